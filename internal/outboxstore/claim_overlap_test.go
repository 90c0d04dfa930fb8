package outboxstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// TestAnOutcomeWaitsForNoOtherClaim: two claims of one subscription at once (the claimers of a
// replica, or of two replicas) never make an outcome wait for a claim that did not take its
// delivery. Claim B is held (a trigger of this test's, on leasing site a's row, then site c's)
// while claim A runs: when A claimed on a snapshot of its own, B, resumed on its older
// snapshot, found A's row claimed only after locking it, and held that lock to its end: A's
// outcome waited for B. Every delivery is claimed once, and every outcome settles its row.
func TestAnOutcomeWaitsForNoOtherClaim(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	g.Expect(store.Add(ctx, o, stamp(change("a", events.EnrolmentActive), change("b", events.EnrolmentActive),
		change("c", events.EnrolmentActive), change("d", events.EnrolmentActive)))).To(Succeed())
	g.Expect(fanOut(t, o, sub)).To(BeNumerically(">=", 4))

	// Gates: advisory locks (class 7150, keys 1 and 2) this test's connection holds; the trigger
	// waits for them when a claim leases the subscription's row of site a (1) or c (2).
	gate, err := testDB.Pool.Acquire(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	defer gate.Release()
	_, err = gate.Exec(ctx, `SELECT pg_advisory_lock(7150, 1), pg_advisory_lock(7150, 2)`)
	g.Expect(err).NotTo(HaveOccurred())
	unlock := func(key int) {
		_, err := gate.Exec(ctx, `SELECT pg_advisory_unlock(7150, $1)`, key)
		g.Expect(err).NotTo(HaveOccurred())
	}
	fn := "claim_gate_" + strings.ReplaceAll(sub, "-", "_")
	_, err = testDB.Pool.Exec(ctx, fmt.Sprintf(`CREATE FUNCTION %[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF NEW.subscription_uid = '%[2]s' AND OLD.claimed_until IS NULL AND NEW.claimed_until IS NOT NULL THEN
				IF NEW.site_id = 'a' THEN PERFORM pg_advisory_lock_shared(7150, 1); PERFORM pg_advisory_unlock_shared(7150, 1); END IF;
				IF NEW.site_id = 'c' THEN PERFORM pg_advisory_lock_shared(7150, 2); PERFORM pg_advisory_unlock_shared(7150, 2); END IF;
			END IF;
			RETURN NEW;
		END $$;
		CREATE TRIGGER %[1]s BEFORE UPDATE ON notification_deliveries FOR EACH ROW EXECUTE FUNCTION %[1]s()`, fn, sub))
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		_, _ = gate.Exec(ctx, `SELECT pg_advisory_unlock_all()`)
		_, _ = testDB.Pool.Exec(ctx, fmt.Sprintf(`DROP TRIGGER %[1]s ON notification_deliveries; DROP FUNCTION %[1]s()`, fn))
	}()
	// gateWaiters is polled: a failed read fails the poll (and is tried again), not the test.
	gateWaiters := func(g Gomega, key int) int {
		var n int
		g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted
			AND classid = 7150 AND objid = $1`, key).Scan(&n)).To(Succeed())
		return n
	}
	type claimed struct {
		ds  []outboxstore.Delivery
		err error
	}
	claim := func(n int) chan claimed {
		ch := make(chan claimed, 1)
		go func() {
			ds, err := store.Claim(ctx, sub, n, time.Minute)
			ch <- claimed{ds, err}
		}()
		return ch
	}

	// B leases a's row and waits at the first gate.
	b := claim(3)
	g.Eventually(func(g Gomega) int { return gateWaiters(g, 1) }).Should(Equal(1))
	// A runs meanwhile: it claims (or waits for B, taking its turn).
	a := claim(1)
	var fromA *claimed
	g.Eventually(func(g Gomega) {
		select {
		case r := <-a:
			fromA = &r
			return
		default:
		}
		var waiting int
		g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND wait_event_type = 'Lock'`).Scan(&waiting)).To(Succeed())
		g.Expect(waiting).To(BeNumerically(">=", 2), "A neither done nor waiting")
	}).Should(Succeed())
	// B goes on, and waits at the second gate on leasing c's row.
	unlock(1)
	g.Eventually(func(g Gomega) int { return gateWaiters(g, 2) }).Should(Equal(1))

	// Whatever A claimed is recorded while B is still running.
	record := func(ds []outboxstore.Delivery) {
		rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		batch := make([]outboxstore.Settled, len(ds))
		for i, d := range ds {
			batch[i] = outboxstore.Settled{Delivery: d, Outcome: outboxstore.Outcome{Result: outboxstore.Delivered,
				At: time.Now(), StatusCode: 204}}
		}
		g.Expect(store.RecordAll(rctx, batch)).To(Succeed(), "an outcome waited for another claim")
	}
	if fromA != nil {
		g.Expect(fromA.err).NotTo(HaveOccurred())
		record(fromA.ds)
	}
	unlock(2)
	fromB := <-b
	g.Expect(fromB.err).NotTo(HaveOccurred())
	if fromA == nil {
		r := <-a
		fromA = &r
		g.Expect(fromA.err).NotTo(HaveOccurred())
		record(fromA.ds)
	}
	record(fromB.ds)

	seen := map[int64]bool{}
	for _, d := range append(fromA.ds, fromB.ds...) {
		g.Expect(seen[d.Seq]).To(BeFalse(), "claimed twice: %s", d.Event.SiteID)
		seen[d.Seq] = true
	}
	var settled int
	g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_deliveries WHERE subscription_uid = $1
		AND state = 'delivered'`, sub).Scan(&settled)).To(Succeed())
	g.Expect(settled).To(Equal(len(seen)), "every outcome settles its row")
}
