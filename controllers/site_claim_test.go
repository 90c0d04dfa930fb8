package controllers_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
)

var _ = Describe("A site declared by kubectl", func() {
	It("gets the MPAN claim from its controller, a second site of the MPAN is refused it, and deleting the first frees it", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		const mpan = "1200000000011"
		named := func(name string) func(*flexv1.Site) { return func(s *flexv1.Site) { s.Name = name } }
		first := site(ns, mpan, named("declared-first"))
		claimKey := client.ObjectKey{Namespace: ns, Name: identity.MPANClaimName(mpan)}
		holder := func(g Gomega) string {
			claim := &flexv1.MPANClaim{}
			err := k8sClient.Get(ctx, claimKey, claim)
			if apierrors.IsNotFound(err) {
				return ""
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(claim.Spec.MPAN).To(Equal(mpan))
			return claim.Spec.SiteName
		}
		create(ctx, first)
		Eventually(holder).Should(Equal(first.Name), "the declared site claims its MPAN")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(first.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
		}).Should(Succeed())

		second := site(ns, mpan, named("declared-second"))
		create(ctx, second)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			stalled := meta.FindStatusCondition(second.Status.Conditions, flexv1.StalledCondition)
			g.Expect(stalled).NotTo(BeNil())
			g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(stalled.Reason).To(Equal(flexv1.ReasonMPANTaken))
			g.Expect(stalled.Message).To(ContainSubstring(first.Name))
		}).Should(Succeed(), "the second site reports the MPAN taken")
		Expect(holder(Default)).To(Equal(first.Name), "the claim stays the first site's")

		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(gone(ctx, first)).Should(BeTrue())
		Eventually(holder).Should(Equal(second.Name), "the claim freed by the deletion goes to the second site")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(second), second)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(second.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
			g.Expect(meta.FindStatusCondition(second.Status.Conditions, flexv1.StalledCondition)).To(BeNil())
		}).Should(Succeed())
	})

	It("is refused the MPAN a site named after it holds, and takes it once that site is gone", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		const mpan = "1200000000011"
		byName := site(ns, mpan)
		declared := site(ns, mpan, func(s *flexv1.Site) { s.Name = "declared-later" })
		create(ctx, byName)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(byName), byName)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(byName.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
		}).Should(Succeed())
		create(ctx, declared)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(declared), declared)).To(Succeed())
			g.Expect(meta.FindStatusCondition(declared.Status.Conditions, flexv1.StalledCondition)).To(
				HaveField("Reason", flexv1.ReasonMPANTaken))
		}).Should(Succeed(), "the declared site reports the MPAN taken")
		claim := &flexv1.MPANClaim{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.MPANClaimName(mpan)}, claim)).To(
			WithTransform(apierrors.IsNotFound, BeTrue()), "no claim against the site that holds the MPAN by its name")

		Expect(k8sClient.Delete(ctx, byName)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.MPANClaimName(mpan)}, claim)).To(Succeed())
			g.Expect(claim.Spec.SiteName).To(Equal(declared.Name))
		}).Should(Succeed(), "the declared site claims the MPAN once the holder is gone")
	})

	// A PATCH of a site's MPAN claims the new MPAN, writes the site, and on a failure (a timeout
	// after the write was applied) deletes its claim and puts the old MPAN back: between the two,
	// the controller sees the site stored with an MPAN it holds by no claim, and claims it. That
	// claim must go as soon as the site is back, not once stale (ClaimGrace).
	It("releases the claim it made as soon as the site is back on the MPAN its name holds", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		const mpan, moved = "1200000000011", "2301234567894"
		s := site(ns, mpan)
		create(ctx, s)
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
		}).Should(Succeed())
		setMPAN := func(to string) {
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
				s.Spec.MPAN = to
				g.Expect(k8sClient.Update(ctx, s)).To(Succeed())
			}).Should(Succeed())
		}

		setMPAN(moved) // the request's write, its claim already rolled back
		claim := &flexv1.MPANClaim{}
		claimKey := client.ObjectKey{Namespace: ns, Name: identity.MPANClaimName(moved)}
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, claimKey, claim)).To(Succeed())
			g.Expect(claim.Spec.SiteName).To(Equal(s.Name))
			g.Expect(household.Declared(claim)).To(BeTrue())
		}).Should(Succeed(), "the controller claims the MPAN the site is stored with")

		setMPAN(mpan) // the rollback puts the old MPAN back
		Eventually(func() bool { return apierrors.IsNotFound(k8sClient.Get(ctx, claimKey, &flexv1.MPANClaim{})) }).
			WithTimeout(household.ClaimGrace/4).Should(BeTrue(), "the controller's claim is released at once, not after the grace")
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
		}).Should(Succeed())
	})
})
