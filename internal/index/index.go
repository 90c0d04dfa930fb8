// Package index sets up the manager's cache: what it holds (CacheOptions), and the indexes
// that the controllers and the REST API look objects up by (Register), so that a lookup by
// natural key or API id is an index hit, not a scan. Every reader finds by those keys through
// a Lookup (NewLookup for the cache, NewAPIServerLookup for a fresh read), whose methods name
// what they find.
package index

import (
	"context"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/fields"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Index names. Each is a field of the indexed kind (or the flexsite.io/id label).
//
// The keys an object is looked up by within its namespace are bucketed (bucket.go): the
// cache has no field index by their value, so a client.MatchingFields on them would fail at
// run time. Their names are therefore unexported: such a selector cannot be written outside
// this package, and every reader finds by them through a Lookup (lookup.go), whose methods
// name what they find. AssetModel and Username are plain field indexes: a MatchingFields on
// them works on the cache (and, for Username, a selectable field, on the API server too).
const (
	// idKey indexes Sites and Assets by their API id (the flexsite.io/id label).
	idKey = "metadata.labels.id"
	// siteNameKey indexes Assets, Enrolments, DeviceConnections and MPANClaims by the site
	// they belong to.
	siteNameKey = "spec.siteName"
	// externalIDKey indexes Assets by the API client's external id.
	externalIDKey = "spec.externalID"
	// mpanKey indexes Sites by meter point.
	mpanKey = "spec.mpan"
	// externalUserIDKey indexes Sites by the end user of the component-token flow.
	externalUserIDKey = "spec.externalUserID"
	// addressKey indexes Sites by their address (validation.AddressKey of street address and
	// postcode): a second site of an organisation at one address is a conflict.
	addressKey = "spec.addressKey"
	// oauthStateKey indexes DeviceConnections, across namespaces, by the hash of the state of
	// the authorisation in progress (flexv1.OAuthStateAnnotation).
	oauthStateKey = "metadata.annotations.oauthState"

	// AssetModel indexes Assets by the asset model they name (a plain field index; the API
	// server cannot select by it).
	AssetModel = "spec.model"
	// Username indexes APIClients by login name (a plain field index).
	Username = "spec.username"
)

// OfSiteOnAPIServer selects, in a List from the API server, the objects of namespace ns that
// belong to the Site named siteName: spec.siteName is a selectable field of every kind a site
// owns (RewardLedgers included, which a Lookup does not find). The cache has no such index
// (a Lookup finds a site's children there): it is for a reader of the API server only.
func OfSiteOnAPIServer(ns, siteName string) client.ListOption {
	return &client.ListOptions{Namespace: ns, FieldSelector: fields.OneTermEqualSelector(siteNameKey, siteName)}
}

// Register adds every Flexsite index to the indexer (a manager's or a cache's), but those of
// the kinds skip names: an index starts its kind's informer, and a replica that never reads
// a kind (the controller tier, APIClients) should neither cache it nor need the right to.
//
// The keys an object is looked up by within its namespace (an organisation's sites by id,
// MPAN and end user; assets by id and external id; a site's children by its name) are
// bucketed (bucket.go; find by them with a Lookup): a fleet holds one of each per object, and
// client-go's index keeps a set per value, ~360 bytes for a set of one. AssetModel and
// Username are looked up across namespaces, with few values each: plain field indexes.
func Register(ctx context.Context, indexer client.FieldIndexer, skip ...client.Object) error {
	skipped := func(obj client.Object) bool {
		return slices.ContainsFunc(skip, func(s client.Object) bool { return reflect.TypeOf(s) == reflect.TypeOf(obj) })
	}
	for _, ix := range []struct {
		obj     client.Object
		field   string
		extract client.IndexerFunc
	}{
		{assetsByModel.sample, AssetModel, assetsByModel.index().extract},
		{apiClientsByUsername.sample, Username, apiClientsByUsername.index().extract},
	} {
		if skipped(ix.obj) {
			continue
		}
		if err := indexer.IndexField(ctx, ix.obj, ix.field, ix.extract); err != nil {
			return err
		}
	}
	informers, isCache := indexer.(InformerSource)
	for _, k := range bucketedIndexes {
		if skipped(k.sample) {
			continue
		}
		var err error
		if isCache {
			err = indexBuckets(ctx, informers, k)
		} else {
			// controller-runtime keeps the same keys (namespace/bucket and the all-namespaces
			// one) under the same name: a List through a reader of it finds the buckets too.
			err = indexer.IndexField(ctx, k.sample, bucketField(k.field), func(o client.Object) []string {
				vals := k.extract(o)
				for i, v := range vals {
					vals[i] = bucket(v)
				}
				return vals
			})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// FieldIndexName is the name under which controller-runtime (and Register) keep a field index
// in an informer's indexer.
func FieldIndexName(field string) string { return "field:" + field }

// NamespacedKey is the key of value within namespace ns in such an index.
func NamespacedKey(ns, value string) string { return ns + "/" + value }

// InformerSource is a controller-runtime cache: it gives the informer of a kind (for its
// indexes, its store, or its events).
type InformerSource interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// StoreOf is the store of the informer that c (a controller-runtime cache) keeps for obj's
// kind, for reads on a hot path that want the cached object itself: no copy (a client Get
// copies the object; with UnsafeDisableDeepCopy still the struct), no lookup of the kind by
// reflection. What it returns is shared and read-only. Nil when c is not informer-backed.
func StoreOf(c client.Reader, obj client.Object) toolscache.Indexer {
	informers, ok := c.(InformerSource)
	if !ok {
		return nil
	}
	inf, err := informers.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
	if err != nil {
		return nil
	}
	withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil
	}
	return withIndexer.GetIndexer()
}
