package app

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// store finds Flexsite objects by their keys. A cached store answers from the manager's
// cache through its indexes; a fresh one reads the API server by GET, never by LIST
// (index.NewFreshLookup; docs/scale.md, "Request paths: no LIST"). Requests start cached and
// go fresh after a write conflict, which says the cache was behind.
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
	a := liveAsset(found)
	if a != nil && st.cached {
		return a.DeepCopy(), nil
	}
	return a, nil
}

// liveAsset is the first of found not being deleted (nil when none), as found holds it.
func liveAsset(found []*flexv1.Asset) *flexv1.Asset {
	for _, a := range found {
		if a.DeletionTimestamp.IsZero() {
			return a
		}
	}
	return nil
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

func (st store) enrolmentsOf(ctx context.Context, site *flexv1.Site) ([]flexv1.Enrolment, error) {
	found, err := st.lookup.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	out := make([]flexv1.Enrolment, len(found))
	for i, e := range found {
		if st.cached {
			e.DeepCopyInto(&out[i])
		} else {
			out[i] = *e
		}
	}
	return out, nil
}

// ledgersOf is the site's RewardLedger, read by its name (householdstore.LedgerOf).
func (st store) ledgersOf(ctx context.Context, site *flexv1.Site) ([]flexv1.RewardLedger, error) {
	ledger, err := householdstore.LedgerOf(ctx, st.r, site)
	if ledger == nil {
		return nil, err
	}
	return []flexv1.RewardLedger{*ledger}, nil
}
