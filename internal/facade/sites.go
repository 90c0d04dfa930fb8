package facade

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/validation"
)

// MaxAssetsPerCall bounds the assets of one onboard or initialise request.
const MaxAssetsPerCall = 100

// Enrolment and unenrolment outcomes.
const (
	statusEnrolled          = "enrolled"
	statusAlreadyEnrolled   = "already_enrolled"
	statusUnenrolled        = "unenrolled"
	statusAlreadyUnenrolled = "already_unenrolled"
)

// OnboardResponse answers POST /entities/site/onboard.
type OnboardResponse struct {
	Site      UpsertSiteResult    `json:"site"`
	Assets    []UpsertAssetResult `json:"assets"`
	Enrolment EnrolResult         `json:"enrolment"`
}

// InitialiseResponse answers POST /entities/site/initialise.
type InitialiseResponse struct {
	Site        UpsertSiteResult    `json:"site"`
	Assets      []UpsertAssetResult `json:"assets"`
	Eligibility *EligibilityRecord  `json:"eligibility"`
}

// parseUpsert reads the site and assets of onboard and initialise.
func (s *Server) parseUpsert(f *fields, body map[string]any) upsertRequest {
	var req upsertRequest
	if site, ok := f.object(body, []any{"body"}, "site", true); ok {
		req.site = parseSite(f, site, []any{"body", "site"})
	}
	if items, ok := f.array(body, []any{"body"}, "assets", true); ok {
		switch {
		case len(items) == 0:
			f.add("List should have at least 1 item after validation, not 0", "too_short", []any{"body", "assets"})
		case len(items) > MaxAssetsPerCall:
			f.add(fmt.Sprintf("List should have at most %d items after validation, not %d", MaxAssetsPerCall, len(items)),
				"too_long", []any{"body", "assets"})
		}
		for i, item := range items {
			loc := []any{"body", "assets", i}
			obj, ok := item.(map[string]any)
			if !ok {
				f.add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", loc)
				continue
			}
			req.assets = append(req.assets, parseAsset(f, obj, loc, s.Now()))
		}
		duplicateExternalIDs(f, req.assets)
	}
	return req
}

func (s *Server) onboard(r *http.Request, p *auth.Principal) (_ any, err error) {
	var out OnboardResponse
	defer func() { metrics.Onboards.WithLabelValues(enrolOutcome(out.Enrolment.Status, err)).Inc() }()
	var prop flexv1.PropositionName
	var override bool
	req, rules, err := s.readUpsert(r, func(f *fields, body map[string]any) upsertRequest {
		prop, _ = enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		override = f.boolean(body, []any{"body"}, "override_withdrawal")
		return s.parseUpsert(f, body)
	})
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	err = s.transact(ctx, func(st store, log *writeLog) error {
		var existing *flexv1.Enrolment
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, func(plan *upsertPlan) error {
			if err := s.confirmFresh(ctx, st, plan.siteBefore); err != nil {
				return err
			}
			var err error
			existing, err = s.decideEnrolment(ctx, st, log, plan, prop, override, rules)
			return err
		}, prop)
		if err != nil {
			return err
		}
		status, err := s.ensureEnrolment(ctx, log, plan.site, existing, prop, override)
		if err != nil {
			return err
		}
		out = OnboardResponse{Site: siteResult(plan, log), Assets: assetResults(plan, log),
			Enrolment: EnrolResult{SiteID: plan.siteID(), Status: status}}
		return nil
	})
	return out, err
}

func (s *Server) initialise(r *http.Request, p *auth.Principal) (any, error) {
	req, rules, err := s.readUpsert(r, s.parseUpsert)
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	var out InitialiseResponse
	err = s.transact(ctx, func(st store, log *writeLog) error {
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, nil)
		if err != nil {
			return err
		}
		out = InitialiseResponse{Site: siteResult(plan, log), Assets: assetResults(plan, log),
			Eligibility: eligibilityRecord(plan.siteID(), plan.eligibility(rules))}
		return nil
	})
	return out, err
}

func siteResult(plan *upsertPlan, log *writeLog) UpsertSiteResult {
	return UpsertSiteResult{SiteID: plan.siteID(), SiteCreated: log.wasCreated(plan.site),
		FieldsUpdated: log.fieldsOf(plan.site), Warnings: []string{}}
}

func assetResults(plan *upsertPlan, log *writeLog) []UpsertAssetResult {
	out := make([]UpsertAssetResult, 0, len(plan.assets))
	for _, ap := range plan.assets {
		out = append(out, UpsertAssetResult{AssetID: ap.asset.Labels[flexv1.IDLabel], ExternalID: ap.asset.Spec.ExternalID,
			AssetCreated: log.wasCreated(ap.asset), FieldsUpdated: log.fieldsOf(ap.asset), Warnings: []string{}})
	}
	return out
}

// decideEnrolment asks the household, before anything is written, whether the site as the
// plan will store it may be enrolled in p, and translates a refusal into the API's answer.
// It answers the site's live enrolment in p, if it has one.
func (s *Server) decideEnrolment(ctx context.Context, st store, log *writeLog, plan *upsertPlan,
	p flexv1.PropositionName, override bool, rules eligibility.Rules) (*flexv1.Enrolment, error) {
	var existing *flexv1.Enrolment
	if plan.siteBefore != nil {
		var err error
		if existing, err = s.liveEnrolment(ctx, st, log, plan.siteBefore, p); err != nil {
			return nil, err
		}
	}
	res := plan.eligibility(rules)
	d := household.DecideEnrolment(household.EnrolmentRequest{Site: plan.site, Proposition: p, Override: override,
		Enrolment: existing, Eligibility: &res, Rules: rules})
	record := func() *EligibilityRecord { return eligibilityRecord(plan.siteID(), res) }
	switch d.Verdict {
	case household.Allowed, household.AlreadyEnrolled:
		return existing, nil
	case household.PreviouslyWithdrew:
		return nil, prerequisitesNotMet("previously_withdrew", d.Message+"; set override_withdrawal to re-enrol it", record())
	case household.NotOffered:
		return nil, prerequisitesNotMet("proposition_not_offered", d.Message, record())
	case household.ConsentRequired:
		return nil, &apiError{status: http.StatusBadRequest, refusal: "consent_required",
			detail: d.Message + ": send gave_boundary_meter_consent_at"}
	case household.NotEligible:
		return nil, prerequisitesNotMet("prerequisites_not_met", d.Message, record())
	default: // SitePending: the site is going away
		return nil, errSiteNotFound
	}
}

// confirmFresh makes sure a decision to enrol rests on the site as stored now, not on a cached
// copy that may miss a withdrawal recorded a moment ago: one GET, and a stale copy means
// planning again from fresh reads.
func (s *Server) confirmFresh(ctx context.Context, st store, site *flexv1.Site) error {
	if site == nil || !st.cached {
		return nil
	}
	current, err := s.store(true).siteByName(ctx, site.Namespace, site.Name)
	if err != nil {
		return err
	}
	if current == nil || current.ResourceVersion != site.ResourceVersion {
		return errRetry
	}
	return nil
}

// liveEnrolment finds the site's enrolment in p, whatever its name (GitOps may have declared
// one). One on its way out is waited for (a retry), so that a new one can follow it.
func (s *Server) liveEnrolment(ctx context.Context, st store, log *writeLog, site *flexv1.Site,
	p flexv1.PropositionName) (*flexv1.Enrolment, error) {
	enrolments, err := st.enrolmentsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	inP := func(e flexv1.Enrolment) bool { return e.Spec.Proposition == p }
	if !slices.ContainsFunc(enrolments, inP) && st.cached && !log.wasCreated(site) {
		// Before deciding there is none, make sure none was declared a moment ago under
		// another name (GitOps): the API server cannot catch that duplicate by name. (A site
		// this request has just created has had no time to be declared against.)
		if enrolments, err = s.store(true).enrolmentsOf(ctx, site); err != nil {
			return nil, err
		}
	}
	i := slices.IndexFunc(enrolments, inP)
	switch {
	case i < 0:
		return nil, nil
	case !enrolments[i].DeletionTimestamp.IsZero():
		return nil, errRetry // being unenrolled right now: wait for it to go, then enrol anew
	}
	return &enrolments[i], nil
}

// ensureEnrolment enrols the site in p: it creates the enrolment when the site has none, and
// otherwise makes the existing one carry the override the request asked for. It tells a new
// enrolment (this request's, over all its attempts) from an existing one.
func (s *Server) ensureEnrolment(ctx context.Context, log *writeLog, site *flexv1.Site, existing *flexv1.Enrolment,
	p flexv1.PropositionName, override bool) (string, error) {
	if existing == nil {
		if err := s.create(ctx, log, household.NewEnrolment(site, p, override)); err != nil {
			return "", err
		}
		return statusEnrolled, nil
	}
	if override && !existing.Spec.OverrideWithdrawal {
		updated := existing.DeepCopy()
		updated.Spec.OverrideWithdrawal = true
		if err := s.update(ctx, log, updated, existing); err != nil {
			return "", err
		}
	}
	if log.wasCreated(existing) {
		return statusEnrolled, nil
	}
	return statusAlreadyEnrolled, nil
}

// siteFor resolves the {site_id} of the path for the principal: a malformed id is a 422, a
// site of another organisation (or, for an end-user token, another site) is a 404.
func (s *Server) siteFor(r *http.Request, p *auth.Principal) (*flexv1.Site, error) {
	return s.siteForID(r.Context(), p, r.PathValue("site_id"), []any{"path", "site_id"})
}

// siteToRead is siteFor for a handler that only reads the site (eligibility, transactions):
// it skips the deep copy of the cached site, so the site it returns must not be changed.
func (s *Server) siteToRead(r *http.Request, p *auth.Principal) (*flexv1.Site, error) {
	byID := store.siteToRead
	if s.reads != nil {
		byID = func(_ store, _ context.Context, ns, id string) (*flexv1.Site, error) { return s.reads.site(ns, id) }
	}
	return s.findSite(r.Context(), p, r.PathValue("site_id"), []any{"path", "site_id"}, byID)
}

func (s *Server) siteForID(ctx context.Context, p *auth.Principal, raw string, loc []any) (*flexv1.Site, error) {
	return s.findSite(ctx, p, raw, loc, store.siteByID)
}

func (s *Server) findSite(ctx context.Context, p *auth.Principal, raw string, loc []any,
	byID func(st store, ctx context.Context, ns, id string) (*flexv1.Site, error)) (*flexv1.Site, error) {
	id, err := validation.ParseUUID(raw)
	if err != nil {
		f := &fields{}
		f.addValidation(err, loc)
		return nil, f.err()
	}
	site, err := byID(s.store(false), ctx, p.Namespace, id)
	if err == nil && site == nil {
		// The cache may not have seen a site this client created a moment ago.
		site, err = s.store(true).siteByID(ctx, p.Namespace, id)
	}
	if err != nil {
		return nil, err
	}
	if site == nil {
		return nil, errSiteNotFound
	}
	// An end-user token reaches its own site only: the one it was issued for, and only while
	// that site is the same user's (not a namesake recreated after an offboard).
	if p.Kind == auth.KindEndUser && (site.Name != p.SiteName || site.Annotations[UserIDAnnotation] != p.UserID) {
		return nil, errSiteNotFound
	}
	return site, nil
}

func (s *Server) eligibility(r *http.Request, p *auth.Principal) (any, error) {
	if s.reads != nil && s.catalogue != nil {
		site, err := s.siteToRead(r, p)
		if err != nil {
			return nil, err
		}
		return s.keptEligibility(r.Context(), site)
	}
	return s.eligibilityRecordOf(r, p)
}

// eligibilityRecordOf is GET eligibility's answer as a record, evaluated afresh (the hosted
// flow builds on it).
func (s *Server) eligibilityRecordOf(r *http.Request, p *auth.Principal) (any, error) {
	site, err := s.siteToRead(r, p)
	if err != nil {
		return nil, err
	}
	res, err := s.evaluate(r.Context(), site)
	if err != nil {
		return nil, err
	}
	return eligibilityRecord(site.Labels[flexv1.IDLabel], res), nil
}

// keptEligibility is evaluate's answer, encoded, from the informers' indexers and the
// followed catalogue: the one kept for the site when it was computed from exactly the same
// site, assets and catalogue (answercache.go), else computed, encoded and kept.
func (s *Server) keptEligibility(ctx context.Context, site *flexv1.Site) (any, error) {
	rules, version, err := s.catalogue.VersionedRules(ctx)
	if err != nil {
		return nil, err
	}
	assets, err := s.reads.assetsOf(site)
	if err != nil {
		return nil, err
	}
	if body := s.reads.answers.get(site, assets, version); body != nil {
		return body, nil
	}
	rec := eligibilityRecord(site.Labels[flexv1.IDLabel], household.EvaluateAssets(&site.Spec, assets, rules))
	var buf bytes.Buffer
	if err := encodeJSON(&buf, rec); err != nil {
		return nil, err
	}
	s.reads.answers.put(site, assets, version, buf.Bytes())
	return encodedJSON(buf.Bytes()), nil
}

// evaluate runs the eligibility rules on a stored site, exactly as the Site controller does
// (with the rules of the last catalogue change the cache told of: it only answers a read).
func (s *Server) evaluate(ctx context.Context, site *flexv1.Site) (eligibility.Result, error) {
	rules, err := s.rulesToRead(ctx)
	if err != nil {
		return eligibility.Result{}, err
	}
	if s.reads != nil {
		assets, err := s.reads.assetsOf(site)
		if err != nil {
			return eligibility.Result{}, err
		}
		return household.EvaluateAssets(&site.Spec, assets, rules), nil
	}
	assets, err := s.store(false).assetsOf(ctx, site)
	if err != nil {
		return eligibility.Result{}, err
	}
	return household.Evaluate(&site.Spec, assets, rules), nil
}

func (s *Server) getSite(r *http.Request, p *auth.Principal) (any, error) {
	site, err := s.siteFor(r, p)
	if err != nil {
		return nil, err
	}
	assets, err := s.store(false).assetsOf(r.Context(), site)
	if err != nil {
		return nil, err
	}
	return legacySiteRecord(site, assets, false), nil
}

// readSiteAction reads the body of an action on {site_id} (enrol, unenrol, meter-consent):
// parse reads its fields and every problem comes back as one 422; then the site is resolved
// for the principal.
func (s *Server) readSiteAction(r *http.Request, p *auth.Principal, parse func(f *fields, body map[string]any)) (
	*flexv1.Site, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	parse(f, body)
	if err := f.err(); err != nil {
		return nil, err
	}
	return s.siteFor(r, p)
}

func (s *Server) enrol(r *http.Request, p *auth.Principal) (_ any, err error) {
	var out EnrolResult
	defer func() { metrics.Enrolments.WithLabelValues(enrolOutcome(out.Status, err)).Inc() }()
	var prop flexv1.PropositionName
	var override bool
	var consent *time.Time
	site, err := s.readSiteAction(r, p, func(f *fields, body map[string]any) {
		prop, _ = enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		override = f.boolean(body, []any{"body"}, "override_withdrawal")
		consent = f.consent(body, []any{"body"}, false)
	})
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	rules, err := household.LoadRules(ctx, s.Cache)
	if err != nil {
		return nil, err
	}
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return errSiteNotFound
		}
		if err := s.confirmFresh(ctx, st, current); err != nil {
			return err
		}
		plan := &upsertPlan{site: current.DeepCopy(), siteBefore: current}
		plan.siteFields = household.MergeSite(&plan.site.Spec, household.SiteFields{Consent: consent})
		household.EnsureID(plan.site)
		if plan.others, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		existing, err := s.decideEnrolment(ctx, st, log, plan, prop, override, rules)
		if err != nil {
			return err
		}
		if err := s.write(ctx, log, plan.site, current, plan.siteFields); err != nil {
			return err
		}
		status, err := s.ensureEnrolment(ctx, log, plan.site, existing, prop, override)
		out = EnrolResult{SiteID: plan.siteID(), Status: status}
		return err
	})
	return out, err
}

func (s *Server) unenrol(r *http.Request, p *auth.Principal) (any, error) {
	var prop flexv1.PropositionName
	site, err := s.readSiteAction(r, p, func(f *fields, body map[string]any) {
		prop, _ = enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
	})
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	enrolments, err := s.store(true).enrolmentsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	var mine []flexv1.Enrolment
	for _, e := range enrolments {
		if e.Spec.Proposition == prop && e.DeletionTimestamp.IsZero() {
			mine = append(mine, e)
		}
	}
	out := EnrolResult{SiteID: site.Labels[flexv1.IDLabel], Status: statusAlreadyUnenrolled}
	if len(mine) == 0 {
		return out, nil
	}
	// The withdrawal is recorded before the enrolment goes, so a failure in between leaves
	// the household's choice on record and a repeated call finishes the job.
	for i := range mine {
		recorded, err := household.RecordWithdrawal(ctx, s.Client, s.APIReader, client.ObjectKeyFromObject(site),
			household.WithdrawalFrom(&mine[i], s.Now()))
		if err != nil {
			return nil, err
		}
		if recorded {
			metrics.Withdrawals.WithLabelValues(metrics.DoorRESTUnenrol).Inc()
		}
	}
	deleted := make([]client.Object, 0, len(mine))
	for i := range mine {
		if err := s.Client.Delete(ctx, &mine[i]); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
		deleted = append(deleted, &mine[i])
	}
	s.awaitCache(ctx, []client.Object{site}, deleted)
	out.Status = statusUnenrolled
	return out, nil
}

// OffboardResponse answers POST /entities/site/{site_id}/offboard-site-and-assets.
type OffboardResponse struct {
	Site  LegacySiteRecord `json:"site"`
	Asset *AssetRecord     `json:"asset"`
}

// offboard deletes the site, then its enrolments, assets and reward ledger. The site goes
// first: its deletion is what tells the enrolments' finalizer not to record a withdrawal,
// and its own finalizer finishes the cleanup if this request dies halfway. Repeating the
// request on a site already being deleted finishes the job.
func (s *Server) offboard(r *http.Request, p *auth.Principal) (any, error) {
	ctx := r.Context()
	id, err := validation.ParseUUID(r.PathValue("site_id"))
	if err != nil {
		f := &fields{}
		f.addValidation(err, []any{"path", "site_id"})
		return nil, f.err()
	}
	sites := &flexv1.SiteList{}
	if err := s.APIReader.List(ctx, sites, client.InNamespace(p.Namespace), client.MatchingLabels{flexv1.IDLabel: id}); err != nil {
		return nil, err
	}
	if len(sites.Items) == 0 {
		return nil, errSiteNotFound
	}
	site := &sites.Items[0]
	fresh := s.store(true)
	assets, err := fresh.assetsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	out := OffboardResponse{Site: legacySiteRecord(site, assets, true)}
	if len(assets) > 0 {
		// The site's first registered asset: the oldest, by name within the same second
		// (creation times are kept to the second).
		first := slices.MinFunc(assets, func(a, b flexv1.Asset) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		rec := assetRecord(&first, id)
		out.Asset = &rec
	}
	if err := s.Client.Delete(ctx, site); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	// The site's finalizer deletes the same children; deleting them here as well means the
	// answer goes out with the household gone, not merely going.
	children, err := household.DeleteChildren(ctx, s.Client, s.APIReader, site)
	if err != nil {
		return nil, err
	}
	s.awaitCache(ctx, nil, append(children, site))
	return out, nil
}

// SitePage answers GET /entities/site.
type SitePage struct {
	Sites         []LegacySiteRecord `json:"sites"`
	TotalNumSites int                `json:"total_num_sites"`
	TotalNumPages int                `json:"total_num_pages"`
	PageNumber    int                `json:"page_number"`
}

func (s *Server) listSites(r *http.Request, p *auth.Principal) (any, error) {
	q := r.URL.Query()
	f := &fields{}
	limit, offset := f.paging(q)
	mpanFilter, postcodeFilter := strings.TrimSpace(q.Get("mpan")), q.Get("postcode")
	if postcodeFilter != "" {
		if norm, err := validation.NormalisePostcode(postcodeFilter); err == nil {
			postcodeFilter = norm
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	ctx := r.Context()
	opts := []client.ListOption{client.InNamespace(p.Namespace)}
	if mpanFilter != "" {
		opts = append(opts, client.MatchingFields{"spec.mpan": strings.ReplaceAll(mpanFilter, " ", "")})
	}
	list := &flexv1.SiteList{}
	if err := s.Cache.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	matched := slices.DeleteFunc(list.Items, func(site flexv1.Site) bool {
		return !site.DeletionTimestamp.IsZero() || (postcodeFilter != "" && site.Spec.Postcode != postcodeFilter)
	})
	sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
	pg := pageOf(len(matched), limit, offset)
	page := SitePage{Sites: []LegacySiteRecord{}, TotalNumSites: len(matched), TotalNumPages: pg.totalPages,
		PageNumber: pg.number}
	if pg.from < pg.to {
		matched = matched[pg.from:pg.to]
		assets := &flexv1.AssetList{}
		if err := s.Cache.List(ctx, assets, client.InNamespace(p.Namespace)); err != nil {
			return nil, err
		}
		bySite := map[string][]flexv1.Asset{}
		for _, a := range assets.Items {
			bySite[a.Spec.SiteName] = append(bySite[a.Spec.SiteName], a)
		}
		for i := range matched {
			page.Sites = append(page.Sites, legacySiteRecord(&matched[i], bySite[matched[i].Name], false))
		}
	}
	return page, nil
}

func (s *Server) meterConsent(r *http.Request, p *auth.Principal) (any, error) {
	var consent *time.Time
	site, err := s.readSiteAction(r, p, func(f *fields, body map[string]any) {
		consent = f.consent(body, []any{"body"}, true)
	})
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	var updated *flexv1.Site
	var assets []flexv1.Asset
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return errSiteNotFound
		}
		// The answer's assets are read before the write: a read failing after it would
		// answer an error for a consent that was recorded.
		if assets, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		updated = current.DeepCopy()
		fields := household.MergeSite(&updated.Spec, household.SiteFields{Consent: consent})
		household.EnsureID(updated)
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return nil, err
	}
	return legacySiteRecord(updated, assets, false), nil
}
