package main

import (
	"context"
	"fmt"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

const (
	// callbacksScenario names the scenario: its step, its figures' group and its table section.
	callbacksScenario  = "callbacks"
	callbacksNamespace = "bench-callbacks"
	// callbacksConcurrency is how many requests each side has in flight at once.
	callbacksConcurrency = 8
)

// callbacksParams size the callbacks scenario.
type callbacksParams struct {
	households, perPart, rounds int
}

func (b *bench) callbacksParams() callbacksParams {
	if b.p.Mode == modeQuick {
		return callbacksParams{households: 10, perPart: 300, rounds: 2}
	}
	return callbacksParams{households: 50, perPart: 1500, rounds: 4}
}

// runCallbacks compares the dispatch status callback (POST /entities/asset/{asset_id}/
// callback/{event_id}: the asset found in the cache, the report judged under the dispatch's
// row lock, the change and its history row written with a NOTIFY) with the readings route's
// per-request throughput (POST /data/readings with one reading: the asset found in the cache,
// the reading judged, one COPY): the same client, the same concurrency, in parts that
// alternate A B B A round after round. Every callback is a real change (requested →
// EXECUTED) of its own dispatch, seeded straight into the database; every reading a new key.
func runCallbacks(ctx context.Context, b *bench, rep *report) error {
	cp := b.callbacksParams()
	o, err := b.organisation(ctx, callbacksNamespace, 17)
	if err != nil {
		return err
	}
	if _, _, err := b.onboardREST(ctx, o, cp.households); err != nil {
		return err
	}
	assets, err := o.onboardedAssets(ctx)
	if err != nil {
		return err
	}

	parts := 4 * cp.rounds
	warmUp := 2 * callbacksConcurrency
	n := parts/2*cp.perPart + warmUp // requests a side
	// The dispatches: request k reports on dispatch k, of asset k mod assets and flex event
	// k div assets, so that every (flex event, asset) is issued once. Their window has started
	// (EXECUTED is refused before it).
	start := time.Now().UTC().Truncate(30 * time.Minute).Add(-time.Hour)
	ds := make([]dispatchstore.Dispatch, n)
	paths := make([]string, n)
	for k := range ds {
		a := assets[k%len(assets)]
		ev := fmt.Sprintf("bench-callbacks-%d", k/len(assets))
		ds[k] = dispatchstore.Dispatch{FlexEvent: ev, SiteID: a.siteID, AssetID: a.assetID, MarketID: "limited_pause",
			From: start, To: start.Add(time.Hour), EventTimestamp: time.Now()}
		paths[k] = dispatch.CallbackPath(a.assetID, dispatch.EventID(callbacksNamespace, ev, a.assetID))
	}
	if _, err := (&dispatchstore.Store{Pool: b.db}).Issue(ctx, callbacksNamespace, "https://flexsite.bench", ds, nil, time.Now()); err != nil {
		return err
	}
	// prod's EventResponse.
	report := struct {
		Timestamp string `json:"timestamp"`
		Status    string `json:"status"`
	}{time.Now().UTC().Format(time.RFC3339), "EXECUTED"}
	// One reading a request, every key new: a minute of asset k mod assets, k div assets
	// minutes after the origin.
	origin := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -10)
	// prod's ReadingsDataPoints, of one ReadingDataPoint.
	type reading struct {
		AssetID string  `json:"asset_id"`
		Label   string  `json:"label"`
		Value   float64 `json:"value"`
		Start   string  `json:"start_timestamp"`
		End     string  `json:"end_timestamp"`
	}
	type readingsBody struct {
		Readings []reading `json:"readings"`
	}
	readings := make([]readingsBody, n)
	for k := range readings {
		a := assets[k%len(assets)]
		s := origin.Add(time.Duration(k/len(assets)) * time.Minute)
		readings[k] = readingsBody{[]reading{{AssetID: a.assetID, Label: readingLabel, Value: 1.5,
			Start: s.Format(time.RFC3339), End: s.Add(time.Minute).Format(time.RFC3339)}}}
	}

	nextCallback, nextReading := 0, 0
	take := func(next *int, count int) []int {
		ks := make([]int, count)
		for i := range ks {
			ks[i] = *next
			*next++
		}
		return ks
	}
	callbackPart := func(ks []int) (timings, error) {
		return runConcurrent(ctx, len(ks), callbacksConcurrency, func(ctx context.Context, i int) error {
			var out struct {
				Changed bool `json:"changed"`
			}
			if err := o.api.call(ctx, "POST", paths[ks[i]], report, &out); err != nil {
				return err
			}
			if !out.Changed {
				return fmt.Errorf("the callback of dispatch %d changed nothing", ks[i])
			}
			return nil
		})
	}
	readingPart := func(ks []int) (timings, error) {
		return runConcurrent(ctx, len(ks), callbacksConcurrency, func(ctx context.Context, i int) error {
			var out struct {
				Responses []struct {
					Accepted bool `json:"accepted"`
				} `json:"responses"`
			}
			if err := o.api.call(ctx, "POST", "/data/readings", readings[ks[i]], &out); err != nil {
				return err
			}
			if len(out.Responses) != 1 || !out.Responses[0].Accepted {
				return fmt.Errorf("reading %d not accepted: %+v", ks[i], out)
			}
			return nil
		})
	}
	// Warm up both paths (connections, plans, the readings' partitions).
	if _, err := callbackPart(take(&nextCallback, warmUp)); err != nil {
		return err
	}
	if _, err := readingPart(take(&nextReading, warmUp)); err != nil {
		return err
	}
	var callbacks, reads timings
	for i := range parts {
		// A B B A: parts 0 and 3 of every four are callbacks, 1 and 2 readings.
		if i%4 == 0 || i%4 == 3 {
			t, err := callbackPart(take(&nextCallback, cp.perPart))
			if err != nil {
				return err
			}
			callbacks.merge(t)
		} else {
			t, err := readingPart(take(&nextReading, cp.perPart))
			if err != nil {
				return err
			}
			reads.merge(t)
		}
	}
	var executed int
	if err := b.db.QueryRow(ctx, `SELECT count(*) FROM dispatches WHERE organisation = $1 AND status = 'executed'`,
		callbacksNamespace).Scan(&executed); err != nil {
		return err
	}
	if executed != n {
		return fmt.Errorf("%d dispatches executed, want %d", executed, n)
	}
	callbackRate, readingRate := callbacks.rate(), reads.rate()
	rep.add(callbacksScenario, "callbacks_per_sec", callbackRate, unitPerSec)
	rep.add(callbacksScenario, "readings_requests_per_sec", readingRate, unitPerSec)
	rep.add(callbacksScenario, "callback_p50", callbacks.percentileMS(50), unitMS)
	rep.add(callbacksScenario, "callback_p99", callbacks.percentileMS(99), unitMS)
	rep.add(callbacksScenario, "readings_request_p50", reads.percentileMS(50), unitMS)
	rep.addTarget(callbacksScenario, "callbacks_vs_readings_requests_ratio", ratio(callbackRate, readingRate), unitRatio,
		target{">=", 0.7})
	rep.detail(callbacksScenario, map[string]any{"requests_per_side": len(callbacks.durations), "concurrency": callbacksConcurrency,
		"assets": len(assets), "rounds": cp.rounds, "readings_per_request": 1})
	return nil
}
