package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

const (
	onboardNamespace = "bench-onboard"
	rawNamespace     = "bench-raw"
	// objectsPerOnboard: a Site, two Assets and an Enrolment.
	objectsPerOnboard = 4
)

// runOnboard compares N REST onboards with creating the same objects straight through
// client-go (same count, same concurrency, the same webhooks), and counts the API requests
// each side causes, the controllers' status writes included (scenario 5, first half).
func runOnboard(ctx context.Context, b *bench, rep *report) error {
	restOrg, err := b.organisation(ctx, onboardNamespace, 11)
	if err != nil {
		return err
	}
	if err := b.namespace(ctx, rawNamespace); err != nil {
		return err
	}
	raw := newHouseholds(rawNamespace, 12)

	// Warm up both paths (connections, the REST API's first requests), outside the figures.
	warm := 2 * b.p.Concurrency
	if _, _, err := b.onboardREST(ctx, restOrg, warm); err != nil {
		return err
	}
	if _, _, err := b.rawHouseholds(ctx, raw, warm); err != nil {
		return err
	}
	cmp, err := b.compare(ctx, restOrg, raw, b.p.Onboards)
	if err != nil {
		return err
	}
	for _, ns := range []string{onboardNamespace, rawNamespace} {
		if err := b.checkEnrolled(ctx, ns, b.p.Onboards+warm); err != nil {
			return err
		}
	}
	reportOnboard(rep, cmp)
	reportRequests(rep, cmp, float64(b.p.Onboards))
	return nil
}

// comparison is n households written each way, with the API requests each way caused.
type comparison struct {
	rest, raw           timings
	restReqs, rawReqs   requestCounts
	restCPU, rawCPU     cpuTimes
	restNames, rawNames []string
}

// compare writes n households through the REST API and n straight through client-go, in
// batches that alternate A B B A, round after round: on a shared machine whose load drifts,
// and with etcd growing as the run goes, a drift then weighs on both sides alike. Each batch
// ends when the controllers are done with it, so batches do not overlap and each side's
// requests are its own.
//
// A batch is about 8×C households (a couple of seconds), not a quarter of each side: full
// runs showed a passing disturbance of 20–40 s, about 45 s after the catalogue changes
// before this scenario, in which the API server spent 30–120 % more CPU per household. With
// batches of 500 it fell on one side's two batches in a row (three runs of five, twice the
// REST side's, by up to 0.35 of the ratio); with short batches it falls on both.
func (b *bench) compare(ctx context.Context, restOrg *org, raw *households, n int) (comparison, error) {
	rounds := max(1, n/(2*8*b.p.Concurrency))
	cmp := comparison{restReqs: requestCounts{}, rawReqs: requestCounts{}, restCPU: cpuTimes{}, rawCPU: cpuTimes{}}
	parts := 2 * rounds
	for i := range 2 * parts {
		size := n/parts + boolInt(i/2 < n%parts)
		rest := i%4 == 1 || i%4 == 2
		res, err := b.runBatch(ctx, rest, size, restOrg, raw)
		if err != nil {
			return cmp, err
		}
		t, reqs := res.t, res.reqs
		side := "raw"
		if rest {
			side = "REST"
			cmp.rest.merge(t)
			cmp.restReqs.add(reqs)
			cmp.restCPU.add(res.cpu)
			cmp.restNames = append(cmp.restNames, res.names...)
		} else {
			cmp.raw.merge(t)
			cmp.rawReqs.add(reqs)
			cmp.rawCPU.add(res.cpu)
			cmp.rawNames = append(cmp.rawNames, res.names...)
		}
		// Each batch's CPU per household too: a batch slower than its neighbours says which
		// process was busier (one full run had two REST batches at half speed, with the API
		// server spending ~80 % more CPU per household, and nothing else to tell why).
		perHousehold := res.cpu.perUnitMS(float64(size))
		logf("%s: %d households in %s (%.1f/s, p50 %.1f ms), %.2f writes each; CPU ms each: API server %.1f, etcd %.1f, manager %.1f",
			side, size, t.wall.Round(time.Millisecond), t.rate(), t.percentileMS(50), reqs.where(isWrite).total()/float64(size),
			perHousehold[roleAPIServer], perHousehold[roleEtcd], perHousehold[roleManager])
	}
	return cmp, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// batchResult is one batch's timings, the requests the API server counted and the CPU time
// every process used meanwhile, and the sites' names.
type batchResult struct {
	t     timings
	reqs  requestCounts
	cpu   cpuTimes
	names []string
}

// runBatch writes one batch and waits until the controllers are done with it, so that the
// requests and CPU time counted are all the batch's.
func (b *bench) runBatch(ctx context.Context, rest bool, n int, restOrg *org, raw *households) (batchResult, error) {
	before, err := b.requests.snapshot(ctx)
	if err != nil {
		return batchResult{}, err
	}
	cpu0 := b.readCPU()
	var res batchResult
	if rest {
		res.t, res.names, err = b.onboardREST(ctx, restOrg, n)
	} else {
		res.t, res.names, err = b.rawHouseholds(ctx, raw, n)
	}
	if err != nil {
		return batchResult{}, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return batchResult{}, err
	}
	// waitIdle's quiet second is idle time for the system under test, not for the bench's
	// polling: a small overstatement of the bench's own share.
	res.cpu = b.readCPU().since(cpu0)
	after, err := b.requests.snapshot(ctx)
	if err != nil {
		return batchResult{}, err
	}
	res.reqs = after.minus(before)
	return res, nil
}

// rawHouseholds creates n households' objects exactly as the REST API does (the site with its
// id label, finalizer and in-flight marker, two assets, an enrolment with its finalizer), in
// the same order, one household per job, at the same concurrency as the REST side. It
// returns the sites' names.
func (b *bench) rawHouseholds(ctx context.Context, h *households, n int) (timings, []string, error) {
	names := make([]string, n)
	t, err := runConcurrent(ctx, n, b.p.Concurrency, func(ctx context.Context, i int) error {
		mpan := h.mpan()
		site := newSite(h.ns, mpan, householdSpec())
		markInFlight(site, mpan)
		objs := []client.Object{
			site,
			newAsset(h.ns, site.Name, chargerID(mpan), chargerSpec()),
			newAsset(h.ns, site.Name, batteryID(mpan), batterySpec()),
			newEnrolment(h.ns, site.Name),
		}
		for _, obj := range objs {
			if err := b.c.Create(ctx, obj); err != nil {
				return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
			}
		}
		names[i] = site.Name
		return nil
	})
	return t, names, err
}

// checkEnrolled makes sure every household of a namespace ended up enrolled: figures of a
// run that did not do its work would mean nothing.
func (b *bench) checkEnrolled(ctx context.Context, ns string, want int) error {
	list := &flexv1.EnrolmentList{}
	if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	active := 0
	for _, e := range list.Items {
		if e.Status.Phase == flexv1.EnrolmentActive {
			active++
		}
	}
	if active != want {
		return fmt.Errorf("%d of %d enrolments in %s are Active", active, want, ns)
	}
	return nil
}

func reportOnboard(rep *report, cmp comparison) {
	rep.add("onboard", "rest_onboards_per_second", cmp.rest.rate(), unitPerSec)
	rep.add("onboard", "raw_households_per_second", cmp.raw.rate(), unitPerSec)
	rep.addTarget("onboard", "rest_vs_raw_ratio", ratio(cmp.rest.rate(), cmp.raw.rate()), unitRatio, target{">=", 0.8})
	rep.add("onboard", "rest_p50_ms", cmp.rest.percentileMS(50), unitMS)
	rep.add("onboard", "rest_p99_ms", cmp.rest.percentileMS(99), unitMS)
	rep.add("onboard", "raw_p50_ms", cmp.raw.percentileMS(50), unitMS)
	rep.add("onboard", "raw_p99_ms", cmp.raw.percentileMS(99), unitMS)
	rep.add("onboard", "rest_vs_raw_p50_latency_ratio", ratio(cmp.rest.percentileMS(50), cmp.raw.percentileMS(50)), unitRatio)
	// CPU time per household of every process, so a missed ratio can be traced to whoever
	// spends the difference; on a saturated machine the rate ratio tends to the CPU ratio.
	n, m := float64(len(cmp.rest.durations)), float64(len(cmp.raw.durations))
	for _, role := range []string{roleManager, roleAPIServer, roleEtcd, roleBench} {
		rep.add("onboard", "rest_cpu_ms_per_onboard_"+cpuKey(role), ms(cmp.restCPU[role])/n, unitMS)
		rep.add("onboard", "raw_cpu_ms_per_household_"+cpuKey(role), ms(cmp.rawCPU[role])/m, unitMS)
	}
	restTotal, rawTotal := ms(cmp.restCPU.total())/n, ms(cmp.rawCPU.total())/m
	rep.add("onboard", "rest_cpu_ms_per_onboard_total", restTotal, unitMS)
	rep.add("onboard", "raw_cpu_ms_per_household_total", rawTotal, unitMS)
	rep.add("onboard", "raw_vs_rest_cpu_ratio", ratio(rawTotal, restTotal), unitRatio)
	logf("CPU ms per REST onboard: %v; per raw household: %v", cmp.restCPU.perUnitMS(n), cmp.rawCPU.perUnitMS(m))
}

// cpuKey turns a process role into a JSON key fragment.
func cpuKey(role string) string { return strings.ReplaceAll(role, "-", "_") }

// reportRequests reports API requests per household. The write budget is the issue's: the
// objects an onboard creates plus at most one status write each. Reads are not budgeted, but
// each is a round trip an onboard waits for, so they explain its latency.
func reportRequests(rep *report, cmp comparison, n float64) {
	restW, rawW := cmp.restReqs.where(isWrite), cmp.rawReqs.where(isWrite)
	status := func(k requestKey) bool { return k.Subresource == "status" }
	failed := func(k requestKey) bool { return len(k.Code) == 3 && k.Code[0] >= '4' }
	rep.add("writes", "objects_per_onboard", objectsPerOnboard, unitCount)
	rep.addTarget("writes", "rest_writes_per_onboard", restW.total()/n, unitCount, target{"<=", 2 * objectsPerOnboard})
	rep.add("writes", "rest_status_writes_per_onboard", restW.where(status).total()/n, unitCount)
	rep.add("writes", "rest_failed_writes_per_onboard", restW.where(failed).total()/n, unitCount)
	rep.add("writes", "raw_writes_per_household", rawW.total()/n, unitCount)
	rep.add("writes", "rest_vs_raw_writes_ratio", ratio(restW.total(), rawW.total()), unitRatio)
	rep.add("writes", "rest_reads_per_onboard", cmp.restReqs.where(isRead).total()/n, unitCount)
	rep.add("writes", "raw_reads_per_household", cmp.rawReqs.where(isRead).total()/n, unitCount)
	rep.detail("rest_requests_per_onboard", cmp.restReqs.perUnit(n))
	rep.detail("raw_requests_per_household", cmp.rawReqs.perUnit(n))
	logf("API requests per REST onboard: %s", cmp.restReqs.perUnitString(n))
	logf("API requests per raw household: %s", cmp.rawReqs.perUnitString(n))
}

// siteKeyOf names a household's Site.
func siteKeyOf(ns, mpan string) client.ObjectKey {
	return client.ObjectKey{Namespace: ns, Name: identity.SiteNameForMPAN(mpan)}
}
