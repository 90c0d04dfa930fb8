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

// site is the live Site of namespace ns whose field (index.ID, MPAN, ExternalUserID) is value
// (nil when none): from the cache through its bucketed index, a copy unless readOnly (then
// the cached object itself, which must not be changed); from the API server through its
// selectors.
func (st store) site(ctx context.Context, ns, field, value string, readOnly bool) (*flexv1.Site, error) {
	found, err := index.Lookup(ctx, st.r, &flexv1.Site{}, &flexv1.SiteList{}, field, ns, value)
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

// asset is site's counterpart for Assets (index.ID, ExternalID), always a copy.
func (st store) asset(ctx context.Context, ns, field, value string) (*flexv1.Asset, error) {
	found, err := index.Lookup(ctx, st.r, &flexv1.Asset{}, &flexv1.AssetList{}, field, ns, value)
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
	return st.site(ctx, ns, index.ID, id, false)
}

// siteToRead is siteByID for a caller that only reads the site: from the cache it is the
// cached object itself, not a deep copy, and must not be changed.
func (st store) siteToRead(ctx context.Context, ns, id string) (*flexv1.Site, error) {
	return st.site(ctx, ns, index.ID, id, true)
}

func (st store) siteByMPAN(ctx context.Context, ns, mpan string) (*flexv1.Site, error) {
	return st.site(ctx, ns, index.MPAN, mpan, false)
}

func (st store) siteByExternalUser(ctx context.Context, ns, externalUserID string) (*flexv1.Site, error) {
	return st.site(ctx, ns, index.ExternalUserID, externalUserID, false)
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
	return st.asset(ctx, ns, index.ID, id)
}

func (st store) assetByExternalID(ctx context.Context, ns, externalID string) (*flexv1.Asset, error) {
	return st.asset(ctx, ns, index.ExternalID, externalID)
}

// assetsOf lists a site's live assets. The result is read-only: from the cache it shares the
// cached objects (no deep copy: reads are the hot path); the slice itself is the caller's.
func (st store) assetsOf(ctx context.Context, site *flexv1.Site) ([]flexv1.Asset, error) {
	list := &flexv1.AssetList{}
	if err := index.List(ctx, st.r, list, index.SiteName, site.Namespace, site.Name, true); err != nil {
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
	if err := index.List(ctx, st.r, list, index.SiteName, site.Namespace, site.Name, false); err != nil {
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
