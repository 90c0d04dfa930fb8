package delivery_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// heldAge is the deliverers' measure of how long committed events have waited for the horizon.
func heldAge() float64 { return testutil.ToFloat64(metrics.NotificationHorizonHeldAge) }

// unfanned counts an organisation's events not yet fanned out (polled: no assertion inside).
func unfanned(ctx context.Context, ns string) (int, error) {
	var n int
	err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE organisation = $1 AND fanned_out_at IS NULL`,
		ns).Scan(&n)
	return n, err
}

// squeezed is ids with each run of one id delivered again (at least once) counted once.
func squeezed(ids []string) []string { return slices.Compact(slices.Clone(ids)) }

var _ = Describe("Delivery in commit order (the horizon)", func() {
	// A site's events written by different transactions go out in the order their writers
	// began writing, whichever commits first, and nothing waits on a timer: a transaction that
	// stays open holds back every event written after it began (anywhere), the deliverers
	// measure it, and once it commits everything follows, in order.
	It("holds every later event back while an earlier writer's transaction is open, shows it, then catches up in order", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		Eventually(heldAge).Should(BeZero())

		By("a writer begins: its credit of site-0 is written first, and its transaction stays open")
		holder, err := testDB.Pool.Begin(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = holder.Rollback(context.Background()) })
		first := uuid.NewString()
		id, data, err := rewardstore.CreditEvent(rewardstore.Site{Namespace: ns, ID: "site-0"},
			flexv1.RewardTransaction{ID: first, Type: "goodwill credit", CreditPence: 1, SettlementDate: "2026-11-01"})
		Expect(err).NotTo(HaveOccurred())
		_, err = holder.Exec(ctx, `INSERT INTO outbox (organisation, site_id, event_type, event_id, payload)
			VALUES ($1, 'site-0', $2, $3, $4)`, ns, string(flexv1.EventRewardsTransactionCredited), id, data)
		Expect(err).NotTo(HaveOccurred())

		By("a burst beside it, each credit committed at once: to site-0 and three other sites")
		want := map[string][]string{"site-0": {first}}
		for range 5 {
			for i := range 4 {
				site := fmt.Sprintf("site-%d", i)
				want[site] = append(want[site], credit(ctx, ns, site, 1)...)
			}
		}

		By("held back: the deliverers measure the wait growing, fan out none of it, and deliver nothing")
		Eventually(heldAge).Should(BeNumerically(">=", 2), "the horizon's age, seconds")
		Expect(unfanned(ctx, ns)).To(Equal(20), "the burst waits in the outbox")
		Expect(r.delivered()).To(BeEmpty())

		By("the writer commits: everything is delivered, each site in the order written, the holder's first")
		Expect(holder.Commit(ctx)).To(Succeed())
		for site, ids := range want {
			Eventually(func() []string { return creditedIDs(r, site) }).Should(Equal(ids), "site %s in order", site)
		}
		Eventually(heldAge).Should(BeZero())
	})

	It("delivers a burst once or more, in order per site, across a PostgreSQL restart in the middle of it", func(ctx SpecContext) {
		if !testDB.CanStop() {
			Skip("the test database's server is not this process's: it cannot be restarted")
		}
		ns := newNamespace(ctx)
		r := newReceiver()
		// Requests 10 to 12 are held unanswered: each is a different site's head (a site's next
		// is never claimed before its head's outcome), so every site is mid-burst.
		r.setAnswer(func(n int) int {
			if n >= 10 && n <= 12 {
				return hold
			}
			return http.StatusNoContent
		})
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		want := map[string][]string{}
		for i := range 3 {
			site := fmt.Sprintf("restart-site-%d", i)
			want[site] = credit(ctx, ns, site, 20)
		}
		Eventually(func() int { return len(r.all()) }).Should(BeNumerically(">=", 13))

		By("PostgreSQL goes away mid-burst, with three posts in flight")
		Expect(testDB.Stop()).To(Succeed())
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				Expect(testDB.Start(context.Background())).To(Succeed())
			}
		})
		Expect(testDB.Pool.Ping(ctx)).NotTo(Succeed(), "the database is down")
		r.release() // their outcomes cannot be recorded

		By("PostgreSQL back: every event delivered at least once, each site in order")
		Expect(testDB.Start(ctx)).To(Succeed())
		restarted = true
		for site, ids := range want {
			Eventually(func() []string { return squeezed(creditedIDs(r, site)) }).Should(Equal(ids), "site %s in order", site)
		}
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())
	})
})
