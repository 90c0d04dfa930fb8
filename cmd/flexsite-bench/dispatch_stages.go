package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Where a dispatch round's time goes, from the FlexEvent's creation (t0) to its last
// dispatch.requested at the receiver: the outbox's own timestamps (same machine, same clock)
// give issuance (the dispatches' events stamped, their transaction's commit seen by the bench
// as the status's count), the fan-out and the last outcome recorded; the deliverer's stage
// histograms, read before and after the round, give how many claims and record batches it
// took and what each step cost.

// dispatchStages is one round's breakdown, in ms from t0 unless said.
type dispatchStages struct {
	Round int `json:"round"`
	// EventsStampedMS: the dispatches' events' created_at (the issuing reconcile's clock).
	EventsStampedMS float64 `json:"events_stamped_ms"`
	// IssuedMS: the FlexEvent's status first counted every dispatch issued (polled every 20 ms).
	IssuedMS float64 `json:"issued_ms"`
	// FirstFannedOutMS and LastFannedOutMS: the first and last event given its delivery row.
	FirstFannedOutMS float64 `json:"first_fanned_out_ms"`
	LastFannedOutMS  float64 `json:"last_fanned_out_ms"`
	// FirstArrivalMS and LastArrivalMS: at the receiver.
	FirstArrivalMS float64 `json:"first_arrival_ms"`
	LastArrivalMS  float64 `json:"last_arrival_ms"`
	// LastRecordedMS: the last delivery's outcome committed.
	LastRecordedMS float64 `json:"last_recorded_ms"`
	// Claims and RecordBatches: the statements the round took (every subscription's).
	Claims        float64 `json:"claims"`
	RecordBatches float64 `json:"record_batches"`
	// Steps: the deliverer's stage histograms' p50 and p99 in ms, by stage.
	Steps map[string][2]float64 `json:"steps_p50_p99_ms"`
}

// dispatchSteps are the deliverer's stages reported per round.
var dispatchSteps = []string{stepClaim, "worker_wait", "sign", "post", stepRecord}

// The steps counted as well as timed: each is observed once per statement.
const (
	stepClaim  = "claim"
	stepRecord = "record"
)

// measureDispatchStages reads the outbox's timestamps of market's dispatch.requested events
// and the stage histograms' difference (before: read just before t0).
func (b *bench) measureDispatchStages(ctx context.Context, round int, market string, t0 time.Time, issued time.Duration,
	arrivals []time.Time, before stageBuckets) (dispatchStages, error) {
	st := dispatchStages{Round: round, IssuedMS: ms(issued), Steps: map[string][2]float64{}}
	var stamped, firstFanned, lastFanned, lastDone time.Time
	if err := b.db.QueryRow(ctx, `SELECT min(o.created_at), min(o.fanned_out_at), max(o.fanned_out_at), max(d.done_at)
		FROM outbox o JOIN notification_deliveries d ON d.event_seq = o.id
		WHERE o.event_type = $1 AND o.payload->>'market_id' = $2`,
		string(flexv1.EventDispatchRequested), market).Scan(&stamped, &firstFanned, &lastFanned, &lastDone); err != nil {
		return st, fmt.Errorf("reading the round's outbox timestamps: %w", err)
	}
	st.EventsStampedMS, st.FirstFannedOutMS = ms(stamped.Sub(t0)), ms(firstFanned.Sub(t0))
	st.LastFannedOutMS, st.LastRecordedMS = ms(lastFanned.Sub(t0)), ms(lastDone.Sub(t0))
	if len(arrivals) > 0 {
		st.FirstArrivalMS = ms(slices.MinFunc(arrivals, time.Time.Compare).Sub(t0))
		st.LastArrivalMS = ms(slices.MaxFunc(arrivals, time.Time.Compare).Sub(t0))
	}
	after, _, err := b.stageSnapshot(ctx)
	if err != nil {
		return st, err
	}
	for _, s := range dispatchSteps {
		p50, n := after.quantile(before, s, 0.50)
		p99, _ := after.quantile(before, s, 0.99)
		st.Steps[s] = [2]float64{ms(p50), ms(p99)}
		switch s {
		case stepClaim:
			st.Claims = n
		case stepRecord:
			st.RecordBatches = n
		}
	}
	return st, nil
}

func (st dispatchStages) String() string {
	steps := make([]string, 0, len(dispatchSteps))
	for _, s := range dispatchSteps {
		steps = append(steps, fmt.Sprintf("%s %.1f/%.1f", s, st.Steps[s][0], st.Steps[s][1]))
	}
	return fmt.Sprintf("round %d: events stamped %.0f ms, issued (status) %.0f, fanned out %.0f..%.0f, "+
		"arrived %.0f..%.0f, last recorded %.0f; %.0f claims, %.0f record batches; steps p50/p99 ms: %s",
		st.Round, st.EventsStampedMS, st.IssuedMS, st.FirstFannedOutMS, st.LastFannedOutMS, st.FirstArrivalMS,
		st.LastArrivalMS, st.LastRecordedMS, st.Claims, st.RecordBatches, strings.Join(steps, ", "))
}
