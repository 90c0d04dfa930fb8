package household

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
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
	return rulesFor(props.Items, models.Items), nil
}

// rulesFor is the rules of a listed catalogue: the last ones built, when the catalogue is
// exactly the one they were built from, or new ones (kept for next time).
func rulesFor(props []flexv1.Proposition, models []flexv1.AssetModel) eligibility.Rules {
	if built := lastRules.Load(); built != nil && built.matches(props, models) {
		return built.rules
	}
	rules := eligibility.NewRules(props, models)
	if b := newBuiltRules(rules, props, models); b != nil {
		lastRules.Store(b)
	}
	return rules
}

// lastRules are the rules LoadRules built last, with the catalogue they were built from.
var lastRules atomic.Pointer[builtRules]

// builtRules are rules and the versions of the objects they were built from.
type builtRules struct {
	rules eligibility.Rules
	// versions of the Propositions and AssetModels, by UID.
	props, models map[types.UID]string
}

// newBuiltRules records what rules were built from; nil when an object has no UID or no
// resourceVersion (not read from an API server), as such rules cannot be told apart.
func newBuiltRules(rules eligibility.Rules, props []flexv1.Proposition, models []flexv1.AssetModel) *builtRules {
	b := &builtRules{rules: rules,
		props: make(map[types.UID]string, len(props)), models: make(map[types.UID]string, len(models))}
	for i := range props {
		if !record(b.props, props[i].UID, props[i].ResourceVersion) {
			return nil
		}
	}
	for i := range models {
		if !record(b.models, models[i].UID, models[i].ResourceVersion) {
			return nil
		}
	}
	return b
}

func record(versions map[types.UID]string, uid types.UID, rv string) bool {
	if uid == "" || rv == "" {
		return false
	}
	versions[uid] = rv
	return true
}

// matches reports whether the listed catalogue is exactly the one the rules were built from.
func (b *builtRules) matches(props []flexv1.Proposition, models []flexv1.AssetModel) bool {
	if len(props) != len(b.props) || len(models) != len(b.models) {
		return false
	}
	for i := range props {
		if rv, ok := b.props[props[i].UID]; !ok || rv != props[i].ResourceVersion {
			return false
		}
	}
	for i := range models {
		if rv, ok := b.models[models[i].UID]; !ok || rv != models[i].ResourceVersion {
			return false
		}
	}
	return true
}

// Catalogue answers the rules in force to readers that may see a catalogue change a moment
// late (the REST facade's GET eligibility), without listing the catalogue per call: the
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

// Rules are the rules in force, as of the last catalogue event handled.
func (c *Catalogue) Rules(ctx context.Context) (eligibility.Rules, error) {
	rules, _, err := c.VersionedRules(ctx)
	return rules, err
}

// VersionedRules are Rules with the count of catalogue events they are kept for: any change
// to the catalogue moves it, so an answer built from the rules holds while it does not.
func (c *Catalogue) VersionedRules(ctx context.Context) (eligibility.Rules, uint64, error) {
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

// Evaluate computes a site's eligibility from its spec and its assets with the rules.
// Assets on their way out no longer count. The Site controller writes the result into
// status; the REST facade answers with it before (and without) writing.
func Evaluate(site *flexv1.SiteSpec, assets []flexv1.Asset, rules eligibility.Rules) eligibility.Result {
	ptrs := make([]*flexv1.Asset, len(assets))
	for i := range assets {
		ptrs[i] = &assets[i]
	}
	return EvaluateAssets(site, ptrs, rules)
}

// EvaluateAssets is Evaluate of assets held by pointer (cached objects, not copied).
func EvaluateAssets(site *flexv1.SiteSpec, assets []*flexv1.Asset, rules eligibility.Rules) eligibility.Result {
	inputs := make([]eligibility.Asset, 0, len(assets))
	for _, a := range assets {
		if a.DeletionTimestamp.IsZero() {
			inputs = append(inputs, eligibility.Asset{Name: a.Name, ID: a.Labels[flexv1.IDLabel], Spec: a.Spec})
		}
	}
	return eligibility.Evaluate(site, inputs, rules)
}

// EvaluatedEligibility is the eligibility the Site controller last wrote into the site's
// status (nil when it never did), and whether it was computed from the site's current spec.
func EvaluatedEligibility(site *flexv1.Site) (*eligibility.Result, bool) {
	for _, c := range site.Status.Conditions {
		if c.Type == flexv1.EligibleCondition {
			return &eligibility.Result{Properties: site.Status.Properties, SiteIssues: eligibility.SiteIssues(&site.Spec),
					EligiblePropositions: site.Status.EligiblePropositions, Assets: site.Status.Assets},
				c.ObservedGeneration == site.Generation && site.Status.ObservedGeneration == site.Generation
		}
	}
	return nil, false
}
