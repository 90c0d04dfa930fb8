package facade

import (
	"slices"
	"strings"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

// readIndexes look cached Sites and Assets up by their field indexes straight in the
// informers' indexers, for the two hot reads (eligibility, transactions): a List through the
// cache copies every match into a new list by reflection, which was a fifth of such a read's
// CPU and most of its garbage. What they return are the cached objects themselves, shared:
// read-only, like any UnsafeDisableDeepCopy read.
type readIndexes struct {
	sites, assets toolscache.Indexer
	// answers keeps encoded eligibility answers by what they were computed from
	// (answercache.go).
	answers *eligibilityAnswers
}

// The indexers' names of the two lookups, made once (a concatenation per read was measurable
// garbage).
var (
	siteIDIndex    = index.FieldIndexName(index.ID)
	assetSiteIndex = index.FieldIndexName(index.SiteName)
)

// newReadIndexes finds the indexers of the cache's Site and Asset informers (nil when the
// cache is not informer-backed: reads then List as before).
func newReadIndexes(c client.Reader) *readIndexes {
	ri := &readIndexes{sites: index.StoreOf(c, &flexv1.Site{}), assets: index.StoreOf(c, &flexv1.Asset{}),
		answers: newEligibilityAnswers(maxEligibilityAnswerBytes)}
	if ri.sites == nil || ri.assets == nil {
		return nil
	}
	return ri
}

// site is the live Site of namespace ns with API id id (nil when none).
func (ri *readIndexes) site(ns, id string) (*flexv1.Site, error) {
	objs, err := ri.sites.ByIndex(siteIDIndex, index.NamespacedKey(ns, id))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if s, ok := o.(*flexv1.Site); ok && s.DeletionTimestamp.IsZero() {
			return s, nil
		}
	}
	return nil, nil
}

// assetsOf are the site's cached Assets (those being deleted too: household.EvaluateAssets
// leaves them out, as Evaluate does), in UID order: the indexer gives them in its set's
// random order, and a kept eligibility answer matches its assets in order (with two assets,
// every other read missed its kept answer and evaluated again).
func (ri *readIndexes) assetsOf(site *flexv1.Site) ([]*flexv1.Asset, error) {
	objs, err := ri.assets.ByIndex(assetSiteIndex, index.NamespacedKey(site.Namespace, site.Name))
	if err != nil {
		return nil, err
	}
	out := make([]*flexv1.Asset, 0, len(objs))
	for _, o := range objs {
		if a, ok := o.(*flexv1.Asset); ok {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *flexv1.Asset) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out, nil
}
