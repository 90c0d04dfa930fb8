package householdstore

import (
	"context"
	"sync/atomic"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/index"
)

// LoadRules reads the eligibility rules in force (Propositions and the AssetModel catalogue).
// Every door evaluates with the rules read here, so none disagrees with Site.status.
//
// The catalogue is listed on every call, but the rules are rebuilt only when it changed:
// the last rules built are kept with the identity (UID) and resourceVersion of every object
// they were built from, and reused only when the listing holds exactly those objects at
// exactly those versions. Any change (an update, a create, a delete) is seen at once.
func LoadRules(ctx context.Context, r client.Reader) (eligibility.Rules, error) {
	props := &flexv1.PropositionList{}
	// The rules are only read, never changed: skip the cache's defensive deep copy, which
	// matters when a catalogue change re-evaluates thousands of sites.
	if err := r.List(ctx, props, client.UnsafeDisableDeepCopy); err != nil {
		return eligibility.Rules{}, err
	}
	models := &flexv1.AssetModelList{}
	if err := r.List(ctx, models, client.UnsafeDisableDeepCopy); err != nil {
		return eligibility.Rules{}, err
	}
	return household.RulesFor(props.Items, models.Items), nil
}

// Catalogue answers the rules in force to readers that may see a catalogue change a moment
// late (the REST API's GET eligibility), without listing the catalogue per call: the
// informers of Propositions and AssetModels tell it of every change, and it rebuilds (with
// LoadRules) on the next call after one. A change is seen once the informer's handlers have
// run, just after the cache holds it. Writers and the Site controller use LoadRules, which
// sees the cache exactly.
type Catalogue struct {
	reader client.Reader
	// version counts the catalogue events seen.
	version atomic.Uint64
	built   atomic.Pointer[versionedRules]
}

type versionedRules struct {
	version uint64
	rules   eligibility.Rules
}

// NewCatalogue reads the rules through r and learns of changes from the informers of the
// same cache.
func NewCatalogue(ctx context.Context, r client.Reader, informers index.InformerSource) (*Catalogue, error) {
	c := &Catalogue{reader: r}
	bump := func(any) { c.version.Add(1) }
	for _, obj := range []client.Object{&flexv1.Proposition{}, &flexv1.AssetModel{}} {
		inf, err := informers.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: bump, DeleteFunc: bump, UpdateFunc: func(_, obj any) { bump(obj) },
		}); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Rules are the rules in force, as of the last catalogue event handled: rebuilt on the
// first call after an event, else the ones built last.
func (c *Catalogue) Rules(ctx context.Context) (eligibility.Rules, error) {
	rules, _, err := c.RulesAt(ctx)
	return rules, err
}

// RulesAt are Rules and the version they are kept for: while Version answers the same, the
// rules in force are these.
func (c *Catalogue) RulesAt(ctx context.Context) (eligibility.Rules, uint64, error) {
	v := c.version.Load()
	if b := c.built.Load(); b != nil && b.version == v {
		return b.rules, v, nil
	}
	rules, err := LoadRules(ctx, c.reader)
	if err != nil {
		return eligibility.Rules{}, 0, err
	}
	// Read at version v or later: kept for v (a later event rebuilds them again).
	c.built.Store(&versionedRules{version: v, rules: rules})
	return rules, v, nil
}

// Version counts the catalogue events seen: the rules RulesAt answered for a version are
// still the ones in force while Version answers it.
func (c *Catalogue) Version() uint64 { return c.version.Load() }

// FixedCatalogue is a Catalogue that answers rules and never changes (no informers): for the
// use cases' unit tests and benchmarks.
func FixedCatalogue(rules eligibility.Rules) *Catalogue {
	c := &Catalogue{}
	c.built.Store(&versionedRules{rules: rules})
	return c
}
