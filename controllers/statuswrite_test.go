package controllers_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
)

// A kubectl delete between a reconcile's read (from the cache) and its status write made the
// write fail with NotFound, which the reconciler returned as an error: an ERROR log and a
// retry for every object of a `kubectl delete -f`.
var _ = Describe("A status written for an object deleted since it was read", func() {
	It("is no error: there is nothing left to report on", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		s := site(ns, "1200000000011")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		a := asset(ns, s.Name, "gone-001", cop11Charger)
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
		Eventually(kstatusNow(ctx, a)).Should(Equal(status.CurrentStatus))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
		base := a.DeepCopy()
		Expect(k8sClient.Delete(ctx, a)).To(Succeed())
		Eventually(func(g Gomega) {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(a), &flexv1.Asset{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}).Should(Succeed())

		By("the write itself meets NotFound")
		changed := base.DeepCopy()
		res, err := controllers.WriteAssetStatus(ctx, k8sClient, base, changed, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(ctrl.Result{}))

		By("and so when the reconcile's own outcome was that NotFound (its metadata patch)")
		gone := apierrors.NewNotFound(schema.GroupResource{Group: "flexsite.io", Resource: "assets"}, a.Name)
		res, err = controllers.WriteAssetStatus(ctx, k8sClient, base, base.DeepCopy(), fmt.Errorf("patching: %w", gone))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(Equal(ctrl.Result{}))
	})
})
