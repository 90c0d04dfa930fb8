package index

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/meta"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/validation"
)

// Lookup finds Flexsite objects by the keys they are looked up by: every reader of the
// manager's cache (and of the API server, for a fresh read) finds by them through one, never
// by a field selector of its own. Each method answers every object of namespace ns (ns "":
// every namespace, where the method says so) whose key is the value, none for an empty value,
// those being deleted too. From a cache they are the cached objects themselves, shared:
// read-only (DeepCopy one to change it).
type Lookup interface {
	// SitesByID finds Sites by API id (the flexsite.io/id label); ns "" for every namespace.
	SitesByID(ctx context.Context, ns, id string) ([]*flexv1.Site, error)
	// SitesByMPAN finds Sites by meter point.
	SitesByMPAN(ctx context.Context, ns, mpan string) ([]*flexv1.Site, error)
	// SitesByExternalUserID finds Sites by the end user of the component-token flow.
	SitesByExternalUserID(ctx context.Context, ns, externalUserID string) ([]*flexv1.Site, error)
	// SitesByAddress finds Sites by address: key is validation.AddressKey of a street address
	// and postcode.
	SitesByAddress(ctx context.Context, ns, key string) ([]*flexv1.Site, error)
	// AssetsByID finds Assets by API id.
	AssetsByID(ctx context.Context, ns, id string) ([]*flexv1.Asset, error)
	// AssetsByExternalID finds Assets by the API client's external id.
	AssetsByExternalID(ctx context.Context, ns, externalID string) ([]*flexv1.Asset, error)
	// AssetsOfSite finds the Assets of the Site named siteName.
	AssetsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Asset, error)
	// EnrolmentsOfSite finds the Enrolments of the Site named siteName.
	EnrolmentsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Enrolment, error)
	// DeviceConnectionsOfSite finds the DeviceConnections of the Site named siteName.
	DeviceConnectionsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.DeviceConnection, error)
	// MPANClaimsOfSite finds the MPANClaims the Site named siteName holds.
	MPANClaimsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.MPANClaim, error)
	// DeviceConnectionsByOAuthState finds, in every namespace, the DeviceConnections whose
	// authorisation in progress has the state of this hash (flexv1.OAuthStateAnnotation).
	DeviceConnectionsByOAuthState(ctx context.Context, stateHash string) ([]*flexv1.DeviceConnection, error)
	// AssetsOfModel finds, in every namespace, the Assets that name the asset model.
	AssetsOfModel(ctx context.Context, model string) ([]*flexv1.Asset, error)
	// APIClientsByUsername finds, in every namespace, the APIClients with this login name.
	APIClientsByUsername(ctx context.Context, username string) ([]*flexv1.APIClient, error)
}

// NewLookup is the Lookup of r, a reader of the manager's cache, whose indexes Register added:
// the cache itself (or a CachedClient), whose informers' stores it reads directly (a bucket,
// no copy), or any reader that wraps the cache, through whose List it reads the same bucket.
// It is the manager's cache's only Lookup: its methods find by the bucketed indexes, which a
// field selector of their values cannot.
func NewLookup(r client.Reader) Lookup { return &lookup{r: r, cached: true} }

// NewAPIServerLookup is the Lookup of r, a reader of the API server (a fresh read): the same
// keys through the selectors the API server has for them (the id label, the CRDs' selectable
// fields).
func NewAPIServerLookup(r client.Reader) Lookup { return &lookup{r: r} }

// NewStoreLookup is the Lookup of informers' stores at hand (kept by the kind of their sample
// object, with the BucketIndexers of that kind), for the tests of what reads a cache.
func NewStoreLookup(stores map[client.Object]toolscache.Indexer) Lookup {
	byKind := make(map[reflect.Type]toolscache.Indexer, len(stores))
	for sample, store := range stores {
		byKind[reflect.TypeOf(sample)] = store
	}
	return &lookup{cached: true, stores: byKind}
}

// lookup is every Lookup: by bucket on a cache, by selector on the API server.
type lookup struct {
	r client.Reader
	// cached: r reads the manager's cache (bucketed indexes), not the API server.
	cached bool
	// stores, when set, are the stores to read instead of r's informers'.
	stores map[reflect.Type]toolscache.Indexer
}

func (l *lookup) SitesByID(ctx context.Context, ns, id string) ([]*flexv1.Site, error) {
	return find(ctx, l, sitesByID, listOf[flexv1.SiteList], ns, id)
}

func (l *lookup) SitesByMPAN(ctx context.Context, ns, mpan string) ([]*flexv1.Site, error) {
	return find(ctx, l, sitesByMPAN, listOf[flexv1.SiteList], ns, mpan)
}

func (l *lookup) SitesByExternalUserID(ctx context.Context, ns, externalUserID string) ([]*flexv1.Site, error) {
	return find(ctx, l, sitesByExternalUserID, listOf[flexv1.SiteList], ns, externalUserID)
}

func (l *lookup) SitesByAddress(ctx context.Context, ns, key string) ([]*flexv1.Site, error) {
	return find(ctx, l, sitesByAddress, listOf[flexv1.SiteList], ns, key)
}

func (l *lookup) AssetsByID(ctx context.Context, ns, id string) ([]*flexv1.Asset, error) {
	return find(ctx, l, assetsByID, listOf[flexv1.AssetList], ns, id)
}

func (l *lookup) AssetsByExternalID(ctx context.Context, ns, externalID string) ([]*flexv1.Asset, error) {
	return find(ctx, l, assetsByExternalID, listOf[flexv1.AssetList], ns, externalID)
}

func (l *lookup) AssetsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Asset, error) {
	return find(ctx, l, assetsBySite, listOf[flexv1.AssetList], ns, siteName)
}

func (l *lookup) EnrolmentsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.Enrolment, error) {
	return find(ctx, l, enrolmentsBySite, listOf[flexv1.EnrolmentList], ns, siteName)
}

func (l *lookup) DeviceConnectionsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.DeviceConnection, error) {
	return find(ctx, l, deviceConnectionsBySite, listOf[flexv1.DeviceConnectionList], ns, siteName)
}

func (l *lookup) MPANClaimsOfSite(ctx context.Context, ns, siteName string) ([]*flexv1.MPANClaim, error) {
	return find(ctx, l, mpanClaimsBySite, listOf[flexv1.MPANClaimList], ns, siteName)
}

func (l *lookup) DeviceConnectionsByOAuthState(ctx context.Context, stateHash string) ([]*flexv1.DeviceConnection, error) {
	return find(ctx, l, deviceConnectionsByOAuthState, listOf[flexv1.DeviceConnectionList], "", stateHash)
}

func (l *lookup) AssetsOfModel(ctx context.Context, model string) ([]*flexv1.Asset, error) {
	return find(ctx, l, assetsByModel, listOf[flexv1.AssetList], "", model)
}

func (l *lookup) APIClientsByUsername(ctx context.Context, username string) ([]*flexv1.APIClient, error) {
	return find(ctx, l, apiClientsByUsername, listOf[flexv1.APIClientList], "", username)
}

// key is a key of kind T (bucketed, unless plain): the field it indexes, and how the API server selects by it.
type key[T client.Object] struct {
	sample T
	field  string
	value  func(T) string
	// acrossNamespaces: found in every namespace too (ns "").
	acrossNamespaces bool
	// selector is the API server's selector of value (nil: it has none; the lookup lists the
	// namespace and keeps what has the value).
	selector func(value string) client.ListOption
	// plain: a plain field index of the cache (looked up across namespaces, few values each).
	plain bool
	// exactInNamespace: within a namespace the cache indexes the value itself, not its bucket,
	// so that a lookup there costs the same however many objects the namespace holds (the
	// keys of the hot reads: see bucketCount); across namespaces (ns "") it is bucketed.
	exactInNamespace bool
}

func (k key[T]) index() bucketedIndex {
	return bucketedIndex{sample: k.sample, field: k.field, acrossNamespaces: k.acrossNamespaces,
		exactInNamespace: k.exactInNamespace, extract: func(o client.Object) []string { return one(k.value(o.(T))) }}
}

// fieldSelector selects field's value on the API server (a selectable field of the CRD).
func fieldSelector(field string) func(string) client.ListOption {
	return func(v string) client.ListOption { return client.MatchingFields{field: v} }
}

func idSelector(v string) client.ListOption { return client.MatchingLabels{flexv1.IDLabel: v} }

func idOf(o client.Object) string { return o.GetLabels()[flexv1.IDLabel] }

var (
	sitesByID = key[*flexv1.Site]{sample: &flexv1.Site{}, field: idKey, acrossNamespaces: true, exactInNamespace: true,
		value: func(s *flexv1.Site) string { return idOf(s) }, selector: idSelector}
	sitesByMPAN = key[*flexv1.Site]{sample: &flexv1.Site{}, field: mpanKey,
		value: func(s *flexv1.Site) string { return s.Spec.MPAN }, selector: fieldSelector(mpanKey)}
	sitesByExternalUserID = key[*flexv1.Site]{sample: &flexv1.Site{}, field: externalUserIDKey,
		value: func(s *flexv1.Site) string { return s.Spec.ExternalUserID }, selector: fieldSelector(externalUserIDKey)}
	// The address key is derived, no field of the CRD: on the API server the lookup lists the
	// namespace and keeps (a fresh read, after a lost race).
	sitesByAddress = key[*flexv1.Site]{sample: &flexv1.Site{}, field: addressKey,
		value: func(s *flexv1.Site) string { return validation.AddressKey(s.Spec.StreetAddress, s.Spec.Postcode) }}
	assetsByID = key[*flexv1.Asset]{sample: &flexv1.Asset{}, field: idKey, exactInNamespace: true,
		value: func(a *flexv1.Asset) string { return idOf(a) }, selector: idSelector}
	assetsByExternalID = key[*flexv1.Asset]{sample: &flexv1.Asset{}, field: externalIDKey,
		value: func(a *flexv1.Asset) string { return a.Spec.ExternalID }, selector: fieldSelector(externalIDKey)}
	assetsBySite = key[*flexv1.Asset]{sample: &flexv1.Asset{}, field: siteNameKey, exactInNamespace: true,
		value: func(a *flexv1.Asset) string { return a.Spec.SiteName }, selector: fieldSelector(siteNameKey)}
	enrolmentsBySite = key[*flexv1.Enrolment]{sample: &flexv1.Enrolment{}, field: siteNameKey,
		value: func(e *flexv1.Enrolment) string { return e.Spec.SiteName }, selector: fieldSelector(siteNameKey)}
	deviceConnectionsBySite = key[*flexv1.DeviceConnection]{sample: &flexv1.DeviceConnection{}, field: siteNameKey,
		value: func(c *flexv1.DeviceConnection) string { return c.Spec.SiteName }, selector: fieldSelector(siteNameKey)}
	// An annotation is no selectable field: on the API server the lookup lists and keeps.
	deviceConnectionsByOAuthState = key[*flexv1.DeviceConnection]{sample: &flexv1.DeviceConnection{}, field: oauthStateKey,
		acrossNamespaces: true,
		value:            func(c *flexv1.DeviceConnection) string { return c.GetAnnotations()[flexv1.OAuthStateAnnotation] }}
	// spec.model is no selectable field of the CRD: on the API server the lookup lists and keeps.
	assetsByModel = key[*flexv1.Asset]{sample: &flexv1.Asset{}, field: AssetModel, plain: true, acrossNamespaces: true,
		value: func(a *flexv1.Asset) string { return a.Spec.Model }}
	apiClientsByUsername = key[*flexv1.APIClient]{sample: &flexv1.APIClient{}, field: Username, plain: true, acrossNamespaces: true,
		value: func(c *flexv1.APIClient) string { return c.Spec.Username }, selector: fieldSelector(Username)}
	mpanClaimsBySite = key[*flexv1.MPANClaim]{sample: &flexv1.MPANClaim{}, field: siteNameKey,
		value: func(c *flexv1.MPANClaim) string { return c.Spec.SiteName }, selector: fieldSelector(siteNameKey)}
)

// indexed is what the cache's bucketed index of k keeps for value in namespace ns ("": every
// namespace): the value itself within a namespace for an exactInNamespace key, else its bucket.
func (k key[T]) indexed(ns, value string) string {
	return indexedValue(k.exactInNamespace && ns != "", value)
}

// listOf is a new, empty list of kind L: find makes one only when it lists (a store at hand
// needs none), so that a lookup in the cache allocates no list it never fills.
func listOf[L any, PL interface {
	*L
	client.ObjectList
}]() client.ObjectList {
	return PL(new(L))
}

// find answers the objects of namespace ns (ns "": every namespace) whose key k is value.
func find[T client.Object](ctx context.Context, l *lookup, k key[T], newList func() client.ObjectList, ns, value string) ([]T, error) {
	if value == "" {
		return nil, nil // an empty value is indexed for nothing
	}
	if ns == "" && !k.acrossNamespaces {
		return nil, fmt.Errorf("%T by %s is looked up within a namespace", k.sample, k.field)
	}
	if l.cached {
		if store := l.storeOf(k.sample); store != nil {
			return findInStore(store, k, ns, value)
		}
		if l.stores != nil {
			return nil, fmt.Errorf("no store of %T at hand", k.sample)
		}
	}
	var opts []client.ListOption
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	switch {
	case l.cached && !k.plain:
		// A reader that wraps the cache: its List reads the bucket.
		opts = append(opts, client.MatchingFields{bucketField(k.field): k.indexed(ns, value)})
	case l.cached:
		opts = append(opts, client.MatchingFields{k.field: value}) // the cache's plain index
	case k.selector != nil:
		opts = append(opts, k.selector(value))
	}
	if l.cached {
		// The cached objects themselves (the list holds shallow copies of them).
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	list := newList()
	if err := l.r.List(ctx, list, opts...); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	var found []T
	for _, item := range items {
		if o, ok := item.(T); ok && k.value(o) == value {
			found = append(found, o)
		}
	}
	return found, nil
}

// findInStore answers find from an informer's store: the bucket's objects whose key is the
// value (10 in a namespace of 10,000 sites; a plain index's, its value's), the cached objects
// themselves.
func findInStore[T client.Object](store toolscache.Indexer, k key[T], ns, value string) ([]T, error) {
	indexName, indexed := BucketIndexName(k.field), k.indexed(ns, value)
	if k.plain {
		indexName, indexed = FieldIndexName(k.field), value
	}
	if ns == "" {
		ns = allNamespaces
	}
	objs, err := store.ByIndex(indexName, NamespacedKey(ns, indexed))
	if err != nil {
		return nil, err
	}
	var found []T
	for _, raw := range objs {
		if o, ok := raw.(T); ok && k.value(o) == value {
			found = append(found, o)
		}
	}
	return found, nil
}

// storeOf is the store of sample's kind: the one at hand, or r's informer's (nil when r has no
// informers: a reader that wraps the cache).
func (l *lookup) storeOf(sample client.Object) toolscache.Indexer {
	if l.stores != nil {
		return l.stores[reflect.TypeOf(sample)]
	}
	return StoreOf(l.r, sample)
}
