package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// The CRD schema (OpenAPI validation + CEL) holds the basic rules even where no admission
// webhook is installed. These specs prove the API server itself refuses bad objects.
var _ = Describe("CRD schema", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	expectInvalid := func(ctx SpecContext, obj client.Object, field string) {
		err := k8sClient.Create(ctx, obj)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(field))
	}

	DescribeTable("refuses a malformed site",
		func(ctx SpecContext, mutate func(*flexv1.Site), field string) {
			expectInvalid(ctx, site(ns, "1200000000011", mutate), field)
		},
		Entry("an MPAN that is not 13 digits", func(s *flexv1.Site) { s.Spec.MPAN = "12345" }, "spec.mpan"),
		Entry("an MPAN with letters", func(s *flexv1.Site) { s.Spec.MPAN = "12000000000AB" }, "spec.mpan"),
		Entry("a lower-case postcode", func(s *flexv1.Site) { s.Spec.Postcode = "sw1a 1aa" }, "spec.postcode"),
		Entry("an unknown market", func(s *flexv1.Site) { s.Spec.Markets = []flexv1.Market{"moon"} }, "spec.markets"),
		Entry("a malformed tariff time", func(s *flexv1.Site) { s.Spec.Tariff = &flexv1.Tariff{CheapStartTime: "25:00"} }, "spec.tariff.cheapStartTime"),
	)

	DescribeTable("refuses a malformed asset",
		func(ctx SpecContext, mutate func(*flexv1.Asset), field string) {
			expectInvalid(ctx, asset(ns, "mpan-1200000000011", "bad", mutate), field)
		},
		Entry("an unknown type", func(a *flexv1.Asset) { a.Spec.Type = "heatpump" }, "spec.type"),
		Entry("negative power", func(a *flexv1.Asset) { a.Spec.PowerW = ptr.To[int64](-1000) }, "spec.powerW"),
		Entry("negative capacity", func(a *flexv1.Asset) { a.Spec.CapacityWh = ptr.To[int64](-500) }, "spec.capacityWh"),
		Entry("a malformed installation date", func(a *flexv1.Asset) { a.Spec.InstallationDate = "15/06/2025" }, "spec.installationDate"),
		Entry("no external id", func(a *flexv1.Asset) { a.Spec.ExternalID = "" }, "spec.externalID"),
	)

	It("accepts asset types verbatim, spaces included", func(ctx SpecContext) {
		for _, t := range flexv1.AllAssetTypes {
			Expect(k8sClient.Create(ctx, asset(ns, "mpan-1200000000011", "type-"+string(t), func(a *flexv1.Asset) { a.Spec.Type = t }))).
				To(Succeed(), string(t))
		}
	})

	It("keeps identity fields immutable", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		a := asset(ns, s.Name, "immutable")
		create(ctx, s, a)

		// The controllers patch these objects' metadata right after creation; an update that
		// loses that race is a Conflict, so retry until the API server judges the change itself.
		rejection := func(obj client.Object, mutate func()) func() error {
			return func() error {
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
				mutate()
				return k8sClient.Update(ctx, obj)
			}
		}
		Eventually(rejection(s, func() { s.Spec.MPAN = "" })).Should(
			SatisfyAll(WithTransform(apierrors.IsInvalid, BeTrue()), MatchError(ContainSubstring("mpan cannot be removed"))))
		Eventually(rejection(a, func() { a.Spec.SiteName = "elsewhere" })).Should(
			SatisfyAll(WithTransform(apierrors.IsInvalid, BeTrue()), MatchError(ContainSubstring("siteName is immutable"))))
		// The REST API answers 409 to a change of type; kubectl and GitOps meet the same lock.
		Eventually(rejection(a, func() {
			a.Spec.Type = map[flexv1.AssetType]flexv1.AssetType{"battery": "charger"}[a.Spec.Type]
			if a.Spec.Type == "" {
				a.Spec.Type = "battery"
			}
		})).Should(SatisfyAll(WithTransform(apierrors.IsInvalid, BeTrue()), MatchError(ContainSubstring("type is immutable"))))
	})

	It("ties a Proposition's object name to the proposition it describes", func(ctx SpecContext) {
		p := &flexv1.Proposition{
			ObjectMeta: metav1.ObjectMeta{Name: "not-limited-pause"},
			Spec:       flexv1.PropositionSpec{Proposition: flexv1.PropositionLimitedPause},
		}
		err := k8sClient.Create(ctx, p)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("metadata.name must be spec.proposition"))
	})

	DescribeTable("refuses a reward transaction that contradicts itself",
		func(ctx SpecContext, tx flexv1.RewardTransaction, message string) {
			tx.ID = "8c0e4a8e-4b7e-4d2a-9a53-1f0a7c3e2b11"
			ledger := &flexv1.RewardLedger{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ledger"},
				Spec:       flexv1.RewardLedgerSpec{SiteName: "mpan-1200000000011", Transactions: []flexv1.RewardTransaction{tx}},
			}
			expectInvalid(ctx, ledger, message)
		},
		Entry("a withdrawal that credits", flexv1.RewardTransaction{Type: "withdrawal", CreditPence: 500}, "a withdrawal is a debit"),
		Entry("a payment status on a flex event", flexv1.RewardTransaction{Type: "flex event", CreditPence: 10, PaymentStatus: "approved"},
			"paymentStatus is for withdrawals only"),
		Entry("an end before the start", flexv1.RewardTransaction{Type: "flex event", CreditPence: 10,
			StartTime: &metav1.Time{Time: time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)},
			EndTime:   &metav1.Time{Time: time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)}}, "endTime must not be before startTime"),
	)

	It("refuses half a tariff window", func(ctx SpecContext) {
		expectInvalid(ctx, site(ns, "1200000000011", func(s *flexv1.Site) {
			s.Spec.Tariff = &flexv1.Tariff{CheapStartTime: "00:30"}
		}), "cheapStartTime and cheapEndTime go together")
	})

	It("refuses an unknown proposition in an enrolment", func(ctx SpecContext) {
		expectInvalid(ctx, enrolment(ns, "mpan-1200000000011", "free_money"), "spec.proposition")
	})

	// A flex event's window, direction and rate: the CEL rules and the schema refuse what
	// internal/validation refuses, without the admission webhook (not installed here).
	at := func(h, m, s int) metav1.Time { return metav1.NewTime(time.Date(2026, 1, 13, h, m, s, 0, time.UTC)) }
	flexEvent := func(mutate func(*flexv1.FlexEventSpec)) *flexv1.FlexEvent {
		ev := &flexv1.FlexEvent{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "event-"},
			Spec: flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: at(17, 30, 0), EndAt: at(18, 30, 0),
				Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25"},
		}
		if mutate != nil {
			mutate(&ev.Spec)
		}
		return ev
	}

	DescribeTable("refuses a malformed flex event",
		func(ctx SpecContext, mutate func(*flexv1.FlexEventSpec), message string) {
			expectInvalid(ctx, flexEvent(mutate), message)
		},
		Entry("a start off the half-hour", func(s *flexv1.FlexEventSpec) { s.StartAt = at(17, 15, 0) },
			"spec.startAt: Invalid value: \"2026-01-13T17:15:00Z\": startAt must be on a half-hour boundary (hh:00:00 or hh:30:00)"),
		Entry("a start with seconds", func(s *flexv1.FlexEventSpec) { s.StartAt = at(17, 30, 1) }, "startAt must be on a half-hour boundary"),
		Entry("an end off the half-hour", func(s *flexv1.FlexEventSpec) { s.EndAt = at(18, 45, 0) }, "endAt must be on a half-hour boundary"),
		Entry("an end before the start", func(s *flexv1.FlexEventSpec) { s.EndAt = at(17, 0, 0) }, "endAt must be after startAt"),
		Entry("an end at the start", func(s *flexv1.FlexEventSpec) { s.EndAt = s.StartAt }, "endAt must be after startAt"),
		Entry("more than a day", func(s *flexv1.FlexEventSpec) { s.EndAt = metav1.NewTime(s.StartAt.Add(25 * time.Hour)) },
			"a flex event must last at most 24 hours"),
		Entry("a negative rate", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "-1" }, "spec.ratePencePerKWh"),
		Entry("a rate with 3 decimals", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "25.555" }, "spec.ratePencePerKWh"),
		Entry("a rate that is not a number", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "lots" }, "spec.ratePencePerKWh"),
		Entry("no rate", func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "" }, "spec.ratePencePerKWh"),
		Entry("an unknown direction", func(s *flexv1.FlexEventSpec) { s.Direction = "sideways" }, "spec.direction"),
		Entry("an unknown proposition", func(s *flexv1.FlexEventSpec) { s.Proposition = "free_money" }, "spec.proposition"),
		Entry("a deadline before the end", func(s *flexv1.FlexEventSpec) { s.Deadline = &metav1.Time{Time: s.EndAt.Add(-time.Hour)} },
			"deadline must not be before endAt"),
		Entry("an empty site name", func(s *flexv1.FlexEventSpec) { s.SiteNames = []string{""} }, "spec.siteNames[0]"),
	)

	It("accepts a flex event of a whole day, at a zero rate, and keeps it but for its deadline", func(ctx SpecContext) {
		day := flexEvent(func(s *flexv1.FlexEventSpec) {
			s.StartAt, s.EndAt, s.RatePencePerKWh, s.Direction = at(0, 0, 0), at(0, 0, 0), "0", flexv1.FlexTurnUp
			s.EndAt = metav1.NewTime(s.StartAt.Add(24 * time.Hour))
		})
		Expect(k8sClient.Create(ctx, day)).To(Succeed())
		Expect(day.Status.ObservedGeneration).To(Equal(int64(-1)), "a new event is InProgress for kstatus")
		Expect(day.Spec.DeadlineOrDefault()).To(Equal(day.Spec.EndAt.Add(48 * time.Hour)))

		ev := flexEvent(func(s *flexv1.FlexEventSpec) {
			s.SiteNames = []string{"mpan-1200000000011"}
			s.RatePencePerKWh = "12.5"
		})
		Expect(k8sClient.Create(ctx, ev)).To(Succeed())
		// The FlexEvent controller writes the event (its finalizer, its status) while this spec
		// does, and the API server answers a stale version with a conflict before it judges the
		// change: a lost race is read again, a refusal is the answer.
		update := func(mutate func(*flexv1.FlexEventSpec)) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current := &flexv1.FlexEvent{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ev), current)).To(Succeed())
				mutate(&current.Spec)
				return k8sClient.Update(ctx, current)
			})
		}
		for what, mutate := range map[string]func(*flexv1.FlexEventSpec){
			"rate":      func(s *flexv1.FlexEventSpec) { s.RatePencePerKWh = "50" },
			"window":    func(s *flexv1.FlexEventSpec) { s.StartAt = at(17, 0, 0) },
			"direction": func(s *flexv1.FlexEventSpec) { s.Direction = flexv1.FlexTurnUp },
		} {
			err := update(mutate)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", what, err)
			Expect(err.Error()).To(ContainSubstring("are immutable"), what)
		}
		err := update(func(s *flexv1.FlexEventSpec) { s.SiteNames = []string{"mpan-1200000000011", "another"} })
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("siteNames is immutable"))
		Expect(update(func(s *flexv1.FlexEventSpec) { s.Deadline = &metav1.Time{Time: s.EndAt.Add(72 * time.Hour)} })).To(Succeed())
	})
})
