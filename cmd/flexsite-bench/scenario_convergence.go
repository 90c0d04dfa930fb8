package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// convergenceNamespace holds scenario 2's households; the bench watches its Assets.
const convergenceNamespace = "bench-conv"

// sampleTimeout bounds one write's wait for its events.
const sampleTimeout = time.Minute

// convKind is one kind of write whose effect on eligibility scenario 2 times.
type convKind struct {
	name string
	// setup is the household before the write: its Site and Assets.
	setup func(ns, mpan string) []client.Object
	// before holds for the Site's status once setup has settled; after once the write has.
	before, after func(*flexv1.Site) bool
	// write makes the change; baseline says which watch event is its own raw write -> watch
	// event (on the Assets or the Sites hub, for which object, when).
	write    func(ctx context.Context, c client.Client, ns, mpan string) error
	baseline func(w *watcher, ns, mpan string) (*hub, types.NamespacedName, func(client.Object) bool)
}

func eligibleFor(p flexv1.PropositionName) func(*flexv1.Site) bool {
	return func(s *flexv1.Site) bool { return slices.Contains(s.Status.EligiblePropositions, p) }
}

func eligibleForNothing(s *flexv1.Site) bool {
	return len(s.Status.Assets) > 0 && len(s.Status.EligiblePropositions) == 0
}

// convKinds are the three writes: an asset added, a consent set, an asset model changed.
func convKinds() []convKind {
	withConsent := householdSpec()
	halfHourlyNoConsent := householdSpec()
	halfHourlyNoConsent.BoundaryMeterConsentAt, halfHourlyNoConsent.HalfHourlySettled = nil, true
	assetBaseline := func(cond func(*flexv1.Asset) bool, externalID func(string) string) func(*watcher, string, string) (
		*hub, types.NamespacedName, func(client.Object) bool) {
		return func(w *watcher, ns, mpan string) (*hub, types.NamespacedName, func(client.Object) bool) {
			return w.assets, types.NamespacedName{Namespace: ns, Name: identity.AssetName(externalID(mpan))},
				func(o client.Object) bool { return cond(o.(*flexv1.Asset)) }
		}
	}
	return []convKind{{
		// A battery of no model qualifies for nothing; adding a qualifying charger makes the site eligible.
		name: "asset_added",
		setup: func(ns, mpan string) []client.Object {
			site := newSite(ns, mpan, withConsent)
			return []client.Object{site, newAsset(ns, site.Name, batteryID(mpan), batterySpec())}
		},
		before: eligibleForNothing, after: eligibleFor(flexv1.PropositionLimitedPause),
		write: func(ctx context.Context, c client.Client, ns, mpan string) error {
			return c.Create(ctx, newAsset(ns, identity.SiteNameForMPAN(mpan), chargerID(mpan), chargerSpec()))
		},
		baseline: assetBaseline(func(*flexv1.Asset) bool { return true }, chargerID),
	}, {
		// A half-hourly settled site qualifies through its boundary meter once it has consent.
		name: "consent_set",
		setup: func(ns, mpan string) []client.Object {
			site := newSite(ns, mpan, halfHourlyNoConsent)
			return []client.Object{site, newAsset(ns, site.Name, batteryID(mpan), batterySpec())}
		},
		before: eligibleForNothing, after: eligibleFor(flexv1.PropositionLimitedPause),
		write: func(ctx context.Context, c client.Client, ns, mpan string) error {
			return c.Patch(ctx, &flexv1.Site{ObjectMeta: objectMeta(ns, identity.SiteNameForMPAN(mpan))},
				mergePatch(`{"spec":{"boundaryMeterConsentAt":%q}}`, time.Now().UTC().Format(time.RFC3339)))
		},
		baseline: func(w *watcher, ns, mpan string) (*hub, types.NamespacedName, func(client.Object) bool) {
			return w.sites, siteKeyOf(ns, mpan),
				func(o client.Object) bool { return o.(*flexv1.Site).Spec.BoundaryMeterConsentAt != nil }
		},
	}, {
		// legacy_charger is not CoP11 qualified and barred from limited_pause: the site loses everything.
		name: "model_changed",
		setup: func(ns, mpan string) []client.Object {
			site := newSite(ns, mpan, withConsent)
			return []client.Object{site, newAsset(ns, site.Name, chargerID(mpan), chargerSpec())}
		},
		before: eligibleFor(flexv1.PropositionLimitedPause), after: eligibleForNothing,
		write: func(ctx context.Context, c client.Client, ns, mpan string) error {
			return c.Patch(ctx, &flexv1.Asset{ObjectMeta: objectMeta(ns, identity.AssetName(chargerID(mpan)))},
				mergePatch(`{"spec":{"model":%q}}`, "legacy_charger"))
		},
		baseline: assetBaseline(func(a *flexv1.Asset) bool { return a.Spec.Model == "legacy_charger" }, chargerID),
	}}
}

// convSamples are one kind's timings: write -> status, and write -> the write's own event.
type convSamples struct {
	converge, baseline []time.Duration
}

// runConvergence times, one write at a time, how long each kind of write takes to show in
// Site.status, next to how long the same write takes to come back as a watch event at all:
// the API server's own write -> watch latency, measured on the very same writes.
func runConvergence(ctx context.Context, b *bench, rep *report) error {
	if err := b.namespace(ctx, convergenceNamespace); err != nil {
		return err
	}
	kinds := convKinds()
	h := newHouseholds(convergenceNamespace, 13)
	mpans, err := b.setupConvergence(ctx, kinds, h)
	if err != nil {
		return err
	}
	samples := make([]convSamples, len(kinds))
	// Kinds take turns, so that drift in the machine's load weighs on all alike.
	for i := range b.p.ConvergenceSamples {
		for k, kind := range kinds {
			conv, base, err := b.convergeOnce(ctx, kind, mpans[k][i])
			if err != nil {
				return fmt.Errorf("%s: %w", kind.name, err)
			}
			samples[k].converge = append(samples[k].converge, conv)
			samples[k].baseline = append(samples[k].baseline, base)
		}
	}
	reportConvergence(rep, kinds, samples)
	return nil
}

// setupConvergence creates every household the samples will change, waits for the
// controllers, and checks each status is where the sample starts from.
func (b *bench) setupConvergence(ctx context.Context, kinds []convKind, h *households) ([][]string, error) {
	n := b.p.ConvergenceSamples
	mpans := make([][]string, len(kinds))
	for k := range kinds {
		for range n {
			mpans[k] = append(mpans[k], h.mpan())
		}
	}
	_, err := runConcurrent(ctx, n*len(kinds), b.p.Concurrency, func(ctx context.Context, i int) error {
		k, j := i%len(kinds), i/len(kinds)
		for _, obj := range kinds[k].setup(h.ns, mpans[k][j]) {
			if err := b.c.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return nil, err
	}
	for k, kind := range kinds {
		for _, mpan := range mpans[k] {
			site := &flexv1.Site{}
			if err := b.watch.cache.Get(ctx, siteKeyOf(h.ns, mpan), site); err != nil {
				return nil, err
			}
			if !kind.before(site) {
				return nil, fmt.Errorf("%s: site %s does not start from the expected status: %+v", kind.name, site.Name, site.Status)
			}
		}
	}
	return mpans, nil
}

// convergeOnce makes one write and returns how long until Site.status showed its effect and
// until the write's own watch event arrived.
func (b *bench) convergeOnce(ctx context.Context, kind convKind, mpan string) (converge, baseline time.Duration, err error) {
	ns := convergenceNamespace
	baseHub, baseKey, baseCond := kind.baseline(b.watch, ns, mpan)
	baseCh := baseHub.expect(baseKey, baseCond)
	convCh := b.watch.sites.expect(siteKeyOf(ns, mpan), func(o client.Object) bool { return kind.after(o.(*flexv1.Site)) })
	start := time.Now()
	if err := kind.write(ctx, b.c, ns, mpan); err != nil {
		return 0, 0, err
	}
	if baseline, err = await(ctx, baseCh, start, sampleTimeout, "watch event of the write"); err != nil {
		return 0, 0, err
	}
	if converge, err = await(ctx, convCh, start, sampleTimeout, "status showing the new eligibility"); err != nil {
		return 0, 0, err
	}
	return converge, baseline, nil
}

func reportConvergence(rep *report, kinds []convKind, samples []convSamples) {
	var all convSamples
	for k, kind := range kinds {
		s := samples[k]
		all.converge = append(all.converge, s.converge...)
		all.baseline = append(all.baseline, s.baseline...)
		rep.add("convergence", kind.name+"_p50_ms", ms(percentile(s.converge, 50)), unitMS)
		rep.add("convergence", kind.name+"_p99_ms", ms(percentile(s.converge, 99)), unitMS)
		rep.add("convergence", kind.name+"_raw_watch_p99_ms", ms(percentile(s.baseline, 99)), unitMS)
	}
	p50, p99 := ms(percentile(all.converge, 50)), ms(percentile(all.converge, 99))
	raw50, raw99 := ms(percentile(all.baseline, 50)), ms(percentile(all.baseline, 99))
	logf("convergence: p50 %.1f ms, p99 %.1f ms; raw write -> watch p50 %.1f ms, p99 %.1f ms", p50, p99, raw50, raw99)
	rep.add("convergence", "samples", float64(len(all.converge)), unitCount)
	rep.add("convergence", "p50_ms", p50, unitMS)
	rep.add("convergence", "p99_ms", p99, unitMS)
	rep.add("convergence", "raw_watch_p50_ms", raw50, unitMS)
	rep.add("convergence", "raw_watch_p99_ms", raw99, unitMS)
	rep.add("convergence", "p50_vs_raw_watch_ratio", ratio(p50, raw50), unitRatio)
	rep.addTarget("convergence", "p99_vs_raw_watch_ratio", ratio(p99, raw99), unitRatio, target{"<=", 2})
}
