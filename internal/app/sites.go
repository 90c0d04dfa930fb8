package app

import (
	"bytes"
	"context"
	"slices"
	"sort"
	"strings"
	"time"

	gojson "github.com/goccy/go-json"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// A site is named, in every use case, by its API id: a canonical UUID the door has read
// (validation.ParseUUID) and answered a malformed one itself.

// site is the caller's site with API id id, found in the cache (findSite). Another
// organisation's site, and for an end user any site but their own, is not found.
func (s *Service) site(ctx context.Context, p *auth.Principal, id string) (*flexv1.Site, error) {
	return s.findSite(ctx, p, id, store.siteByID)
}

// readByID finds a site to read by its id in the cache: the kept reads' index when there is one.
func (s *Service) readByID() func(st store, ctx context.Context, ns, id string) (*flexv1.Site, error) {
	if s.reads != nil {
		return func(_ store, _ context.Context, ns, id string) (*flexv1.Site, error) { return s.reads.site(ns, id) }
	}
	return store.siteToRead
}

// SiteToRead is site for a use case that only reads the site (eligibility; the other use case
// packages build on it: rewards, subscriptions' site events): it skips the deep copy of the
// cached site, so the site it returns must not be changed. A site the reads' index holds by
// id (index.KeptSites) is answered with no store made: nothing allocated.
func (s *Service) SiteToRead(ctx context.Context, p *auth.Principal, id string) (*flexv1.Site, error) {
	if s.reads != nil {
		if site, err := s.reads.site(p.Namespace, id); err != nil || site != nil && Reaches(p, site) {
			return site, err
		}
	}
	return s.findSite(ctx, p, id, s.readByID())
}

// SiteInCache is SiteToRead from the cache alone, never the API server: for a request that
// names many sites at once (a flex event's site_ids, up to 1,000), where each id, known or
// not, must cost a cache lookup and no API-server call. A site written through the API is in
// the cache before that write is answered (transact waits for it), so only a site created
// outside the API a moment ago can be missed: not found, as an unknown one.
func (s *Service) SiteInCache(ctx context.Context, p *auth.Principal, id string) (*flexv1.Site, error) {
	site, err := s.readByID()(s.store(false), ctx, p.Namespace, id)
	if err != nil {
		return nil, err
	}
	if site == nil || !Reaches(p, site) {
		return nil, ErrSiteNotFound
	}
	return site, nil
}

// findSite finds the site in the cache alone: no name derives from a random id, so the API
// server could only LIST the namespace for it (docs/scale.md, "Request paths: no LIST"). A
// write through the API answers once this replica's cache has it (awaitCache); only a site
// made elsewhere a moment ago is missed. An end user's token names its site: read by name.
func (s *Service) findSite(ctx context.Context, p *auth.Principal, id string,
	byID func(st store, ctx context.Context, ns, id string) (*flexv1.Site, error)) (*flexv1.Site, error) {
	site, err := byID(s.store(false), ctx, p.Namespace, id)
	if err == nil && site == nil && p.Kind == auth.KindEndUser && p.SiteName != "" {
		site, err = s.store(true).siteByName(ctx, p.Namespace, p.SiteName)
		if site != nil && site.Labels[flexv1.IDLabel] != id {
			site = nil
		}
	}
	if err != nil {
		return nil, err
	}
	if site == nil || !Reaches(p, site) {
		return nil, ErrSiteNotFound
	}
	return site, nil
}

// Reaches is the one rule of whose sites a caller reaches: an organisation's token, every
// site of its organisation; an end user's token, its own site only: the one it was issued
// for, and only while that site is the same user's (not a namesake recreated after an
// offboard), and not on its way out.
func Reaches(p *auth.Principal, site *flexv1.Site) bool {
	if site.Namespace != p.Namespace {
		return false
	}
	if p.Kind != auth.KindEndUser {
		return true
	}
	return site.Name == p.SiteName && site.Annotations[flexv1.UserIDAnnotation] == p.UserID && site.DeletionTimestamp.IsZero()
}

// OwnSite is the end user's own site (the cache first, then the API server).
func (s *Service) OwnSite(ctx context.Context, p *auth.Principal) (*flexv1.Site, error) {
	if p.Kind != auth.KindEndUser || p.SiteName == "" {
		return nil, ErrSiteNotFound // only a household's token names a site of its own
	}
	site, err := s.store(false).siteByName(ctx, p.Namespace, p.SiteName)
	if err == nil && site == nil {
		site, err = s.store(true).siteByName(ctx, p.Namespace, p.SiteName)
	}
	if err != nil {
		return nil, err
	}
	if site == nil || !Reaches(p, site) {
		return nil, ErrSiteNotFound
	}
	return site, nil
}

// EligibilityJSON is the eligibility record of the caller's site, encoded (EncodedJSON):
// the Site controller's evaluation in the site's status, once it is current (eligibility.go).
// The answer of an unchanged site is kept encoded (keptanswer.Eligibility): the read of a site
// read before costs its lookups, a comparison and the bytes.
func (s *Service) EligibilityJSON(ctx context.Context, p *auth.Principal, siteID string) (EncodedJSON, error) {
	site, res, body, err := s.currentEligibility(ctx, p, siteID, true)
	if err != nil || body != nil {
		return body, err
	}
	return EncodeEligibility(eligibilityRecord(site.Labels[flexv1.IDLabel], *res))
}

// EncodeEligibility encodes a record as encoding/json's Encoder would, through goccy/go-json
// (no reflection, byte for byte alike: the REST door's tests), into a buffer of an answer's
// size (~1 KB): growing one from empty was a third of what the read itself allocated.
func EncodeEligibility(rec *EligibilityRecord) (EncodedJSON, error) {
	buf := bytes.NewBuffer(make([]byte, 0, 2048))
	if err := gojson.NewEncoder(buf).Encode(rec); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Eligibility is the eligibility record of the caller's site: the Site controller's
// evaluation in the site's status, once it is current (eligibility.go).
func (s *Service) Eligibility(ctx context.Context, p *auth.Principal, siteID string) (*EligibilityRecord, error) {
	site, res, _, err := s.currentEligibility(ctx, p, siteID, false)
	if err != nil {
		return nil, err
	}
	return eligibilityRecord(site.Labels[flexv1.IDLabel], *res), nil
}

// GetSite is the caller's site as the legacy site record.
func (s *Service) GetSite(ctx context.Context, p *auth.Principal, siteID string) (LegacySiteRecord, error) {
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return LegacySiteRecord{}, err
	}
	assets, err := s.store(false).assetsOf(ctx, site)
	if err != nil {
		return LegacySiteRecord{}, err
	}
	return legacySiteRecord(p, site, assets, false), nil
}

// SitePage answers a page of the organisation's sites.
type SitePage struct {
	Sites         []LegacySiteRecord `json:"sites"`
	TotalNumSites int                `json:"total_num_sites"`
	TotalNumPages int                `json:"total_num_pages"`
	PageNumber    int                `json:"page_number"`
}

// SiteFilter selects sites: by MPAN (as sent, spaces ignored) and normalised postcode; empty
// selects all.
type SiteFilter struct{ MPAN, Postcode string }

// ListSites answers a page of the organisation's live sites, ordered by object name.
func (s *Service) ListSites(ctx context.Context, p *auth.Principal, filter SiteFilter, pg Paging) (SitePage, error) {
	list := &flexv1.SiteList{}
	if filter.MPAN != "" {
		// The sites with that MPAN (read-only: the cached objects, shared), through its index.
		found, err := index.NewLookup(s.Cache).SitesByMPAN(ctx, p.Namespace, strings.ReplaceAll(filter.MPAN, " ", ""))
		if err != nil {
			return SitePage{}, err
		}
		for _, site := range found {
			list.Items = append(list.Items, *site)
		}
	} else if err := s.Cache.List(ctx, list, client.InNamespace(p.Namespace)); err != nil {
		return SitePage{}, err
	}
	matched := slices.DeleteFunc(list.Items, func(site flexv1.Site) bool {
		return !site.DeletionTimestamp.IsZero() || (filter.Postcode != "" && site.Spec.Postcode != filter.Postcode)
	})
	sort.Slice(matched, func(i, j int) bool { return matched[i].Name < matched[j].Name })
	w := pg.window(len(matched))
	page := SitePage{Sites: []LegacySiteRecord{}, TotalNumSites: len(matched), TotalNumPages: w.totalPages,
		PageNumber: w.number}
	if w.from < w.to {
		matched = matched[w.from:w.to]
		assets := &flexv1.AssetList{}
		if err := s.Cache.List(ctx, assets, client.InNamespace(p.Namespace)); err != nil {
			return SitePage{}, err
		}
		bySite := map[string][]flexv1.Asset{}
		for _, a := range assets.Items {
			bySite[a.Spec.SiteName] = append(bySite[a.Spec.SiteName], a)
		}
		for i := range matched {
			page.Sites = append(page.Sites, legacySiteRecord(p, &matched[i], bySite[matched[i].Name], false))
		}
	}
	return page, nil
}

// SiteUpdate is a change of a site: what is sent changes, nothing else.
type SiteUpdate struct {
	Fields household.SiteFields
	// MPAN is the new meter point, normalised; empty when not sent.
	MPAN string
}

// PatchSite changes what in sends of the caller's site, the change kubectl would make to the
// Site object, and nothing when nothing differs. A new MPAN is claimed first
// (householdstore.ClaimMPAN): the site keeps its name and id, and no moment exists in which two
// sites hold the MPAN. The claim of the MPAN the site leaves is released after; if the
// request dies between the two, the Site controller releases it once stale.
func (s *Service) PatchSite(ctx context.Context, p *auth.Principal, siteID string, in SiteUpdate) (LegacySiteRecord, error) {
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return LegacySiteRecord{}, err
	}
	var updated, before *flexv1.Site
	var assets []flexv1.Asset
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return ErrSiteNotFound
		}
		// Everything the answer needs is read before the first write: a read that fails after
		// it would answer an error for a change that was made.
		if assets, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		updated, before = current.DeepCopy(), current
		fields := household.MergeSite(&updated.Spec, in.Fields)
		if in.MPAN != "" && in.MPAN != current.Spec.MPAN {
			now := time.Now()
			if p.Kind != auth.KindOrganisation { // a household's changes are budgeted, and spent in this write
				if wait := household.SpendMeterChange(updated, now); wait > 0 {
					return &Error{Kind: TooManyRequests, Code: household.MeterChangesCode, Detail: household.MeterChangesRefusal,
						RetryAfter: household.RetryAfter(wait)}
				}
			}
			claim, err := householdstore.ClaimMPAN(ctx, s.Client, s.APIReader, s.store(true).lookup, current, in.MPAN, now)
			log.adoptClaim(claim, err)
			if err != nil {
				return mpanTaken(err, p.MPANViewer())
			}
			updated.Spec.MPAN = in.MPAN
			fields = append(fields, "mpan")
		}
		household.EnsureID(updated)
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return LegacySiteRecord{}, err
	}
	if before.Spec.MPAN != "" && before.Spec.MPAN != updated.Spec.MPAN {
		// Best effort: the Site controller releases a claim left behind once it is stale.
		if err := householdstore.ReleaseClaim(ctx, s.Client, s.APIReader, updated, before.Spec.MPAN); err != nil {
			s.Log.Error(err, "releasing an MPAN claim", "mpan", before.Spec.MPAN)
		}
	}
	return legacySiteRecord(p, updated, assets, false), nil
}

// MeterConsent records the household's boundary meter consent (a consent recorded earlier
// keeps its time unless another is sent).
func (s *Service) MeterConsent(ctx context.Context, p *auth.Principal, siteID string, consent time.Time) (LegacySiteRecord, error) {
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return LegacySiteRecord{}, err
	}
	var updated *flexv1.Site
	var assets []flexv1.Asset
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return ErrSiteNotFound
		}
		// The answer's assets are read before the write: a read failing after it would
		// answer an error for a consent that was recorded.
		if assets, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		updated = current.DeepCopy()
		fields := household.MergeSite(&updated.Spec, household.SiteFields{Consent: &consent})
		household.EnsureID(updated)
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return LegacySiteRecord{}, err
	}
	return legacySiteRecord(p, updated, assets, false), nil
}

// OffboardResponse answers offboard.
type OffboardResponse struct {
	Site LegacySiteRecord `json:"site"`
	// Asset is the site's first asset; absent, never null, for a site without one (production
	// declares it an AssetResponse, and a strict client refuses a null).
	Asset *AssetRecord `json:"asset,omitempty"`
}

// Offboard deletes the site, then its enrolments, assets and reward ledger. The site goes
// first: its deletion is what tells the enrolments' finalizer not to record a withdrawal,
// and its own finalizer finishes the cleanup if this request dies halfway. Repeating the
// request on a site already being deleted finishes the job.
func (s *Service) Offboard(ctx context.Context, p *auth.Principal, siteID string) (OffboardResponse, error) {
	fresh := s.store(true) // as stored now, by GET; one being deleted too (a repeat finishes it)
	sites, err := fresh.lookup.SitesByID(ctx, p.Namespace, siteID)
	if err != nil {
		return OffboardResponse{}, err
	}
	if len(sites) == 0 {
		return OffboardResponse{}, ErrSiteNotFound
	}
	site := sites[0]
	assets, err := fresh.assetsOf(ctx, site)
	if err != nil {
		return OffboardResponse{}, err
	}
	out := OffboardResponse{Site: legacySiteRecord(p, site, assets, true)}
	if len(assets) > 0 {
		// The site's first registered asset: the oldest, by name within the same second
		// (creation times are kept to the second).
		first := slices.MinFunc(assets, func(a, b flexv1.Asset) int {
			if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
				return c
			}
			return strings.Compare(a.Name, b.Name)
		})
		rec := assetRecord(&first, siteID)
		out.Asset = &rec
	}
	if err := s.Client.Delete(ctx, site); client.IgnoreNotFound(err) != nil {
		return OffboardResponse{}, err
	}
	// The site's finalizer deletes the same children; deleting them here as well means the
	// answer goes out with the household gone, not merely going.
	children, err := householdstore.DeleteFoundChildren(ctx, s.Client, s.APIReader, index.NewFreshLookup(s.Cache, s.APIReader), site)
	if err != nil {
		return OffboardResponse{}, err
	}
	s.awaitCache(ctx, nil, append(children, site))
	return out, nil
}

// DeleteSite deletes a site that holds nothing. A site that holds assets, enrolments, reward
// history or an onboarding still in progress is a bad request pointing at offboard, which
// removes everything.
//
// What it holds is read as stored now, by GET (what the cache has seen, the ledger by name; no
// LIST: docs/scale.md), and the site is deleted only at the version read (a precondition), so
// a change to it in between (the Site controller re-evaluating it because an asset arrived,
// say) means looking again. An asset the cache had not seen at the look, or created after it,
// cannot be refused any more: the deletion wins, and the asset goes with the site, here (as
// offboard does) and by the Site finalizer (householdstore.DeleteChildren, which lists). An asset created once the site is marked for
// deletion is refused: the asset webhook does not admit an asset of a site being deleted, and
// the use cases answer not found for a site on its way out. Both read the site from a cache
// first, so for as long as a cache lags the mark one may still be admitted; while the site
// waits on its finalizer, the finalizer deletes it (a child's creation requeues the site).
func (s *Service) DeleteSite(ctx context.Context, p *auth.Principal, siteID string) error {
	var site *flexv1.Site
	if err := untilWon(ctx, func(bool) error {
		var err error
		site, err = s.deleteIfEmpty(ctx, p.Namespace, siteID)
		return err
	}); err != nil {
		return err
	}
	// Anything that arrived after the look goes with the site. The site is deleted whatever
	// happens here: the Site finalizer deletes the same children, so a failure is logged,
	// not answered. The answer waits until this replica's cache no longer holds the site
	// (nor those), so the client reads its delete.
	children, err := householdstore.DeleteFoundChildren(ctx, s.Client, s.APIReader, index.NewFreshLookup(s.Cache, s.APIReader), site)
	if err != nil {
		s.Log.Error(err, "deleting what arrived at a deleted site; its finalizer finishes", "site", site.Name)
	}
	s.awaitCache(ctx, nil, append(children, site))
	return nil
}

// deleteIfEmpty looks at the site and what it holds on the API server and deletes it if it
// holds nothing. errRetry: the site changed between the look and the deletion.
func (s *Service) deleteIfEmpty(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	fresh := s.store(true)
	site, err := fresh.siteByID(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	if site == nil {
		return nil, ErrSiteNotFound
	}
	assets, err := fresh.assetsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	enrolments, err := fresh.enrolmentsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	ledgers, err := fresh.ledgersOf(ctx, site)
	if err != nil {
		return nil, err
	}
	// The in-flight deadline is on the wall clock (inFlightDeadline), not the settable Now.
	inFlight, _, err := householdstore.CheckInFlight(ctx, householdstore.Readers{Fresh: s.APIReader,
		FreshLookup: fresh.lookup}, site, time.Now())
	if err != nil {
		return nil, err
	}
	if held := household.HoldingsOf(assets, enrolments, ledgers, inFlight); !held.Empty() {
		return nil, Fail(BadRequest, "Site cannot be deleted: it has %s. Deleting a site removes only a site "+
			"that has nothing; to remove the site with its assets, enrolments and rewards, offboard it "+
			"(POST /entities/site/%s/offboard-site-and-assets)", held, id)
	}
	err = s.Client.Delete(ctx, site, client.Preconditions{UID: &site.UID, ResourceVersion: &site.ResourceVersion})
	switch {
	case apierrors.IsConflict(err):
		return nil, errRetry
	case apierrors.IsNotFound(err):
		return nil, ErrSiteNotFound
	case err != nil:
		return nil, err
	}
	return site, nil
}

// EligibilityCheckResponse answers check-eligibility.
type EligibilityCheckResponse struct {
	IsHalfHourlySettled bool                           `json:"is_half_hourly_settled"`
	Propositions        []PropositionEligibilityRecord `json:"propositions"`
}

// CheckEligibility answers what a prospective site would be eligible for: its MPAN
// (normalised) and, optionally, the model of an asset it would install
// (household.EvaluateProspect, the Site controller's evaluation). Nothing is stored. The site
// is the organisation's stored site with that MPAN when it has one (half-hourly settlement
// and consent are facts about a stored site), else a new site (household.ProspectSite).
func (s *Service) CheckEligibility(ctx context.Context, p *auth.Principal, mpan, model string) (EligibilityCheckResponse, error) {
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return EligibilityCheckResponse{}, err
	}
	if model != "" {
		if _, ok := rules.Model(model); !ok {
			return EligibilityCheckResponse{}, Fail(NotFound, "Asset model %q not found", model)
		}
	}
	stored, err := s.store(false).siteByMPAN(ctx, p.Namespace, mpan)
	if err != nil {
		return EligibilityCheckResponse{}, err
	}
	res := household.EvaluateProspect(household.Prospect{Site: household.ProspectSite(mpan, stored), Model: model}, rules)
	out := EligibilityCheckResponse{IsHalfHourlySettled: res.Properties.IsHalfHourlySettled,
		Propositions: make([]PropositionEligibilityRecord, 0, len(res.Propositions))}
	for _, pe := range res.Propositions {
		out.Propositions = append(out.Propositions, PropositionEligibilityRecord{
			Proposition: pe.Proposition, IsEligible: pe.Eligible, Issues: nonNil(pe.Issues)})
	}
	return out, nil
}

// DispatchChange is a change of dispatch consent: household.ConsentDispatch or
// household.DeconsentDispatch.
type DispatchChange func(*flexv1.SiteSpec, []flexv1.DispatchMethod) []string

// ChangeDispatch applies a change of dispatch consent to the site's spec.dispatchMethods and
// answers the legacy site record. It writes as every site change does (transact), so the API
// server's schema and the admission webhooks judge it as they judge kubectl's; a change that
// changes nothing writes nothing.
func (s *Service) ChangeDispatch(ctx context.Context, p *auth.Principal, siteID string, change DispatchChange,
	methods []flexv1.DispatchMethod) (LegacySiteRecord, error) {
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return LegacySiteRecord{}, err
	}
	var out LegacySiteRecord
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() || current.UID != site.UID {
			return ErrSiteNotFound
		}
		// Everything the answer needs is read before the write, so a failed read never
		// answers an error for a change that was made.
		assets, err := st.assetsOf(ctx, current)
		if err != nil {
			return err
		}
		updated := current.DeepCopy()
		fields := change(&updated.Spec, methods)
		household.EnsureID(updated)
		out = legacySiteRecord(p, updated, assets, false)
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return LegacySiteRecord{}, err
	}
	return out, nil
}

// OriginAllowed reports whether origin was recorded for the organisation's site siteID when
// its end user's tokens were issued (household.OriginAllowed): a CORS preflight carries no
// token, so it is answered from that record. fresh reads the site the cache finds by GET, as
// stored now (the cache may not have seen an origin recorded a moment ago), never by a LIST.
func (s *Service) OriginAllowed(ctx context.Context, siteID, origin string, fresh bool) bool {
	sites, err := s.store(fresh).lookup.SitesByID(ctx, "", siteID)
	if err != nil {
		return false
	}
	for _, site := range sites {
		if site.DeletionTimestamp.IsZero() && household.OriginAllowed(site, origin) {
			return true
		}
	}
	return false
}
