package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// probeConcurrency is how many interactive clients onboard while a catalogue change fans
// out: a few people at a time, not a load test.
const probeConcurrency = 2

// onboardProbe onboards households of o at probeConcurrency until n of them are done (n > 0)
// or stop is closed (stop non-nil), whichever comes first, timing each. The households are not added to o's lists: the read
// scenario reads only households with a reward ledger.
func (b *bench) onboardProbe(ctx context.Context, o *org, n int, stop <-chan struct{}) (timings, error) {
	var mu sync.Mutex
	var t timings
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	var count int
	for range probeConcurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				mu.Lock()
				done := firstErr != nil || (n > 0 && count >= n)
				count++
				mu.Unlock()
				if done {
					return
				}
				if stop != nil {
					select {
					case <-stop:
						return
					default:
					}
				}
				t0 := time.Now()
				var resp onboardResponse
				err := o.api.call(ctx, "POST", "/entities/site/onboard", onboardBody(o.h.mpan()), &resp)
				d := time.Since(t0)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				if err == nil {
					t.durations = append(t.durations, d)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.wall = time.Since(start)
	if firstErr != nil {
		return t, fmt.Errorf("onboard probe: %w", firstErr)
	}
	return t, ctx.Err()
}

// rawStatusPatches is the fan-out's baseline: a client writing, straight to the API server at
// C concurrent clients, as many status patches as a catalogue change made the manager write,
// of the same fields and size. It runs after the change has converged: it writes back every
// changed site's eligibility as it was before the change (timed: these are real writes, not
// no-ops), then the eligibility the change computed (untimed), so the statuses agree with
// the rules again. sites are the statuses before the change; expected, after it.
func (b *bench) rawStatusPatches(ctx context.Context, sites []flexv1.Site,
	expected map[types.NamespacedName]eligibility.Result) (timings, error) {
	var changed []*flexv1.Site
	for i := range sites {
		if !agrees(&sites[i], expected[client.ObjectKeyFromObject(&sites[i])]) {
			changed = append(changed, &sites[i])
		}
	}
	// A nil list is sent as null, which removes the field, as the manager's omitempty does.
	write := func(ctx context.Context, site *flexv1.Site, res eligibility.Result) error {
		type status struct {
			Properties           flexv1.SiteProperties     `json:"properties"`
			EligiblePropositions []flexv1.PropositionName  `json:"eligiblePropositions"`
			Assets               []flexv1.AssetEligibility `json:"assets"`
		}
		body, err := json.Marshal(struct {
			Status status `json:"status"`
		}{status{res.Properties, res.EligiblePropositions, res.Assets}})
		if err != nil {
			return err
		}
		obj := &flexv1.Site{}
		obj.Namespace, obj.Name = site.Namespace, site.Name
		return b.c.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, body))
	}
	t, err := runConcurrent(ctx, len(changed), b.p.Concurrency, func(ctx context.Context, i int) error {
		s := changed[i]
		return write(ctx, s, eligibility.Result{Properties: s.Status.Properties,
			EligiblePropositions: s.Status.EligiblePropositions, Assets: s.Status.Assets})
	})
	if err != nil {
		return t, fmt.Errorf("raw status patches: %w", err)
	}
	_, err = runConcurrent(ctx, len(changed), b.p.Concurrency, func(ctx context.Context, i int) error {
		return write(ctx, changed[i], expected[client.ObjectKeyFromObject(changed[i])])
	})
	if err != nil {
		return t, fmt.Errorf("putting the statuses back: %w", err)
	}
	return t, nil
}
