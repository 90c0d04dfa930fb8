package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
})
