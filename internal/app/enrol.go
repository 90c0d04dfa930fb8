package app

import (
	"context"
	"errors"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/metrics"
)

// Enrolment and unenrolment outcomes.
const (
	StatusEnrolled          = "enrolled"
	StatusAlreadyEnrolled   = "already_enrolled"
	StatusUnenrolled        = "unenrolled"
	StatusAlreadyUnenrolled = "already_unenrolled"
)

// EnrolResult answers enrol and unenrol (and is onboard's `enrolment`).
type EnrolResult struct {
	SiteID string `json:"site_id"`
	Status string `json:"status"`
}

// EnrolInput is an enrolment request.
type EnrolInput struct {
	Proposition flexv1.PropositionName
	// Override re-enrols a household that withdrew from the proposition.
	Override bool
	// Consent records the household's boundary meter consent with the enrolment (nil: none sent).
	Consent *time.Time
}

// Enrol enrols the caller's site siteID in a proposition, if the household's rules allow it.
func (s *Service) Enrol(ctx context.Context, p *auth.Principal, siteID string, in EnrolInput) (_ EnrolResult, err error) {
	var out EnrolResult
	defer func() { metrics.Enrolments.WithLabelValues(outcome(out.Status, err)).Inc() }()
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return out, err
	}
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return out, err
	}
	err = s.transact(ctx, func(st store, log *writeLog) error {
		current, err := st.siteByName(ctx, site.Namespace, site.Name)
		if err != nil {
			return err
		}
		if current == nil || !current.DeletionTimestamp.IsZero() {
			return ErrSiteNotFound
		}
		if err := s.confirmFresh(ctx, st, current); err != nil {
			return err
		}
		plan := &upsertPlan{site: current.DeepCopy(), siteBefore: current}
		plan.siteFields = household.MergeSite(&plan.site.Spec, household.SiteFields{Consent: in.Consent})
		household.EnsureID(plan.site)
		if plan.others, err = st.assetsOf(ctx, current); err != nil {
			return err
		}
		existing, err := s.decideEnrolment(ctx, st, log, plan, in.Proposition, in.Override, rules)
		if err != nil {
			return err
		}
		if err := s.write(ctx, log, plan.site, current, plan.siteFields); err != nil {
			return err
		}
		status, err := s.ensureEnrolment(ctx, log, plan.site, existing, in.Proposition, in.Override)
		out = EnrolResult{SiteID: plan.siteID(), Status: status}
		return err
	})
	return out, err
}

// Unenrol withdraws the caller's site siteID from a proposition: the withdrawal is recorded
// on the site, then the enrolment goes.
func (s *Service) Unenrol(ctx context.Context, p *auth.Principal, siteID string, prop flexv1.PropositionName) (EnrolResult, error) {
	site, err := s.site(ctx, p, siteID)
	if err != nil {
		return EnrolResult{}, err
	}
	mine, err := householdstore.LiveEnrolmentsIn(ctx, s.store(true).lookup, s.APIReader, site, prop, time.Now())
	if err != nil {
		return EnrolResult{}, err
	}
	out := EnrolResult{SiteID: site.Labels[flexv1.IDLabel], Status: StatusAlreadyUnenrolled}
	if len(mine) == 0 {
		return out, nil
	}
	// The withdrawal is recorded before the enrolment goes, so a failure in between leaves
	// the household's choice on record and a repeated call finishes the job.
	for i := range mine {
		recorded, err := householdstore.RecordWithdrawal(ctx, s.Client, s.APIReader, client.ObjectKeyFromObject(site),
			household.WithdrawalFrom(&mine[i], s.Now()))
		if err != nil {
			return EnrolResult{}, err
		}
		if recorded {
			metrics.Withdrawals.WithLabelValues(metrics.DoorRESTUnenrol).Inc()
		}
	}
	deleted := make([]client.Object, 0, len(mine))
	for i := range mine {
		if err := s.Client.Delete(ctx, &mine[i]); client.IgnoreNotFound(err) != nil {
			return EnrolResult{}, err
		}
		deleted = append(deleted, &mine[i])
	}
	s.awaitCache(ctx, []client.Object{site}, deleted)
	out.Status = StatusUnenrolled
	return out, nil
}

// decideEnrolment asks the household, before anything is written, whether the site as the
// plan will store it may be enrolled in p, and translates a refusal into the use case's.
// It answers the site's live enrolment in p, if it has one. An enrolment on its way out is
// decided without: a refusal (a withdrawal on record, say) is answered at once, however long
// the enrolment lingers; an enrolment allowed waits for it to go (a retry).
func (s *Service) decideEnrolment(ctx context.Context, st store, log *writeLog, plan *upsertPlan,
	p flexv1.PropositionName, override bool, rules eligibility.Rules) (*flexv1.Enrolment, error) {
	var existing *flexv1.Enrolment
	leaving := false
	if plan.siteBefore != nil {
		var err error
		existing, err = s.liveEnrolment(ctx, st, log, plan.siteBefore, p)
		if leaving = errors.Is(err, errEnrolmentLeaving); err != nil && !leaving {
			return nil, err
		}
	}
	res := plan.eligibility(rules)
	d := household.DecideEnrolment(household.EnrolmentRequest{Site: plan.site, Proposition: p, Override: override,
		Enrolment: existing, Eligibility: &res, Rules: rules})
	record := func() *EligibilityRecord { return eligibilityRecord(plan.siteID(), res) }
	switch d.Verdict {
	case household.Allowed, household.AlreadyEnrolled:
		if leaving {
			return nil, errEnrolmentLeaving
		}
		return existing, nil
	case household.PreviouslyWithdrew:
		return nil, refusedEnrolment("previously_withdrew", d.Message+"; set override_withdrawal to re-enrol it", record())
	case household.NotOffered:
		return nil, refusedEnrolment("proposition_not_offered", d.Message, record())
	case household.ConsentRequired:
		return nil, &Error{Kind: BadRequest, Code: "consent_required",
			Detail: d.Message + ": send gave_boundary_meter_consent_at"}
	case household.NotEligible:
		return nil, refusedEnrolment("prerequisites_not_met", d.Message, record())
	default: // SitePending: the site is going away
		return nil, ErrSiteNotFound
	}
}

// confirmFresh makes sure a decision to enrol rests on the site as stored now, not on a cached
// copy that may miss a withdrawal recorded a moment ago: one GET, and a stale copy means
// planning again from fresh reads.
func (s *Service) confirmFresh(ctx context.Context, st store, site *flexv1.Site) error {
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

// errEnrolmentLeaving is liveEnrolment's answer when the site's enrolment in p is on its way
// out: a retry, which decideEnrolment answers only when the decision without that enrolment
// allows the enrolment.
var errEnrolmentLeaving error = &retry{answer: ErrTooManyChanges}

// liveEnrolment finds the site's enrolment in p, whatever its name (GitOps may have declared
// one). One on its way out is waited for (a retry), so that a new one can follow it.
func (s *Service) liveEnrolment(ctx context.Context, st store, log *writeLog, site *flexv1.Site,
	p flexv1.PropositionName) (*flexv1.Enrolment, error) {
	enrolments, err := st.enrolmentsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	inP := func(e flexv1.Enrolment) bool { return e.Spec.Proposition == p }
	if !slices.ContainsFunc(enrolments, inP) && !log.wasCreated(site) {
		// Before deciding there is none, look for one made a moment ago, through any door, that
		// the cache has not seen: by its claim (GETs, no LIST: docs/scale.md). (A site this
		// request has just created has had no time to be enrolled by another.)
		found, err := householdstore.StoredEnrolment(ctx, s.APIReader, site, p, time.Now(), st.cached)
		if errors.As(err, new(*household.AlreadyEnrolledError)) {
			return nil, &retry{answer: ErrTooManyChanges} // being stored right now: plan again once it is
		}
		if err != nil {
			return nil, err
		}
		if found != nil {
			enrolments = append(enrolments, *found)
		}
	}
	i := slices.IndexFunc(enrolments, inP)
	switch {
	case i < 0:
		return nil, nil
	case !enrolments[i].DeletionTimestamp.IsZero():
		return nil, errEnrolmentLeaving // being unenrolled right now: wait for it to go, then enrol anew
	}
	return &enrolments[i], nil
}

// ensureEnrolment enrols the site in p: it creates the enrolment when the site has none, and
// otherwise makes the existing one carry the override the request asked for. It tells a new
// enrolment (this request's, over all its attempts) from an existing one.
func (s *Service) ensureEnrolment(ctx context.Context, log *writeLog, site *flexv1.Site, existing *flexv1.Enrolment,
	p flexv1.PropositionName, override bool) (string, error) {
	if existing == nil {
		enr := household.NewEnrolment(site, p, override)
		if err := s.create(ctx, log, enr); err != nil {
			// Refused for another Enrolment that holds or is taking the site's place in p: plan
			// again, and find that one.
			if other, cerr := householdstore.ClaimedByAnother(ctx, s.APIReader, site, enr, time.Now()); cerr == nil && other {
				return "", errRetry
			}
			return "", err
		}
		return StatusEnrolled, nil
	}
	if override && !existing.Spec.OverrideWithdrawal {
		updated := existing.DeepCopy()
		updated.Spec.OverrideWithdrawal = true
		if err := s.update(ctx, log, updated, existing); err != nil {
			return "", err
		}
	}
	if log.wasCreated(existing) {
		return StatusEnrolled, nil
	}
	return StatusAlreadyEnrolled, nil
}
