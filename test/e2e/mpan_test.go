package e2e_test

import (
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/validation"
)

// A household's meter point changes through either door (docs/platform.md "Changing a site's MPAN"): the
// site keeps its object name and id, and the MPAN it takes is claimed first, whether by REST
// (PATCH /entities/site) or by a platform team with kubectl.
var _ = Describe("Changing a site's MPAN through kubectl and REST", func() {
	// mpanLike is another valid MPAN beside the walker's, the n-th: never the walker's own
	// (a walker whose MPAN has n for its 11th and 12th digits gets n+50 instead).
	mpanLike := func(w walker, n int) string {
		if fmt.Sprintf("%02d", n) == w.mpan[10:12] {
			n = (n + 50) % 100
		}
		first12 := w.mpan[:10] + fmt.Sprintf("%02d", n)
		return first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
	}

	It("needs the claim with kubectl, makes it over REST, and answers 409 for an MPAN another site claims", func(ctx SpecContext) {
		w := newWalker(ctx)
		w.expectOnboard(false, http.StatusOK, "enrolled")
		b, c := mpanLike(w, 91), mpanLike(w, 92)

		By("refusing a kubectl MPAN change without the claim")
		r := kubectl(ctx, "-n", w.ns, "patch", "site", w.siteName, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"mpan":%q}}`, b))
		Expect(r.Err).To(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(ContainSubstring("changing a site's MPAN needs the MPANClaim " + identity.MPANClaimName(b)))

		By("accepting it once the claim names the site, as docs/platform.md shows")
		mustKubectlIn(ctx, fmt.Sprintf("apiVersion: flexsite.io/v1alpha1\nkind: MPANClaim\nmetadata: {name: %s}\nspec: {mpan: %q, siteName: %s}\n",
			identity.MPANClaimName(b), b, w.siteName), "-n", w.ns, "create", "-f", "-")
		mustKubectl(Default, ctx, "-n", w.ns, "patch", "site", w.siteName, "--type", "merge", "-p", fmt.Sprintf(`{"spec":{"mpan":%q}}`, b))
		// REST reads come from the manager's cache, which sees a kubectl write a moment later.
		Eventually(func(g Gomega) {
			status, body := call("GET", "/entities/site/"+w.siteID, w.token, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", body)
			g.Expect(body.MapG(g)).To(HaveKeyWithValue("mpan", b))
		}).Should(Succeed())

		By("moving back over REST: the site holds its first MPAN by its name again")
		status, body := call("PATCH", "/entities/site/"+w.siteID, w.token, map[string]any{"mpan": w.mpan})
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(getSite(ctx, Default, w.ns, w.siteName).Spec.MPAN).To(Equal(w.mpan))
		Eventually(func(g Gomega) string { return mustKubectl(g, ctx, "-n", w.ns, "get", "mpanclaims", "-o", "name") }).
			Should(BeEmpty(), "the claim it left is released, and the one it no longer needs")

		By("answering 409, not 500, when admission sees the MPAN claimed by another site")
		mustKubectlIn(ctx, fmt.Sprintf("apiVersion: flexsite.io/v1alpha1\nkind: MPANClaim\nmetadata: {name: %s}\nspec: {mpan: %q, siteName: elsewhere}\n",
			identity.MPANClaimName(c), c), "-n", w.ns, "create", "-f", "-")
		onboard := w.onboardBody(false)
		onboard["site"].(map[string]any)["mpan"] = c
		onboard["assets"].([]any)[0].(map[string]any)["external_id"] = "walk-other-" + c
		Eventually(func(g Gomega) {
			status, body = call("POST", "/entities/site/onboard", w.token, onboard)
			g.Expect(status).To(Equal(http.StatusConflict), "%s", body)
		}).Should(Succeed())
		Expect(mustKubectl(Default, ctx, "-n", w.ns, "get", "sites", "--field-selector", "spec.mpan="+c, "-o", "name")).To(BeEmpty())
		status, body = call("PATCH", "/entities/site/"+w.siteID, w.token, map[string]any{"mpan": c})
		Expect(status).To(Equal(http.StatusConflict), "%s", body)
	})
})
