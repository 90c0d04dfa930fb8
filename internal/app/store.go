package app

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// store finds Flexsite objects by their keys. A cached store answers from the manager's
// cache through its indexes; a fresh one asks the API server (label and field selectors on
// the same keys: the CRDs declare them selectable). Requests start cached and go fresh after
// a write conflict, which says the cache was behind.
type store struct {
	r      client.Reader
	cached bool
}

func (s *Service) store(fresh bool) store {
	if fresh {
		return store{r: s.APIReader}
	}
	return store{r: s.Cache, cached: true}
}

// byID selects objects by their API id: an index in the cache, a label selector on the server.
func (st store) byID(id string) client.ListOption {
	if st.cached {
		return client.MatchingFields{index.ID: id}
	}
	return client.MatchingLabels{flexv1.IDLabel: id}
}

func (st store) siteByID(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	return liveSite(ctx, st.r, client.InNamespace(ns), st.byID(id))
}

// siteToRead is siteByID for a caller that only reads the site: from the cache it is the
// cached object itself, not a deep copy, and must not be changed.
func (st store) siteToRead(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	if !st.cached {
		return st.siteByID(ctx, ns, id)
	}
	return liveSite(ctx, st.r, client.InNamespace(ns), st.byID(id), client.UnsafeDisableDeepCopy)
}

func (st store) siteByMPAN(ctx context.Context, ns, mpan string) (*flexv1.Site, error) {
	return liveSite(ctx, st.r, client.InNamespace(ns), client.MatchingFields{index.MPAN: mpan})
}

func (st store) siteByExternalUser(ctx context.Context, ns, externalUserID string) (*flexv1.Site, error) {
	return liveSite(ctx, st.r, client.InNamespace(ns),
		client.MatchingFields{index.ExternalUserID: externalUserID})
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
	return liveAsset(ctx, st.r, client.InNamespace(ns), st.byID(id))
}

func (st store) assetByExternalID(ctx context.Context, ns, externalID string) (*flexv1.Asset, error) {
	return liveAsset(ctx, st.r, client.InNamespace(ns), client.MatchingFields{index.ExternalID: externalID})
}

// assetsOf lists a site's live assets. The result is read-only: from the cache it shares the
// cached objects (no deep copy: reads are the hot path); the slice itself is the caller's.
func (st store) assetsOf(ctx context.Context, site *flexv1.Site) ([]flexv1.Asset, error) {
	list := &flexv1.AssetList{}
	if err := st.r.List(ctx, list, client.InNamespace(site.Namespace), client.MatchingFields{index.SiteName: site.Name},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	live := list.Items[:0]
	for _, a := range list.Items {
		if a.DeletionTimestamp.IsZero() {
			live = append(live, a)
		}
	}
	return live, nil
}

func (st store) enrolmentsOf(ctx context.Context, site *flexv1.Site) ([]flexv1.Enrolment, error) {
	list := &flexv1.EnrolmentList{}
	if err := st.r.List(ctx, list, client.InNamespace(site.Namespace), client.MatchingFields{index.SiteName: site.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (st store) ledgersOf(ctx context.Context, site *flexv1.Site) ([]flexv1.RewardLedger, error) {
	list := &flexv1.RewardLedgerList{}
	if err := st.r.List(ctx, list, client.InNamespace(site.Namespace), client.MatchingFields{index.SiteName: site.Name}); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// liveSite and liveAsset return the first object of a list that is not being deleted: to
// the API an object on its way out is gone.
func liveSite(ctx context.Context, r client.Reader, opts ...client.ListOption) (*flexv1.Site, error) {
	list := &flexv1.SiteList{}
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}

func liveAsset(ctx context.Context, r client.Reader, opts ...client.ListOption) (*flexv1.Asset, error) {
	list := &flexv1.AssetList{}
	if err := r.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			return &list.Items[i], nil
		}
	}
	return nil, nil
}
