package controllers_test

import (
	"context"
	"fmt"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Under load the controllers suite once read an Enrolment in phase NotEligible with no
// issues: the Site controller had evaluated the site before its asset reached the cache
// ("no assets"), and the Enrolment published that. A phase is published only with its
// reasons, and only from a verdict on the site's current spec and assets: every version of
// the Enrolments the API server held is checked here, through a watch, not only the ones a
// poll happens to see.
var _ = Describe("Enrolment phase", func() {
	It("is published only with its reasons, and is Pending until the site's verdict covers its assets", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		seen := watchEnrolments(ctx, ns)

		// Several households declared at once, each site with its asset and its enrolment in
		// one go, as an apply does: every race between the Site's evaluation, the asset
		// reaching the cache and the Enrolment's decision gets its chances.
		mpans := []string{"2301234567894", "1012345678903", "1234567890126", "1200000000011"}
		assets := make([]*flexv1.Asset, 0, len(mpans))
		enrolments := make([]*flexv1.Enrolment, 0, len(mpans))
		for i, mpan := range mpans {
			s := site(ns, mpan)
			a := asset(ns, s.Name, fmt.Sprintf("c%d", i))
			e := enrolment(ns, s.Name, lp)
			create(ctx, s, a, e)
			assets, enrolments = append(assets, a), append(enrolments, e)
		}
		for _, e := range enrolments {
			Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentNotEligible)))
			Expect(e.Status.Issues).To(ConsistOf(flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet))
		}
		for _, a := range assets {
			patchAsset(ctx, a, cop11Charger)
		}
		for _, e := range enrolments {
			Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
		}

		first := map[string]bool{}
		for _, v := range seen() {
			if !first[v.Name] {
				first[v.Name] = true
				Expect(v.Status.Phase).To(Equal(flexv1.EnrolmentPending), "%s: a new Enrolment reads Pending from its creation", v.Name)
			}
			Expect(phaseHasItsReasons(v)).To(Succeed(), "%s at resourceVersion %s", v.Name, v.ResourceVersion)
		}
		Expect(first).To(HaveLen(len(enrolments)))
	})
})

// phaseHasItsReasons checks one version of an Enrolment: a phase other than Pending comes
// with the Ready condition of the same generation that explains it, and NotEligible for the
// site's assets names their issues.
func phaseHasItsReasons(e *flexv1.Enrolment) error {
	ready := meta.FindStatusCondition(e.Status.Conditions, flexv1.ReadyCondition)
	switch e.Status.Phase {
	case flexv1.EnrolmentPending:
		return nil
	case "":
		return fmt.Errorf("no phase")
	}
	if ready == nil || ready.ObservedGeneration != e.Generation {
		return fmt.Errorf("phase %s without a Ready condition of generation %d: %v", e.Status.Phase, e.Generation, ready)
	}
	switch e.Status.Phase {
	case flexv1.EnrolmentActive:
		if ready.Status != metav1.ConditionTrue || len(e.Status.Issues) > 0 {
			return fmt.Errorf("Active with Ready %s and issues %v", ready.Status, e.Status.Issues)
		}
	case flexv1.EnrolmentNotEligible:
		if ready.Status != metav1.ConditionFalse {
			return fmt.Errorf("NotEligible with Ready %s", ready.Status)
		}
		if ready.Reason == flexv1.ReasonNotEligible && len(e.Status.Issues) == 0 {
			return fmt.Errorf("NotEligible without issues (%s)", ready.Message)
		}
	}
	return nil
}

// watchEnrolments records every version of the namespace's Enrolments from now on; seen
// stops the watch and answers them in order.
func watchEnrolments(ctx context.Context, ns string) (seen func() []*flexv1.Enrolment) {
	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &flexv1.EnrolmentList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	var (
		mu       sync.Mutex
		versions []*flexv1.Enrolment
		done     = make(chan struct{})
	)
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if e, ok := ev.Object.(*flexv1.Enrolment); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				mu.Lock()
				versions = append(versions, e)
				mu.Unlock()
			}
		}
	}()
	DeferCleanup(w.Stop)
	return func() []*flexv1.Enrolment {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return versions
	}
}
