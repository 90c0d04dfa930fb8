package admission_test

import (
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func subscription(ns, name string) *flexv1.Subscription {
	return &flexv1.Subscription{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.SubscriptionSpec{URL: "https://receiver.example.com/flexsite",
			SecretRef: flexv1.SecretKeyReference{Name: "subscription-secret", Key: "secret"}},
	}
}

var _ = Describe("Subscription webhook", func() {
	It("refuses an organisation's subscription past the cap, as the REST API does, and takes one again once one is deleted",
		func(ctx SpecContext) {
			ns, err := env.Namespace(ctx)
			Expect(err).NotTo(HaveOccurred())
			for i := range maxSubscriptions {
				Expect(k8sClient.Create(ctx, subscription(ns, fmt.Sprintf("declared-%d", i)))).To(Succeed())
			}

			By("one more is refused once the webhook's cache has seen them")
			attempt := 0
			Eventually(func(g Gomega) {
				attempt++
				sub := subscription(ns, fmt.Sprintf("one-too-many-%d", attempt))
				err := k8sClient.Create(ctx, sub)
				if err == nil {
					// The webhook's cache had not seen the three yet: take this one back and ask again.
					g.Expect(k8sClient.Delete(ctx, sub)).To(Succeed())
				}
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(`admission webhook "vsubscription.flexsite.io" denied the request: ` +
					`subscriptions.flexsite.io "` + sub.Name + `" is forbidden: The organisation has ` +
					fmt.Sprint(maxSubscriptions) + ` notification subscriptions, the most it may have; delete one before adding another`))
			}).Should(Succeed())

			By("another organisation's are its own")
			other, err := env.Namespace(ctx)
			Expect(err).NotTo(HaveOccurred())
			Expect(k8sClient.Create(ctx, subscription(other, "first"))).To(Succeed())

			By("a change to a subscription needs no room")
			sub := &flexv1.Subscription{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "declared-0"}, sub)).To(Succeed())
			sub.Spec.Paused = true
			Expect(k8sClient.Update(ctx, sub)).To(Succeed())

			By("deleting one makes room")
			Expect(k8sClient.Delete(ctx, sub)).To(Succeed())
			Eventually(func() error { return k8sClient.Create(ctx, subscription(ns, "replacement")) }).Should(Succeed())
		})
})
