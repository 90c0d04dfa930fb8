package e2e_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/validation"
)

// One household walked through both doors in turn: whichever door withdraws it, overrides the
// withdrawal or repeats a request, both doors give the same answer afterwards (docs/api.md,
// "Withdrawal and re-enrolment").
var _ = Describe("One household through kubectl and REST alternately", func() {
	var (
		w        walker
		enrolled = func(ctx context.Context) {
			GinkgoHelper()
			By("both doors agreeing the household is enrolled")
			w.expectEnrolmentActive(ctx)
			w.expectOnboard(false, http.StatusOK, "already_enrolled")
			w.expectEnrol(false, http.StatusOK, "already_enrolled")
		}
		withdrawn = func(ctx context.Context) {
			GinkgoHelper()
			By("both doors agreeing the household withdrew")
			w.expectNoEnrolment(ctx)
			w.expectOnboard(false, http.StatusUnprocessableEntity, "previously_withdrew")
			w.expectEnrol(false, http.StatusUnprocessableEntity, "previously_withdrew")
			r := w.applyEnrolment(ctx, "declared-without-override", false)
			Expect(r.Err).To(HaveOccurred(), "%s", r)
			Expect(r.Stderr).To(ContainSubstring("spec.overrideWithdrawal: Forbidden: The household withdrew from limited_pause"))
		}
	)

	BeforeEach(func(ctx SpecContext) { w = newWalker(ctx) })

	It("withdraw by kubectl, override by REST, repeat, withdraw by REST, override by kubectl apply", func(ctx SpecContext) {
		w.expectOnboard(false, http.StatusOK, "enrolled")
		enrolled(ctx)

		By("withdrawing by kubectl delete")
		w.deleteEnrolmentWithKubectl(ctx)
		withdrawn(ctx)

		By("overriding the withdrawal by REST onboard")
		w.expectOnboard(true, http.StatusOK, "enrolled")
		enrolled(ctx)
		By("repeating the same onboard without the flag, again and again")
		w.expectOnboard(false, http.StatusOK, "already_enrolled")

		By("withdrawing by REST unenrol")
		w.expectUnenrol("unenrolled")
		withdrawn(ctx)

		By("overriding by kubectl apply")
		r := w.applyEnrolment(ctx, "declared-with-override", true)
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)
		enrolled(ctx)
		w.expectHistory(ctx, 2)
	})

	It("withdraw by REST, override by kubectl, withdraw by kubectl, override by REST enrol", func(ctx SpecContext) {
		w.expectOnboard(false, http.StatusOK, "enrolled")
		w.expectUnenrol("unenrolled")
		w.expectUnenrol("already_unenrolled")
		withdrawn(ctx)

		r := w.applyEnrolment(ctx, "declared-with-override", true)
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)
		enrolled(ctx)

		w.deleteEnrolmentWithKubectl(ctx)
		withdrawn(ctx)

		w.expectEnrol(true, http.StatusOK, "enrolled")
		enrolled(ctx)
		w.expectHistory(ctx, 2)
	})

	It("fills in, never clears, whichever door stored a field", func(ctx SpecContext) {
		w.expectOnboard(false, http.StatusOK, "enrolled")

		By("a client that sends only what it knows, or empty strings, clears nothing")
		answer := w.initialise(map[string]any{"mpan": w.mpan, "postcode": "SW1A 1AA", "street_address": "", "email": ""})
		Expect(answer["site"]).To(HaveKeyWithValue("fields_updated", BeEmpty()))
		site := getSite(ctx, Default, w.ns, w.siteName)
		Expect(site.Spec.StreetAddress).To(Equal("10 Downing Street"))
		Expect(site.Spec.Email).To(Equal("resident@example.com"))

		By("a field corrected with kubectl is kept by the next initialise that leaves it out")
		mustKubectl(Default, ctx, "patch", "site", w.siteName, "-n", w.ns, "--type=merge",
			"-p", `{"spec":{"streetAddress":"11 Downing Street"}}`)
		answer = w.initialise(map[string]any{"mpan": w.mpan, "postcode": "SW1A 1AA"})
		Expect(answer["site"]).To(HaveKeyWithValue("fields_updated", BeEmpty()))
		Expect(getSite(ctx, Default, w.ns, w.siteName).Spec.StreetAddress).To(Equal("11 Downing Street"))

		By("a different value replaces it, and is named")
		answer = w.initialise(map[string]any{"mpan": w.mpan, "postcode": "SW1A 1AA", "email": "new@example.com"})
		Expect(answer["site"]).To(HaveKeyWithValue("fields_updated", ConsistOf("email")))
		Expect(getSite(ctx, Default, w.ns, w.siteName).Spec.Email).To(Equal("new@example.com"))

		By("initialise changes no enrolment")
		enrolled(ctx)
	})
})

// walker drives one household of a fresh organisation through both doors.
type walker struct {
	ns, token, mpan, siteName, siteID string
}

func newWalker(ctx context.Context) walker {
	first12 := fmt.Sprintf("10%010d", time.Now().UnixNano()%10_000_000_000)
	mpan := first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
	o := newOrg(ctx, newNamespace(ctx, "e2e-walk"))
	return walker{ns: o.Namespace, token: o.token(), mpan: mpan, siteName: identity.SiteNameForMPAN(mpan)}
}

func (w *walker) onboardBody(override bool) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": w.mpan, "postcode": "SW1A 1AA", "street_address": "10 Downing Street",
			"email": "resident@example.com"},
		"assets": []any{map[string]any{"external_id": "walk-charger-" + w.mpan, "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15"}},
		"proposition": "limited_pause", "override_withdrawal": override,
	}
}

// expectOnboard sends the household's onboard and checks the answer: the enrolment status on
// a 200, the error code on a 422.
func (w *walker) expectOnboard(override bool, wantStatus int, want string) {
	GinkgoHelper()
	status, body := call("POST", "/entities/site/onboard", w.token, w.onboardBody(override))
	Expect(status).To(Equal(wantStatus), "%s", body)
	if status == http.StatusOK {
		Expect(body.Map()["enrolment"]).To(HaveKeyWithValue("status", want), "%s", body)
		w.siteID = body.Map()["site"].(map[string]any)["site_id"].(string)
		return
	}
	Expect(body.Map()["detail"]).To(HaveKeyWithValue("code", want), "%s", body)
}

func (w *walker) expectEnrol(override bool, wantStatus int, want string) {
	GinkgoHelper()
	status, body := call("POST", "/entities/site/"+w.siteID+"/enrol", w.token,
		map[string]any{"proposition": "limited_pause", "override_withdrawal": override})
	Expect(status).To(Equal(wantStatus), "%s", body)
	if status == http.StatusOK {
		Expect(body.Map()).To(HaveKeyWithValue("status", want))
		return
	}
	Expect(body.Map()["detail"]).To(HaveKeyWithValue("code", want), "%s", body)
}

func (w *walker) expectUnenrol(want string) {
	GinkgoHelper()
	status, body := call("POST", "/entities/site/"+w.siteID+"/unenrol", w.token, map[string]any{"proposition": "limited_pause"})
	Expect(status).To(Equal(http.StatusOK), "%s", body)
	Expect(body.Map()).To(HaveKeyWithValue("status", want))
}

func (w *walker) initialise(site map[string]any) map[string]any {
	GinkgoHelper()
	status, body := call("POST", "/entities/site/initialise", w.token, map[string]any{
		"site": site, "assets": []any{map[string]any{"external_id": "walk-charger-" + w.mpan, "type": "charger"}}})
	Expect(status).To(Equal(http.StatusOK), "%s", body)
	return body.Map()
}

// liveEnrolments lists the household's enrolments in limited_pause that are not going away.
func (w *walker) liveEnrolments(ctx context.Context, g Gomega) []flexv1.Enrolment {
	list := &flexv1.EnrolmentList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(w.ns))).To(Succeed())
	var live []flexv1.Enrolment
	for _, e := range list.Items {
		if e.Spec.SiteName == w.siteName && e.DeletionTimestamp.IsZero() {
			live = append(live, e)
		}
	}
	return live
}

func (w *walker) expectEnrolmentActive(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		live := w.liveEnrolments(ctx, g)
		g.Expect(live).To(HaveLen(1))
		g.Expect(live[0].Status.Phase).To(Equal(flexv1.EnrolmentActive))
	}).Should(Succeed())
}

func (w *walker) expectNoEnrolment(ctx context.Context) {
	GinkgoHelper()
	Eventually(func(g Gomega) { g.Expect(w.liveEnrolments(ctx, g)).To(BeEmpty()) }).Should(Succeed())
}

func (w *walker) deleteEnrolmentWithKubectl(ctx context.Context) {
	GinkgoHelper()
	live := w.liveEnrolments(ctx, Default)
	Expect(live).To(HaveLen(1))
	mustKubectl(Default, ctx, "delete", "enrolment", live[0].Name, "-n", w.ns, "--timeout=30s")
}

// applyEnrolment declares an enrolment of the household with kubectl apply.
func (w *walker) applyEnrolment(ctx context.Context, name string, override bool) run {
	return kubectlIn(ctx, fmt.Sprintf(`apiVersion: flexsite.io/v1alpha1
kind: Enrolment
metadata:
  name: %s
  namespace: %s
spec:
  siteName: %s
  proposition: limited_pause
  overrideWithdrawal: %t
`, name, w.ns, w.siteName, override), "apply", "-f", "-")
}

func (w *walker) expectHistory(ctx context.Context, n int) {
	GinkgoHelper()
	Eventually(func(g Gomega) []flexv1.EnrolmentPeriod {
		return getSite(ctx, g, w.ns, w.siteName).Status.EnrolmentHistory
	}).Should(HaveLen(n))
}
