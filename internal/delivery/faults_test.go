package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// burst commits rounds credits to each of sites sites, one credit a transaction, round after
// round (the sites' transactions interleave), and answers each site's credits in order.
func burst(ctx context.Context, ns, prefix string, sites, rounds int) (map[string][]string, int) {
	want := map[string][]string{}
	for range rounds {
		for i := range sites {
			site := fmt.Sprintf("%s-%02d", prefix, i)
			want[site] = append(want[site], credit(ctx, ns, site, 1)...)
		}
	}
	return want, sites * rounds
}

// deliveryRows counts a subscription's delivery rows: all of them, those delivered, those
// delivered at their first recorded attempt, and those given up (polled: no assertion inside).
func deliveryRows(ctx context.Context, uid string) (all, delivered, firstAttempt, givenUp int, err error) {
	err = testDB.Pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'delivered'),
			count(*) FILTER (WHERE state = 'delivered' AND attempts = 1), count(*) FILTER (WHERE state = 'given_up')
		FROM notification_deliveries WHERE subscription_uid = $1`, uid).Scan(&all, &delivered, &firstAttempt, &givenUp)
	return all, delivered, firstAttempt, givenUp, err
}

var _ = Describe("Faults in the middle of a burst", func() {
	// A replica dies (its process killed) while it holds claims: what it posted has no
	// recorded outcome, so its leases run out and another replica delivers those events again,
	// with the same webhook-id; meanwhile no later event of those sites overtakes them.
	It("takes over a killed replica's claims once their lease ends: every event at least once, each site in order", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		// The first DefaultWorkers requests are held unanswered: all the doomed replica's workers.
		r.setAnswer(func(n int) int {
			if n < delivery.DefaultWorkers {
				return hold
			}
			return http.StatusNoContent
		})
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		uid := string(sub.UID)

		By("the suite's manager stopped: the replica to be killed will be the only deliverer at first")
		stopManager()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				startManager()
			}
		})
		want, total := burst(ctx, ns, "kill-site", 40, 5)

		By("the doomed replica: a manager of its own with a deliverer on a pool of its own")
		pool, err := db.Open(ctx, testDB.URL)
		Expect(err).NotTo(HaveOccurred())
		mgr, err := env.NewManager()
		Expect(err).NotTo(HaveOccurred())
		// Its lease outlasts the steps before its death, so that what it claimed is still its
		// own when it dies. It claims one delivery ahead of its workers: the other sites' heads
		// are left to the second replica (claimed ahead, they too would wait for its lease).
		const doomedLease = 10 * time.Second
		doomed := &delivery.Deliverer{Store: &outboxstore.Store{Pool: pool},
			Policy:  events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
			RootCAs: roots, Schedule: testSchedule, Interval: 100 * time.Millisecond, Lease: doomedLease, Lookahead: 1,
			SecretGrace: 3 * time.Second}
		Expect(doomed.SetupWithManager(ctx, mgr)).To(Succeed())
		doomedCtx, kill := context.WithCancel(suiteCtx)
		dead := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(dead)
			Expect(mgr.Start(doomedCtx)).To(Succeed())
		}()
		DeferCleanup(func() {
			kill()
			<-dead
			pool.Close()
		})

		By("it claims the first sites' heads and posts them: all its workers in flight, leased, no outcome")
		Eventually(func() int { return len(r.all()) }).Should(Equal(delivery.DefaultWorkers))
		heldIDs := make([]string, 0, delivery.DefaultWorkers)
		for _, g := range r.all() {
			heldIDs = append(heldIDs, g.ID)
		}
		// Each held delivery's own lease end: its claimers' statements overlap, so the leases end
		// a few milliseconds apart, and each is taken over when its own ends.
		var leasedIDs []string
		var leaseEnds []time.Time
		rows, err := testDB.Pool.Query(ctx, `SELECT o.event_id, d.claimed_until FROM notification_deliveries d
			JOIN outbox o ON o.id = d.event_seq
			WHERE d.subscription_uid = $1 AND o.event_id = ANY($2) AND d.state = 'pending' AND d.attempts = 0
				AND d.claimed_until > now()`, uid, heldIDs)
		Expect(err).NotTo(HaveOccurred())
		var leasedID string
		var leaseEnd time.Time
		_, err = pgx.ForEachRow(rows, []any{&leasedID, &leaseEnd}, func() error {
			leasedIDs, leaseEnds = append(leasedIDs, leasedID), append(leaseEnds, leaseEnd)
			return nil
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(leasedIDs).To(HaveLen(delivery.DefaultWorkers), "the posts in flight are leased, with no outcome recorded")

		By("a second replica (the suite's manager) delivers the rest of the burst beside it")
		startManager()
		restarted = true
		Eventually(func() int { return len(r.delivered()) }).Should(BeNumerically(">=", 40))
		Expect(pendingDeliveries(ctx, ns)).To(BeNumerically(">", 0), "mid-burst")

		By("the doomed replica killed: its posts cut, no outcome recorded")
		kill()
		<-dead
		pool.Close()
		Eventually(r.abandonedHeld).Should(Equal(delivery.DefaultWorkers), "its posts in flight were cut")

		By("every event arrives at least once, each site in order; the killed replica's events once its lease ended")
		for site, ids := range want {
			Eventually(func() []string { return squeezed(creditedIDs(r, site)) }).Should(Equal(ids), "site %s in order", site)
		}
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())
		delivered := map[string]bool{}
		for _, g := range r.delivered() {
			delivered[g.ID] = true
		}
		for _, id := range heldIDs {
			Expect(delivered).To(HaveKey(id), "a killed replica's event is delivered again with the same webhook-id")
		}
		var takenEarly int
		Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_deliveries d JOIN outbox o ON o.id = d.event_seq
			JOIN unnest($2::text[], $3::timestamptz[]) AS h(event_id, lease_end) ON h.event_id = o.event_id
			WHERE d.subscription_uid = $1 AND (d.state <> 'delivered' OR d.done_at < h.lease_end)`,
			uid, leasedIDs, leaseEnds).Scan(&takenEarly)).To(Succeed())
		Expect(takenEarly).To(BeZero(), "the killed replica's deliveries are taken over only once its leases end")
		By("the outbox's record: each event delivered, at its first recorded attempt (the killed replica recorded none)")
		all, done, first, givenUp, err := deliveryRows(ctx, uid)
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{all, done, first, givenUp}).To(Equal([]int{total, total, total, 0}))
	})

	// The receiver goes away mid-burst (its address refuses connections): the deliverers
	// record each failed attempt and retry with backoff, the waiting sites' later events stay
	// behind their heads, and once it is back everything arrives, in order.
	It("retries through a receiver down mid-burst, then delivers everything, each site in order, none lost", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		const downAt = 30
		r.setAnswer(func(n int) int {
			if n == downAt {
				return goDown
			}
			return http.StatusNoContent
		})
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		uid := string(sub.UID)
		want, total := burst(ctx, ns, "down-site", 20, 6)

		By("the receiver goes down mid-burst: its address refuses connections")
		Eventually(r.downNow).Should(BeTrue())
		_, err := net.DialTimeout("tcp", r.Listener.Addr().String(), time.Second)
		Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "dialling the receiver: %v", err)
		Expect(len(r.delivered())).To(BeNumerically("<", total), "mid-burst")

		By("the deliverers retry: failed attempts recorded, refused, every waiting site's head tried again and again")
		Eventually(func(g Gomega) {
			var sites, retried, refused int
			g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(DISTINCT site_id), count(*) FILTER (WHERE attempts >= 5)
				FROM notification_deliveries WHERE subscription_uid = $1 AND state = 'pending'`, uid).Scan(&sites, &retried)).To(Succeed())
			g.Expect(sites).To(BeNumerically(">", 0))
			g.Expect(retried).To(Equal(sites), "each waiting site's head failed 5 times, and nothing behind it was tried")
			g.Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_attempts WHERE subscription_uid = $1
				AND status_code IS NULL AND error = $2`, uid, events.DeliveryConnRefused).Scan(&refused)).To(Succeed())
			g.Expect(refused).To(BeNumerically(">=", 5))
		}).Should(Succeed())

		By("the receiver back on its address: everything arrives, each site in order")
		r.up()
		for site, ids := range want {
			Eventually(func() []string { return squeezed(creditedIDs(r, site)) }).Should(Equal(ids), "site %s in order", site)
		}
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())

		By("the outbox's record: every event delivered, none given up, the waiting heads after failed attempts")
		all, done, first, givenUp, err := deliveryRows(ctx, uid)
		Expect(err).NotTo(HaveOccurred())
		Expect([]int{all, done, givenUp}).To(Equal([]int{total, total, 0}))
		Expect(first).To(BeNumerically("<", total), "some were delivered after failed attempts")
		stats, err := (&outboxstore.Store{Pool: testDB.Pool}).StatsOf(ctx, uid)
		Expect(err).NotTo(HaveOccurred())
		Expect(stats.Delivered).To(BeEquivalentTo(total), "each event's delivery recorded once")
		Expect(stats.FailedAttempts).To(BeNumerically(">=", 5))
		Expect(stats.GivenUp).To(BeZero())
	})
})
