package householdstore

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/claiming"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

// ClaimMPAN reserves mpan for site before the site's spec names it. It answers the claim when
// this call created it, or may have (its Create failed in a way that does not prove it was
// refused): the caller deletes it if the request then fails. It answers nil when the site
// claimed it already. An MPANTakenError says another site holds or is taking the MPAN. fresh
// must read from the API server, not a cache; holders finds the sites that hold an MPAN as
// stored now: a request's is index.NewFreshLookup, by GET, no LIST (docs/scale.md, "Request
// paths: no LIST"). It reads the site named after the MPAN, which a creator meets the claim
// with (Unclaimed), from the API server, so the meeting below stays linearisable; a site
// declared by kubectl or GitOps under another name is found as the cache has seen it, as the
// Site webhook finds it.
func ClaimMPAN(ctx context.Context, c client.Client, fresh client.Reader, holders index.Lookup, site *flexv1.Site,
	mpan string, now time.Time) (*flexv1.MPANClaim, error) {
	return claimMPAN(ctx, c, fresh, household.NewClaim(site, mpan), site, now,
		func() error { return holderOtherThan(ctx, holders, site, mpan) })
}

// ClaimDeclared gives a site declared by kubectl or GitOps (under a name that does not hold
// its MPAN) the claim of its MPAN, for the Site controller: the claim is the only proof of an
// MPAN held under another name. It answers nil when the site holds its MPAN (by its name, or
// by a claim, now made or made before), and an MPANTakenError when another site holds it or
// is taking it: the site named after the MPAN, or the site an earlier claim names. Unlike a
// request, it does not back off from other sites declared with the same MPAN and no claim:
// the first to claim holds it. The claim it makes is a declared one (household.NewDeclaredClaim):
// made for a site already stored with the MPAN, it binds only while the site holds it, so
// one made for a failed request's write, seen before the request rolled it back, is stale
// as soon as the site is back (ReleaseClaims deletes it then). c may read from a cache,
// fresh must read from the API server; no LIST.
func ClaimDeclared(ctx context.Context, c client.Client, fresh client.Reader, site *flexv1.Site, now time.Time) error {
	mpan := site.Spec.MPAN
	if mpan == "" || household.HoldsByName(site) {
		return nil
	}
	held := household.NewClaim(site, mpan)
	if err := c.Get(ctx, client.ObjectKeyFromObject(held), held); err == nil && held.Spec.SiteName == site.Name && held.Spec.MPAN == mpan {
		return nil // claimed before, as the cache has seen it
	}
	// Looked for before the claim too, so that a site refused by a name writes nothing (a claim
	// made and withdrawn would wake its controller again); looked for after, for the race.
	if err := heldByName(ctx, fresh, site, mpan); err != nil {
		return err
	}
	// A claim perhaps stored by a failed attempt is this site's: the next reconcile finds it.
	_, err := claimMPAN(ctx, c, fresh, household.NewDeclaredClaim(site, mpan), site, now,
		func() error { return heldByName(ctx, fresh, site, mpan) })
	return err
}

// heldByName reports, as an MPANTakenError, a live site other than site named after mpan
// that holds it: the site a creator meets a claim with (Unclaimed).
func heldByName(ctx context.Context, fresh client.Reader, site *flexv1.Site, mpan string) error {
	other := &flexv1.Site{}
	err := fresh.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.SiteNameForMPAN(mpan)}, other)
	if err != nil {
		return client.IgnoreNotFound(err)
	}
	if other.Name != site.Name && other.DeletionTimestamp.IsZero() && other.Spec.MPAN == mpan {
		return &household.MPANTakenError{MPAN: mpan, Holder: other.Name}
	}
	return nil
}

// claimMPAN is the claim protocol (internal/claiming) both claimants of an MPAN share: create
// want (site's claim), then look for another holder with holderOther (withdrawing the claim
// when there is one); replace a stale claim; refuse a standing one of another site.
func claimMPAN(ctx context.Context, c client.Client, fresh client.Reader, want *flexv1.MPANClaim, site *flexv1.Site,
	now time.Time, holderOther func() error) (*flexv1.MPANClaim, error) {
	return claiming.Claim(ctx, c, fresh, claiming.Claimant[flexv1.MPANClaim, *flexv1.MPANClaim]{
		Want: want.DeepCopy,
		Judge: func(ctx context.Context, existing *flexv1.MPANClaim) (bool, claimrule.Standing, error) {
			holder, err := siteOf(ctx, fresh, existing)
			if err != nil {
				return false, 0, err
			}
			return existing.Spec.SiteName == site.Name, household.Standing(existing, holder, now), nil
		},
		OtherHolder: holderOther,
		Taken: func(existing *flexv1.MPANClaim, standing claimrule.Standing) error {
			return &household.MPANTakenError{MPAN: want.Spec.MPAN, Holder: existing.Spec.SiteName, Pending: standing == claimrule.Pending}
		},
		What: fmt.Sprintf("MPAN %s for site %s", want.Spec.MPAN, site.Name),
	})
}

// Unclaimed is the creator's half of the meeting: called after creating site (named
// mpan-<MPAN>), it reports an MPANTakenError when another site claims the MPAN, and then the
// creator must delete its site. fresh must read from the API server.
func Unclaimed(ctx context.Context, fresh client.Reader, site *flexv1.Site, now time.Time) error {
	claim := &flexv1.MPANClaim{}
	err := fresh.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.MPANClaimName(site.Spec.MPAN)}, claim)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil || claim.Spec.SiteName == site.Name {
		return err
	}
	holder, err := siteOf(ctx, fresh, claim)
	if err != nil {
		return err
	}
	if standing := household.Standing(claim, holder, now); standing != claimrule.Stale {
		return &household.MPANTakenError{MPAN: site.Spec.MPAN, Holder: claim.Spec.SiteName, Pending: standing == claimrule.Pending}
	}
	return nil
}

// holderOtherThan reports, as an MPANTakenError, a live site other than site that holds mpan.
func holderOtherThan(ctx context.Context, holders index.Lookup, site *flexv1.Site, mpan string) error {
	sites, err := holders.SitesByMPAN(ctx, site.Namespace, mpan)
	if err != nil {
		return err
	}
	for _, other := range sites {
		if other.Name != site.Name && other.DeletionTimestamp.IsZero() {
			return &household.MPANTakenError{MPAN: mpan, Holder: other.Name}
		}
	}
	return nil
}

// siteOf is the Site an MPAN claim names, read from r; nil when it does not exist.
func siteOf(ctx context.Context, r client.Reader, claim *flexv1.MPANClaim) (*flexv1.Site, error) {
	return getOrNil[flexv1.Site](ctx, r, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Spec.SiteName})
}

// getOrNil reads the object of key from r: nil, and no error, when it does not exist (a
// claim's holder that is gone or not stored yet).
func getOrNil[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, key client.ObjectKey) (PT, error) {
	obj := PT(new(T))
	if err := r.Get(ctx, key, obj); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return obj, nil
}

// ReleaseClaim deletes site's claim of an MPAN it has just left, if it holds one: the change
// that left it is done. fresh must read from the API server.
func ReleaseClaim(ctx context.Context, c client.Client, fresh client.Reader, site *flexv1.Site, mpan string) error {
	claim := household.NewClaim(site, mpan)
	if err := fresh.Get(ctx, client.ObjectKeyFromObject(claim), claim); err != nil || claim.Spec.SiteName != site.Name {
		return client.IgnoreNotFound(err)
	}
	return client.IgnoreNotFound(c.Delete(ctx, claim, client.Preconditions{UID: &claim.UID}))
}

// ReleaseClaims deletes the site's claims that it no longer needs: those of another MPAN than
// it holds, once stale, and the claim of the MPAN its name holds (it went back to it: the
// name, and the site now stored with the MPAN, keep anyone else from it). It answers how
// long until the next of the others turns stale (zero: none left pending), for the Site
// controller to look again then.
func ReleaseClaims(ctx context.Context, c client.Client, r client.Reader, site *flexv1.Site, now time.Time) (time.Duration, error) {
	claims, err := index.NewLookup(r).MPANClaimsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return 0, err
	}
	var next time.Duration
	for _, cached := range claims {
		claim := cached.DeepCopy() // deleted with preconditions: not the cache's object
		switch household.Standing(claim, site, now) {
		case claimrule.Held:
			if !household.HoldsByName(site) {
				continue
			}
			err := c.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return 0, err
			}
		case claimrule.Pending:
			if wait := claim.CreationTimestamp.Add(household.ClaimGrace).Sub(now); next == 0 || wait < next {
				next = wait
			}
		case claimrule.Stale:
			err := c.Delete(ctx, claim, client.Preconditions{UID: &claim.UID, ResourceVersion: &claim.ResourceVersion})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return 0, err
			}
		}
	}
	return next, nil
}
