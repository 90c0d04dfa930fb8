package controllers_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/shards"
)

const (
	lp   = flexv1.PropositionLimitedPause
	fasc = flexv1.PropositionFullAssetScheduleControl
	pc   = flexv1.PropositionPriceCurve
)

var _ = Describe("Site eligibility", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) { ns = newNamespace(ctx) })

	It("computes eligibility from the site's assets into status, with conditions and an id", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		charger := asset(ns, s.Name, "charger-001", cop11Charger)
		battery := asset(ns, s.Name, "battery-001", func(a *flexv1.Asset) { a.Spec.Type = flexv1.AssetTypeBattery })
		create(ctx, s, charger, battery)

		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) int { return len(s.Status.Assets) }, Equal(2)))
		Expect(eligibleFor(s)).To(Equal([]flexv1.PropositionName{lp, fasc, pc}))
		Expect(s.Labels[flexv1.IDLabel]).To(MatchRegexp(`^[0-9a-f-]{36}$`))
		Expect(s.Finalizers).To(ContainElement(flexv1.Finalizer))
		Expect(s.Status.ObservedGeneration).To(Equal(s.Generation))
		Expect(s.Status.Properties).To(Equal(flexv1.SiteProperties{HasMeterConsent: false, IsHalfHourlySettled: false}))
		Expect(issuesOf(s, charger.Name, lp)).To(BeEmpty())
		Expect(issuesOf(s, battery.Name, lp)).To(Equal([]flexv1.EligibilityIssue{
			flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet}))
		// full_asset_schedule_control needs consent to enrol, not to be eligible: the
		// Enrolment, not the Site, reports the missing consent.
		Expect(issuesOf(s, charger.Name, fasc)).To(BeEmpty())

		ready := meta.FindStatusCondition(s.Status.Conditions, flexv1.ReadyCondition)
		Expect(ready).NotTo(BeNil())
		Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		Expect(ready.ObservedGeneration).To(Equal(s.Generation))
		Expect(meta.IsStatusConditionTrue(s.Status.Conditions, flexv1.EligibleCondition)).To(BeTrue())

		By("recording each asset's API id in the eligibility detail")
		Eventually(fetched(ctx, charger)).Should(WithTransform(func(a *flexv1.Asset) string { return a.Labels[flexv1.IDLabel] }, Not(BeEmpty())))
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) string {
			for _, a := range s.Status.Assets {
				if a.Name == charger.Name {
					return a.ID
				}
			}
			return ""
		}, Equal(charger.Labels[flexv1.IDLabel])))
	})

	It("follows an asset's model and installation date", func(ctx SpecContext) {
		s := site(ns, "2301234567894")
		a := asset(ns, s.Name, "ev-charger")
		create(ctx, s, a)
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet})))
		Expect(meta.FindStatusCondition(s.Status.Conditions, flexv1.EligibleCondition).Reason).To(Equal(flexv1.ReasonNotEligible))

		By("naming a model the catalogue does not know")
		patchAsset(ctx, a, func(a *flexv1.Asset) { a.Spec.Model = "no-such-model"; a.Spec.InstallationDate = "2025-01-01" })
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetModelNotFound})))

		By("naming a model that is not CoP11 qualified")
		patchAsset(ctx, a, func(a *flexv1.Asset) { a.Spec.Model = "generic_heat_pump" })
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetModelNotCoP11Qualified})))

		By("naming a model whose override blocks limited_pause")
		patchAsset(ctx, a, func(a *flexv1.Asset) { a.Spec.Model = "legacy_charger" })
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetModelEnrolEligibilityOverride})))

		By("naming a qualified model")
		patchAsset(ctx, a, func(a *flexv1.Asset) { a.Spec.Model = "zappi" })
		Eventually(fetched(ctx, s)).Should(WithTransform(eligibleFor, Equal([]flexv1.PropositionName{lp, fasc, pc})))
	})

	It("follows consent and half-hourly settlement", func(ctx SpecContext) {
		s := site(ns, "1012345678903")
		a := asset(ns, s.Name, "hp-1", func(a *flexv1.Asset) { a.Spec.Type = flexv1.AssetTypeHeatPump })
		create(ctx, s, a)
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) bool {
			return meta.IsStatusConditionFalse(s.Status.Conditions, flexv1.EligibleCondition)
		}, BeTrue()))

		patchSite(ctx, s, func(s *flexv1.Site) {
			s.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)}
			s.Spec.HalfHourlySettled = true
		})
		Eventually(fetched(ctx, s)).Should(WithTransform(eligibleFor, Equal([]flexv1.PropositionName{lp, fasc, pc})))
		Expect(s.Status.Properties).To(Equal(flexv1.SiteProperties{HasMeterConsent: true, IsHalfHourlySettled: true}))

		By("withdrawing consent")
		patchSite(ctx, s, func(s *flexv1.Site) { s.Spec.BoundaryMeterConsentAt = nil })
		Eventually(fetched(ctx, s)).Should(WithTransform(eligibleFor, BeEmpty()))
		Expect(s.Status.Properties.HasMeterConsent).To(BeFalse())

		By("marking the site non-domestic")
		patchSite(ctx, s, func(s *flexv1.Site) { s.Spec.NonDomestic = true })
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, ContainElement(flexv1.IssueNonDomesticSite)))
	})

	It("follows the asset-model catalogue", func(ctx SpecContext) {
		model := &flexv1.AssetModel{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "test-model-"},
			Spec:       flexv1.AssetModelSpec{ModelName: "catalogue-test-" + ns, CoP11Qualified: false},
		}
		create(ctx, model)
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, model))).To(Succeed()) })

		s := site(ns, "1234567890126")
		a := asset(ns, s.Name, "catalogue-charger", func(a *flexv1.Asset) {
			a.Spec.Model = model.Spec.ModelName
			a.Spec.InstallationDate = "2024-02-29"
		})
		create(ctx, s, a)
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetModelNotCoP11Qualified})))

		By("qualifying the model under CoP11")
		base := model.DeepCopy()
		model.Spec.CoP11Qualified = true
		Expect(k8sClient.Patch(ctx, model, client.MergeFrom(base))).To(Succeed())
		Eventually(fetched(ctx, s)).Should(WithTransform(eligibleFor, ContainElement(lp)))

		By("removing the model from the catalogue")
		Expect(k8sClient.Delete(ctx, model)).To(Succeed())
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, lp)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetModelNotFound})))
	})

	It("follows an asset removed from the site", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		a := asset(ns, s.Name, "removable", cop11Charger)
		create(ctx, s, a)
		Eventually(fetched(ctx, s)).Should(WithTransform(eligibleFor, ContainElement(lp)))
		Expect(k8sClient.Delete(ctx, a)).To(Succeed())
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) string {
			return meta.FindStatusCondition(s.Status.Conditions, flexv1.EligibleCondition).Reason
		}, Equal(flexv1.ReasonNoAssets)))
		Expect(s.Status.Assets).To(BeEmpty())
	})

	It("counts an asset the API server holds that the replica's cache does not yet hold (a household moving to this shard)",
		func(ctx SpecContext) {
			s := site(ns, "1200000000011")
			onShard := func(a *flexv1.Asset) { a.Labels = map[string]string{shards.ShardLabel: specShard} }
			arrived := asset(ns, s.Name, "arrived", cop11Charger, onShard)
			onItsWay := asset(ns, s.Name, "on-its-way", func(a *flexv1.Asset) { a.Spec.Type = flexv1.AssetTypeBattery })
			create(ctx, s, arrived, onItsWay)
			// The suite's manager (every household cached) evaluates both, each with its API id.
			Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.AssetEligibility { return s.Status.Assets },
				ConsistOf(SatisfyAll(HaveField("Name", arrived.Name), HaveField("ID", Not(BeEmpty()))),
					SatisfyAll(HaveField("Name", onItsWay.Name), HaveField("ID", Not(BeEmpty()))))))

			By("evaluating it on a replica whose cache holds only the ring's objects labelled for its shard")
			shard := shardCache(ctx)
			Eventually(func(g Gomega) {
				g.Expect(shard.GetCache().Get(ctx, client.ObjectKeyFromObject(arrived), &flexv1.Asset{})).To(Succeed())
			}).Should(Succeed())
			Expect(shard.GetCache().Get(ctx, client.ObjectKeyFromObject(onItsWay), &flexv1.Asset{})).
				To(MatchError(ContainSubstring("not found")), "the asset without the shard's label is not in its cache")
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
			was := s.Status.DeepCopy()
			Expect(controllers.EvaluateSite(ctx, shard, s)).To(Succeed(), "evaluated at once, not waiting for the asset")
			Expect(s.Status.Assets).To(Equal(was.Assets), "both assets counted, the one read from the API server too")
			Expect(s.Status.EligiblePropositions).To(Equal(was.EligiblePropositions))
			Expect(s.Status.EvaluatedFrom).To(Equal(was.EvaluatedFrom))
			Expect(meta.FindStatusCondition(s.Status.Conditions, flexv1.EligibleCondition).Reason).To(Equal(flexv1.ReasonEligible))

			By("not counting it once it is deleted")
			Expect(k8sClient.Delete(ctx, onItsWay)).To(Succeed())
			Expect(controllers.EvaluateSite(ctx, shard, s)).To(Succeed())
			Expect(s.Status.Assets).To(ConsistOf(HaveField("Name", arrived.Name)))
		})

	It("deletes the site's assets, enrolments, reward ledger and MPAN claims with it, recording no withdrawal", func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		a1 := asset(ns, s.Name, "del-1", cop11Charger)
		a2 := asset(ns, s.Name, "del-2")
		e := enrolment(ns, s.Name, lp)
		ledger := &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.RewardLedgerName(s.Name)},
			Spec: flexv1.RewardLedgerSpec{SiteName: s.Name, Transactions: []flexv1.RewardTransaction{{
				ID: "8c0e4a8e-4b7e-4d2a-9a53-1f0a7c3e2b11", Type: "flex event", CreditPence: 120}}},
		}
		claim := household.NewClaim(s, "2301234567894") // a change of MPAN on its way
		other := asset(ns, "some-other-site", "not-a-child")
		create(ctx, s, a1, a2, e, ledger, claim, other)
		Eventually(fetched(ctx, e)).Should(WithTransform(phaseOf, Equal(flexv1.EnrolmentActive)))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(claim), claim)).To(Succeed(), "a pending claim stays")

		Expect(k8sClient.Delete(ctx, s)).To(Succeed())
		for _, child := range []client.Object{a1, a2, e, ledger, claim, s} {
			Eventually(gone(ctx, child)).Should(BeTrue(), "%T %s", child, child.GetName())
		}
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(other), other)).To(Succeed(), "another site's asset must stay")
	})

	It("writes nothing when a resync finds nothing changed", Serial, func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		create(ctx, s, asset(ns, s.Name, "steady", cop11Charger))
		// Settled: eligible, and the asset's id (given by its controller after creation)
		// recorded in the site's status.
		Eventually(fetched(ctx, s)).Should(SatisfyAll(WithTransform(eligibleFor, ContainElement(lp)),
			WithTransform(func(s *flexv1.Site) []flexv1.AssetEligibility { return s.Status.Assets },
				ConsistOf(HaveField("ID", Not(BeEmpty()))))))
		Consistently(fetched(ctx, s), "1s").Should(WithTransform(func(s *flexv1.Site) string { return s.ResourceVersion }, Equal(s.ResourceVersion)))
		settled := s.ResourceVersion

		By("changing a proposition's description, which re-evaluates every site")
		sites := &flexv1.SiteList{}
		Expect(k8sClient.List(ctx, sites)).To(Succeed())
		before := reconcilesOf(Default, "site")
		prop := &flexv1.Proposition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "price-curve"}, prop)).To(Succeed())
		base := prop.DeepCopy()
		prop.Spec.Description = "touched at " + time.Now().Format(time.RFC3339Nano)
		Expect(k8sClient.Patch(ctx, prop, client.MergeFrom(base))).To(Succeed())
		// The re-evaluation has run (one reconcile per site at least; the spec is Serial, so
		// little else reconciles meanwhile): only now can "no write" mean it wrote nothing.
		Eventually(func(g Gomega) float64 { return reconcilesOf(g, "site") - before }).
			Should(BeNumerically(">=", len(sites.Items)), "the site controller re-evaluated every site")
		Consistently(fetched(ctx, s), "2s").Should(WithTransform(func(s *flexv1.Site) string { return s.ResourceVersion }, Equal(settled)))
	})

	It("follows a proposition's rules", Serial, func(ctx SpecContext) {
		s := site(ns, "1200000000011")
		a := asset(ns, s.Name, "rules-charger", cop11Charger)
		create(ctx, s, a)
		Eventually(fetched(ctx, s)).Should(WithTransform(eligibleFor, ContainElement(pc)))

		prop := &flexv1.Proposition{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "price-curve"}, prop)).To(Succeed())
		original := prop.DeepCopy()
		DeferCleanup(func(ctx SpecContext) {
			current := &flexv1.Proposition{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: "price-curve"}, current)).To(Succeed())
			current.Spec = original.Spec
			Expect(k8sClient.Update(ctx, current)).To(Succeed())
		})
		By("restricting price_curve to batteries")
		prop.Spec.AssetTypes = []flexv1.AssetType{flexv1.AssetTypeBattery}
		Expect(k8sClient.Update(ctx, prop)).To(Succeed())
		Eventually(fetched(ctx, s)).Should(WithTransform(func(s *flexv1.Site) []flexv1.EligibilityIssue {
			return issuesOf(s, a.Name, pc)
		}, Equal([]flexv1.EligibilityIssue{flexv1.IssueAssetTypeNotSupported})))
		Expect(s.Status.EligiblePropositions).NotTo(ContainElement(pc))
	})
})

func patchSite(ctx SpecContext, s *flexv1.Site, mutate func(*flexv1.Site)) {
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), s)).To(Succeed())
	base := s.DeepCopy()
	mutate(s)
	Expect(k8sClient.Patch(ctx, s, client.MergeFrom(base))).To(Succeed())
}

func patchAsset(ctx SpecContext, a *flexv1.Asset, mutate func(*flexv1.Asset)) {
	Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(a), a)).To(Succeed())
	base := a.DeepCopy()
	mutate(a)
	Expect(k8sClient.Patch(ctx, a, client.MergeFrom(base))).To(Succeed())
}

// specShard is the shard name of shardCache's replica.
const specShard = "spec-shard"

// shardCache starts a manager whose cache is a controller tier shard's (shards.OwnCache: the
// ring's kinds only where labelled for specShard), with the controllers' indexes, and runs
// nothing but its cache: for evaluating a site as a shard would, beside the suite's manager.
func shardCache(ctx SpecContext) ctrl.Manager {
	GinkgoHelper()
	mgr, err := env.NewManager(func(o *ctrl.Options) { o.Cache = shards.OwnCache(index.CacheOptions(), specShard) })
	Expect(err).NotTo(HaveOccurred())
	Expect(index.Register(ctx, mgr.GetFieldIndexer())).To(Succeed())
	mctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(mctx)).To(Succeed())
	}()
	DeferCleanup(func() { stop(); <-done })
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	return mgr
}
