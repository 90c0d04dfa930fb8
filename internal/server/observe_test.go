package server_test

import (
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/web"
)

// What the REST API tells its operators about each request: a request id on every answer, the
// request counted by route pattern, and every write named after the API client that made it.
var _ = Describe("Observability of the REST API", func() {
	It("answers every request with a request id: the caller's when sane, a fresh one otherwise", func() {
		resp := limitedCall(apiServer, "GET", "/healthz", "", "", "", web.HeaderRequestID, "trace-42.a_b")
		Expect(resp.Header.Get(web.HeaderRequestID)).To(Equal("trace-42.a_b"))
		resp = limitedCall(apiServer, "GET", "/no/such/route", "", "", "", web.HeaderRequestID, "bad id\twith spaces")
		Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
		Expect(resp.Header.Get(web.HeaderRequestID)).To(MatchRegexp(`^[0-9a-f-]{36}$`))
	})

	It("counts requests by route pattern, method and status, never by raw path", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		onboarded := metrics.HTTPRequests.WithLabelValues("/entities/site/onboard", "POST", "200")
		read := metrics.HTTPRequests.WithLabelValues("/entities/site/{site_id}", "GET", "200")
		before, readBefore := testutil.ToFloat64(onboarded), testutil.ToFloat64(read)
		siteID := onboardedSite(tok, validMPAN(8101))
		mustCall("GET", "/entities/site/"+siteID, tok, nil)
		Expect(testutil.ToFloat64(onboarded)).To(Equal(before + 1))
		Expect(testutil.ToFloat64(read)).To(Equal(readBefore + 1))
		Expect(testutil.CollectAndLint(metrics.HTTPRequests)).To(BeEmpty())
	})

	It("names the API client as the field manager of every REST write (managedFields)", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		mpan := validMPAN(8102)
		siteID := onboardedSite(tok, mpan)
		mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"email": "managed@example.com"})
		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
		managers := make([]string, 0, len(site.ManagedFields))
		for _, m := range site.ManagedFields {
			managers = append(managers, m.Manager)
		}
		Expect(managers).To(ContainElement(SatisfyAll(HavePrefix(auth.FieldManagerPrefix), Not(ContainSubstring(tok)))))
		for _, m := range site.ManagedFields {
			if strings.HasPrefix(m.Manager, auth.FieldManagerPrefix) && m.Operation == "Update" && m.Subresource == "" {
				Expect(m.FieldsV1.GetRawString()).To(ContainSubstring(`"f:email"`))
			}
		}
	})

	It("says what failed in RFC 6749's words at the token endpoint", func(ctx SpecContext) {
		o := newOrg(ctx)
		status, resp := call("POST", "/auth/token-form", "", form{"username": o.Username, "password": "wrong", "grant_type": "password"})
		Expect(status).To(Equal(http.StatusUnauthorized))
		Expect(resp.Map()).To(HaveKeyWithValue("error", "invalid_grant"))
		Expect(resp.Map()).To(HaveKeyWithValue("detail", "Incorrect username or password"))
		status, resp = call("POST", "/auth/token-form", "", form{"username": o.Username, "password": "x", "grant_type": "client_credentials"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity))
		Expect(resp.Map()).To(HaveKeyWithValue("error", "unsupported_grant_type"))
	})
})
