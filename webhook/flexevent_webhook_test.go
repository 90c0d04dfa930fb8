package admission_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func flexEvent(ns string, p flexv1.PropositionName) *flexv1.FlexEvent {
	// Tomorrow's half-hour: an event starts at most 7 days before it is declared.
	start := time.Now().UTC().Truncate(30 * time.Minute).Add(24 * time.Hour)
	return &flexv1.FlexEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "event-"},
		Spec: flexv1.FlexEventSpec{Proposition: p, StartAt: metav1.NewTime(start), EndAt: metav1.NewTime(start.Add(time.Hour)),
			Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25"},
	}
}

// Serial: the spec withdraws a Proposition (cluster-wide) for a moment.
var _ = Describe("FlexEvent webhook", Serial, func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	It("accepts an event for an offered proposition", func(ctx SpecContext) {
		ev := flexEvent(ns, flexv1.PropositionLimitedPause)
		Expect(k8sClient.Create(ctx, ev)).To(Succeed())
		Expect(ev.Spec.DeadlineOrDefault()).To(Equal(ev.Spec.EndAt.Add(48 * time.Hour)))
	})

	It("refuses an event for a proposition that is not offered, naming the field", func(ctx SpecContext) {
		By("withdrawing the price_curve Proposition, and putting it back afterwards")
		p := &flexv1.Proposition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "price-curve"}, p)).To(Succeed())
		Expect(k8sClient.Delete(ctx, p)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) {
			back := &flexv1.Proposition{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Labels: p.Labels, Annotations: p.Annotations}, Spec: p.Spec}
			Expect(client.IgnoreAlreadyExists(k8sClient.Create(ctx, back))).To(Succeed())
		})

		By("an event for it is refused once the webhook's cache has seen the deletion")
		Eventually(func(g Gomega) {
			ev := flexEvent(ns, flexv1.PropositionPriceCurve)
			ev.GenerateName, ev.Name = "", "evening-peak"
			err := k8sClient.Create(ctx, ev)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(`admission webhook "vflexevent.flexsite.io" denied the request: ` +
				`FlexEvent.flexsite.io "evening-peak" is invalid: spec.proposition: Invalid value: "price_curve": ` +
				`the proposition is not offered: there is no Proposition "price-curve"`))
		}).Should(Succeed())

		By("an event for another proposition is still accepted")
		Expect(k8sClient.Create(ctx, flexEvent(ns, flexv1.PropositionLimitedPause))).To(Succeed())
	})

	It("refuses an event that starts more than 7 days back, as the REST API does", func(ctx SpecContext) {
		ev := flexEvent(ns, flexv1.PropositionLimitedPause)
		ev.GenerateName, ev.Name = "", "history"
		start := time.Now().UTC().Truncate(30*time.Minute).AddDate(0, 0, -8)
		ev.Spec.StartAt, ev.Spec.EndAt = metav1.NewTime(start), metav1.NewTime(start.Add(time.Hour))
		err := k8sClient.Create(ctx, ev)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.startAt: Invalid value: "` + start.Format(time.RFC3339) +
			`": A flex event may start at most 7 days before it is declared`))

		By("6 days back is accepted")
		ev = flexEvent(ns, flexv1.PropositionLimitedPause)
		start = time.Now().UTC().Truncate(30*time.Minute).AddDate(0, 0, -6)
		ev.Spec.StartAt, ev.Spec.EndAt = metav1.NewTime(start), metav1.NewTime(start.Add(time.Hour))
		Expect(k8sClient.Create(ctx, ev)).To(Succeed())
	})

	It("bounds the rate by the organisation's maximum, declared on its namespace", func(ctx SpecContext) {
		ev := flexEvent(ns, flexv1.PropositionLimitedPause)
		ev.Spec.RatePencePerKWh = "1000.01"
		err := k8sClient.Create(ctx, ev)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
		Expect(err.Error()).To(ContainSubstring(`spec.ratePencePerKWh: Invalid value: "1000.01": ` +
			`Rate must be at most 1000 pence per kWh, the organisation's maximum`))
		Expect(k8sClient.Create(ctx, flexEvent(ns, flexv1.PropositionLimitedPause))).To(Succeed(), "25 p is within it")

		By("raising the maximum on the namespace")
		namespace := &corev1.Namespace{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: ns}, namespace)).To(Succeed())
		if namespace.Annotations == nil {
			namespace.Annotations = map[string]string{}
		}
		namespace.Annotations[flexv1.MaxFlexRateAnnotation] = "1500"
		Expect(k8sClient.Update(ctx, namespace)).To(Succeed())
		Eventually(func() error {
			ev := flexEvent(ns, flexv1.PropositionLimitedPause)
			ev.Spec.RatePencePerKWh = "1500"
			return k8sClient.Create(ctx, ev)
		}).Should(Succeed())
	})
})
