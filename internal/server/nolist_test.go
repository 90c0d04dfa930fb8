package server_test

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/testenv"
)

// No request path LISTs: the API server answers a LIST of a namespace (a label or field
// selector included) by going through every object of it, so a request that lists costs more
// the bigger its organisation is (docs/scale.md, "Request paths: no LIST"). The manager's
// API-server requests made on behalf of each REST request are counted by verb (countAPICalls
// on the manager's transport; the cache's watches are not the request's), and no request here
// may make a LIST. The Enrolment webhook's side is the webhook suite's (webhook/nolist_test.go).
var _ = Describe("Request paths issue no LIST", func() {
	It("counts the API-server requests by verb of an onboard, an enrol, 100 unknown asset ids and 100 unknown site ids: no LIST", func(ctx SpecContext) {
		needDatabase()
		o := newOrg(ctx)
		tok := o.token()
		// The organisation already has a household: the namespace is not empty.
		mustCall("POST", "/entities/site/onboard", tok, household("1200000000011"))

		counted := func(tag, method, path string, body any, want int) {
			GinkgoHelper()
			status, resp, err := testenv.CallWithHeaders(apiServer.URL, method, path, tok, body,
				map[string]string{countHeader: tag})
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(want), "%s %s: %s", method, path, resp)
		}

		onboard := "nolist-onboard-" + o.Namespace
		status, resp, err := testenv.CallWithHeaders(apiServer.URL, "POST", "/entities/site/onboard", tok,
			household("1300000000016"), map[string]string{countHeader: onboard})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		siteID := response(resp).Map()["site"].(map[string]any)["site_id"].(string)

		// An enrol of a site that exists, in a proposition it is not enrolled in.
		enrol := "nolist-enrol-" + o.Namespace
		counted(enrol, "POST", "/entities/site/"+siteID+"/enrol", map[string]any{"proposition": "price_curve"}, http.StatusOK)

		unknownAssets := "nolist-unknown-assets-" + o.Namespace
		for range 100 {
			counted(unknownAssets, "GET", "/entities/asset/"+uuid.NewString(), nil, http.StatusNotFound)
		}
		unknownSites := "nolist-unknown-sites-" + o.Namespace
		for range 100 {
			counted(unknownSites, "GET", "/entities/site/"+uuid.NewString(), nil, http.StatusNotFound)
		}

		for _, tag := range []string{onboard, enrol, unknownAssets, unknownSites} {
			GinkgoWriter.Printf("FIGURES API-server requests by verb, %s: %s\n",
				strings.TrimSuffix(strings.TrimPrefix(tag, "nolist-"), "-"+o.Namespace), verbCounts(tag))
		}
		for _, tag := range []string{onboard, enrol, unknownAssets, unknownSites} {
			Expect(apiCallsOfVerb(tag, "list")).To(BeZero(), "LISTs made by %s (%s)", tag, verbCounts(tag))
			Expect(apiCallsOfVerb(tag, "deletecollection")).To(BeZero(), "%s (%s)", tag, verbCounts(tag))
		}
		Expect(apiCallsOf(unknownAssets)).To(BeZero(), "an unknown asset id is a cache lookup (%s)", verbCounts(unknownAssets))
		Expect(apiCallsOf(unknownSites)).To(BeZero(), "an unknown site id is a cache lookup (%s)", verbCounts(unknownSites))
	})
})

// verbCounts names the tag's API-server requests by verb ("create=4 get=2"), "none" for none.
func verbCounts(tag string) string {
	var parts []string
	apiCalls.Range(func(k, v any) bool {
		if verb, ok := strings.CutPrefix(k.(string), tag+" "); ok && !strings.Contains(verb, " ") {
			if n := v.(*atomic.Int64).Load(); n > 0 {
				parts = append(parts, fmt.Sprintf("%s=%d", verb, n))
			}
		}
		return true
	})
	if len(parts) == 0 {
		return "none"
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}
