package app

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

// store finds Flexsite objects by their keys. A cached store answers from the manager's
// cache through its indexes; a fresh one reads from the API server, by GET only
// (index.NewFreshLookup: what the cache finds, and the names derived from the key, as stored
// now), never by a LIST, whose cost grows with the organisation (docs/scale.md, "Request
// paths: no LIST"). Requests start cached and go fresh after a write conflict, which says the
// cache was behind; the objects a conflict is about are named (a site by its MPAN, an asset by
// its external id, an enrolment by its site and proposition), so reading those names is what
// a lost race needs.
type store struct {
	r      client.Reader
	lookup index.Lookup
	cached bool
}

func (s *Service) store(fresh bool) store {
	if fresh {
		return store{r: s.APIReader, lookup: index.NewFreshLookup(s.Cache, s.APIReader)}
	}
	return store{r: s.Cache, lookup: index.NewLookup(s.Cache), cached: true}
}

// site is the live Site of the Sites found (nil when none): from the cache through its
// bucketed index, a copy unless readOnly (then the cached object itself, which must not be
// changed); from the API server through its selectors.
func (st store) site(found []*flexv1.Site, err error, readOnly bool) (*flexv1.Site, error) {
	if err != nil {
		return nil, err
	}
	for _, s := range found {
		if s.DeletionTimestamp.IsZero() {
			if st.cached && !readOnly {
				return s.DeepCopy(), nil
			}
			return s, nil
		}
	}
	return nil, nil
}

// asset is site's counterpart for Assets, always a copy.
func (st store) asset(found []*flexv1.Asset, err error) (*flexv1.Asset, error) {
	if err != nil {
		return nil, err
	}
	for _, a := range found {
		if a.DeletionTimestamp.IsZero() {
			if st.cached {
				return a.DeepCopy(), nil
			}
			return a, nil
		}
	}
	return nil, nil
}

func (st store) siteByID(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	found, err := st.lookup.SitesByID(ctx, ns, id)
	return st.site(found, err, false)
}

// siteToRead is siteByID for a caller that only reads the site: from the cache it is the
// cached object itself, not a deep copy, and must not be changed.
func (st store) siteToRead(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	found, err := st.lookup.SitesByID(ctx, ns, id)
	return st.site(found, err, true)
}

func (st store) siteByMPAN(ctx context.Context, ns, mpan string) (*flexv1.Site, error) {
	found, err := st.lookup.SitesByMPAN(ctx, ns, mpan)
	return st.site(found, err, false)
}

func (st store) siteByExternalUser(ctx context.Context, ns, externalUserID string) (*flexv1.Site, error) {
	found, err := st.lookup.SitesByExternalUserID(ctx, ns, externalUserID)
	return st.site(found, err, false)
}

func (st store) siteByName(ctx context.Context, ns, name string) (*flexv1.Site, error) {
	site := &flexv1.Site{}
	if err := st.r.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, site); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return site, nil
}

func (st store) assetByID(ctx context.Context, ns, id string) (*flexv1.Asset, error) {
	return st.asset(st.lookup.AssetsByID(ctx, ns, id))
}

func (st store) assetByExternalID(ctx context.Context, ns, externalID string) (*flexv1.Asset, error) {
	return st.asset(st.lookup.AssetsByExternalID(ctx, ns, externalID))
}

// assetsOf lists a site's live assets. The result is read-only: from the cache it shares the
// cached objects (no deep copy: reads are the hot path); the slice itself is the caller's.
func (st store) assetsOf(ctx context.Context, site *flexv1.Site) ([]flexv1.Asset, error) {
	found, err := st.lookup.AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	live := make([]flexv1.Asset, 0, len(found))
	for _, a := range found {
		if a.DeletionTimestamp.IsZero() {
			live = append(live, *a)
		}
	}
	return live, nil
}

// enrolmentsOf lists a site's enrolments. A fresh store reads, besides those the cache has
// seen, the enrolment of each of props under the name the API gives it
// (identity.EnrolmentName): one made a moment ago by another request is found by it.
func (st store) enrolmentsOf(ctx context.Context, site *flexv1.Site, props ...flexv1.PropositionName) ([]flexv1.Enrolment, error) {
	found, err := st.lookup.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	out := make([]flexv1.Enrolment, len(found), len(found)+len(props))
	for i, e := range found {
		if st.cached {
			e.DeepCopyInto(&out[i])
		} else {
			out[i] = *e
		}
	}
	if st.cached {
		return out, nil
	}
	for _, p := range props {
		if slices.ContainsFunc(out, func(e flexv1.Enrolment) bool { return e.Name == identity.EnrolmentName(site.Name, p) }) {
			continue
		}
		e, err := st.namedEnrolment(ctx, site, p)
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, *e)
		}
	}
	return out, nil
}

// namedEnrolment is the site's enrolment in p under the name the API gives it
// (identity.EnrolmentName), read from st by GET; nil when there is none.
func (st store) namedEnrolment(ctx context.Context, site *flexv1.Site, p flexv1.PropositionName) (*flexv1.Enrolment, error) {
	e := &flexv1.Enrolment{}
	switch err := st.r.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.EnrolmentName(site.Name, p)}, e); {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case e.Spec.SiteName != site.Name || e.Spec.Proposition != p:
		return nil, nil
	}
	return e, nil
}

// ledgersOf is the site's RewardLedger, read by its name (identity.RewardLedgerName: one per
// site, named after it), none when it has none.
func (st store) ledgersOf(ctx context.Context, site *flexv1.Site) ([]flexv1.RewardLedger, error) {
	ledger := &flexv1.RewardLedger{}
	err := st.r.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.RewardLedgerName(site.Name)}, ledger)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case ledger.Spec.SiteName != site.Name:
		return nil, nil
	}
	return []flexv1.RewardLedger{*ledger}, nil
}
