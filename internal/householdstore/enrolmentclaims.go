package householdstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/claiming"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

// HoldEnrolment admits enr's hold on its site's enrolment in its proposition, or reports an
// AlreadyEnrolledError (the Enrolment webhook's half; household's "Which Enrolment holds a
// site's enrolment"). An Enrolment named after its site and proposition holds it by its name
// and writes nothing: it is refused when the claim of its name binds for another Enrolment
// (one GET of the claim, one of the Enrolment it names). One under another name claims it
// (ClaimEnrolment). Enrolments stored before claims existed are found as the cache has seen
// them (holders: the cache's index, no LIST; docs/scale.md, "Request paths: no LIST"). fresh
// must read from the API server, not a cache.
func HoldEnrolment(ctx context.Context, w client.Client, fresh client.Reader, holders index.Lookup,
	enr *flexv1.Enrolment, now time.Time, dryRun bool) error {
	if !household.EnrolmentHeldByName(enr) {
		return ClaimEnrolment(ctx, w, fresh, holders, enr, now, dryRun)
	}
	claimed, err := claimedEnrolment(ctx, fresh, enr.Namespace, enr.Spec.SiteName, enr.Spec.Proposition, now)
	var taken *household.AlreadyEnrolledError
	if errors.As(err, &taken) && taken.Holder == enr.Name {
		err = nil // a claim naming enr itself: none of another's
	}
	if err != nil {
		return err
	}
	if claimed != nil && claimed.Name != enr.Name {
		return &household.AlreadyEnrolledError{SiteName: enr.Spec.SiteName, Proposition: enr.Spec.Proposition, Holder: claimed.Name}
	}
	return unclaimedHolder(ctx, holders, enr)
}

// ClaimEnrolment reserves enr's site and proposition for enr, an Enrolment not named after
// them, before enr is stored, or reports an AlreadyEnrolledError: another Enrolment holds it
// by its claim, or is being stored with its claim at this moment, or holds it by its name (an
// Enrolment named after the site and the proposition, looked for by GET once the claim is
// made, which withdraws the claim). The claims are read from the API server (fresh must not be
// a cache), so two enrolments made a moment apart through any doors meet at the claim's name,
// or the claimant finds the named one. With dryRun it writes nothing and answers what a real
// request would meet now. The protocol is internal/claiming's.
func ClaimEnrolment(ctx context.Context, w client.Client, fresh client.Reader, holders index.Lookup,
	enr *flexv1.Enrolment, now time.Time, dryRun bool) error {
	want := household.NewEnrolmentClaim(enr)
	_, err := claiming.Claim(ctx, w, fresh, claiming.Claimant[flexv1.EnrolmentClaim, *flexv1.EnrolmentClaim]{
		Want: want.DeepCopy,
		Judge: func(ctx context.Context, existing *flexv1.EnrolmentClaim) (bool, claimrule.Standing, error) {
			holder, err := enrolmentOf(ctx, fresh, existing)
			if err != nil {
				return false, 0, err
			}
			return existing.Spec.EnrolmentName == enr.Name, household.EnrolmentClaimStanding(existing, holder, now), nil
		},
		OtherHolder: func() error {
			if err := unclaimedHolder(ctx, holders, enr); err != nil {
				return err
			}
			return namedHolder(ctx, fresh, enr)
		},
		Taken: func(existing *flexv1.EnrolmentClaim, standing claimrule.Standing) error {
			return &household.AlreadyEnrolledError{SiteName: enr.Spec.SiteName, Proposition: enr.Spec.Proposition,
				Holder: existing.Spec.EnrolmentName, Pending: standing == claimrule.Pending}
		},
		What:   fmt.Sprintf("enrolment of site %s in %s for Enrolment %s", enr.Spec.SiteName, enr.Spec.Proposition, enr.Name),
		DryRun: dryRun,
	})
	return err
}

// namedHolder reports, as an AlreadyEnrolledError, the live Enrolment named after enr's site
// and proposition as stored now (one GET; fresh must not be a cache): it holds them by its name.
func namedHolder(ctx context.Context, fresh client.Reader, enr *flexv1.Enrolment) error {
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: enr.Namespace, Name: enr.Spec.SiteName}}
	named, err := NamedEnrolment(ctx, fresh, site, enr.Spec.Proposition)
	if err != nil || named == nil || named.Name == enr.Name || !named.DeletionTimestamp.IsZero() {
		return err
	}
	return &household.AlreadyEnrolledError{SiteName: enr.Spec.SiteName, Proposition: enr.Spec.Proposition, Holder: named.Name}
}

// ClaimedEnrolment is the Enrolment that holds site's enrolment in p by its claim, read from
// the API server by GET (fresh must not be a cache): nil when no claim binds. A claim made a
// moment ago whose Enrolment is not stored yet is an AlreadyEnrolledError with Pending (ask
// again in a moment).
func ClaimedEnrolment(ctx context.Context, fresh client.Reader, site *flexv1.Site, p flexv1.PropositionName,
	now time.Time) (*flexv1.Enrolment, error) {
	return claimedEnrolment(ctx, fresh, site.Namespace, site.Name, p, now)
}

func claimedEnrolment(ctx context.Context, fresh client.Reader, ns, siteName string, p flexv1.PropositionName,
	now time.Time) (*flexv1.Enrolment, error) {
	claim := &flexv1.EnrolmentClaim{}
	err := fresh.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.EnrolmentClaimName(siteName, p)}, claim)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	holder, err := enrolmentOf(ctx, fresh, claim)
	if err != nil {
		return nil, err
	}
	if holder != nil && (holder.Spec.SiteName != siteName || holder.Spec.Proposition != p) {
		holder = nil // another site's whose name digests alike: it holds nothing here
	}
	switch household.EnrolmentClaimStanding(claim, holder, now) {
	case claimrule.Held:
		return holder, nil
	case claimrule.Pending:
		return nil, &household.AlreadyEnrolledError{SiteName: siteName, Proposition: p, Holder: claim.Spec.EnrolmentName, Pending: true}
	default:
		return nil, nil
	}
}

// StoredEnrolment is site's enrolment in p as stored now, found by its claim (ClaimedEnrolment:
// an Enrolment under a name of its own), and with no claim and named, by the name the API
// gives it (NamedEnrolment: an Enrolment of that name holds it by its name and makes no
// claim). A pending claim naming that name (left by an earlier admission) is none: the API's
// own create of the name meets it as its own. GETs; fresh must not be a cache.
func StoredEnrolment(ctx context.Context, fresh client.Reader, site *flexv1.Site, p flexv1.PropositionName,
	now time.Time, named bool) (*flexv1.Enrolment, error) {
	claimed, err := ClaimedEnrolment(ctx, fresh, site, p, now)
	var taken *household.AlreadyEnrolledError
	if errors.As(err, &taken) && taken.Holder == identity.EnrolmentName(site.Name, p) {
		err = nil
	}
	if err != nil || claimed != nil || !named {
		return claimed, err
	}
	return NamedEnrolment(ctx, fresh, site, p)
}

// LiveEnrolmentsIn are site's live enrolments in p as stored now, by GET: those holders (a
// fresh lookup: those the cache has seen, read again) finds, and the one its claim names (or,
// with no claim, the one named after site and p). One being stored at this moment is not yet.
func LiveEnrolmentsIn(ctx context.Context, holders index.Lookup, fresh client.Reader, site *flexv1.Site,
	p flexv1.PropositionName, now time.Time) ([]flexv1.Enrolment, error) {
	found, err := holders.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	stored, err := StoredEnrolment(ctx, fresh, site, p, now, true)
	if err != nil && !errors.As(err, new(*household.AlreadyEnrolledError)) {
		return nil, err
	}
	if stored != nil && !slices.ContainsFunc(found, func(e *flexv1.Enrolment) bool { return e.Name == stored.Name }) {
		found = append(found, stored)
	}
	var out []flexv1.Enrolment
	for _, e := range found {
		if e.Spec.Proposition == p && e.DeletionTimestamp.IsZero() {
			out = append(out, *e)
		}
	}
	return out, nil
}

// ClaimedByAnother reports whether an Enrolment other than enr holds or is taking site's
// enrolment in enr's proposition by its claim: what an Enrolment webhook refused enr for.
func ClaimedByAnother(ctx context.Context, fresh client.Reader, site *flexv1.Site, enr *flexv1.Enrolment, now time.Time) (bool, error) {
	claimed, err := ClaimedEnrolment(ctx, fresh, site, enr.Spec.Proposition, now)
	var taken *household.AlreadyEnrolledError
	if errors.As(err, &taken) {
		return taken.Holder != enr.Name, nil
	}
	return claimed != nil && claimed.Name != enr.Name, err
}

// ReleaseEnrolmentClaim deletes enr's claim, for its finalizer: only the claim that names enr
// (another Enrolment's, made once enr was on its way out, stays), with preconditions so that
// a claim made a moment ago by another is never deleted. fresh must read from the API server.
func ReleaseEnrolmentClaim(ctx context.Context, w client.Client, fresh client.Reader, enr *flexv1.Enrolment) error {
	if household.EnrolmentHeldByName(enr) {
		return nil // held by its name: it made no claim
	}
	claim := &flexv1.EnrolmentClaim{}
	err := fresh.Get(ctx, client.ObjectKeyFromObject(household.NewEnrolmentClaim(enr)), claim)
	if err != nil || claim.Spec.EnrolmentName != enr.Name {
		return client.IgnoreNotFound(err)
	}
	uid, rv := claim.UID, claim.ResourceVersion
	err = w.Delete(ctx, claim, client.Preconditions{UID: &uid, ResourceVersion: &rv})
	if apierrors.IsConflict(err) {
		return nil // replaced meanwhile: no longer enr's
	}
	return client.IgnoreNotFound(err)
}

// unclaimedHolder reports, as an AlreadyEnrolledError, a live Enrolment other than enr of the
// same site in the same proposition that holders (the cache) has seen: one stored before
// claims existed, which holds its place without a claim.
func unclaimedHolder(ctx context.Context, holders index.Lookup, enr *flexv1.Enrolment) error {
	others, err := holders.EnrolmentsOfSite(ctx, enr.Namespace, enr.Spec.SiteName)
	if err != nil {
		return err
	}
	for _, other := range others {
		if other.Name != enr.Name && other.Spec.Proposition == enr.Spec.Proposition && other.DeletionTimestamp.IsZero() {
			return &household.AlreadyEnrolledError{SiteName: enr.Spec.SiteName, Proposition: enr.Spec.Proposition, Holder: other.Name}
		}
	}
	return nil
}

// enrolmentOf is the Enrolment a claim names, read from r; nil when it does not exist.
func enrolmentOf(ctx context.Context, r client.Reader, claim *flexv1.EnrolmentClaim) (*flexv1.Enrolment, error) {
	return getOrNil[flexv1.Enrolment](ctx, r, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.EnrolmentName})
}
