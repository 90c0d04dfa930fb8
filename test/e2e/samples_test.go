package e2e_test

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The samples own the namespace "demo" (config/samples/00_organisation.yaml), which `make run`
// creates first with its demo API client, as this suite's first spec does. The specs build on
// one another, so they run in order: apply, re-apply, withdraw.

const (
	demo            = "demo"
	demoSite        = "mpan-1200000000011"
	demoHHSite      = "mpan-2301234567894"
	demoEnrolment   = "mpan-1200000000011.limited-pause"
	demoHHEnrolment = "mpan-2301234567894.full-asset-schedule-control"
	allEligible     = `["limited_pause","full_asset_schedule_control","price_curve"]`
)

func samplesDir() string { return filepath.Join(testenv.RepoRoot(), "config", "samples") }

var _ = Describe("The samples, through kubectl", Ordered, func() {
	It("apply without a warning after make run's bootstrap, converge within seconds, and read well with get, explain and describe", func(ctx SpecContext) {
		By("make run's bootstrap has made the default rules (the suite's environment) and the demo organisation")
		Expect(bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.DemoOrganisation("flexsite-demo"))).To(Succeed())

		By("kubectl apply -f config/samples/ says nothing on stderr: what the bootstrap made is unchanged")
		r := kubectl(ctx, "apply", "-f", samplesDir())
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(BeEmpty(), "%s", r)
		out := r.Stdout
		Expect(out).To(ContainSubstring("namespace/demo unchanged"))
		for _, name := range []string{
			"proposition.flexsite.io/limited-pause", "proposition.flexsite.io/full-asset-schedule-control", "proposition.flexsite.io/price-curve",
			"assetmodel.flexsite.io/myenergi-zappi", "assetmodel.flexsite.io/legacy-charger",
		} {
			Expect(out).To(ContainSubstring(name+" unchanged"), "%s", r)
		}
		Expect(out).To(ContainSubstring("site.flexsite.io/" + demoSite + " created"))
		Expect(out).To(ContainSubstring("enrolment.flexsite.io/" + demoHHEnrolment + " created"))

		By("eligibility reaches status within seconds")
		Eventually(func(g Gomega) {
			out := mustKubectl(g, ctx, "get", "sites", "-n", demo, "-o",
				`jsonpath={range .items[*]}{.metadata.name}{"="}{.status.eligiblePropositions}{"\n"}{end}`)
			g.Expect(strings.Split(strings.TrimSpace(out), "\n")).To(ConsistOf(
				demoSite+"="+allEligible,
				demoHHSite+"="+allEligible,
			))
		}).Should(Succeed())

		By("both enrolments become Active")
		mustKubectl(Default, ctx, "wait", "--for=jsonpath={.status.phase}=Active", "enrolment", "--all", "-n", demo, "--timeout=30s")

		By("the flexsite category lists every kind")
		out = mustKubectl(Default, ctx, "get", "flexsite", "-n", demo)
		for _, name := range []string{
			"site.flexsite.io/" + demoSite, "site.flexsite.io/" + demoHHSite,
			"asset.flexsite.io/asset-charger-001", "asset.flexsite.io/asset-battery-001", "asset.flexsite.io/asset-heat-pump-7",
			"enrolment.flexsite.io/" + demoEnrolment, "enrolment.flexsite.io/" + demoHHEnrolment,
		} {
			Expect(out).To(ContainSubstring(name))
		}

		By("kubectl get sites prints the documented columns")
		out = mustKubectl(Default, ctx, "get", "sites", "-n", demo)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		Expect(lines).To(HaveLen(3), out)
		Expect(strings.Fields(lines[0])).To(Equal([]string{"NAME", "MPAN", "POSTCODE", "ELIGIBLE", "READY", "AGE"}))
		Expect(out).To(MatchRegexp(`(?m)^` + demoSite + `\s+1200000000011\s+SW1A 1AA\s+` + regexp.QuoteMeta(allEligible) + `\s+True\s+`))
		Expect(out).To(MatchRegexp(`(?m)^` + demoHHSite + `\s+2301234567894\s+M1 1AE\s+` + regexp.QuoteMeta(allEligible) + `\s+True\s+`))

		By("kubectl explain documents the fields")
		out = mustKubectl(Default, ctx, "explain", "site.spec.mpan")
		Expect(out).To(ContainSubstring("FIELD: mpan <string>"))
		Expect(out).To(ContainSubstring("13-digit core of the site's Meter Point Administration Number"))

		By("kubectl describe shows the Enrolled event")
		Eventually(func(g Gomega) {
			out := mustKubectl(g, ctx, "describe", "enrolment", "-n", demo, demoEnrolment)
			g.Expect(out).To(ContainSubstring("Phase:"))
			g.Expect(out).To(MatchRegexp(`(?ms)^Events:.*^\s+Normal\s+Enrolled\s+.*is enrolled in limited_pause`))
		}).Should(Succeed())
	})

	It("apply a second time without changing anything", func(ctx SpecContext) {
		Eventually(func(g Gomega) { settled(ctx, g, demo) }).Should(Succeed())
		before := resourceVersions(Default, ctx, demo)
		Expect(before).To(HaveLen(7), "2 sites, 3 assets and 2 enrolments: %v", before)

		r := kubectl(ctx, "apply", "-f", samplesDir())
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(BeEmpty(), "%s", r)
		out := r.Stdout
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			if strings.Contains(line, ".flexsite.io/") {
				Expect(line).To(HaveSuffix(" unchanged"))
			}
		}
		Expect(resourceVersions(Default, ctx, demo)).To(Equal(before), "the second apply wrote to Flexsite objects")

		By("and nothing churns afterwards")
		Consistently(func(g Gomega) map[string]string { return resourceVersions(g, ctx, demo) }).Should(Equal(before))
	})

	It("remembers a withdrawal whichever door the next enrolment comes through", func(ctx SpecContext) {
		mustKubectl(Default, ctx, "wait", "--for=jsonpath={.status.phase}=Active", "enrolment", demoEnrolment, "-n", demo, "--timeout=30s")

		By("kubectl delete of an Active enrolment records a withdrawal in the Site's status")
		mustKubectl(Default, ctx, "delete", "enrolment", "-n", demo, demoEnrolment, "--timeout=30s")
		Eventually(func(g Gomega) {
			site := getSite(ctx, g, demo, demoSite)
			g.Expect(site.Status.EnrolmentHistory).To(ContainElement(And(
				HaveField("Proposition", flexv1.PropositionLimitedPause), HaveField("EnrolledAt", Not(BeNil())))))
		}).Should(Succeed())

		By("re-applying the sample's enrolment is refused, naming spec.overrideWithdrawal")
		r := kubectl(ctx, "apply", "-f", filepath.Join(samplesDir(), "10_household.yaml"))
		Expect(r.Err).To(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(ContainSubstring(`The Enrolment "` + demoEnrolment + `" is invalid: spec.overrideWithdrawal: Forbidden`))
		r = kubectl(ctx, "get", "enrolment", "-n", demo, demoEnrolment)
		Expect(r.Err).To(HaveOccurred())
		Expect(r.Stderr).To(ContainSubstring("NotFound"))

		By("the REST API refuses to enrol without override_withdrawal")
		apiClient := newOrg(ctx, demo)
		tok := apiClient.token()
		site := &flexv1.Site{}
		Expect(env.Client.Get(ctx, clientKey(demo, demoSite), site)).To(Succeed())
		siteID := site.Labels[flexv1.IDLabel]
		Expect(siteID).NotTo(BeEmpty(), "the controller gives kubectl-made sites an id")
		path := "/entities/site/" + siteID + "/enrol"
		status, body := call("POST", path, tok, map[string]any{"proposition": "limited_pause"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", body)
		detail, ok := body.Map()["detail"].(map[string]any)
		Expect(ok).To(BeTrue(), "%s", body)
		Expect(detail).To(HaveKeyWithValue("code", "previously_withdrew"))

		By("and enrols with override_withdrawal")
		status, body = call("POST", path, tok, map[string]any{"proposition": "limited_pause", "override_withdrawal": true})
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()).To(HaveKeyWithValue("status", "enrolled"))
		mustKubectl(Default, ctx, "wait", "--for=jsonpath={.status.phase}=Active", "enrolment", demoEnrolment, "-n", demo, "--timeout=30s")
		Expect(mustKubectl(Default, ctx, "get", "enrolment", "-n", demo, demoEnrolment, "-o", "jsonpath={.spec.overrideWithdrawal}")).
			To(Equal("true"))
	})
})

// settled succeeds once every Site, Asset and Enrolment of ns reflects its current spec.
func settled(ctx context.Context, g Gomega, ns string) {
	sites := &flexv1.SiteList{}
	g.Expect(env.Client.List(ctx, sites, client.InNamespace(ns))).To(Succeed())
	for _, s := range sites.Items {
		g.Expect(s.Status.ObservedGeneration).To(Equal(s.Generation), "site %s", s.Name)
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue(), "site %s", s.Name)
		g.Expect(s.Labels).To(HaveKey(flexv1.IDLabel), "site %s", s.Name)
	}
	assets := &flexv1.AssetList{}
	g.Expect(env.Client.List(ctx, assets, client.InNamespace(ns))).To(Succeed())
	for _, a := range assets.Items {
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation), "asset %s", a.Name)
		g.Expect(meta.IsStatusConditionTrue(a.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue(), "asset %s", a.Name)
	}
	enrolments := &flexv1.EnrolmentList{}
	g.Expect(env.Client.List(ctx, enrolments, client.InNamespace(ns))).To(Succeed())
	for _, e := range enrolments.Items {
		g.Expect(e.Status.ObservedGeneration).To(Equal(e.Generation), "enrolment %s", e.Name)
		g.Expect(e.Status.Phase).To(Equal(flexv1.EnrolmentActive), "enrolment %s", e.Name)
	}
}

// resourceVersions maps kind/name to resourceVersion for every Site, Asset and Enrolment of
// ns, as kubectl reads them.
func resourceVersions(g Gomega, ctx context.Context, ns string) map[string]string {
	out := mustKubectl(g, ctx, "get", "sites,assets,enrolments", "-n", ns, "-o",
		`jsonpath={range .items[*]}{.kind}/{.metadata.name}{"="}{.metadata.resourceVersion}{"\n"}{end}`)
	rvs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		name, rv, ok := strings.Cut(line, "=")
		g.ExpectWithOffset(1, ok).To(BeTrue(), "%q", line)
		rvs[name] = rv
	}
	return rvs
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }

// getSite reads a Site straight from the API server.
func getSite(ctx context.Context, g Gomega, ns, name string) *flexv1.Site {
	site := &flexv1.Site{}
	g.Expect(env.Client.Get(ctx, clientKey(ns, name), site)).To(Succeed())
	return site
}
