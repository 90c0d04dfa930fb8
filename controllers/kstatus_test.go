package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// kstatusOf computes what kstatus (Flux health checks, kubectl apply --wait tooling, Argo CD's
// generic checks) makes of an object as the API server returns it.
func kstatusOf(obj client.Object) status.Status {
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: content})
	Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// kstatusNow reads obj afresh and computes its kstatus, for Eventually and Consistently.
func kstatusNow(ctx SpecContext, obj client.Object) func(Gomega) status.Status {
	return func(g Gomega) status.Status {
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		return kstatusOf(obj)
	}
}

var _ = Describe("kstatus", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("reports a new object InProgress until its controller has observed it, then an eligible household Current", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		a := asset(ns, s.Name, "ks-charger", cop11Charger)
		e := enrolment(ns, s.Name, lp)
		for _, obj := range []client.Object{s, a, e} {
			Expect(k8sClient.Create(ctx, obj)).To(Succeed())
			Expect(kstatusOf(obj)).To(Equal(status.InProgressStatus), "%T as created", obj)
		}
		for _, obj := range []client.Object{s, a, e} {
			Eventually(kstatusNow(ctx, obj)).Should(Equal(status.CurrentStatus), "%T", obj)
		}
		Expect(phaseOf(e)).To(Equal(flexv1.EnrolmentActive))
	})

	It("reports an enrolment that cannot become active Failed within seconds, never InProgress for long", func(ctx SpecContext) {
		s := site(ns, "2301234567894")
		e := enrolment(ns, s.Name, lp)
		create(ctx, s, asset(ns, s.Name, "ks-no-model"), e)
		Eventually(kstatusNow(ctx, e), 5*time.Second).Should(Equal(status.FailedStatus))
		Expect(phaseOf(e)).To(Equal(flexv1.EnrolmentNotEligible))
		Consistently(kstatusNow(ctx, e), "2s").Should(Equal(status.FailedStatus))
		By("the site itself is Current: not being eligible is its domain state, not a failure")
		Expect(kstatusNow(ctx, s)(Default)).To(Equal(status.CurrentStatus))

	})

	It("reports a spec change InProgress until observed, then Current", func(ctx SpecContext) {
		s := site(ns, "1012345678903")
		a := asset(ns, s.Name, "ks-spec", cop11Charger)
		create(ctx, s, a)
		Eventually(kstatusNow(ctx, s)).Should(Equal(status.CurrentStatus))
		Eventually(kstatusNow(ctx, a)).Should(Equal(status.CurrentStatus))

		for _, obj := range []client.Object{s, a} {
			// Controllers may still be writing (the asset's id reaching the site's status):
			// apply the change to the object as stored.
			Eventually(func() error {
				if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					return err
				}
				switch o := obj.(type) {
				case *flexv1.Site:
					o.Spec.StreetAddress = "1 New Street"
				case *flexv1.Asset:
					o.Spec.InstallationDate = "2025-07-01"
				}
				return k8sClient.Update(ctx, obj)
			}).Should(Succeed())
			// The API server's answer to the update: the new generation, not observed yet.
			Expect(kstatusOf(obj)).To(Equal(status.InProgressStatus), "%T as updated", obj)
			Eventually(kstatusNow(ctx, obj)).Should(Equal(status.CurrentStatus), "%T", obj)
			Expect(obj.(interface{ GetObservedGeneration() int64 }).GetObservedGeneration()).To(Equal(obj.GetGeneration()))
		}
	})
})
