package facade

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/identity"
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

func (s *Server) onboard(r *http.Request, p *auth.Principal) (any, error) {
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
	var out OnboardResponse
	err = s.transact(ctx, func(st store, log *writeLog) error {
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, func(plan *upsertPlan) error {
			if err := s.confirmFresh(ctx, st, plan.siteBefore); err != nil {
				return err
			}
			return checkEnrolment(plan.site, plan.eligibility(rules), prop, override, rules)
		}, prop)
		if err != nil {
			return err
		}
		status, err := s.ensureEnrolment(ctx, st, log, plan.site, prop, override)
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

// checkEnrolment applies the enrolment prerequisites to a site as it will be stored, before
// anything is written: a previous withdrawal, an offered proposition, consent where the
// proposition needs it, and eligibility.
func checkEnrolment(site *flexv1.Site, res eligibility.Result, p flexv1.PropositionName, override bool,
	rules eligibility.Rules) error {
	record := func() *EligibilityRecord { return eligibilityRecord(site.Labels[flexv1.IDLabel], res) }
	if _, withdrew := site.Annotations[identity.WithdrawalAnnotation(p)]; withdrew && !override {
		return prerequisitesNotMet("previously_withdrew",
			fmt.Sprintf("The site previously withdrew from %s; set override_withdrawal to re-enrol it", p), record())
	}
	rule, offered := rules.Proposition(p)
	if !offered {
		return prerequisitesNotMet("proposition_not_offered", fmt.Sprintf("Proposition %s is not offered", p), record())
	}
	if rule.RequiresBoundaryMeterConsent && site.Spec.BoundaryMeterConsentAt == nil {
		return fail(http.StatusBadRequest,
			"Proposition %s needs the household's boundary meter consent: send gave_boundary_meter_consent_at", p)
	}
	if !res.IsEligible(p) {
		msg := fmt.Sprintf("The site is not eligible for %s", p)
		if issues := res.Issues(p); len(issues) > 0 {
			names := make([]string, len(issues))
			for i, issue := range issues {
				names[i] = string(issue)
			}
			msg += ": " + strings.Join(names, ", ")
		}
		return prerequisitesNotMet("prerequisites_not_met", msg, record())
	}
	return nil
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

// ensureEnrolment enrols the site in p unless an enrolment exists (whatever its name: GitOps
// may have declared one). It tells a new enrolment from an existing one.
func (s *Server) ensureEnrolment(ctx context.Context, st store, log *writeLog, site *flexv1.Site,
	p flexv1.PropositionName, override bool) (string, error) {
	enrolments, err := st.enrolmentsOf(ctx, site)
	if err != nil {
		return "", err
	}
	if !slices.ContainsFunc(enrolments, func(e flexv1.Enrolment) bool { return e.Spec.Proposition == p }) &&
		st.cached && !log.wasCreated(site) {
		// Before creating one, make sure no enrolment was declared a moment ago under another
		// name (GitOps): the API server cannot catch that duplicate by name. (A site this
		// request has just created has had no time to be declared against.)
		if enrolments, err = s.store(true).enrolmentsOf(ctx, site); err != nil {
			return "", err
		}
	}
	for i := range enrolments {
		e := &enrolments[i]
		if e.Spec.Proposition != p {
			continue
		}
		if !e.DeletionTimestamp.IsZero() {
			return "", errRetry // being unenrolled right now: wait for it to go, then enrol anew
		}
		if override && !e.Spec.OverrideWithdrawal {
			before := e.DeepCopy()
			e.Spec.OverrideWithdrawal = true
			if err := s.update(ctx, log, e, before); err != nil {
				return "", err
			}
		}
		if log.wasCreated(e) {
			return statusEnrolled, nil
		}
		return statusAlreadyEnrolled, nil
	}
	e := &flexv1.Enrolment{
		ObjectMeta: metav1.ObjectMeta{Namespace: site.Namespace, Name: identity.EnrolmentName(site.Name, p),
			Finalizers: []string{flexv1.Finalizer}},
		Spec: flexv1.EnrolmentSpec{SiteName: site.Name, Proposition: p, OverrideWithdrawal: override},
	}
	if err := s.create(ctx, log, e); err != nil {
		return "", err
	}
	return statusEnrolled, nil
}

// siteFor resolves the {site_id} of the path for the principal: a malformed id is a 422, a
// site of another organisation (or, for an end-user token, another site) is a 404.
func (s *Server) siteFor(r *http.Request, p *auth.Principal) (*flexv1.Site, error) {
	return s.siteForID(r.Context(), p, r.PathValue("site_id"), []any{"path", "site_id"})
}

func (s *Server) siteForID(ctx context.Context, p *auth.Principal, raw string, loc []any) (*flexv1.Site, error) {
	id, err := validation.ParseUUID(raw)
	if err != nil {
		f := &fields{}
		f.addValidation(err, loc)
		return nil, f.err()
	}
	site, err := s.store(false).siteByID(ctx, p.Namespace, id)
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
	site, err := s.siteFor(r, p)
	if err != nil {
		return nil, err
	}
	res, err := s.evaluate(r.Context(), site)
	if err != nil {
		return nil, err
	}
	return eligibilityRecord(site.Labels[flexv1.IDLabel], res), nil
}

// evaluate runs the eligibility rules on a stored site, exactly as the Site controller does.
func (s *Server) evaluate(ctx context.Context, site *flexv1.Site) (eligibility.Result, error) {
	assets, err := s.store(false).assetsOf(ctx, site)
	if err != nil {
		return eligibility.Result{}, err
	}
	rules, err := controllers.LoadRules(ctx, s.Cache)
	if err != nil {
		return eligibility.Result{}, err
	}
	inputs := make([]eligibility.Asset, len(assets))
	for i, a := range assets {
		inputs[i] = eligibility.Asset{Name: a.Name, ID: a.Labels[flexv1.IDLabel], Spec: a.Spec}
	}
	return eligibility.Evaluate(&site.Spec, inputs, rules), nil
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

func (s *Server) enrol(r *http.Request, p *auth.Principal) (any, error) {
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
	rules, err := controllers.LoadRules(ctx, s.Cache)
	if err != nil {
		return nil, err
	}
	var out EnrolResult
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
		desired := current.DeepCopy()
		fields := mergeSite(desired, siteInput{Postcode: current.Spec.Postcode, Consent: consent})
		plan := &upsertPlan{site: desired, siteBefore: current, siteFields: fields}
		if plan.others, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		if err := checkEnrolment(desired, plan.eligibility(rules), prop, override, rules); err != nil {
			return err
		}
		if err := s.write(ctx, log, desired, current, fields); err != nil {
			return err
		}
		status, err := s.ensureEnrolment(ctx, st, log, desired, prop, override)
		out = EnrolResult{SiteID: desired.Labels[flexv1.IDLabel], Status: status}
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
	if err := controllers.RecordWithdrawal(ctx, s.Client, site, prop, s.Now()); err != nil {
		return nil, err
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
		rec := assetRecord(&assets[0], id)
		out.Asset = &rec
	}
	if err := s.Client.Delete(ctx, site); client.IgnoreNotFound(err) != nil {
		return nil, err
	}
	enrolments, err := fresh.enrolmentsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	children := make([]client.Object, 0, len(enrolments)+len(assets)+1)
	for i := range enrolments {
		children = append(children, &enrolments[i])
	}
	for i := range assets {
		children = append(children, &assets[i])
	}
	children = append(children, &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{
		Namespace: site.Namespace, Name: identity.RewardLedgerName(site.Name)}})
	for _, child := range children {
		if err := s.Client.Delete(ctx, child); client.IgnoreNotFound(err) != nil {
			return nil, err
		}
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
	limit := f.queryInt(q, "limit", 10, 1, 5000)
	offset := f.queryInt(q, "offset", 0, 0, -1)
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
	page := SitePage{Sites: []LegacySiteRecord{}, TotalNumSites: len(matched),
		TotalNumPages: (len(matched) + limit - 1) / limit, PageNumber: offset/limit + 1}
	if offset < len(matched) {
		matched = matched[offset:min(len(matched), offset+limit)]
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
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return errSiteNotFound
		}
		updated = current.DeepCopy()
		fields := mergeSite(updated, siteInput{Postcode: current.Spec.Postcode, Consent: consent})
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return nil, err
	}
	assets, err := s.store(false).assetsOf(ctx, updated)
	if err != nil {
		return nil, err
	}
	return legacySiteRecord(updated, assets, false), nil
}
