package facade

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/validation"
)

// The site lifecycle rows of api-reference.md: deleting a site that holds nothing, checking
// what a prospective site would be eligible for, and a household's dispatch consent.

// deleteSite deletes a site that holds nothing (DELETE /entities/site/{site_id}): 204. A site
// that holds assets, enrolments, reward history or an onboarding still in progress is a 400
// pointing at offboard, which removes everything.
//
// What it holds is read from the API server, not the cache, and the site is deleted only at
// the version that was read (a precondition), so a change to it in between (the Site
// controller re-evaluating it because an asset arrived, say) means looking again. An asset
// created in the instant between that look and the deletion cannot be refused any more: the
// deletion wins, and the asset goes with the site, deleted here (as offboard does) and by the
// Site finalizer (household.DeleteChildren). An asset created once the site is marked for
// deletion is refused: the asset webhook does not admit an asset of a site being deleted, and
// the REST API answers 404 for a site on its way out. Both read the site from a cache first,
// so for as long as a cache lags the mark one may still be admitted; while the site waits on
// its finalizer, the finalizer deletes it (a child's creation requeues the site).
func (s *Server) deleteSite(r *http.Request, p *auth.Principal) (any, error) {
	id, err := validation.ParseUUID(r.PathValue("site_id"))
	if err != nil {
		f := &fields{}
		f.addValidation(err, []any{"path", "site_id"})
		return nil, f.err()
	}
	ctx := r.Context()
	for attempt := 0; attempt < maxAttempts; attempt++ {
		site, err := s.deleteIfEmpty(ctx, p.Namespace, id)
		if errors.Is(err, errRetry) {
			time.Sleep(time.Duration(attempt*attempt) * 10 * time.Millisecond)
			continue
		}
		if err != nil {
			return nil, err
		}
		// Anything that arrived after the look goes with the site. The site is deleted whatever
		// happens here: the Site finalizer deletes the same children, so a failure is logged,
		// not answered. The answer waits until this replica's cache no longer holds the site
		// (nor those), so the client reads its delete.
		children, err := household.DeleteChildren(ctx, s.Client, s.APIReader, site)
		if err != nil {
			s.Log.Error(err, "deleting what arrived at a deleted site; its finalizer finishes", "site", site.Name)
		}
		s.awaitCache(ctx, nil, append(children, site))
		return noContent{}, nil
	}
	return nil, errTooManyChanges
}

// deleteIfEmpty looks at the site and what it holds on the API server and deletes it if it
// holds nothing. errRetry: the site changed between the look and the deletion.
func (s *Server) deleteIfEmpty(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	fresh := s.store(true)
	site, err := fresh.siteByID(ctx, ns, id)
	if err != nil {
		return nil, err
	}
	if site == nil {
		return nil, errSiteNotFound
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
	inFlight, _, err := household.CheckInFlight(ctx, s.APIReader, s.APIReader, site, time.Now())
	if err != nil {
		return nil, err
	}
	if held := household.HoldingsOf(assets, enrolments, ledgers, inFlight); !held.Empty() {
		return nil, fail(http.StatusBadRequest, "Site cannot be deleted: it has %s. Deleting a site removes only a site "+
			"that has nothing; to remove the site with its assets, enrolments and rewards, offboard it "+
			"(POST /entities/site/%s/offboard-site-and-assets)", held, id)
	}
	err = s.Client.Delete(ctx, site, client.Preconditions{UID: &site.UID, ResourceVersion: &site.ResourceVersion})
	switch {
	case apierrors.IsConflict(err):
		return nil, errRetry
	case apierrors.IsNotFound(err):
		return nil, errSiteNotFound
	case err != nil:
		return nil, err
	}
	return site, nil
}

// EligibilityCheckResponse answers POST /entities/site/check-eligibility.
type EligibilityCheckResponse struct {
	IsHalfHourlySettled bool                           `json:"is_half_hourly_settled"`
	Propositions        []PropositionEligibilityRecord `json:"propositions"`
}

// checkEligibility answers what a prospective site would be eligible for: its MPAN and,
// optionally, the model of an asset it would install (household.EvaluateProspect, the Site
// controller's evaluation). Nothing is stored. The site is the organisation's stored site with
// that MPAN when it has one (half-hourly settlement and consent are facts about a stored site),
// else a new site (household.ProspectSite).
func (s *Server) checkEligibility(r *http.Request, p *auth.Principal) (any, error) {
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	loc := []any{"body"}
	var mpan, model string
	if raw, ok := f.str(body, loc, "mpan", true); ok {
		if norm, err := validation.NormaliseMPAN(raw); err != nil {
			f.addValidation(err, at(loc, "mpan"))
		} else {
			mpan = norm
		}
	}
	if m, ok := f.str(body, loc, "asset_model", false); ok {
		model = m
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	ctx := r.Context()
	rules, err := household.LoadRules(ctx, s.Cache)
	if err != nil {
		return nil, err
	}
	if model != "" {
		if _, ok := rules.Model(model); !ok {
			return nil, fail(http.StatusNotFound, "Asset model %q not found", model)
		}
	}
	stored, err := s.store(false).siteByMPAN(ctx, p.Namespace, mpan)
	if err != nil {
		return nil, err
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

func (s *Server) dispatchConsent(r *http.Request, p *auth.Principal) (any, error) {
	return s.changeDispatch(r, p, household.ConsentDispatch)
}

func (s *Server) dispatchDeconsent(r *http.Request, p *auth.Principal) (any, error) {
	return s.changeDispatch(r, p, household.DeconsentDispatch)
}

// changeDispatch applies a change of dispatch consent (household.ConsentDispatch or
// DeconsentDispatch) to the site's spec.dispatchMethods and answers the legacy site record.
// It writes as every site change does (transact), so the API server's schema and the
// admission webhooks judge it as they judge kubectl's; a change that changes nothing writes
// nothing.
func (s *Server) changeDispatch(r *http.Request, p *auth.Principal,
	change func(*flexv1.SiteSpec, []flexv1.DispatchMethod) []string) (any, error) {
	var methods []flexv1.DispatchMethod
	site, err := s.readSiteAction(r, p, func(f *fields, body map[string]any) {
		methods = dispatchMethods(f, body, []any{"body"})
	})
	if err != nil {
		return nil, err
	}
	ctx := r.Context()
	var out LegacySiteRecord
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() || current.UID != site.UID {
			return errSiteNotFound
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
		out = legacySiteRecord(updated, assets, false)
		return s.write(ctx, log, updated, current, fields)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// dispatchMethods reads the required dispatch_methods of SiteDispatchConsentRequest: a list of
// distinct dispatch methods (uniqueItems), possibly empty.
func dispatchMethods(f *fields, body map[string]any, loc []any) []flexv1.DispatchMethod {
	items, ok := f.array(body, loc, "dispatch_methods", true)
	if !ok {
		return nil
	}
	loc = at(loc, "dispatch_methods")
	methods := make([]flexv1.DispatchMethod, 0, len(items))
	first := map[flexv1.DispatchMethod]int{}
	for i, item := range items {
		m, ok := enumValue(f, item, at(loc, i), allDispatchMethods)
		if !ok {
			continue
		}
		if j, seen := first[m]; seen {
			f.add(fmt.Sprintf("List should have unique items: %q is also dispatch_methods[%d]", m, j), "value_error", at(loc, i))
			continue
		}
		first[m] = i
		methods = append(methods, m)
	}
	return methods
}
