package app

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/keptanswer"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// readIndexes look cached Sites and Assets up by their field indexes straight in the
// informers' indexers, for the two hot reads (eligibility, transactions): a List through the
// cache copies every match into a new list by reflection, which was a fifth of such a read's
// CPU and most of its garbage. What they return are the cached objects themselves, shared:
// read-only, like any UnsafeDisableDeepCopy read. Every index lookup of this package's hot
// reads is one of the two methods below.
type readIndexes struct {
	lookup index.Lookup
	// changes wakes the reads that wait for a site's next status (eligibility.go).
	changes *index.Changes
	sites   index.KeptSites // the sites found by id, held until they change
}

// newReadIndexes finds the indexers of the cache's Site and Asset informers (nil when the
// cache is not informer-backed: reads then List as before).
func newReadIndexes(c client.Reader) *readIndexes {
	sites, assets := index.StoreOf(c, &flexv1.Site{}), index.StoreOf(c, &flexv1.Asset{})
	if sites == nil || assets == nil {
		return nil
	}
	ri := &readIndexes{lookup: index.NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Site{}: sites, &flexv1.Asset{}: assets}),
		changes: &index.Changes{}}
	if informers, ok := c.(index.InformerSource); ok {
		ri.changes.Follow(informers, &flexv1.Site{}, &flexv1.Asset{})
	}
	index.FollowKeptSites(c, &ri.sites)
	return ri
}

// site is the live Site of namespace ns with API id id (nil when none).
func (ri *readIndexes) site(ns, id string) (*flexv1.Site, error) {
	return ri.sites.Site(ns, id, func() (*flexv1.Site, error) {
		sites, err := ri.lookup.SitesByID(context.Background(), ns, id) // the stores at hand: no wait
		if err != nil {
			return nil, err
		}
		for _, s := range sites {
			if s.DeletionTimestamp.IsZero() {
				return s, nil
			}
		}
		return nil, nil
	})
}

// assetsOf are the site's cached Assets (those being deleted too: household.EvaluateAssets
// and household.EligibilityInputsOf leave them out), in the index's order (any: an
// evaluation orders its assets, and EligibilityInputsOf digests them in any order).
func (ri *readIndexes) assetsOf(site *flexv1.Site) ([]*flexv1.Asset, error) {
	return ri.lookup.AssetsOfSite(context.Background(), site.Namespace, site.Name) // the stores at hand: no wait
}

// followKept makes every change of a cached Site or Asset reach kept.Changed (the site it
// belongs to) while the informer's store applies it, before any reader can see the change:
// that is what lets kept serve an answer by site id without looking the site and its assets up
// (keptanswer.Eligibility.Current). Without informers kept is not followed: every read looks up.
func followKept(c client.Reader, kept *keptanswer.Eligibility) {
	if kept != nil && index.TellChanges(c, fmt.Sprintf("flexsite.io/kept-eligibility-%p", kept), keptTell(kept),
		&flexv1.Site{}, &flexv1.Asset{}) {
		kept.Follow()
	}
}

// keptTell tells kept the change of a Site or an Asset: the site it belongs to.
func keptTell(kept *keptanswer.Eligibility) func(obj any) {
	return func(obj any) {
		switch o := obj.(type) {
		case *flexv1.Site:
			kept.Changed(o.Namespace, o.Name)
		case *flexv1.Asset:
			kept.Changed(o.Namespace, o.Spec.SiteName)
		}
	}
}

// EncodedJSON is an answer already encoded as encoding/json's Encoder would (HTML-safe, a
// trailing newline): a door sends it as it is.
type EncodedJSON []byte

// rulesToRead are the rules in force for an answer that only reads (GET eligibility): from
// the householdstore.Catalogue kept up to date by the cache's informers, without listing the
// catalogue per request, when the cache has informers; else listed (householdstore.LoadRules).
// version is the catalogue's (householdstore.Catalogue.Version; 0 without one).
func (s *Service) rulesToRead(ctx context.Context) (rules eligibility.Rules, version uint64, err error) {
	if s.catalogue != nil {
		return s.catalogue.RulesAt(ctx)
	}
	rules, err = householdstore.LoadRules(ctx, s.Cache)
	return rules, 0, err
}
