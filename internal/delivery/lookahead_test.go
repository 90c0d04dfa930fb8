package delivery_test

import (
	"context"
	"net/http"
	"net/netip"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

var _ = Describe("Claiming ahead of the workers", func() {
	// A subscription claims more of its due deliveries than it has workers (each its site's
	// head), queued for the next free worker. One that waits in the queue until its lease runs
	// short is never posted by that replica: once its lease ends another replica claims and
	// delivers it, then its site's next event; posting the stale copy after them would break
	// the site's order.
	It("claims sites' heads beyond its busy workers, and never posts one whose lease ran short in its queue", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		// The first DefaultWorkers requests are held: every worker of the first replica busy.
		r.setAnswer(func(n int) int {
			if n < delivery.DefaultWorkers {
				return hold
			}
			return http.StatusNoContent
		})
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		uid := string(sub.UID)

		By("the suite's manager stopped: the first replica will be the only deliverer at first")
		stopManager()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				startManager()
			}
		})
		const sites = 40
		want, total := burst(ctx, ns, "ahead-site", sites, 2)

		By("the first replica: its workers and a lookahead that together take every site's head")
		pool, err := db.Open(ctx, testDB.URL)
		Expect(err).NotTo(HaveOccurred())
		mgr, err := env.NewManager()
		Expect(err).NotTo(HaveOccurred())
		first := &delivery.Deliverer{Store: &outboxstore.Store{Pool: pool},
			Policy:  events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			RootCAs: roots, Schedule: testSchedule, Interval: 100 * time.Millisecond, Lease: testLease,
			Lookahead: sites - delivery.DefaultWorkers, SecretGrace: 3 * time.Second}
		Expect(first.SetupWithManager(ctx, mgr)).To(Succeed())
		firstCtx, stopFirst := context.WithCancel(suiteCtx)
		stopped := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			Expect(mgr.Start(firstCtx)).To(Succeed())
		}()
		DeferCleanup(func() {
			stopFirst()
			<-stopped
			pool.Close()
		})

		By("its workers post the first heads and are held; every site's head is claimed, the rest queued behind them")
		Eventually(func() int { return len(r.all()) }).Should(Equal(delivery.DefaultWorkers))
		Eventually(func(g Gomega) {
			var claimed, heads int
			g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE d.claimed_until IS NOT NULL),
					count(*) FILTER (WHERE d.claimed_until IS NOT NULL AND o.payload->>'transaction_id' <> ALL($2))
				FROM notification_deliveries d JOIN outbox o ON o.id = d.event_seq
				WHERE d.subscription_uid = $1 AND d.state = 'pending'`, uid, secondIDs(want)).Scan(&claimed, &heads)).To(Succeed())
			g.Expect(claimed).To(Equal(sites), "the workers' heads and the lookahead's")
			g.Expect(heads).To(Equal(sites), "only heads: no site's second event is claimed before its first is delivered")
		}).Should(Succeed())
		Expect(r.all()).To(HaveLen(delivery.DefaultWorkers), "the queued ones wait for a worker")

		By("their leases end while the workers are held")
		Eventually(func() (int, error) {
			var n int
			err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_deliveries WHERE subscription_uid = $1
				AND claimed_until > now()`, uid).Scan(&n)
			return n, err
		}).Should(BeZero())

		By("a second replica (the suite's manager) claims them again and delivers every event, each site in order")
		startManager()
		restarted = true
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())
		for site, ids := range want {
			Expect(squeezed(creditedIDs(r, site))).To(Equal(ids), "site %s in order", site)
		}

		By("the first replica's workers released: its queued deliveries, their leases gone, are dropped, not posted")
		r.release()
		Eventually(func() int { return first.Unposted(sub.UID) }).Should(BeZero(), "the first replica has posted or dropped all it claimed")
		for site, ids := range want {
			Expect(squeezed(creditedIDs(r, site))).To(Equal(ids), "site %s still in order", site)
		}
		Expect(r.all()).To(HaveLen(delivery.DefaultWorkers+total), "the held posts, then each event once by the second replica")
		Expect(first.Expired(sub.UID)).To(Equal(sites-delivery.DefaultWorkers), "the queued ones dropped")
	})
})

// secondIDs are the credits after each site's first.
func secondIDs(want map[string][]string) []string {
	var out []string
	for _, ids := range want {
		out = append(out, ids[1:]...)
	}
	return out
}
