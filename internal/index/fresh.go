package index

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// NewFreshLookup is the Lookup of a request path that must read past the cache (after a lost
// write race, or to act on an object as stored now), without a LIST: the API server answers a
// LIST of a namespace, by label or field selector too, by going through every object of it, so
// its cost grows with the organisation (docs/scale.md, "Request paths: no LIST"). It finds the
// candidates in cache (the manager's, through its indexes, as NewLookup does) and under the
// names derived from the key (identity: a Site of an MPAN or of an end user, the site an
// MPANClaim names, an Asset of an external id), and reads each from api by GET, keeping those
// whose key is the value as stored now. So it answers every object written under its key's
// derived name (every request of the API writes so) and every other object the cache has seen
// (kubectl, GitOps), at its stored version. An object written outside the API under another
// name a moment ago, not in the cache yet, is not found: such a write is told apart by the
// API server itself (a name taken, an admission check) or caught up with by the controllers.
// The objects it answers are its own.
func NewFreshLookup(cache, api client.Reader) Lookup {
	return &freshLookup{cached: NewLookup(cache), api: api}
}

type freshLookup struct {
	cached Lookup
	api    client.Reader
}

func (l *freshLookup) SitesByID(ctx context.Context, ns, id string) ([]*flexv1.Site, error) {
	return fresh(ctx, l, sitesByID, ns, id, l.cached.SitesByID)
}

func (l *freshLookup) SitesByMPAN(ctx context.Context, ns, mpan string) ([]*flexv1.Site, error) {
	derived := []string{identity.SiteNameForMPAN(mpan)}
	// A site that holds its MPAN under another name holds it by the MPANClaim of that name.
	claim := &flexv1.MPANClaim{}
	err := l.api.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.MPANClaimName(mpan)}, claim)
	switch {
	case err == nil && claim.Spec.MPAN == mpan:
		derived = append(derived, claim.Spec.SiteName)
	case client.IgnoreNotFound(err) != nil:
		return nil, err
	}
	return fresh(ctx, l, sitesByMPAN, ns, mpan, l.cached.SitesByMPAN, derived...)
}

func (l *freshLookup) SitesByExternalUserID(ctx context.Context, ns, externalUserID string) ([]*flexv1.Site, error) {
	return fresh(ctx, l, sitesByExternalUserID, ns, externalUserID, l.cached.SitesByExternalUserID,
		identity.SiteNameForExternalUser(externalUserID))
}

func (l *freshLookup) SitesByAddress(ctx context.Context, ns, key string) ([]*flexv1.Site, error) {
	return fresh(ctx, l, sitesByAddress, ns, key, l.cached.SitesByAddress)
}

func (l *freshLookup) AssetsByID(ctx context.Context, ns, id string) ([]*flexv1.Asset, error) {
	return fresh(ctx, l, assetsByID, ns, id, l.cached.AssetsByID)
}

func (l *freshLookup) AssetsByExternalID(ctx context.Context, ns, externalID string) ([]*flexv1.Asset, error) {
	return fresh(ctx, l, assetsByExternalID, ns, externalID, l.cached.AssetsByExternalID, identity.AssetName(externalID))
}

func (l *freshLookup) AssetsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Asset, error) {
	return fresh(ctx, l, assetsBySite, ns, siteName, l.cached.AssetsOfSite)
}

// EnrolmentsOfSite: the site's enrolments the cache has seen, as stored now. An enrolment the
// API writes is named by its site and proposition (identity.EnrolmentName): a caller that
// knows the proposition reads that name too.
func (l *freshLookup) EnrolmentsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Enrolment, error) {
	return fresh(ctx, l, enrolmentsBySite, ns, siteName, l.cached.EnrolmentsOfSite)
}

func (l *freshLookup) DeviceConnectionsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.DeviceConnection, error) {
	return fresh(ctx, l, deviceConnectionsBySite, ns, siteName, l.cached.DeviceConnectionsOfSite)
}

func (l *freshLookup) MPANClaimsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.MPANClaim, error) {
	return fresh(ctx, l, mpanClaimsBySite, ns, siteName, l.cached.MPANClaimsOfSite)
}

func (l *freshLookup) DeviceConnectionsByOAuthState(ctx context.Context, stateHash string) ([]*flexv1.DeviceConnection, error) {
	return fresh(ctx, l, deviceConnectionsByOAuthState, "", stateHash,
		func(ctx context.Context, _, v string) ([]*flexv1.DeviceConnection, error) {
			return l.cached.DeviceConnectionsByOAuthState(ctx, v)
		})
}

func (l *freshLookup) AssetsOfModel(ctx context.Context, model string) ([]*flexv1.Asset, error) {
	return fresh(ctx, l, assetsByModel, "", model, func(ctx context.Context, _, v string) ([]*flexv1.Asset, error) {
		return l.cached.AssetsOfModel(ctx, v)
	})
}

func (l *freshLookup) APIClientsByUsername(ctx context.Context, username string) ([]*flexv1.APIClient, error) {
	return fresh(ctx, l, apiClientsByUsername, "", username, func(ctx context.Context, _, v string) ([]*flexv1.APIClient, error) {
		return l.cached.APIClientsByUsername(ctx, v)
	})
}

// fresh reads by GET, from the API server, the objects of kind k that inCache finds and those
// of namespace ns named derived, and answers those whose key is value as stored now.
func fresh[T client.Object](ctx context.Context, l *freshLookup, k key[T], ns, value string,
	inCache func(ctx context.Context, ns, value string) ([]T, error), derived ...string) ([]T, error) {
	if value == "" {
		return nil, nil
	}
	cached, err := inCache(ctx, ns, value)
	if err != nil {
		return nil, err
	}
	names := make([]types.NamespacedName, 0, len(cached)+len(derived))
	seen := make(map[types.NamespacedName]bool, cap(names))
	add := func(n types.NamespacedName) {
		if n.Name != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	for _, o := range cached {
		add(types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
	}
	if ns != "" {
		for _, name := range derived {
			add(types.NamespacedName{Namespace: ns, Name: name})
		}
	}
	var found []T
	for _, n := range names {
		obj := k.sample.DeepCopyObject().(T)
		if err := l.api.Get(ctx, n, obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, err
		}
		if k.value(obj) == value {
			found = append(found, obj)
		}
	}
	return found, nil
}
