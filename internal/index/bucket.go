package index

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Unique keys (API ids, meter points, external ids) are indexed in the cache by bucket, not by
// value. An informer's index keeps a set per value: for a key that only one object has, that
// set (a map of one) and its entry cost ~360 bytes an object, a quarter of what a fleet's
// Sites and Assets hold in the cache (six such keys a site with two assets). A bucket holds
// the objects whose key hashes to it: ~30 bytes an object once a namespace has more objects
// than buckets. A lookup (Find) takes the bucket's objects and keeps those whose key is the
// value: 10 objects in a namespace of 10,000 sites, 1,000 at a million.
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

// BucketIndexName is the name under which a bucketed index is kept in an informer's indexer.
func BucketIndexName(field string) string { return "bucket:" + field }

// bucketedKey names a bucketed index of a kind.
type bucketedKey struct {
	kind  reflect.Type
	field string
}

// bucketed are the bucketed indexes' extractors, by kind and field (Register adds them; Find
// keeps the bucket's objects whose key is the value).
var bucketed = map[bucketedKey]client.IndexerFunc{}

func bucketedKeyOf(obj client.Object, field string) bucketedKey {
	return bucketedKey{kind: reflect.TypeOf(obj), field: field}
}

// indexBuckets adds the bucketed index of obj's kind by field.
func indexBuckets(ctx context.Context, informers InformerSource, obj client.Object, field string, extract client.IndexerFunc,
	acrossNamespaces bool) error {
	inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	return inf.AddIndexers(toolscache.Indexers{BucketIndexName(field): bucketIndexFunc(extract, acrossNamespaces)})
}

// bucketIndexFunc is an informer's index function of the buckets of what extract answers.
func bucketIndexFunc(extract client.IndexerFunc, acrossNamespaces bool) toolscache.IndexFunc {
	return func(raw any) ([]string, error) {
		o, ok := raw.(client.Object)
		if !ok {
			return nil, fmt.Errorf("object of type %T is not an Object", raw)
		}
		vals := extract(o)
		keys := make([]string, 0, len(vals))
		for _, v := range vals {
			b := bucket(v)
			if k := NamespacedKey(o.GetNamespace(), b); !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
			if k := allNamespacesKey(b); acrossNamespaces && !slices.Contains(keys, k) {
				keys = append(keys, k)
			}
		}
		return keys, nil
	}
}

// allNamespacesKey is a bucket's key across namespaces (a namespace name has no "*").
func allNamespacesKey(bucket string) string { return "*/" + bucket }

// ErrNotCached is Find's answer for a reader that is not an informer-backed cache: the caller
// lists with client.MatchingFields (the API server's field and label selectors) instead.
var ErrNotCached = errors.New("not an informer-backed cache")

// Find answers the objects of sample's kind in namespace ns whose field (a bucketed index:
// ID, MPAN, ExternalID, ExternalUserID) is value, from c's informer store; with ns "", in
// every namespace (Sites by ID and DeviceConnections by OAuthState only). They are the cached
// objects themselves, shared: read-only (DeepCopy one to change it).
func Find[T client.Object](c client.Reader, sample T, field, ns, value string) ([]T, error) {
	store := StoreOf(c, sample)
	if store == nil {
		return nil, ErrNotCached
	}
	return FindIn(store, sample, field, ns, value)
}

// FindIn is Find in an informer's store already at hand (StoreOf), for the hot reads.
func FindIn[T client.Object](store toolscache.Indexer, sample T, field, ns, value string) ([]T, error) {
	extract, ok := bucketed[bucketedKeyOf(sample, field)]
	if !ok {
		return nil, fmt.Errorf("no bucketed index %s of %T", field, sample)
	}
	key := NamespacedKey(ns, bucket(value))
	if ns == "" {
		key = allNamespacesKey(bucket(value))
	}
	objs, err := store.ByIndex(BucketIndexName(field), key)
	if err != nil {
		return nil, err
	}
	var found []T
	for _, raw := range objs {
		o, ok := raw.(T)
		if ok && (ns == "" || o.GetNamespace() == ns) && slices.Contains(extract(o), value) {
			found = append(found, o)
		}
	}
	return found, nil
}

// Finder is a reader that wraps a cache and finds by bucketed key itself (Lookup asks it): a
// wrapper that counts reads or injects faults into them answers index.Find of its cache.
type Finder interface {
	FindIndexed(ctx context.Context, sample client.Object, field, ns, value string) ([]client.Object, error)
}

// Lookup is Find on an informer-backed cache (or a Finder); on any other reader (the API server) it lists
// with the selectors the API server has for the same keys (the id label, the CRDs' selectable
// fields), into list. What it answers from a cache is shared and read-only.
func Lookup[T client.Object](ctx context.Context, c client.Reader, sample T, list client.ObjectList, field, ns, value string) ([]T, error) {
	if f, ok := c.(Finder); ok {
		objs, err := f.FindIndexed(ctx, sample, field, ns, value)
		if err != nil {
			return nil, err
		}
		found := make([]T, 0, len(objs))
		for _, o := range objs {
			if t, ok := o.(T); ok {
				found = append(found, t)
			}
		}
		return found, nil
	}
	found, err := Find(c, sample, field, ns, value)
	if !errors.Is(err, ErrNotCached) {
		return found, err
	}
	selector := client.ListOption(client.MatchingFields{field: value})
	if field == ID {
		selector = client.MatchingLabels{flexv1.IDLabel: value}
	}
	opts := []client.ListOption{selector}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	found = make([]T, 0, len(items))
	for _, item := range items {
		if o, ok := item.(T); ok {
			found = append(found, o)
		}
	}
	return found, nil
}

// uniqueKeys are the bucketed indexes (see bucketCount).
// A Site is also found by ID across namespaces: a CORS preflight carries no token, so no
// organisation (restapi's preflightGranted). A site's children are found by its name the same
// way (a site has a few: a set each cost as much as a unique key's).
var uniqueKeys = []struct {
	obj              client.Object
	field            string
	extract          client.IndexerFunc
	acrossNamespaces bool
}{
	{&flexv1.Site{}, ID, func(o client.Object) []string { return one(o.GetLabels()[flexv1.IDLabel]) }, true},
	{&flexv1.Site{}, MPAN, func(o client.Object) []string { return one(o.(*flexv1.Site).Spec.MPAN) }, false},
	{&flexv1.Site{}, ExternalUserID, func(o client.Object) []string { return one(o.(*flexv1.Site).Spec.ExternalUserID) }, false},
	{&flexv1.Asset{}, ID, func(o client.Object) []string { return one(o.GetLabels()[flexv1.IDLabel]) }, false},
	{&flexv1.Asset{}, ExternalID, func(o client.Object) []string { return one(o.(*flexv1.Asset).Spec.ExternalID) }, false},
	{&flexv1.Asset{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.Asset).Spec.SiteName) }, false},
	{&flexv1.Enrolment{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.Enrolment).Spec.SiteName) }, false},
	{&flexv1.DeviceConnection{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.DeviceConnection).Spec.SiteName) }, false},
	{&flexv1.DeviceConnection{}, OAuthState,
		func(o client.Object) []string { return one(o.GetAnnotations()[flexv1.OAuthStateAnnotation]) }, true},
	{&flexv1.MPANClaim{}, SiteName, func(o client.Object) []string { return one(o.(*flexv1.MPANClaim).Spec.SiteName) }, false},
}

// ListFor answers a new list of obj's kind, for a kind that has bucketed indexes (nil for
// another): what a Finder that wraps a reader lists into when it asks Lookup.
func ListFor(obj client.Object) client.ObjectList {
	switch obj.(type) {
	case *flexv1.Site:
		return &flexv1.SiteList{}
	case *flexv1.Asset:
		return &flexv1.AssetList{}
	case *flexv1.Enrolment:
		return &flexv1.EnrolmentList{}
	case *flexv1.DeviceConnection:
		return &flexv1.DeviceConnectionList{}
	case *flexv1.MPANClaim:
		return &flexv1.MPANClaimList{}
	}
	return nil
}

// itemOf answers a new item of a list kind that has bucketed indexes (nil for another).
func itemOf(list client.ObjectList) client.Object {
	switch list.(type) {
	case *flexv1.SiteList:
		return &flexv1.Site{}
	case *flexv1.AssetList:
		return &flexv1.Asset{}
	case *flexv1.EnrolmentList:
		return &flexv1.Enrolment{}
	case *flexv1.DeviceConnectionList:
		return &flexv1.DeviceConnection{}
	case *flexv1.MPANClaimList:
		return &flexv1.MPANClaim{}
	}
	return nil
}

// List fills list with the objects of namespace ns whose field is value, as c.List with
// client.MatchingFields would: on a cache (or a Finder) through the bucketed index, each a
// copy, or with readOnly the cached object itself (shallow: its maps and slices are the
// cache's, as client.UnsafeDisableDeepCopy gives); on the API server through its selectors.
func List(ctx context.Context, c client.Reader, list client.ObjectList, field, ns, value string, readOnly bool) error {
	sample := itemOf(list)
	if sample == nil {
		return c.List(ctx, list, client.InNamespace(ns), client.MatchingFields{field: value})
	}
	found, err := Lookup(ctx, c, sample, list, field, ns, value)
	if err != nil {
		return err
	}
	items := make([]runtime.Object, len(found))
	for i, o := range found {
		if !readOnly {
			o = o.DeepCopyObject().(client.Object)
		}
		items[i] = o
	}
	return meta.SetList(list, items)
}

func init() {
	for _, k := range uniqueKeys {
		bucketed[bucketedKeyOf(k.obj, k.field)] = k.extract
	}
}

// one is v as an index's values (none when empty).
func one(v string) []string {
	if v == "" {
		return nil
	}
	return []string{v}
}

// CachedClient is a manager's client whose lookups by bucketed key (Lookup, List) go to the
// manager's cache: what a controller reads with.
type CachedClient struct {
	client.Client
	// Cache is the manager's cache (informer-backed).
	Cache client.Reader
}

// FindIndexed is Find in the cache.
func (c CachedClient) FindIndexed(_ context.Context, sample client.Object, field, ns, value string) ([]client.Object, error) {
	return Find(c.Cache, sample, field, ns, value)
}

// BucketIndexers are the bucketed indexes of obj's kind, for an indexer built by hand (tests).
func BucketIndexers(obj client.Object) toolscache.Indexers {
	out := toolscache.Indexers{}
	for _, k := range uniqueKeys {
		if reflect.TypeOf(k.obj) == reflect.TypeOf(obj) {
			out[BucketIndexName(k.field)] = bucketIndexFunc(k.extract, k.acrossNamespaces)
		}
	}
	return out
}
