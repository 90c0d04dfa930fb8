package delivery_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

const lp = flexv1.PropositionLimitedPause

func newNamespace(ctx context.Context) string {
	ns, err := env.Namespace(ctx)
	Expect(err).NotTo(HaveOccurred())
	return ns
}

// ready waits until the deliverer has seen the subscription (events are recorded for it).
func ready(ctx context.Context, sub *flexv1.Subscription) {
	Eventually(func(g Gomega) bool {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
		return meta.FindStatusCondition(sub.Status.Conditions, flexv1.ReadyCondition) != nil
	}).Should(BeTrue())
}

func household(ctx context.Context, ns, mpan, model string) (*flexv1.Site, *flexv1.Asset) {
	s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.SiteNameForMPAN(mpan)},
		Spec: flexv1.SiteSpec{MPAN: mpan, Postcode: "SW1A 1AA"}}
	a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName("charger-" + mpan)},
		Spec: flexv1.AssetSpec{SiteName: s.Name, ExternalID: "charger-" + mpan, Type: flexv1.AssetTypeCharger,
			PowerW: ptr.To[int64](7400), Model: model, InstallationDate: "2025-06-15"}}
	Expect(k8sClient.Create(ctx, s)).To(Succeed())
	Expect(k8sClient.Create(ctx, a)).To(Succeed())
	return s, a
}

func enrol(ctx context.Context, s *flexv1.Site) *flexv1.Enrolment {
	e := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: identity.EnrolmentName(s.Name, lp)},
		Spec: flexv1.EnrolmentSpec{SiteName: s.Name, Proposition: lp}}
	Expect(k8sClient.Create(ctx, e)).To(Succeed())
	return e
}

func patchSpec[T client.Object](ctx context.Context, obj T, mutate func(T)) {
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
	base := obj.DeepCopyObject().(T)
	mutate(obj)
	Expect(k8sClient.Patch(ctx, obj, client.MergeFrom(base))).To(Succeed())
}

func del(ctx context.Context, obj client.Object) {
	Expect(k8sClient.Delete(ctx, obj)).To(Succeed())
}

func gone(ctx context.Context, obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
}

// countOf is how many times kind is in kinds.
func countOf(kinds []string, kind string) int {
	n := 0
	for _, k := range kinds {
		if k == kind {
			n++
		}
	}
	return n
}

// inOrder checks that each subject's events (a site's eligibility, an asset's changes, an
// enrolment's status, a site's ledger) reached the receiver in the order they happened. Those
// are each written by one controller, one reconcile after another: a later one's transaction
// begins after the earlier one committed, so commit-horizon order keeps them in order. Events
// that different controllers write at once about one change (an asset's update and the
// eligibility change it causes) go in the order their transactions began writing, which their
// timestamps (each controller's clock when it computed the event) need not follow to the
// millisecond (docs/notifications.md, "Order").
func inOrder(got []received) {
	last := map[string]string{}
	for _, g := range got {
		site, _ := g.Data["site_id"].(string)
		if site == "" {
			continue
		}
		subject := site + "/" + g.Type
		if asset, ok := g.Data["asset"].(map[string]any); ok {
			subject += "/" + fmt.Sprint(asset["id"])
		}
		if p, ok := g.Data["proposition"].(string); ok {
			subject += "/" + p
		}
		Expect(g.Timestamp >= last[subject]).To(BeTrue(), "event %s of %s at %s arrived after one at %s", g.ID, subject,
			g.Timestamp, last[subject])
		last[subject] = g.Timestamp
	}
}

var _ = Describe("Notifications through the Kubernetes API (kubectl, GitOps, a catalogue edit)", func() {
	It("delivers every event type of a household's life, signed, in order, none for a no-op", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r)
		ready(ctx, sub)

		By("a household created: asset created, eligibility changed")
		s, a := household(ctx, ns, "1200000000011", "zappi")
		Eventually(r.kinds).Should(ContainElements("asset.changed:created", "site.eligibility_changed"))

		By("an enrolment: active")
		e := enrol(ctx, s)
		Eventually(r.kinds).Should(ContainElement("enrolment.changed:active"))

		By("a no-op write: nothing")
		n := len(r.all())
		var version string
		patchSpec(ctx, a, func(a *flexv1.Asset) { version, a.Spec.PowerW = a.ResourceVersion, ptr.To[int64](7400) })
		Expect(a.ResourceVersion).To(Equal(version), "the no-op write changed the asset")

		By("an asset update that breaks eligibility: asset updated, eligibility changed, enrolment not eligible")
		patchSpec(ctx, a, func(a *flexv1.Asset) { a.Spec.Model = "legacy_charger" })
		Eventually(func() []string { return r.kinds()[n:] }).Should(ContainElements(
			"asset.changed:updated", "site.eligibility_changed", "enrolment.changed:not_eligible"))
		// A site's events arrive in order: an event of the no-op write would have come before
		// this update's, which has arrived.
		Expect(countOf(r.kinds()[n:], "asset.changed:updated")).To(Equal(1), "events after the no-op write: %v", r.kinds()[n:])

		By("the enrolment deleted: removed")
		del(ctx, e)
		Eventually(r.kinds).Should(ContainElement("enrolment.changed:removed"))
		Eventually(gone(ctx, e)).Should(BeTrue())

		By("the asset deleted: asset deleted (and eligibility changed)")
		del(ctx, a)
		Eventually(r.kinds).Should(ContainElement("asset.changed:deleted"))

		By("the site deleted: offboarded, and the site goes")
		siteID := siteIDOf(ctx, s)
		del(ctx, s)
		Eventually(r.kinds).Should(ContainElement("site.offboarded"))
		Eventually(gone(ctx, s)).Should(BeTrue())

		got := r.delivered()
		for _, g := range got {
			Expect(g.Verified).To(BeTrue(), "event %s verifies with the Standard Webhooks library", g.ID)
			Expect(g.Data["site_id"]).To(Equal(siteID))
		}
		inOrder(got)
		Expect(kindOf(got[len(got)-1])).To(Equal("site.offboarded"))

		By("the subscription's status counts the deliveries")
		Eventually(func(g Gomega) int64 {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			return sub.Status.Delivered
		}).Should(BeNumerically(">=", int64(len(got))))
		Expect(sub.Status.LastDelivery).NotTo(BeNil())
		Expect(sub.Status.RecentDeliveries).NotTo(BeEmpty())
		Expect(sub.Status.ConsecutiveFailures).To(BeZero())
	})

	It("tells a catalogue edit to the sites it changes", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		model := &flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "notify-test-model"},
			Spec: flexv1.AssetModelSpec{ModelName: "notify_test_model", Manufacturer: "Test",
				AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger}, CoP11Qualified: true}}
		Expect(k8sClient.Create(ctx, model)).To(Succeed())
		DeferCleanup(func(ctx context.Context) { _ = k8sClient.Delete(ctx, model) })
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventSiteEligibilityChanged)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "2301234567894", "notify_test_model")
		Eventually(func(g Gomega) []flexv1.PropositionName {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.Status.EligiblePropositions
		}).ShouldNot(BeEmpty())
		Eventually(r.kinds).Should(HaveLen(1))

		patchSpec(ctx, model, func(m *flexv1.AssetModel) { m.Spec.CoP11Qualified = false })
		Eventually(r.kinds).Should(Equal([]string{"site.eligibility_changed", "site.eligibility_changed"}))
		last := r.delivered()[1]
		Expect(last.Data["previous_eligible_propositions"]).NotTo(BeEmpty())
		Expect(last.Data["eligibility"].(map[string]any)["eligible_propositions"]).To(BeEmpty())
	})
})

var _ = Describe("Delivery", func() {
	It("retries a failing receiver with the same webhook-id until it recovers, and loses nothing", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		r.setAnswer(func(int) int { return http.StatusServiceUnavailable })
		sub := subscribe(ctx, ns, r)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		enrol(ctx, s)

		By("failing for a while")
		Eventually(func() int { return len(r.all()) }).Should(BeNumerically(">=", 4))
		Eventually(func(g Gomega) int32 {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			return sub.Status.ConsecutiveFailures
		}).Should(BeNumerically(">=", 2))
		Expect(meta.IsStatusConditionFalse(sub.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())

		By("recovering")
		r.setAnswer(nil)
		Eventually(r.kinds).Should(ContainElements("asset.changed:created", "site.eligibility_changed", "enrolment.changed:active"))
		failedIDs := map[string]bool{}
		for _, g := range r.all() {
			if g.Status >= 300 {
				failedIDs[g.ID] = true
			}
		}
		deliveredIDs := map[string]bool{}
		for _, g := range r.delivered() {
			deliveredIDs[g.ID] = true
		}
		for id := range failedIDs {
			Expect(deliveredIDs).To(HaveKey(id), "an event that failed is delivered later with the same webhook-id")
		}
		inOrder(r.delivered())
		By("the outbox drains")
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())
	})

	It("waits for the signing Secret of a new subscription made a moment after it, without a failed attempt", func(ctx SpecContext) {
		// The REST API makes the Secret just after the Subscription (it is owned by it);
		// here the Secret comes a second late, after the first event fell due.
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := &flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "late-secret"},
			Spec: flexv1.SubscriptionSpec{URL: r.URL, SecretRef: flexv1.SecretKeyReference{Name: "subscription-late-secret"}}}
		Expect(k8sClient.Create(ctx, sub)).To(Succeed())
		ready(ctx, sub)
		household(ctx, ns, "1200000000011", "zappi")
		By("the first event falls due (held back 300 ms): the deliverer holds it back for the Secret, and sends nothing")
		Eventually(func() int { return deliverer.Load().SecretWaits(sub.UID) }).Should(BeNumerically(">=", 1))
		Expect(r.all()).To(BeEmpty())
		Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "subscription-late-secret"},
			Data: map[string][]byte{delivery.DefaultSecretKey: []byte(r.secret)}})).To(Succeed())

		Eventually(r.kinds).Should(ContainElement("asset.changed:created"))
		for _, g := range r.all() {
			Expect(g.Verified).To(BeTrue())
		}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			g.Expect(sub.Status.Delivered).To(BeNumerically(">=", 1))
		}).Should(Succeed())
		Expect(sub.Status.FailedAttempts).To(BeZero(), "recent deliveries: %+v", sub.Status.RecentDeliveries)
		for _, a := range sub.Status.RecentDeliveries {
			Expect(a.Error).To(BeEmpty())
			Expect(a.Attempt).To(Equal(int32(1)))
		}
		Expect(meta.IsStatusConditionTrue(sub.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
	})

	It("reports a signing Secret that never comes, once the subscription is no longer new", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := &flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-secret"},
			Spec: flexv1.SubscriptionSpec{URL: r.URL, SecretRef: flexv1.SecretKeyReference{Name: "subscription-no-secret"}}}
		Expect(k8sClient.Create(ctx, sub)).To(Succeed())
		ready(ctx, sub)
		household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			c := meta.FindStatusCondition(sub.Status.Conditions, flexv1.ReadyCondition)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(flexv1.ReasonSecretMissing))
		}).Should(Succeed())
		Expect(sub.Status.FailedAttempts).To(BeNumerically(">=", 1))
		Expect(r.all()).To(BeEmpty())
	})

	It("delivers what was pending when a manager stopped, from another one", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		r.setAnswer(func(int) int { return http.StatusInternalServerError })
		sub := subscribe(ctx, ns, r)
		ready(ctx, sub)
		household(ctx, ns, "1200000000011", "zappi")
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeNumerically(">=", 2))

		By("starting a standby, then stopping the leader with events pending")
		stopLeader := stopManager
		startManager() // waits for the Lease
		stopLeader()
		// Only now does the receiver recover: what it gets, the standby delivered.
		r.setAnswer(nil)
		Eventually(r.kinds).Should(ContainElements("asset.changed:created", "site.eligibility_changed"))
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())
	})

	It("pauses a subscription whose receiver answers 410 Gone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		r.setAnswer(func(int) int { return http.StatusGone })
		sub := subscribe(ctx, ns, r)
		ready(ctx, sub)
		household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) bool {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			return sub.Spec.Paused
		}).Should(BeTrue())
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			return meta.FindStatusCondition(sub.Status.Conditions, flexv1.ReadyCondition).Reason
		}).Should(Equal(flexv1.ReasonPaused))
	})

	It("tells the organisation why a delivery failed in generic words: no address, resolver or DNS answer", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		tok := restToken(ctx, ns)
		failing := newReceiver()
		failing.setAnswer(func(int) int { return http.StatusServiceUnavailable })
		// localhost resolves to a loopback address this deliverer allows (nothing listens on port
		// 1: connection refused) and to ::1, which it refuses; .invalid never resolves.
		subs := map[string]*flexv1.Subscription{}
		for name, url := range map[string]string{"loopback": "https://localhost:1/hook",
			"unresolvable": "https://no-such-receiver.invalid/hook", "failing": failing.URL} {
			secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "secret-" + name},
				Data: map[string][]byte{delivery.DefaultSecretKey: []byte(failing.secret)}}
			Expect(k8sClient.Create(ctx, secret)).To(Succeed())
			sub := &flexv1.Subscription{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: flexv1.SubscriptionSpec{URL: url, SecretRef: flexv1.SecretKeyReference{Name: secret.Name}}}
			Expect(k8sClient.Create(ctx, sub)).To(Succeed())
			ready(ctx, sub)
			subs[name] = sub
		}
		household(ctx, ns, "1200000000011", "zappi")

		generic := []string{"address not allowed", "connection refused", "host not found", "DNS lookup failed", "timed out",
			"network unreachable", "connection failed"}
		address := regexp.MustCompile(`\d+\.\d+\.\d+\.\d+|::|\[|localhost|invalid|:53|lookup|dial`)
		for name, sub := range subs {
			want := generic
			if name == "failing" {
				want = []string{"HTTP 503"}
			}
			By("the " + name + " subscription's status and deliveries")
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
				g.Expect(sub.Status.RecentDeliveries).NotTo(BeEmpty())
				for _, a := range sub.Status.RecentDeliveries {
					g.Expect(a.Error).To(BeElementOf(want), name)
				}
				c := meta.FindStatusCondition(sub.Status.Conditions, flexv1.ReadyCondition)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(flexv1.ReasonDeliveryFailing))
				g.Expect(c.Message).NotTo(MatchRegexp(address.String()), name)
			}).Should(Succeed())
			status, list := rest("GET", "/notifications/subscriptions/"+sub.Name+"/deliveries", tok, nil)
			Expect(status).To(Equal(http.StatusOK), "%v", list)
			Expect(list["deliveries"]).NotTo(BeEmpty())
			for _, d := range list["deliveries"].([]any) {
				e := d.(map[string]any)["error"]
				Expect(e).To(BeElementOf(want), name)
				Expect(e).NotTo(MatchRegexp(address.String()), name)
			}
		}
	})

	It("keeps a healthy receiver's deliveries flowing while another subscription's receiver hangs", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		release := make(chan struct{})
		dead := newReceiver(release)
		DeferCleanup(func() { close(release) })
		healthy := newReceiver()
		deadSub := subscribe(ctx, ns, dead)
		healthySub := subscribe(ctx, ns, healthy)
		ready(ctx, deadSub)
		ready(ctx, healthySub)
		for _, mpan := range []string{"1200000000011", "2301234567894", "1012345678903"} {
			household(ctx, ns, mpan, "zappi")
		}
		Eventually(func() int {
			return len(slices.DeleteFunc(healthy.kinds(), func(k string) bool { return k != "site.eligibility_changed" }))
		}).Should(Equal(3))
		Expect(deadSub.Status.Delivered).To(BeZero())
	})

	It("forgets the deliveries of a deleted subscription, and keeps delivering another's", func(ctx SpecContext) {
		By("leaving deliveries owed to a subscription whose receiver fails")
		ns := newNamespace(ctx)
		failing := newReceiver()
		failing.setAnswer(func(int) int { return http.StatusServiceUnavailable })
		doomed := subscribe(ctx, ns, failing)
		ready(ctx, doomed)
		for _, mpan := range []string{"1200000000011", "2301234567894", "1012345678903"} {
			household(ctx, ns, mpan, "zappi")
		}
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeNumerically(">=", 3))

		By("deleting it: its deliveries go; another subscription of the organisation gets the new events")
		Expect(k8sClient.Delete(ctx, doomed)).To(Succeed())
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(BeZero())
		healthy := newReceiver()
		ready(ctx, subscribe(ctx, ns, healthy))
		household(ctx, ns, "2000000000017", "zappi")
		Eventually(healthy.kinds).Should(ContainElement("site.eligibility_changed"))
	})
})

var _ = Describe("Reward notifications", func() {
	It("tells each transaction added to a site's ledger, once", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.Labels[flexv1.IDLabel]
		}).ShouldNot(BeEmpty())
		tx := func(id string, pence int64) flexv1.RewardTransaction {
			return flexv1.RewardTransaction{ID: id, Type: "flex period", CreditPence: pence}
		}
		ledger := &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.RewardLedgerName(s.Name)},
			Spec: flexv1.RewardLedgerSpec{SiteName: s.Name, Transactions: []flexv1.RewardTransaction{
				tx("0b7c6f4e-1111-4a8e-9d1c-2f3e4a5b6c7d", 120)}}}
		Expect(k8sClient.Create(ctx, ledger)).To(Succeed())
		Eventually(r.kinds).Should(Equal([]string{"rewards.transaction_credited"}))

		patchSpec(ctx, ledger, func(l *flexv1.RewardLedger) {
			l.Spec.Transactions = append(l.Spec.Transactions, tx("0b7c6f4e-2222-4a8e-9d1c-2f3e4a5b6c7d", 80))
		})
		Eventually(r.kinds).Should(HaveLen(2))
		Consistently(r.kinds, "1s").Should(HaveLen(2))
		got := r.delivered()
		Expect(got[0].Data).To(HaveKeyWithValue("transaction_id", "0b7c6f4e-1111-4a8e-9d1c-2f3e4a5b6c7d"))
		Expect(got[1].Data).To(HaveKeyWithValue("transaction_id", "0b7c6f4e-2222-4a8e-9d1c-2f3e4a5b6c7d"))
		Expect(got[1].Data).To(HaveKeyWithValue("credit_pence", float64(80)))
		Expect(got[1].Data).To(HaveKeyWithValue("site_id", s.Labels[flexv1.IDLabel]))
		Expect(got[1].Verified).To(BeTrue())
	})

	It("imports a ledger an earlier version told, on upgrade: nothing lost, nothing told twice", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.Labels[flexv1.IDLabel]
		}).ShouldNot(BeEmpty())

		By("with no manager running, a ledger as an earlier version left it: its first credit told (lastCreditedID)")
		stopManager()
		told, untold := "0b7c6f4e-4444-4a8e-9d1c-2f3e4a5b6c7d", "0b7c6f4e-5555-4a8e-9d1c-2f3e4a5b6c7d"
		ledger := &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.RewardLedgerName(s.Name)},
			Spec: flexv1.RewardLedgerSpec{SiteName: s.Name, Transactions: []flexv1.RewardTransaction{
				{ID: told, Type: "flex period", CreditPence: 120, SettlementDate: "2026-09-01"},
				{ID: untold, Type: "flex period", CreditPence: 80, SettlementDate: "2026-10-01"}}}}
		Expect(k8sClient.Create(ctx, ledger)).To(Succeed())
		ledger.Status = flexv1.RewardLedgerStatus{ObservedGeneration: ledger.Generation, LastCreditedID: told}
		Expect(k8sClient.Status().Update(ctx, ledger)).To(Succeed())

		By("the new manager imports both into the database and tells only the untold one")
		startManager()
		Eventually(r.kinds).Should(Equal([]string{"rewards.transaction_credited"}))
		Expect(r.delivered()[0].Data).To(HaveKeyWithValue("transaction_id", untold))
		store := &rewardstore.Store{Pool: testDB.Pool}
		Eventually(func(g Gomega) int {
			all, err := store.All(ctx, rewardstore.Site{Namespace: ns, ID: s.Labels[flexv1.IDLabel]})
			g.Expect(err).NotTo(HaveOccurred())
			return len(all)
		}).Should(Equal(2))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), ledger)).To(Succeed())
			g.Expect(ledger.Status.TransactionCount).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(ledger.Status.BalancePence).To(HaveValue(BeEquivalentTo(200)))
		}).Should(Succeed())
		Expect(ledger.Spec.Transactions).To(HaveLen(2), "the spec is never rewritten")
		Consistently(r.kinds, "1s").Should(HaveLen(1))
	})

	It("delivers a credit committed while no manager ran, once one starts", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.Labels[flexv1.IDLabel]
		}).ShouldNot(BeEmpty())

		By("the manager stopped, a credit committed (as the REST API commits it: the credit and its event in one SQL transaction)")
		stopManager()
		store := &rewardstore.Store{Pool: testDB.Pool}
		id := "0b7c6f4e-3333-4a8e-9d1c-2f3e4a5b6c7d"
		_, created, err := store.Append(ctx, rewardstore.Site{Namespace: ns, ID: s.Labels[flexv1.IDLabel]},
			flexv1.RewardTransaction{ID: id, Type: "goodwill credit", CreditPence: 150, SettlementDate: "2026-11-01"},
			rewardstore.SourceAPI)
		Expect(err).NotTo(HaveOccurred())
		Expect(created).To(BeTrue())

		By("a manager started again: the event is delivered from the outbox, once")
		startManager()
		Eventually(r.kinds).Should(Equal([]string{"rewards.transaction_credited"}))
		got := r.delivered()
		Expect(got[0].Data).To(HaveKeyWithValue("transaction_id", id))
		Expect(got[0].Data).To(HaveKeyWithValue("credit_pence", float64(150)))
		Expect(got[0].Verified).To(BeTrue())
		Consistently(r.kinds, "1s").Should(HaveLen(1))
	})
})

var _ = Describe("Deletions", func() {
	It("lets an enrolment go at once while its receiver is down, and tells its removal later", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventEnrolmentChanged)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) []flexv1.PropositionName {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			return s.Status.EligiblePropositions
		}).Should(ContainElement(lp))
		e := enrol(ctx, s)
		Eventually(r.kinds).Should(Equal([]string{"enrolment.changed:active"}))

		By("the receiver down, the enrolment deleted: it goes, its removal waits in the outbox")
		r.setAnswer(func(int) int { return http.StatusBadGateway })
		del(ctx, e)
		Eventually(gone(ctx, e)).Should(BeTrue())
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(Equal(1))

		By("enrolling again meanwhile")
		e2 := enrol(ctx, s)
		Eventually(func(g Gomega) flexv1.EnrolmentPhase {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(e2), e2)).To(Succeed())
			return e2.Status.Phase
		}).ShouldNot(BeEmpty())

		By("the receiver back: removed, then the new enrolment's state, in order")
		r.setAnswer(nil)
		Eventually(r.kinds).Should(HaveLen(3))
		Expect(r.kinds()[1]).To(Equal("enrolment.changed:removed"))
		inOrder(r.delivered())
	})
})

// siteIDOf waits for a site's API id.
func siteIDOf(ctx context.Context, s *flexv1.Site) string {
	Eventually(func(g Gomega) string {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
		return s.Labels[flexv1.IDLabel]
	}).ShouldNot(BeEmpty())
	return s.Labels[flexv1.IDLabel]
}

// credit commits n credits to a site as the REST API commits them (the credit and its event in
// one SQL transaction) and answers their ids, in order.
func credit(ctx context.Context, ns, siteID string, n int) []string {
	return creditWith(ctx, Default, ns, siteID, n)
}

// creditWith is credit asserting with g (a polled function's Gomega).
func creditWith(ctx context.Context, g Gomega, ns, siteID string, n int) []string {
	store := &rewardstore.Store{Pool: testDB.Pool}
	ids := make([]string, 0, n)
	for i := range n {
		id := uuid.NewString()
		_, created, err := store.Append(ctx, rewardstore.Site{Namespace: ns, ID: siteID},
			flexv1.RewardTransaction{ID: id, Type: "goodwill credit", CreditPence: int64(10 + i), SettlementDate: "2026-11-01"},
			rewardstore.SourceAPI)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(created).To(BeTrue())
		ids = append(ids, id)
	}
	return ids
}

// creditedIDs are the transaction ids of a site's delivered credits, in the order delivered;
// one whose signature did not verify with the Standard Webhooks library shows as
// "unverified <id>" (polled: it asserts nothing itself, the caller's matcher sees it).
func creditedIDs(r *receiver, siteID string) []string {
	var out []string
	for _, g := range r.delivered() {
		if g.Type == string(flexv1.EventRewardsTransactionCredited) && g.Data["site_id"] == siteID {
			id, _ := g.Data["transaction_id"].(string)
			if !g.Verified {
				id = "unverified " + id
			}
			out = append(out, id)
		}
	}
	return out
}

var _ = Describe("One outbox: nothing capped, nothing dropped", func() {
	// The finding: with a receiver down while more than 16 credits land on one site, the
	// RewardLedger's status outbox kept 16 and the SQL rows were marked delivered: the rest of
	// the rewards.transaction_credited events were gone.
	It("delivers all of 40 credits to one site, in order, once its receiver is back", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		r.setAnswer(func(int) int { return http.StatusServiceUnavailable })
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		siteID := siteIDOf(ctx, s)

		By("40 credits while the receiver answers 503")
		ids := credit(ctx, ns, siteID, 40)
		Eventually(func() int { return len(r.all()) }).Should(BeNumerically(">=", 3))
		Expect(r.delivered()).To(BeEmpty())
		Eventually(func() (int, error) { return pendingDeliveries(ctx, ns) }).Should(Equal(40))

		By("the receiver back: every credit, in the order credited, verified")
		r.setAnswer(nil)
		Eventually(func() []string { return creditedIDs(r, siteID) }).Should(Equal(ids))
		Eventually(func(g Gomega) { deliveredOnce(ctx, g, ns, 40) }).Should(Succeed())
		Expect(r.delivered()).To(HaveLen(40), "each credit posted once successfully")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			g.Expect(sub.Status.Delivered).To(BeEquivalentTo(40))
			g.Expect(sub.Status.Dropped).To(BeZero())
		}).Should(Succeed())
	})

	It("delivers each event once, in order per site, with two deliverers on one database", func(ctx SpecContext) {
		By("a second manager beside the first: both deliverers run")
		first := stopManager
		startManager()
		second := stopManager
		DeferCleanup(func() {
			second()
			stopManager = first
		})
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		a, _ := household(ctx, ns, "1200000000011", "zappi")
		b, _ := household(ctx, ns, "2301234567894", "zappi")
		idA, idB := siteIDOf(ctx, a), siteIDOf(ctx, b)

		credited := map[string][]string{}
		for range 4 {
			credited[idA] = append(credited[idA], credit(ctx, ns, idA, 10)...)
			credited[idB] = append(credited[idB], credit(ctx, ns, idB, 10)...)
		}
		Eventually(func() []string { return creditedIDs(r, idA) }).Should(Equal(credited[idA]))
		Eventually(func() []string { return creditedIDs(r, idB) }).Should(Equal(credited[idB]))
		Eventually(func(g Gomega) { deliveredOnce(ctx, g, ns, 80) }).Should(Succeed())
		Expect(r.all()).To(HaveLen(80), "each event posted once")
	})

	// A burst to one subscription: the workers' outcomes are recorded in batches (one SQL
	// transaction for all those waiting), and each batch frees its sites' next events.
	It("delivers a burst over many sites to one subscription once each, in order per site, and counts it exactly", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		credited := map[string][]string{}
		for round := range 4 {
			for i := range 24 {
				siteID := fmt.Sprintf("burst-site-%02d", i)
				credited[siteID] = append(credited[siteID], credit(ctx, ns, siteID, 1+round%2)...)
			}
		}
		total := 0
		for siteID, ids := range credited {
			total += len(ids)
			Eventually(func() []string { return creditedIDs(r, siteID) }).Should(Equal(ids), "site %s in order", siteID)
		}
		Eventually(func(g Gomega) { deliveredOnce(ctx, g, ns, total) }).Should(Succeed())
		Expect(r.all()).To(HaveLen(total), "each event posted once")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(sub), sub)).To(Succeed())
			g.Expect(sub.Status.Delivered).To(BeEquivalentTo(total))
			g.Expect(sub.Status.FailedAttempts).To(BeZero())
		}).Should(Succeed())
	})

	// The signing secret is read once a second, not once a delivery: a rotation still takes.
	It("signs with a rotated signing secret once the Secret holds it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		first := credit(ctx, ns, "rotating-site", 1)
		Eventually(func() []string { return creditedIDs(r, "rotating-site") }).Should(Equal(first))

		By("a new secret in the Secret, and the receiver verifying with it alone")
		key := make([]byte, 32)
		_, _ = rand.Read(key)
		rotated := "whsec_" + base64.StdEncoding.EncodeToString(key)
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: sub.Spec.SecretRef.Name}, secret)).To(Succeed())
		secret.Data[delivery.DefaultSecretKey] = []byte(rotated)
		Expect(k8sClient.Update(ctx, secret)).To(Succeed())
		r.setSecret(rotated)

		// A credit each poll: those signed within a second of the last read carry the old
		// signature; a later one carries the new.
		Eventually(func(g Gomega) bool {
			creditWith(ctx, g, ns, "rotating-site", 1)
			for _, g := range r.delivered() {
				if g.Type == string(flexv1.EventRewardsTransactionCredited) && g.Verified &&
					g.Data["transaction_id"] != first[0] {
					return true
				}
			}
			return false
		}).WithPolling(300 * time.Millisecond).Should(BeTrue())
	})

	It("delivers again, with the same webhook-id, an event posted by a deliverer that stopped before recording it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		// The first request is held: the deliverer has posted, and has no outcome to record.
		r.setAnswer(func(n int) int {
			if n == 0 {
				return hold
			}
			return http.StatusNoContent
		})
		sub := subscribe(ctx, ns, r, flexv1.EventRewardsTransactionCredited)
		ready(ctx, sub)
		s, _ := household(ctx, ns, "1200000000011", "zappi")
		siteID := siteIDOf(ctx, s)
		ids := credit(ctx, ns, siteID, 2)
		Eventually(func() int { return len(r.all()) }).Should(Equal(1))
		posted := r.all()[0].ID

		By("the manager stops mid-delivery; another starts once the claim's lease has expired")
		stopManager()
		startManager()
		Eventually(func() []string { return creditedIDs(r, siteID) }).Should(Equal(ids))
		Expect(r.delivered()[0].ID).To(Equal(posted), "the same webhook-id")
	})
})

var _ = Describe("Dispatch notifications", func() {
	It("delivers a dispatch issued while no manager ran, signed, in prod's DispatchEvent shape, once one starts", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		r := newReceiver()
		sub := subscribe(ctx, ns, r, flexv1.EventDispatchRequested)
		ready(ctx, sub)
		s, a := household(ctx, ns, "1200000000011", "zappi")
		Eventually(func(g Gomega) []string {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
			return []string{s.Labels[flexv1.IDLabel], a.Labels[flexv1.IDLabel]}
		}).ShouldNot(ContainElement(BeEmpty()))

		By("the manager killed once the dispatch was issued (the dispatch and its event committed together), before delivering it")
		stopManager()
		start := time.Now().UTC().Truncate(30 * time.Minute).Add(2 * time.Hour)
		ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ev-dispatch"},
			Spec: flexv1.FlexEventSpec{Proposition: lp, StartAt: metav1.NewTime(start), EndAt: metav1.NewTime(start.Add(time.Hour)),
				Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25", SiteNames: []string{s.Name}}}
		Expect(k8sClient.Create(ctx, ev)).To(Succeed())
		assetID := a.Labels[flexv1.IDLabel]
		store := &dispatchstore.Store{Pool: testDB.Pool}
		issued, err := store.Issue(ctx, ns, "https://flexsite.test", []dispatchstore.Dispatch{{FlexEvent: ev.Name,
			SiteID: s.Labels[flexv1.IDLabel], AssetID: assetID, MarketID: string(lp), LevelKW: 0,
			From: start, To: start.Add(time.Hour), EventTimestamp: ev.CreationTimestamp.Time}}, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(issued).To(Equal(1))

		By("a manager started again: the dispatch is delivered from the outbox, once")
		startManager()
		Eventually(r.kinds).Should(Equal([]string{"dispatch.requested"}))
		got := r.delivered()[0]
		Expect(got.Verified).To(BeTrue())
		id := dispatch.EventID(ns, ev.Name, assetID).String()
		Expect(got.ID).To(Equal(dispatchstore.RequestedEventID(dispatch.EventID(ns, ev.Name, assetID))))
		Expect(got.Data).To(Equal(map[string]any{"event_id": id, "asset_id": assetID,
			"issued_timestamp": got.Data["issued_timestamp"], "event_timestamp": dispatch.Stamp(ev.CreationTimestamp.Time),
			"market_id": string(lp), "level_kw": float64(0), "from_time": dispatch.Stamp(start),
			"to_time":                dispatch.Stamp(start.Add(time.Hour)),
			"update_status_callback": "https://flexsite.test/entities/asset/" + assetID + "/callback/" + id}))
		Expect(got.Data["issued_timestamp"]).To(MatchRegexp(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`))
		Consistently(r.kinds, "1s").Should(HaveLen(1))
	})
})
