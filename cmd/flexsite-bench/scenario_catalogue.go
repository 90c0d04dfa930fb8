package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// ruleChange is an edit of one rule object of the catalogue.
type ruleChange struct {
	// name prefixes the figures: "asset_model", "proposition".
	name string
	// obj names the object (kind and name) to change.
	obj client.Object
	// edit changes it; revert puts back what it was.
	edit   func(client.Object)
	revert func(client.Object)
}

// catalogueChanges are the issue's "a change to a proposition or asset model that affects
// every site", one of each: the fleet's chargers lose their CoP11 qualification (so every
// household loses every proposition), and price_curve is narrowed to batteries.
func catalogueChanges() []ruleChange {
	return []ruleChange{
		{
			name: "asset_model", obj: &flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "myenergi-zappi"}},
			edit:   func(o client.Object) { o.(*flexv1.AssetModel).Spec.CoP11Qualified = false },
			revert: func(o client.Object) { o.(*flexv1.AssetModel).Spec.CoP11Qualified = true },
		},
		{
			name: "proposition", obj: &flexv1.Proposition{ObjectMeta: metav1.ObjectMeta{Name: "price-curve"}},
			edit: func(o client.Object) {
				o.(*flexv1.Proposition).Spec.AssetTypes = []flexv1.AssetType{flexv1.AssetTypeBattery}
			},
			revert: func(o client.Object) { o.(*flexv1.Proposition).Spec.AssetTypes = nil },
		},
	}
}

// runCatalogue times each catalogue change, and its revert, until every Site's status agrees
// with the new rules. The first change is also written by a plain client (the same status
// patches, straight to the API server): the fan-out's baseline. The second change runs with
// interactive REST onboards alongside, whose p99 is compared with the same onboards on an
// idle manager: a fan-out must not starve interactive work.
func runCatalogue(ctx context.Context, b *bench, rep *report) error {
	for n, ch := range catalogueChanges() {
		for _, step := range []struct {
			suffix string
			edit   func(client.Object)
		}{{stepChange, ch.edit}, {"revert", ch.revert}} {
			prefix := ch.name + "_" + step.suffix
			// The proposition change leaves limited_pause as it was, so the probe's households
			// (a charger, in limited_pause) can still enrol while it fans out.
			first, loaded := n == 0 && step.suffix == stepChange, n == 1 && step.suffix == stepChange
			var probe *fanoutProbe
			if loaded {
				var err error
				if probe, err = b.startFanoutProbe(ctx); err != nil {
					return err
				}
			}
			res, err := b.timeRuleChange(ctx, ch.obj, step.edit, probe)
			if err != nil {
				return fmt.Errorf("%s %s: %w", ch.name, step.suffix, err)
			}
			logf("catalogue %s %s: %d of %d sites changed, all agree after %s (%.0f sites/s, %.2f writes per changed site)",
				ch.name, step.suffix, res.changed, res.sites, res.took.Round(time.Millisecond), res.sitesPerSecond(), res.writesPerSite())
			rep.add("catalogue", prefix+"_sites_changed", float64(res.changed), unitCount)
			rep.add("catalogue", prefix+"_seconds", res.took.Seconds(), unitSeconds)
			rep.add("catalogue", prefix+"_sites_per_second", res.sitesPerSecond(), unitPerSec)
			if loaded {
				// The probe's onboards write too: the writes per changed site are of the quiet runs.
				reportFanoutProbe(rep, probe)
			} else {
				rep.add("catalogue", prefix+"_writes_per_changed_site", res.writesPerSite(), unitCount)
			}
			if res.disagreeingBefore > 0 {
				rep.add("catalogue", prefix+"_sites_disagreeing_before", float64(res.disagreeingBefore), unitCount)
			}
			rep.detail("catalogue_"+prefix+"_writes", res.writes.perUnit(1))
			// Who spends the CPU of a fan-out (with the probe's onboards, when loaded): on two
			// shared cores, what the fan-out burns is what the interactive requests wait for.
			rep.detail("catalogue_"+prefix+"_cpu_ms_per_changed_site", res.cpu.perUnitMS(float64(max(res.changed, 1))))
			logf("catalogue %s %s: CPU ms per changed site %v", ch.name, step.suffix, res.cpu.perUnitMS(float64(max(res.changed, 1))))
			if first {
				raw, err := b.rawStatusPatches(ctx, res.snapshot.sites, res.expected)
				if err != nil {
					return err
				}
				logf("raw: %d status patches in %s (%.0f/s)", len(raw.durations), raw.wall.Round(time.Millisecond), raw.rate())
				rep.add("catalogue", "raw_status_patches", float64(len(raw.durations)), unitCount)
				rep.add("catalogue", "raw_status_patch_seconds", raw.wall.Seconds(), unitSeconds)
				rep.add("catalogue", "raw_status_patches_per_second", raw.rate(), unitPerSec)
				rep.addTarget("catalogue", prefix+"_vs_raw_patches_ratio", ratio(res.took.Seconds(), raw.wall.Seconds()),
					unitRatio, target{"<=", 2})
			}
		}
	}
	return nil
}

// stepChange names a catalogue change's first step (the second, "revert", undoes it).
const stepChange = "change"

// fanoutProbe is interactive onboards timed on an idle manager, then during a fan-out.
type fanoutProbe struct {
	idle, during timings
	stop         chan struct{}
	done         chan error
}

// startFanoutProbe times FanoutProbe onboards on the idle manager, then starts as many again
// in the background, from the change on; timeRuleChange stops them early if the fan-out has
// converged first. Both sides are the same number of onboards, so their p99s are the same
// statistic over windows of about the same length: on a shared machine, a window ten times
// longer (the whole fan-out) meets ten times the other tenants' hiccups, which the p99 of the
// longer side would count against the fan-out. (With 50 idle onboards against the whole
// fan-out's, the ratio of one quick run swung between 0.6 and 8 with the same code.)
func (b *bench) startFanoutProbe(ctx context.Context) (*fanoutProbe, error) {
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return nil, err
	}
	p := &fanoutProbe{stop: make(chan struct{}), done: make(chan error, 1)}
	var err error
	if p.idle, err = b.onboardProbe(ctx, b.fleet, b.p.FanoutProbe, nil); err != nil {
		return nil, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *fanoutProbe) run(ctx context.Context, b *bench) {
	go func() {
		var err error
		p.during, err = b.onboardProbe(ctx, b.fleet, b.p.FanoutProbe, p.stop)
		p.done <- err
	}()
}

func (p *fanoutProbe) finish() error {
	close(p.stop)
	return <-p.done
}

func reportFanoutProbe(rep *report, p *fanoutProbe) {
	rep.add("catalogue", "onboards_idle", float64(len(p.idle.durations)), unitCount)
	rep.add("catalogue", "onboards_during_fanout", float64(len(p.during.durations)), unitCount)
	rep.add("catalogue", "onboard_probe_seconds_idle", p.idle.wall.Seconds(), unitSeconds)
	rep.add("catalogue", "onboard_probe_seconds_during_fanout", p.during.wall.Seconds(), unitSeconds)
	rep.add("catalogue", "onboard_p50_ms_idle", p.idle.percentileMS(50), unitMS)
	rep.add("catalogue", "onboard_p90_ms_idle", p.idle.percentileMS(90), unitMS)
	rep.add("catalogue", "onboard_p99_ms_idle", p.idle.percentileMS(99), unitMS)
	rep.add("catalogue", "onboard_p50_ms_during_fanout", p.during.percentileMS(50), unitMS)
	rep.add("catalogue", "onboard_p90_ms_during_fanout", p.during.percentileMS(90), unitMS)
	rep.add("catalogue", "onboard_p99_ms_during_fanout", p.during.percentileMS(99), unitMS)
	rep.addTarget("catalogue", "onboard_p99_during_fanout_vs_idle_ratio",
		ratio(p.during.percentileMS(99), p.idle.percentileMS(99)), unitRatio, target{"<=", 2})
	logf("onboards at %d clients: idle p99 %.1f ms (%d), during the fan-out p99 %.1f ms (%d)", probeConcurrency,
		p.idle.percentileMS(99), len(p.idle.durations), p.during.percentileMS(99), len(p.during.durations))
}

// ruleChangeResult is one timed catalogue change.
type ruleChangeResult struct {
	sites, changed, disagreeingBefore int
	snapshot                          *clusterSnapshot
	expected                          map[types.NamespacedName]eligibility.Result
	took                              time.Duration
	writes                            requestCounts
	// cpu is every process's CPU time from the change until every status agreed.
	cpu cpuTimes
}

func (r ruleChangeResult) sitesPerSecond() float64 {
	return ratio(float64(r.changed), r.took.Seconds())
}

func (r ruleChangeResult) writesPerSite() float64 { return ratio(r.writes.total(), float64(r.changed)) }

// timeRuleChange works out, with the eligibility rules themselves, what every Site's status
// must become, makes the change, and times until the bench's watch has seen every status
// agree. The clock starts before the update request and stops at the last site's event.
// With a probe, interactive onboards run from the change until every status agrees.
func (b *bench) timeRuleChange(ctx context.Context, obj client.Object, edit func(client.Object),
	probe *fanoutProbe) (ruleChangeResult, error) {
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return ruleChangeResult{}, err
	}
	snap, err := b.snapshot(ctx)
	if err != nil {
		return ruleChangeResult{}, err
	}
	before, after, err := snap.rules(obj, edit)
	if err != nil {
		return ruleChangeResult{}, err
	}
	expected := map[types.NamespacedName]eligibility.Result{}
	res := ruleChangeResult{sites: len(snap.sites), snapshot: snap, expected: expected}
	for i := range snap.sites {
		site := &snap.sites[i]
		old, next := snap.evaluate(site, before), snap.evaluate(site, after)
		if !agrees(site, old) {
			res.disagreeingBefore++
		}
		if !sameResult(old, next) {
			res.changed++
		}
		expected[client.ObjectKeyFromObject(site)] = next
	}
	tr := newTracker(snap.sites, expected)
	b.watch.sites.setTracker(tr.observe)
	defer b.watch.sites.setTracker(nil)

	writes0, err := b.requests.snapshot(ctx)
	if err != nil {
		return res, err
	}
	cpu0 := b.readCPU()
	start := time.Now()
	if probe != nil {
		probe.run(ctx, b)
	}
	if err := b.updateRule(ctx, obj, edit); err != nil {
		if probe != nil {
			_ = probe.finish()
		}
		return res, err
	}
	res.took, err = await(ctx, tr.done, start, b.p.Settle, "agreement of every site's status")
	res.cpu = b.readCPU().since(cpu0)
	if probe != nil {
		if perr := probe.finish(); err == nil {
			err = perr
		}
	}
	if err != nil {
		return res, fmt.Errorf("%w (%d sites still disagree)", err, tr.left())
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return res, err
	}
	writes1, err := b.requests.snapshot(ctx)
	res.writes = writes1.minus(writes0).where(isWrite)
	return res, err
}

// updateRule reads the rule object, edits it and writes it back.
func (b *bench) updateRule(ctx context.Context, obj client.Object, edit func(client.Object)) error {
	current := obj.DeepCopyObject().(client.Object)
	if err := b.c.Get(ctx, client.ObjectKeyFromObject(obj), current); err != nil {
		return err
	}
	edit(current)
	return b.c.Update(ctx, current)
}

// statusTracker counts down the sites whose status does not yet agree with what is expected.
type statusTracker struct {
	mu       sync.Mutex
	expected map[types.NamespacedName]eligibility.Result
	pending  map[types.NamespacedName]bool
	done     chan time.Time
}

func newTracker(sites []flexv1.Site, expected map[types.NamespacedName]eligibility.Result) *statusTracker {
	t := &statusTracker{expected: expected, pending: map[types.NamespacedName]bool{}, done: make(chan time.Time, 1)}
	for i := range sites {
		key := client.ObjectKeyFromObject(&sites[i])
		if !agrees(&sites[i], expected[key]) {
			t.pending[key] = true
		}
	}
	if len(t.pending) == 0 {
		t.done <- time.Now()
	}
	return t
}

func (t *statusTracker) observe(obj client.Object, at time.Time) {
	site, ok := obj.(*flexv1.Site)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(site)
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.pending[key] || !agrees(site, t.expected[key]) {
		return
	}
	delete(t.pending, key)
	if len(t.pending) == 0 {
		t.done <- at
	}
}

func (t *statusTracker) left() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.pending)
}

// agrees tells whether a Site's status holds the eligibility result.
func agrees(site *flexv1.Site, res eligibility.Result) bool {
	st := &site.Status
	return equality.Semantic.DeepEqual(st.Properties, res.Properties) &&
		equality.Semantic.DeepEqual(st.EligiblePropositions, res.EligiblePropositions) &&
		equality.Semantic.DeepEqual(st.Assets, res.Assets)
}

func sameResult(a, b eligibility.Result) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// clusterSnapshot is every Site (from the bench's watch), every Asset and the rules.
type clusterSnapshot struct {
	sites        []flexv1.Site
	assets       map[types.NamespacedName][]eligibility.Asset // by site
	propositions []flexv1.Proposition
	models       []flexv1.AssetModel
}

func (b *bench) snapshot(ctx context.Context) (*clusterSnapshot, error) {
	s := &clusterSnapshot{assets: map[types.NamespacedName][]eligibility.Asset{}}
	sites := &flexv1.SiteList{}
	if err := b.watch.cache.List(ctx, sites); err != nil {
		return nil, err
	}
	s.sites = sites.Items
	err := listPages(ctx, b.c, &flexv1.AssetList{}, func(list client.ObjectList) {
		for _, a := range list.(*flexv1.AssetList).Items {
			if a.DeletionTimestamp.IsZero() {
				key := types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.SiteName}
				s.assets[key] = append(s.assets[key], eligibility.Asset{Name: a.Name, ID: a.Labels[flexv1.IDLabel], Spec: a.Spec})
			}
		}
	})
	if err != nil {
		return nil, err
	}
	props, models := &flexv1.PropositionList{}, &flexv1.AssetModelList{}
	if err := b.c.List(ctx, props); err != nil {
		return nil, err
	}
	if err := b.c.List(ctx, models); err != nil {
		return nil, err
	}
	s.propositions, s.models = props.Items, models.Items
	return s, nil
}

// rules are the rules in force, and as they will be once edit is applied to obj.
func (s *clusterSnapshot) rules(obj client.Object, edit func(client.Object)) (before, after eligibility.Rules, err error) {
	props := append([]flexv1.Proposition(nil), s.propositions...)
	models := append([]flexv1.AssetModel(nil), s.models...)
	found := false
	for i := range props {
		if _, ok := obj.(*flexv1.Proposition); ok && props[i].Name == obj.GetName() {
			props[i] = *props[i].DeepCopy()
			edit(&props[i])
			found = true
		}
	}
	for i := range models {
		if _, ok := obj.(*flexv1.AssetModel); ok && models[i].Name == obj.GetName() {
			models[i] = *models[i].DeepCopy()
			edit(&models[i])
			found = true
		}
	}
	if !found {
		return before, after, fmt.Errorf("no rule object %T %s", obj, obj.GetName())
	}
	return eligibility.NewRules(s.propositions, s.models), eligibility.NewRules(props, models), nil
}

func (s *clusterSnapshot) evaluate(site *flexv1.Site, rules eligibility.Rules) eligibility.Result {
	return eligibility.Evaluate(&site.Spec, s.assets[client.ObjectKeyFromObject(site)], rules)
}

// listPages lists every object of a kind from the API server, a page at a time.
func listPages(ctx context.Context, c client.Client, list client.ObjectList, each func(client.ObjectList)) error {
	opts := []client.ListOption{client.Limit(1000)}
	for {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		each(list)
		next := list.GetContinue()
		if next == "" {
			return nil
		}
		opts = []client.ListOption{client.Limit(1000), client.Continue(next)}
	}
}
