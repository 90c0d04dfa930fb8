package e2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/validation"
)

// householdView is what a household looks like once stored, with what legitimately differs
// between two stores of the same household left out: API ids, timestamps, resourceVersions.
type householdView struct {
	SiteSpec   flexv1.SiteSpec
	SiteStatus flexv1.SiteStatus
	Assets     map[string]assetView
	Enrolments map[string]enrolmentView
}

type assetView struct {
	Spec   flexv1.AssetSpec
	Status flexv1.AssetStatus
}

type enrolmentView struct {
	Spec   flexv1.EnrolmentSpec
	Phase  flexv1.EnrolmentPhase
	Issues []flexv1.EligibilityIssue
	Ready  []metav1.Condition
}

func withoutTimes(conds []metav1.Condition) []metav1.Condition {
	out := make([]metav1.Condition, len(conds))
	for i, c := range conds {
		c.LastTransitionTime = metav1.Time{}
		out[i] = c
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// viewOf reads the household of siteName in ns straight from the API server.
func viewOf(ctx context.Context, g Gomega, ns, siteName string) householdView {
	site := getSite(ctx, g, ns, siteName)
	st := *site.Status.DeepCopy()
	st.Conditions = withoutTimes(st.Conditions)
	// What the evaluation was computed from digests the assets' UIDs, which differ between
	// any two stores of one household (like the ids and enrolment UIDs below).
	st.EvaluatedFrom.Assets = ""
	for i := range st.Assets {
		st.Assets[i].ID = ""
	}
	sort.Slice(st.Assets, func(i, j int) bool { return st.Assets[i].Name < st.Assets[j].Name })
	for i := range st.EnrolmentHistory {
		st.EnrolmentHistory[i].EnrolmentUID = ""
		st.EnrolmentHistory[i].EnrolledAt, st.EnrolmentHistory[i].WithdrawnAt = nil, metav1.Time{}
	}
	v := householdView{SiteSpec: site.Spec, SiteStatus: st, Assets: map[string]assetView{}, Enrolments: map[string]enrolmentView{}}

	assets := &flexv1.AssetList{}
	g.Expect(env.Client.List(ctx, assets, client.InNamespace(ns))).To(Succeed())
	for _, a := range assets.Items {
		a.Status.Conditions = withoutTimes(a.Status.Conditions)
		v.Assets[a.Name] = assetView{Spec: a.Spec, Status: a.Status}
	}
	enrolments := &flexv1.EnrolmentList{}
	g.Expect(env.Client.List(ctx, enrolments, client.InNamespace(ns))).To(Succeed())
	for _, e := range enrolments.Items {
		v.Enrolments[e.Name] = enrolmentView{Spec: e.Spec, Phase: e.Status.Phase, Issues: e.Status.Issues,
			Ready: withoutTimes(e.Status.Conditions)}
	}
	return v
}

var _ = Describe("REST and kubectl", func() {
	It("store the same household the same way, and agree on its eligibility", func(ctx SpecContext) {
		first12 := "10123456789" + fmt.Sprint(time.Now().UnixNano()%10)
		mpan := first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
		_, err := validation.NormaliseMPAN(mpan)
		Expect(err).NotTo(HaveOccurred())
		siteName := identity.SiteNameForMPAN(mpan)
		chargerID, batteryID := "charger-"+mpan, "battery-"+mpan

		By("onboarding through REST in one organisation")
		restOrg := newOrg(ctx, fmt.Sprintf("e2e-rest-%d", time.Now().UnixNano()%1_000_000_000))
		tok := restOrg.token()
		status, body := call("POST", "/entities/site/onboard", tok, map[string]any{
			"site": map[string]any{
				"mpan": mpan, "postcode": "sw1a 1aa", "street_address": "10 Downing Street",
				"email": "resident@example.com", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z",
			},
			"assets": []any{
				map[string]any{"external_id": chargerID, "type": "charger", "asset_model": "zappi",
					"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}},
				map[string]any{"external_id": batteryID, "type": "battery",
					"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}},
			},
			"proposition": "limited_pause",
		})
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		answer := body.Map()
		Expect(answer).To(HaveKeyWithValue("enrolment", HaveKeyWithValue("status", "enrolled")))
		siteID, _ := answer["site"].(map[string]any)["site_id"].(string)
		Expect(siteID).NotTo(BeEmpty(), "%s", body)

		By("applying the equivalent YAML with kubectl in another")
		kubeNS := newNamespace(ctx, "e2e-kubectl")
		r := kubectlIn(ctx, fmt.Sprintf(`apiVersion: flexsite.io/v1alpha1
kind: Site
metadata:
  name: %[2]s
  namespace: %[1]s
spec:
  mpan: "%[3]s"
  postcode: SW1A 1AA
  streetAddress: 10 Downing Street
  email: resident@example.com
  boundaryMeterConsentAt: "2026-01-15T10:30:00Z"
---
apiVersion: flexsite.io/v1alpha1
kind: Asset
metadata:
  name: %[4]s
  namespace: %[1]s
spec:
  siteName: %[2]s
  externalID: %[5]s
  type: charger
  model: zappi
  installationDate: "2025-06-15"
  powerW: 7400
---
apiVersion: flexsite.io/v1alpha1
kind: Asset
metadata:
  name: %[6]s
  namespace: %[1]s
spec:
  siteName: %[2]s
  externalID: %[7]s
  type: battery
  powerW: 5000
  capacityWh: 13500
---
apiVersion: flexsite.io/v1alpha1
kind: Enrolment
metadata:
  name: %[8]s
  namespace: %[1]s
spec:
  siteName: %[2]s
  proposition: limited_pause
`, kubeNS, siteName, mpan, identity.AssetName(chargerID), chargerID, identity.AssetName(batteryID), batteryID,
			identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)), "apply", "-f", "-")
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)

		By("both converge")
		for _, ns := range []string{restOrg.Namespace, kubeNS} {
			Eventually(func(g Gomega) {
				settled(ctx, g, ns)
				v := viewOf(ctx, g, ns, siteName)
				g.Expect(v.SiteStatus.Assets).To(HaveLen(2))
				g.Expect(v.Enrolments).To(HaveLen(1))
			}).Should(Succeed(), "namespace %s", ns)
		}

		By("and are stored alike")
		viaREST := viewOf(ctx, Default, restOrg.Namespace, siteName)
		viaKubectl := viewOf(ctx, Default, kubeNS, siteName)
		Expect(viaKubectl).To(Equal(viaREST))
		Expect(viaREST.SiteStatus.EligiblePropositions).To(ConsistOf(flexv1.AllPropositions))
		Expect(viaREST.Enrolments).To(HaveKeyWithValue(identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause),
			HaveField("Phase", flexv1.EnrolmentActive)))

		By("the REST eligibility answer matches the status kubectl shows")
		status, body = call("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		eligible, _ := body.Map()["eligible_propositions"].([]any)
		out := mustKubectl(Default, ctx, "get", "site", "-n", kubeNS, siteName, "-o", "jsonpath={.status.eligiblePropositions}")
		Expect(out).To(MatchJSON(mustJSON(eligible)))
	})
})

func mustJSON(v any) string {
	data, err := json.Marshal(v)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return string(data)
}
