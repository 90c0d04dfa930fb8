package outboxstore_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// burst is how many sites' events the benchmarks' subscription has pending: a flex event's
// dispatch.requested at full scale.
const burst = 10000

// seedBurst writes an event for each of burst sites, fanned out to one new subscription.
func seedBurst(b *testing.B) (sub string) {
	b.Helper()
	ctx := context.Background()
	o := org()
	sub = uuid.NewString()
	evs := make([]events.Event, burst)
	for i := range evs {
		evs[i] = events.Stamp(change(fmt.Sprintf("site-%05d", i), events.EnrolmentActive), time.Now().Add(-time.Minute))
	}
	if err := store.Add(ctx, o, evs); err != nil {
		b.Fatal(err)
	}
	for {
		m, err := store.FanOut(ctx, 1000, func(u outboxstore.Unfanned) ([]string, bool) {
			if u.Organisation != o {
				return nil, true
			}
			return []string{sub}, true
		})
		if err != nil {
			b.Fatal(err)
		}
		if m < 1000 {
			return sub
		}
	}
}

// BenchmarkClaim: one claim of 8 from a subscription with 10,000 pending deliveries (a burst
// to one subscription); the claims are released so that every claim sees the whole backlog.
func BenchmarkClaim(b *testing.B) {
	sub := seedBurst(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		ds, err := store.Claim(ctx, sub, 8, 0)
		if err != nil || len(ds) != 8 {
			b.Fatalf("claimed %d, %v", len(ds), err)
		}
	}
}

// BenchmarkRecord: one delivered outcome recorded (per op), the subscription's backlog 10,000.
func BenchmarkRecord(b *testing.B) {
	sub := seedBurst(b)
	ctx := context.Background()
	ds, err := store.Claim(ctx, sub, b.N, time.Hour)
	if err != nil || len(ds) < min(b.N, burst) {
		b.Fatalf("claimed %d, %v", len(ds), err)
	}
	b.ResetTimer()
	for i := range b.N {
		d := ds[i%len(ds)]
		if err := store.Record(ctx, d, outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDue: which subscriptions have a delivery due, one of them with 10,000 pending.
func BenchmarkDue(b *testing.B) {
	sub := seedBurst(b)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		if due, _, err := store.Due(ctx, []string{sub}); err != nil || len(due) != 1 {
			b.Fatalf("due %v, %v", due, err)
		}
	}
}

// BenchmarkRecordAll: 16 delivered outcomes recorded at once (per op), the subscription's
// backlog 10,000: compare with 16 × BenchmarkRecord.
func BenchmarkRecordAll(b *testing.B) {
	sub := seedBurst(b)
	ctx := context.Background()
	ds, err := store.Claim(ctx, sub, 16*b.N, time.Hour)
	if err != nil || len(ds) < min(16*b.N, burst) {
		b.Fatalf("claimed %d, %v", len(ds), err)
	}
	b.ResetTimer()
	for i := range b.N {
		batch := make([]outboxstore.Settled, 16)
		for j := range batch {
			batch[j] = outboxstore.Settled{Delivery: ds[(16*i+j)%len(ds)],
				Outcome: outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}}
		}
		if err := store.RecordAll(ctx, batch); err != nil {
			b.Fatal(err)
		}
	}
}
