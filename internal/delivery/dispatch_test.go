package delivery_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

var _ = Describe("Dispatches' deliveries written by their issuer", func() {
	// The FlexEvent controller writes a burst's delivery rows in the issuing transaction, for
	// the subscriptions the deliverer names (SubscribersOf, the fan-out's rule), and the
	// deliverer's claimers are woken when it commits (Committed): when Issue returns, the rows
	// are there for the subscription that takes dispatch.requested and for no other, and
	// every dispatch reaches its receiver once.
	It("names the subscriptions owed the dispatches, and delivers what the issuer wrote", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		wants, other := newReceiver(), newReceiver()
		sub := subscribe(ctx, ns, wants, flexv1.EventDispatchRequested)
		ready(ctx, sub)
		otherSub := subscribe(ctx, ns, other, flexv1.EventRewardsTransactionCredited)
		ready(ctx, otherSub)

		d := deliverer.Load()
		Eventually(func(g Gomega) {
			uids, ok := d.SubscribersOf(ctx, ns, flexv1.EventDispatchRequested)
			g.Expect(ok).To(BeTrue())
			g.Expect(uids).To(ConsistOf(string(sub.UID)))
		}).Should(Succeed())

		const n = 100
		start := time.Now().UTC().Truncate(time.Second).Add(2 * time.Hour)
		ds := make([]dispatchstore.Dispatch, n)
		for i := range ds {
			ds[i] = dispatchstore.Dispatch{FlexEvent: "burst", SiteID: fmt.Sprintf("site-%03d", i),
				AssetID: fmt.Sprintf("asset-%03d", i), MarketID: "limited_pause", From: start, To: start.Add(time.Hour),
				EventTimestamp: time.Now()}
		}
		store := &dispatchstore.Store{Pool: testDB.Pool, Subscribers: d}
		issued, err := store.Issue(ctx, ns, "https://flexsite.example", ds, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(issued).To(Equal(n))

		var mine, others, unfanned int
		Expect(testDB.Pool.QueryRow(ctx, `SELECT
				(SELECT count(*) FROM notification_deliveries WHERE organisation = $1 AND subscription_uid = $2),
				(SELECT count(*) FROM notification_deliveries WHERE organisation = $1 AND subscription_uid <> $2),
				(SELECT count(*) FROM outbox WHERE organisation = $1 AND fanned_out_at IS NULL)`,
			ns, string(sub.UID)).Scan(&mine, &others, &unfanned)).To(Succeed())
		Expect(mine).To(Equal(n), "the subscription's delivery rows, committed with the dispatches")
		Expect(others).To(BeZero(), "rows for a subscription that does not take dispatch.requested")
		Expect(unfanned).To(BeZero(), "events left to the fan-out")

		Eventually(func(g Gomega) { deliveredOnce(ctx, g, ns, n) }).Should(Succeed())
		got := wants.delivered()
		Expect(got).To(HaveLen(n))
		seen := map[string]bool{}
		for _, g := range got {
			Expect(g.Verified).To(BeTrue())
			Expect(g.Type).To(Equal(string(flexv1.EventDispatchRequested)))
			seen[g.ID] = true
		}
		Expect(seen).To(HaveLen(n), "each dispatch once")
		Expect(other.all()).To(BeEmpty())
	})
})
