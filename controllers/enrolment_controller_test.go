package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

var _ = Describe("Enrolment", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("becomes active for an eligible site, with a Ready condition and an event", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		e := enrolment(ns, s.Name, lp)
		create(ctx, s, asset(ns, s.Name, "c1", cop11Charger), e)

		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
		Expect(e.Status.EnrolledAt).NotTo(BeNil())
		Expect(e.Finalizers).To(ContainElement(flexv1.Finalizer))
		ready := meta.FindStatusCondition(e.Status.Conditions, flexv1.ReadyCondition)
		Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		Expect(ready.ObservedGeneration).To(Equal(e.Generation))
		Eventually(func(g Gomega) []string { return eventReasons(g, ctx, ns, e.Name) }).Should(ContainElement(flexv1.ReasonEnrolled))
	})

	It("says why a site is not eligible and turns active by itself once it is", func(ctx SpecContext) {
		s := site(ns, "2301234567894")
		a := asset(ns, s.Name, "c2")
		e := enrolment(ns, s.Name, lp)
		create(ctx, s, a, e)

		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentNotEligible)))
		Expect(e.Status.Issues).To(ConsistOf(flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet))
		Expect(meta.FindStatusCondition(e.Status.Conditions, flexv1.ReadyCondition).Message).
			To(ContainSubstring("asset_model_not_set"))

		patchAsset(ctx, a, cop11Charger)
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
		Expect(e.Status.Issues).To(BeEmpty())
	})

	It("waits for a site that does not exist yet", func(ctx SpecContext) {
		e := enrolment(ns, "mpan-1012345678903", lp)
		create(ctx, e)
		Eventually(fetched(ctx, e)).Should(WithTransform(func(e *flexv1.Enrolment) string {
			c := meta.FindStatusCondition(e.Status.Conditions, flexv1.ReadyCondition)
			if c == nil {
				return ""
			}
			return c.Reason
		}, Equal(flexv1.ReasonSiteNotFound)))
		Expect(e.Status.Phase).To(Equal(flexv1.EnrolmentPending))

		s := site(ns, "1012345678903")
		create(ctx, s, asset(ns, s.Name, "late", cop11Charger))
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
	})

	It("needs boundary meter consent where the proposition says so", func(ctx SpecContext) {
		s := site(ns, "1234567890126")
		e := enrolment(ns, s.Name, fasc)
		create(ctx, s, asset(ns, s.Name, "c3", cop11Charger), e)
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentNotEligible)))
		Expect(meta.FindStatusCondition(e.Status.Conditions, flexv1.ReadyCondition).Reason).To(Equal("BoundaryMeterConsentRequired"))

		patchSite(ctx, s, func(s *flexv1.Site) { s.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: time.Now()} })
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
	})

	It("records a withdrawal when an active enrolment is deleted, and refuses re-enrolment without an override", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		e := enrolment(ns, s.Name, lp)
		create(ctx, s, asset(ns, s.Name, "c4", cop11Charger), e)
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))

		Expect(k8sClient.Delete(ctx, e)).To(Succeed())
		Eventually(gone(ctx, e)).Should(BeTrue())
		Eventually(fetched(ctx, s)).Should(WithTransform(historyOf, HaveExactElements(
			And(HaveField("Proposition", lp), HaveField("EnrolledAt", Equal(e.Status.EnrolledAt)),
				HaveField("WithdrawnAt.Time", BeTemporally("~", time.Now(), time.Minute))))))

		By("re-applying the same enrolment without an override")
		again := enrolment(ns, s.Name, lp)
		create(ctx, again)
		Eventually(fetched(ctx, again)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentWithdrawn)))
		Expect(meta.FindStatusCondition(again.Status.Conditions, flexv1.ReadyCondition).Reason).To(Equal(flexv1.ReasonPreviouslyWithdrew))
		Expect(meta.IsStatusConditionTrue(again.Status.Conditions, flexv1.StalledCondition)).To(BeTrue())

		By("overriding the withdrawal")
		base := again.DeepCopy()
		again.Spec.OverrideWithdrawal = true
		Expect(k8sClient.Patch(ctx, again, client.MergeFrom(base))).To(Succeed())
		Eventually(fetched(ctx, again)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
		Expect(again.Status.EnrolledAt.After(s.Status.EnrolmentHistory[0].WithdrawnAt.Time) ||
			again.Status.EnrolledAt.Equal(&s.Status.EnrolmentHistory[0].WithdrawnAt)).To(BeTrue())

		By("withdrawing again: a second period in the history, and the new enrolment stays superseded no more")
		Expect(k8sClient.Delete(ctx, again)).To(Succeed())
		Eventually(gone(ctx, again)).Should(BeTrue())
		Eventually(fetched(ctx, s)).Should(WithTransform(historyOf, HaveLen(2)))
		third := enrolment(ns, s.Name, lp)
		create(ctx, third)
		Eventually(fetched(ctx, third)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentWithdrawn)))
	})

	It("records no withdrawal for an enrolment that never became active", func(ctx SpecContext) {
		s := site(ns, "2301234567894")
		e := enrolment(ns, s.Name, lp)
		create(ctx, s, e)
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentNotEligible)))
		Expect(k8sClient.Delete(ctx, e)).To(Succeed())
		Eventually(gone(ctx, e)).Should(BeTrue())
		Consistently(fetched(ctx, s), "1s").Should(WithTransform(historyOf, BeEmpty()))
	})
})

var _ = Describe("Asset", func() {
	It("gets an API id and reports whether its site exists", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		a := asset(ns, "mpan-1200000000011", "orphan")
		create(ctx, a)
		Eventually(fetched(ctx, a)).Should(WithTransform(func(a *flexv1.Asset) string {
			c := meta.FindStatusCondition(a.Status.Conditions, flexv1.ReadyCondition)
			if c == nil {
				return ""
			}
			return c.Reason
		}, Equal(flexv1.ReasonSiteNotFound)))
		Expect(a.Labels[flexv1.IDLabel]).To(MatchRegexp(`^[0-9a-f-]{36}$`))
		id := a.Labels[flexv1.IDLabel]

		create(ctx, site(ns, "1200000000011"))
		Eventually(fetched(ctx, a)).Should(WithTransform(func(a *flexv1.Asset) bool {
			return meta.IsStatusConditionTrue(a.Status.Conditions, flexv1.ReadyCondition)
		}, BeTrue()))
		Expect(a.Labels[flexv1.IDLabel]).To(Equal(id), "the id is stable")
	})
})

func eventReasons(g Gomega, ctx SpecContext, ns, name string) []string {
	events := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	var reasons []string
	for _, ev := range events.Items {
		if ev.Regarding.Name == name {
			reasons = append(reasons, ev.Reason)
		}
	}
	return reasons
}
