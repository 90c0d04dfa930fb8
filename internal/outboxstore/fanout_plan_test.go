package outboxstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	NodeType  string     `json:"Node Type"`
	IndexName string     `json:"Index Name"`
	HitBlocks int        `json:"Shared Hit Blocks"`
	ReadBlock int        `json:"Shared Read Blocks"`
	Plans     []planNode `json:"Plans"`
}

func (n planNode) walk(f func(planNode)) {
	f(n)
	for _, c := range n.Plans {
		c.walk(f)
	}
}

// The fan-out's scan after many events were fanned out (a fleet's credits, which nobody
// subscribes to): each mark left a dead row version that VACUUM has not removed yet. The scan
// takes the oldest events to fan out through the index in their order, and stops: it does not
// visit the dead versions through a bitmap scan (which grew with every event fanned out and
// took 0.3 to 0.9 s a pass at 520,000 events: issue 39).
func TestFanOutScanSkipsWhatWasFannedOut(t *testing.T) {
	ctx := context.Background()
	// No VACUUM during the test: the dead versions stay, as between two autovacuums.
	if _, err := testDB.Pool.Exec(ctx, `ALTER TABLE outbox SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = testDB.Pool.Exec(ctx, `ALTER TABLE outbox RESET (autovacuum_enabled)`) })
	const fanned = 20000
	o := org()
	evs := make([]events.Event, fanned)
	for i := range evs {
		evs[i] = events.Stamp(change(fmt.Sprintf("site-%05d", i%5000), events.EnrolmentActive), time.Now().Add(-time.Hour))
	}
	if err := store.Add(ctx, o, evs); err != nil {
		t.Fatal(err)
	}
	// Fanned out to nobody, 500 at a time, as the deliverer does.
	for {
		n, err := store.FanOut(ctx, 500, func(outboxstore.Unfanned) ([]string, bool) { return nil, true })
		if err != nil {
			t.Fatal(err)
		}
		if n < 500 {
			break
		}
	}
	if err := store.Add(ctx, o, stamp(change("site-new", events.EnrolmentActive))); err != nil {
		t.Fatal(err)
	}
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := pgx.BeginFunc(ctx, testDB.Pool, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, outboxstore.FanOutPlan); err != nil {
			return err
		}
		var out []byte
		if err := q.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+outboxstore.FanOutScan, 500).Scan(&out); err != nil {
			return err
		}
		return json.Unmarshal(out, &plan)
	}); err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 {
		t.Fatalf("plan: %+v", plan)
	}
	top := plan[0].Plan
	blocks, ordered := top.HitBlocks+top.ReadBlock, false
	top.walk(func(n planNode) {
		switch n.NodeType {
		case "Bitmap Heap Scan", "Bitmap Index Scan", "Sort", "Seq Scan":
			t.Errorf("the fan-out's scan has a %s: it visits what was fanned out already", n.NodeType)
		case "Index Scan":
			ordered = n.IndexName == "outbox_fan_out_order"
		}
	})
	if !ordered {
		t.Errorf("the fan-out's scan does not use the index in its order (outbox_fan_out_order): %+v", top)
	}
	// Dead entries it passes cost no visit of the table once marked: far fewer blocks than
	// the 20,000 dead versions' (560 blocks through the bitmap scan before migration 00023, 59 after).
	if blocks > 200 {
		t.Errorf("the fan-out's scan touched %d blocks to find one event after %d were fanned out", blocks, fanned)
	}
}

// A pass asks which subscriptions have a delivery due: with 10,000 pending for one
// subscription (a flex event's burst), the answer costs what the first claimable delivery and
// one probe for the next retry cost, not a scan of every pending row (Due grouped them all by
// subscription, once a pass: issue 50).
func TestDueDoesNotScanEveryPendingDelivery(t *testing.T) {
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	evs := make([]events.Event, 10000)
	for i := range evs {
		evs[i] = events.Stamp(change(fmt.Sprintf("site-%05d", i), events.EnrolmentActive), time.Now().Add(-time.Minute))
	}
	if err := store.Add(ctx, o, evs); err != nil {
		t.Fatal(err)
	}
	if fanned := fanOut(t, o, sub); fanned < len(evs) {
		t.Fatalf("fanned out %d", fanned)
	}
	if _, err := testDB.Pool.Exec(ctx, `ANALYZE notification_deliveries`); err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := testDB.Pool.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) `+outboxstore.DueScan, []string{sub}).Scan(&out); err != nil {
		t.Fatal(err)
	}
	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("plan: %s, %v", out, err)
	}
	top := plan[0].Plan
	top.walk(func(n planNode) {
		switch n.NodeType {
		case "Aggregate", "Sort", "Seq Scan", "Bitmap Heap Scan":
			t.Errorf("Due's plan has a %s: it visits every pending delivery: %s", n.NodeType, out)
		}
	})
	if blocks := top.HitBlocks + top.ReadBlock; blocks > 100 {
		t.Errorf("Due touched %d blocks with 10,000 deliveries pending", blocks)
	}
	if due, _, err := store.Due(ctx, []string{sub}); err != nil || len(due) != 1 {
		t.Errorf("due %v, %v", due, err)
	}
}
