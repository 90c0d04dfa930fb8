package index

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Unique keys (API ids, meter points, external ids) are indexed in the cache by bucket, not by
// value. An informer's index keeps a set per value: for a key that only one object has, that
// set (a map of one) and its entry cost ~360 bytes an object, a quarter of what a fleet's
// Sites and Assets hold in the cache (six such keys a site with two assets). A bucket holds
// the objects whose key hashes to it: ~30 bytes an object once a namespace has more objects
// than buckets. A lookup (Find) takes the bucket's objects and keeps those whose key is the
// value: 10 objects in a namespace of 10,000 sites, 1,000 at a million.
//
// Three keys are read on every request of the hot reads (a site by its id and a site's assets,
// for eligibility and the transactions page; an asset by its id, for the per-asset reads such
// as the battery schedule), where a lookup that grows with the namespace shows as CPU per read
// growing with the fleet (issue 39: the bucket's objects, fetched from the store's map one by
// one, were most of the eligibility read's growth from 1,000 to 5,000 sites). Those are
// indexed by value within a namespace (exactInNamespace): a lookup costs the same at any size,
// for ~270 bytes an object more (a set of one: a site's id, its assets' site, each asset's id).
const bucketCount = 1024

// bucketNames are the buckets' index values, made once ("000" to "3ff").
var bucketNames = func() []string {
	names := make([]string, bucketCount)
	for i := range names {
		names[i] = fmt.Sprintf("%03x", i)
	}
	return names
}()

// bucket is value's bucket: FNV-1a, 32 bits, of its bytes, modulo bucketCount.
func bucket(value string) string {
	h := uint32(2166136261)
	for i := 0; i < len(value); i++ {
		h ^= uint32(value[i])
		h *= 16777619
	}
	return bucketNames[h%bucketCount]
}

// bucketField is the field under which the buckets of field are indexed. An informer keeps
// the index as controller-runtime keeps a field index (FieldIndexName, keys namespace/bucket
// and allNamespaces/bucket), so that a reader that wraps the cache finds a bucket with an
// ordinary List (client.MatchingFields{bucketField(field): bucket}).
func bucketField(field string) string { return "bucket:" + field }

// BucketIndexName is the name under which a bucketed index is kept in an informer's indexer.
func BucketIndexName(field string) string { return FieldIndexName(bucketField(field)) }

// bucketedIndex is a bucketed index of a kind: its field and what an object's values of it are.
type bucketedIndex struct {
	sample  client.Object
	field   string
	extract client.IndexerFunc
	// acrossNamespaces: the index also answers a value in every namespace.
	acrossNamespaces bool
	// exactInNamespace: within a namespace the value itself is indexed, not its bucket (see
	// key.exactInNamespace); across namespaces it stays bucketed.
	exactInNamespace bool
}

// indexBuckets adds a bucketed index to its kind's informer.
func indexBuckets(ctx context.Context, informers InformerSource, k bucketedIndex) error {
	inf, err := informers.GetInformer(ctx, k.sample, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return inf.AddIndexers(toolscache.Indexers{BucketIndexName(k.field): k.indexFunc()})
}

// indexFunc is an informer's index function of the buckets of what extract answers (of the
// values themselves within a namespace, for an exactInNamespace index).
func (bi bucketedIndex) indexFunc() toolscache.IndexFunc {
	return func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not an Object", raw)
		}
		vals := bi.extract(o)
		keys := make([]string, 0, len(vals))
		for _, v := range vals {
			b := bucket(v)
			if k := NamespacedKey(o.GetNamespace(), indexedValue(bi.exactInNamespace, v)); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
			if k := allNamespacesKey(b); bi.acrossNamespaces && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return keys, nil
	}
}

// indexedValue is what an index keeps for value within a namespace: the value itself for an
// exactInNamespace index, else its bucket.
func indexedValue(exactInNamespace bool, value string) string {
	if exactInNamespace {
		return value
	}
	return bucket(value)
}

// allNamespaces is the namespace under which controller-runtime keeps a field index's keys
// across namespaces (a namespace name has no underscore).
const allNamespaces = "__all_namespaces"

// allNamespacesKey is a bucket's key across namespaces.
func allNamespacesKey(bucket string) string { return NamespacedKey(allNamespaces, bucket) }

// bucketedIndexes are the bucketed indexes (see bucketCount). They are fixed: what a Lookup
// finds by each is named by its methods (lookup.go), not registered at run time.
// A Site is also found by ID across namespaces: a CORS preflight carries no token, so no
// organisation (restapi's preflightGranted). A site's children are found by its name the same
// way (a site has a few: a set each cost as much as a unique key's).
var bucketedIndexes = []bucketedIndex{
	sitesByID.index(), sitesByMPAN.index(), sitesByExternalUserID.index(), sitesByAddress.index(),
	assetsByID.index(), assetsByExternalID.index(), assetsBySite.index(),
	enrolmentsBySite.index(), deviceConnectionsBySite.index(), deviceConnectionsByOAuthState.index(),
	mpanClaimsBySite.index(),
}

// one is v as an index's values (none when empty).
func one(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// CachedClient is a manager's client whose Lookup (NewLookup) finds in the manager's cache's
// stores: what a controller reads with.
type CachedClient struct {
	client.Client
	// Cache is the manager's cache (informer-backed).
	Cache client.Reader
}

// GetInformer is the cache's: a Lookup of the client finds in the informers' stores.
func (c CachedClient) GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error) {
	informers, ok := c.Cache.(InformerSource)
	if !ok {
		return nil, errors.New("the client's cache is not informer-backed")
	}
	return informers.GetInformer(ctx, obj, opts...)
}

// BucketIndexers are the bucketed indexes of obj's kind, for an indexer built by hand (tests).
func BucketIndexers(obj client.Object) toolscache.Indexers {
	out := toolscache.Indexers{}
	for _, k := range bucketedIndexes {
		if reflect.TypeOf(k.sample) == reflect.TypeOf(obj) {
			out[BucketIndexName(k.field)] = k.indexFunc()
		}
	}
	return out
}
