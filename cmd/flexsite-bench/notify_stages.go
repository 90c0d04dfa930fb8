package main

import (
	"context"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/flexsite/flexsite/internal/probe"
)

// Where a notification's change -> delivery goes (issue 39): the bench splits it in two by
// the event's own timestamp, which the receiver reads from the body (the time the Site
// controller recorded the event, microseconds): change -> event recorded (the controller's
// side: convergence) and event recorded -> the receiver (the outbox's side). The manager's
// histograms (internal/metrics, flexsite_notification_stage_seconds), read before and after
// the healthy receiver's phase, split the outbox's side into its stages.

const stageMetric = "flexsite_notification_stage_seconds"

// notifyStages are the stages reported, in the order a delivery passes them.
var notifyStages = []string{"fanned_out", "claimed", "worker_wait", "sign", "post", stepRecord, "delivered"}

// stageBuckets is one snapshot of the stage histograms: stage -> upper bound -> cumulative count.
type stageBuckets map[string]map[float64]float64

// connCounts are the deliverer's connections so far, by whether they were reused.
type connCounts struct{ reused, fresh float64 }

func (b *bench) stageSnapshot(ctx context.Context) (stageBuckets, connCounts, error) {
	samples, err := probe.Fetch(ctx, probeClient, b.mgr.metricsURL, stageMetric+"_bucket", "flexsite_notification_connections_total")
	if err != nil {
		return nil, connCounts{}, err
	}
	out := stageBuckets{}
	var conns connCounts
	for _, s := range samples {
		if s.Name == "flexsite_notification_connections_total" {
			if s.Labels["reused"] == "true" {
				conns.reused += s.Value
			} else {
				conns.fresh += s.Value
			}
			continue
		}
		le, err := strconv.ParseFloat(s.Labels["le"], 64)
		if err != nil {
			continue // +Inf parses; anything else is not ours
		}
		st := s.Labels["stage"]
		if out[st] == nil {
			out[st] = map[float64]float64{}
		}
		out[st][le] = s.Value
	}
	return out, conns, nil
}

// quantile estimates the q-quantile (0..1) of what a stage observed between before and after,
// interpolating linearly within the bucket (as Prometheus's histogram_quantile). NaN when
// nothing was observed.
func (after stageBuckets) quantile(before stageBuckets, stage string, q float64) (time.Duration, float64) {
	a, bf := after[stage], before[stage]
	bounds := make([]float64, 0, len(a))
	for le := range a {
		bounds = append(bounds, le)
	}
	slices.Sort(bounds)
	total := 0.0
	if len(bounds) > 0 {
		total = a[bounds[len(bounds)-1]] - bf[bounds[len(bounds)-1]]
	}
	if total <= 0 {
		return 0, 0
	}
	rank, lower, prev := q*total, 0.0, 0.0
	for _, le := range bounds {
		n := a[le] - bf[le]
		if n >= rank {
			if math.IsInf(le, 1) {
				return time.Duration(lower * float64(time.Second)), total
			}
			frac := 0.0
			if n > prev {
				frac = (rank - prev) / (n - prev)
			}
			return time.Duration((lower + (le-lower)*frac) * float64(time.Second)), total
		}
		lower, prev = le, n
	}
	return time.Duration(lower * float64(time.Second)), total
}

// reportNotifyStages adds the breakdown of the healthy receiver's phase alone.
func reportNotifyStages(rep *report, ph notifyPhase) {
	recorded50, recorded99 := ms(percentile(ph.recorded, 50)), ms(percentile(ph.recorded, 99))
	outbox50, outbox99 := ms(percentile(ph.outbox, 50)), ms(percentile(ph.outbox, 99))
	rep.add("notifications", "change_to_event_recorded_p50_ms", recorded50, unitMS)
	rep.add("notifications", "change_to_event_recorded_p99_ms", recorded99, unitMS)
	rep.add("notifications", "event_recorded_to_receiver_p50_ms", outbox50, unitMS)
	rep.add("notifications", "event_recorded_to_receiver_p99_ms", outbox99, unitMS)
	line := ""
	for _, st := range notifyStages {
		p50, n := ph.stagesAfter.quantile(ph.stagesBefore, st, 0.50)
		p99, _ := ph.stagesAfter.quantile(ph.stagesBefore, st, 0.99)
		if n == 0 {
			continue
		}
		rep.add("notifications", "stage_"+st+"_p50_ms", ms(p50), unitMS)
		rep.add("notifications", "stage_"+st+"_p99_ms", ms(p99), unitMS)
		line += " " + st + " " + strconv.FormatFloat(ms(p50), 'f', 1, 64) + "/" + strconv.FormatFloat(ms(p99), 'f', 1, 64)
	}
	conns := ph.connsAfter
	conns.fresh -= ph.connsBefore.fresh
	conns.reused -= ph.connsBefore.reused
	rep.add("notifications", "posts_on_new_connections", conns.fresh, unitCount)
	rep.add("notifications", "posts_on_reused_connections", conns.reused, unitCount)
	logf("notifications, healthy alone: change -> event recorded p50/p99 %.1f/%.1f ms; event recorded -> receiver %.1f/%.1f ms; "+
		"deliverer stages p50/p99 ms (histogram estimates):%s; connections new %.0f, reused %.0f",
		recorded50, recorded99, outbox50, outbox99, line, conns.fresh, conns.reused)
}
