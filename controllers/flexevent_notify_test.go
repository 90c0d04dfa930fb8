package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// The running manager's FlexEvent controller hears of every dispatch change through
// PostgreSQL's NOTIFY: nothing about the object changes, and the event is not due to be
// looked at again for hours, yet its counts follow within moments.
var _ = Describe("A flex event's dispatch counts", func() {
	It("follow each change in the database, with no change of the event", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		start := time.Now().UTC().Truncate(30 * time.Minute).Add(3 * time.Hour)
		ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "notified"},
			Spec: flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
				EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25",
				SiteNames: []string{"no-such-site"}}}
		create(ctx, ev)
		Eventually(func(g Gomega) {
			g.Expect(fetched(ctx, ev)(g).Status.Dispatches).NotTo(BeNil())
			g.Expect(ev.Status.Dispatches.IssuedAt).NotTo(BeNil())
		}).Should(Succeed())
		Expect(ev.Status.Dispatches.Summary).To(Equal("none asked"))
		generation := ev.Generation

		By("a dispatch issued in the database (as another replica would)")
		store := &dispatchstore.Store{Pool: suiteDB.Pool}
		now := time.Now()
		_, err := store.Issue(ctx, ns, "https://flexsite.test", []dispatchstore.Dispatch{{FlexEvent: ev.Name, SiteID: "site-1",
			AssetID: "asset-1", MarketID: "limited_pause", From: start, To: start.Add(time.Hour), EventTimestamp: now}}, nil, now)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) int32 { return fetched(ctx, ev)(g).Status.Dispatches.Issued }).Should(BeEquivalentTo(1))

		By("the asset controller reporting EXECUTED (once the window has started)")
		_, err = store.Record(ctx, ns, dispatchstore.Report{AssetID: "asset-1", EventID: dispatch.EventID(ns, ev.Name, "asset-1"),
			Status: dispatch.Executed, At: start, By: "test"}, start)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) string { return fetched(ctx, ev)(g).Status.Dispatches.Summary }).Should(Equal("1 asked: 1 executed"))
		Expect(ev.Status.Dispatches.Executed).To(BeEquivalentTo(1))
		Expect(ev.Generation).To(Equal(generation))
	})
})
