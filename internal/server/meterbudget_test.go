package server_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

// budgeted is another REST API instance (a replica: the same cluster, cache and database)
// whose meter register lookups have the given budgets.
func budgeted(b server.MeterBudgets) *httptest.Server {
	GinkgoHelper()
	cfg := apiSrv.Config
	cfg.MeterBudgets = b
	srv := httptest.NewServer(server.NewServer(cfg))
	DeferCleanup(srv.Close)
	return srv
}

// readAnswer reads a response's status, Retry-After and body.
func readAnswer(resp *http.Response) (int, string, response) {
	GinkgoHelper()
	body, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, resp.Header.Get("Retry-After"), body
}

// untilHourEnds is the Retry-After of a budget whose UTC hour is spent at the suite's clock.
func untilHourEnds() string {
	now := clock.Load().UTC()
	left := now.Truncate(time.Hour).Add(time.Hour).Sub(now)
	return strconv.Itoa(int((left + time.Second - 1) / time.Second))
}

var _ = Describe("The meter register's lookup budget", func() {
	BeforeEach(func(ctx SpecContext) { ensureMeterRegister(ctx) })

	It("answers an organisation's lookups past its hour's budget 429 with Retry-After when the hour ends, on every replica, "+
		"counting lookups and refusals per organisation", func(ctx SpecContext) {
		budget := server.MeterBudgets{OrganisationPerHour: 4, OrganisationPerDay: 100}
		replicaA, replicaB := budgeted(budget), budgeted(budget)
		o := newOrg(ctx, flexv1.RoleEntityRead)
		tok, other := o.token(), newOrg(ctx, flexv1.RoleEntityRead).token()
		// The clock stays within one hour for the spec's first part.
		start := clock.Load().UTC().Truncate(time.Hour).Add(10 * time.Minute)
		was := *clock.Load()
		DeferCleanup(func() { clock.Store(&was) })
		clock.Store(&start)

		By("four lookups, one of each kind, spread over two replicas, are answered")
		status, _, resp := readAnswer(limitedCall(replicaA, "GET", "/meter/search?postcode=TN11AA&building_identifier=30", tok, "", ""))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		var found []map[string]any
		Expect(json.Unmarshal(resp, &found)).To(Succeed())
		Expect(found).To(HaveLen(1))
		status, _, resp = readAnswer(limitedCall(replicaB, "GET", "/meter/by-ref/"+found[0]["ref"].(string), tok, "", ""))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		status, _, resp = readAnswer(limitedCall(replicaA, "POST", "/meter/by-mpan", tok, "application/json",
			fmt.Sprintf(`{"mpan": %q}`, meterMPAN(30))))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		status, _, resp = readAnswer(limitedCall(replicaB, "POST", "/meter/by-address", tok, "application/json",
			fmt.Sprintf(`{"address": %q}`, oldBarnAddress)))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)

		By("a malformed lookup is refused before the register is read, and spends nothing")
		status, _, resp = readAnswer(limitedCall(replicaA, "GET", "/meter/search?postcode=SW1A", tok, "", ""))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)

		By("the fifth, on either replica and on any route, is 429 with Retry-After when the hour ends")
		for _, req := range []struct {
			srv          *httptest.Server
			method, path string
			body         string
		}{
			{replicaA, "GET", "/meter/search?postcode=TN11AA", ""},
			{replicaB, "GET", "/meter/" + meterMPAN(31), ""},
			{replicaA, "GET", "/meter/?address=" + url.QueryEscape(oldBarnAddress), ""},
		} {
			contentType := ""
			if req.body != "" {
				contentType = "application/json"
			}
			status, retryAfter, resp := readAnswer(limitedCall(req.srv, req.method, req.path, tok, contentType, req.body))
			Expect(status).To(Equal(http.StatusTooManyRequests), "%s %s: %s", req.method, req.path, resp)
			Expect(retryAfter).To(Equal(untilHourEnds()), "%s %s", req.method, req.path)
			Expect(resp.Detail()).To(Equal("The organisation has made its 4 meter lookups of this hour (UTC); the budget frees at " +
				start.Truncate(time.Hour).Add(time.Hour).Format(time.RFC3339)))
			Expect(string(resp)).NotTo(MatchRegexp(`[0-9]{13}`), "a refusal tells no MPAN")
		}

		By("another organisation's budget is its own")
		status, _, resp = readAnswer(limitedCall(replicaB, "GET", "/meter/search?postcode=TN11AA", other, "", ""))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)

		By("the metrics count the organisation's lookups and refusals")
		Expect(testutil.ToFloat64(metrics.MeterLookups.WithLabelValues(o.Namespace))).To(Equal(4.0))
		Expect(testutil.ToFloat64(metrics.MeterLookupsRefused.WithLabelValues(o.Namespace,
			string(meters.BudgetOrganisationHour)))).To(Equal(3.0))

		By("the next hour, the organisation looks up again")
		next := start.Add(time.Hour)
		clock.Store(&next)
		status, _, resp = readAnswer(limitedCall(replicaB, "GET", "/meter/search?postcode=TN11AA", tok, "", ""))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
	})

	It("gives a household's searches a budget of their own besides their organisation's", func(ctx SpecContext) {
		srv := budgeted(server.MeterBudgets{OrganisationPerHour: 5, HouseholdPerHour: 2})
		o := newOrg(ctx)
		start := clock.Load().UTC().Truncate(time.Hour).Add(10 * time.Minute)
		was := *clock.Load()
		DeferCleanup(func() { clock.Store(&was) })
		clock.Store(&start)
		householdToken := func(externalID string) string {
			u := mustCall("POST", "/auth/component-token", o.token(), componentForm(externalID,
				"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
			return u["access_token"].(string)
		}
		search := func(tok string) (int, string, response) {
			return readAnswer(limitedCall(srv, "GET", "/hosted/api/meters?postcode="+url.QueryEscape(meterStreetPostcode), tok, "", "",
				hostedflow.EmbedderOriginHeader, "https://app.example.com"))
		}
		first, second := householdToken("budget-first"), householdToken("budget-second")

		By("a household searches twice, then is told in words when to come back")
		for range 2 {
			status, _, resp := search(first)
			Expect(status).To(Equal(http.StatusOK), "%s", resp)
		}
		for range 3 {
			status, retryAfter, resp := search(first)
			Expect(status).To(Equal(http.StatusTooManyRequests), "%s", resp)
			Expect(retryAfter).To(Equal(untilHourEnds()))
			Expect(resp.Detail()).To(Equal(hostedflow.MeterBudgetWords))
		}
		Expect(testutil.ToFloat64(metrics.MeterLookupsRefused.WithLabelValues(o.Namespace,
			string(meters.BudgetHouseholdHour)))).To(Equal(3.0))

		By("its refused searches spent nothing of its organisation's: another household and the API client share the other 3")
		for range 2 {
			status, _, resp := search(second)
			Expect(status).To(Equal(http.StatusOK), "%s", resp)
		}
		status, _, resp := readAnswer(limitedCall(srv, "GET", "/meter/search?postcode=TN11AA", o.token(), "", ""))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)

		By("the organisation's hour spent, every household of it waits too")
		third := householdToken("budget-third")
		status, retryAfter, resp := search(third)
		Expect(status).To(Equal(http.StatusTooManyRequests), "%s", resp)
		Expect(retryAfter).To(Equal(untilHourEnds()))
		Expect(testutil.ToFloat64(metrics.MeterLookups.WithLabelValues(o.Namespace))).To(Equal(5.0))
	})
})

var _ = Describe("The cap on an organisation's notification subscriptions", func() {
	It("refuses a subscription past the cap with 409 and stores nothing, and takes one again once one is deleted", func(ctx SpecContext) {
		cfg := apiSrv.Config
		cfg.MaxSubscriptions = 3
		srv := httptest.NewServer(server.NewServer(cfg))
		DeferCleanup(srv.Close)
		o := newOrg(ctx)
		tok := o.token()
		subscribe := func(i int) (int, response) {
			status, _, resp := readAnswer(limitedCall(srv, "POST", "/notifications/subscriptions", tok, "application/json",
				fmt.Sprintf(`{"url": "https://hooks.flexsite.invalid/cap-%d"}`, i)))
			return status, resp
		}
		ids := make([]string, 0, 3)
		for i := range 3 {
			status, resp := subscribe(i)
			Expect(status).To(Equal(http.StatusCreated), "%s", resp)
			ids = append(ids, resp.Map()["id"].(string))
		}
		Eventually(func(g Gomega) {
			status, body, err := testenv.Call(srv.URL, "GET", "/notifications/subscriptions", tok, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), "%s", body)
			g.Expect(response(body).MapG(g)["subscriptions"]).To(HaveLen(3), "the cache has seen the three")
		}).Should(Succeed())

		for i := 3; i < 6; i++ {
			status, resp := subscribe(i)
			Expect(status).To(Equal(http.StatusConflict), "%s", resp)
			Expect(resp.Detail()).To(Equal("The organisation has 3 notification subscriptions, the most it may have; " +
				"delete one before adding another"))
		}
		stored := &flexv1.SubscriptionList{}
		Expect(k8sClient.List(ctx, stored, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(stored.Items).To(HaveLen(3))

		By("deleting one makes room for one")
		status, _, resp := readAnswer(limitedCall(srv, "DELETE", "/notifications/subscriptions/"+ids[0], tok, "", ""))
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		Eventually(func(g Gomega) {
			status, body, err := testenv.Call(srv.URL, "POST", "/notifications/subscriptions", tok,
				map[string]any{"url": "https://hooks.flexsite.invalid/cap-9"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusCreated), "%s", body)
		}).Should(Succeed())
	})
})
