package controllers_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
)

// The in-flight protocol: a site created by a REST request is published once everything the
// request names exists, and deleted if the request's deadline passes first.
var _ = Describe("A site created by a request that writes more after it", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	marked := func(mpan string, marker household.InFlight) *flexv1.Site {
		return site(ns, mpan, func(s *flexv1.Site) { marker.Mark(s) })
	}
	evaluated := func(s *flexv1.Site) bool {
		return s.Status.ObservedGeneration == s.Generation && meta.IsStatusConditionTrue(s.Status.Conditions, flexv1.ReadyCondition)
	}

	It("is published, once, when everything the request named exists", func(ctx SpecContext) {
		charger := asset(ns, identity.SiteNameForMPAN("1200000000011"), "if-charger", cop11Charger)
		s := marked("1200000000011", household.InFlight{Until: time.Now().Add(time.Minute),
			Assets: []string{charger.Name}, Enrolments: []flexv1.PropositionName{lp}})
		create(ctx, s, charger)

		By("publishing nothing while the enrolment is missing: the site reads as not observed yet")
		// The controller has looked at the site (it gives a site its finalizer and id in the
		// pass that then finds it still being written): only now can "nothing published" mean
		// it decided so.
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) bool {
			return controllerutil.ContainsFinalizer(s, flexv1.Finalizer) && s.Labels[flexv1.IDLabel] != ""
		}, BeTrue()), "the site controller reconciled the marked site")
		Consistently(fetched(ctx, s), "1s").Should(SatisfyAll(
			WithTransform(func(s *flexv1.Site) int { return len(s.Status.Conditions) }, BeZero()),
			WithTransform(func(s *flexv1.Site) int64 { return s.Status.ObservedGeneration }, Equal(int64(-1)))))

		create(ctx, enrolment(ns, s.Name, lp))
		Eventually(fetched(ctx, s)).Should(WithTransform(evaluated, BeTrue()))
		Expect(eligibleFor(s)).To(ContainElement(lp))
	})

	It("is deleted, with its children, when the deadline passes first", func(ctx SpecContext) {
		charger := asset(ns, identity.SiteNameForMPAN("2301234567894"), "if-orphan", cop11Charger)
		s := marked("2301234567894", household.InFlight{Until: time.Now().Add(2 * time.Second),
			Assets: []string{charger.Name, "never-written"}})
		create(ctx, s, charger)

		Eventually(gone(ctx, s)).Should(BeTrue())
		Eventually(gone(ctx, charger)).Should(BeTrue())
		Eventually(func(g Gomega) []string { return eventReasons(g, ctx, ns, s.Name) }).Should(ContainElement("AbandonedOnboard"))
	})

	It("ignores a marker long past its deadline (a site restored from a backup)", func(ctx SpecContext) {
		s := marked("1012345678903", household.InFlight{Until: time.Now().Add(-time.Hour), Assets: []string{"restored-later"}})
		create(ctx, s)
		Eventually(fetched(ctx, s)).Should(WithTransform(evaluated, BeTrue()))
		Consistently(func() error { return k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s) }, "1s").Should(Succeed())
	})
})
