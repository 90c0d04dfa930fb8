package server_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/openadr/oadrtest"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The OpenADR door's answers are checked against the Alliance's document as they come: every
// call through oadrCall validates its answer (status, headers, body), so a spec fails on the
// first answer a generated VEN could not read.
var (
	oadrContractOnce sync.Once
	oadrContractVal  *oadrtest.Contract
)

func oadrContract() *oadrtest.Contract {
	oadrContractOnce.Do(func() {
		c, err := oadrtest.Load(apiServer.URL)
		Expect(err).NotTo(HaveOccurred())
		oadrContractVal = c
	})
	return oadrContractVal
}

// oadrStatusesEveryDoorAnswers are the statuses the document leaves out that every door may
// answer: no or a bad token, a rate limit, a dependency down. Their bodies are problems too.
var oadrStatusesEveryDoorAnswers = []int{http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable}

// oadrCall sends one request to the OpenADR door (path under its base path) and checks the
// answer against the Alliance's document; body is nil, a form, url.Values, raw JSON or
// anything JSON-encodable. It fails through g (the global Gomega outside a polled function).
func oadrCallG(g Gomega, method, path, token string, body any) (int, response) {
	status, data, header, err := testenv.CallFull(apiServer.URL, method, oadr.BasePath+path, token, body, nil)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	req, err := oadrtest.Request(method, apiServer.URL+oadr.BasePath+path)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	g.ExpectWithOffset(1, oadrContract().Check(req, status, header, data, oadrStatusesEveryDoorAnswers...)).To(Succeed(),
		"%s %s answered %d: %s", method, path, status, data)
	if status >= 400 && status != http.StatusNotImplemented {
		if strings.HasPrefix(path, "/auth/token") && status < 500 && status != http.StatusForbidden {
			return status, data
		}
		var p map[string]any
		g.ExpectWithOffset(1, json.Unmarshal(data, &p)).To(Succeed(), "%s", data)
		g.ExpectWithOffset(1, p).To(HaveKeyWithValue("status", BeNumerically("==", status)), "a problem: %s", data)
		g.ExpectWithOffset(1, header.Get("Content-Type")).To(HavePrefix("application/problem+json"))
	}
	return status, data
}

func oadrCall(method, path, token string, body any) (int, response) {
	return oadrCallG(Default, method, path, token, body)
}

// basic is an HTTP Basic Authorization header's value.
func basic(user, password string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(url.QueryEscape(user)+":"+url.QueryEscape(password)))
}

// oadrToken is a client-credentials token of o's client for scopes (all its roles' when none).
func (o org) oadrToken(scopes ...string) string {
	values := url.Values{"grant_type": {"client_credentials"}, "client_id": {o.Username}, "client_secret": {o.Password}}
	if len(scopes) > 0 {
		values.Set("scope", strings.Join(scopes, " "))
	}
	var tok string
	Eventually(func(g Gomega) {
		status, body := oadrCallG(g, "POST", "/auth/token", "", values)
		g.Expect(status).To(Equal(http.StatusOK), "%s", body)
		tok = body.MapG(g)["access_token"].(string)
	}).Should(Succeed())
	return tok
}

var _ = Describe("The OpenADR door: tokens and programs", func() {
	var o org
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
	})

	It("issues client-credentials tokens, narrowed to the scopes asked for, and refuses in RFC 6749's words", func(ctx SpecContext) {
		tok := o.oadrToken()
		Expect(tok).NotTo(BeEmpty())
		creds := url.Values{"grant_type": {"client_credentials"}, "client_id": {o.Username}, "client_secret": {o.Password}}

		By("answering every scope the client's roles grant")
		status, body := oadrCall("POST", "/auth/token", "", creds)
		Expect(status).To(Equal(http.StatusOK))
		Expect(body.Map()).To(HaveKeyWithValue("token_type", "Bearer"))
		Expect(strings.Fields(body.Map()["scope"].(string))).To(ConsistOf("read_all", "write_programs", "write_events",
			"write_reports", "write_subscriptions", "write_vens"))

		By("a token asked for read_all reads, and writes nothing")
		readOnly := o.oadrToken("read_all")
		status, _ = oadrCall("GET", "/programs", readOnly, nil)
		Expect(status).To(Equal(http.StatusOK))
		status, body = oadrCall("POST", "/vens", readOnly, map[string]any{"venName": "ven-1"})
		Expect(status).To(Equal(http.StatusForbidden), "%s", body)
		Expect(body.Map()["detail"]).To(ContainSubstring("write_vens"))

		By("HTTP Basic carries the credentials as well as the form")
		status, body, _, err := testenv.CallFull(apiServer.URL, "POST", oadr.BasePath+"/auth/token", "",
			url.Values{"grant_type": {"client_credentials"}}, map[string]string{"Authorization": basic(o.Username, o.Password)})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", body)

		By("refusing bad credentials, grants and scopes with the document's authError")
		for _, tc := range []struct {
			values url.Values
			code   string
		}{
			{url.Values{"grant_type": {"client_credentials"}, "client_id": {o.Username}, "client_secret": {"wrong"}}, "invalid_client"},
			{url.Values{"grant_type": {"password"}, "client_id": {o.Username}, "client_secret": {o.Password}}, "unsupported_grant_type"},
			{url.Values{"client_id": {o.Username}, "client_secret": {o.Password}}, "invalid_request"},
			{url.Values{"grant_type": {"client_credentials"}, "client_id": {o.Username}}, "invalid_request"},
			{url.Values{"grant_type": {"client_credentials"}, "client_id": {o.Username}, "client_secret": {o.Password},
				"scope": {"read_all admin"}}, "invalid_scope"},
		} {
			status, body := oadrCall("POST", "/auth/token", "", tc.values)
			Expect(status).To(Equal(http.StatusBadRequest), "%v: %s", tc.values, body)
			Expect(body.Map()).To(HaveKeyWithValue("error", tc.code), "%v", tc.values)
		}
		status, body = oadrCall("POST", "/auth/token", "", map[string]any{"grant_type": "client_credentials"})
		Expect(status).To(Equal(http.StatusBadRequest), "a JSON body is not a form: %s", body)

		By("a client without flex_events_write is refused write_events")
		reader := newOrg(ctx, flexv1.RoleEntityRead)
		Eventually(func(g Gomega) {
			status, body := oadrCallG(g, "POST", "/auth/token", "", url.Values{"grant_type": {"client_credentials"},
				"client_id": {reader.Username}, "client_secret": {reader.Password}, "scope": {"write_events"}})
			g.Expect(status).To(Equal(http.StatusBadRequest), "%s", body)
			g.Expect(body.MapG(g)).To(HaveKeyWithValue("error", "invalid_scope"))
		}).Should(Succeed())
	})

	It("answers the propositions as programs, read-only, and every refusal as a problem", func() {
		tok := o.oadrToken()
		status, body := oadrCall("GET", "/programs", tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		var programs []map[string]any
		Expect(json.Unmarshal(body, &programs)).To(Succeed())
		names := make([]any, 0, len(programs))
		for _, p := range programs {
			names = append(names, p["programName"])
			Expect(p["id"]).To(Equal(p["programName"]))
		}
		Expect(names).To(ContainElement("limited_pause"))

		status, body = oadrCall("GET", "/programs/limited_pause", tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()).To(HaveKeyWithValue("programName", "limited_pause"))

		status, _ = oadrCall("GET", "/programs?limit=1&skip=0", tok, nil)
		Expect(status).To(Equal(http.StatusOK))
		status, body = oadrCall("GET", "/programs?targetType=RESOURCE_NAME&targetValues=x", tok, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(string(body)).To(MatchJSON(`[]`))

		for _, tc := range []struct {
			method, path string
			token        string
			body         any
			status       int
		}{
			{"GET", "/programs/free_money", tok, nil, http.StatusNotFound},
			{"GET", "/programs?limit=51", tok, nil, http.StatusBadRequest},
			{"GET", "/programs?skip=-1", tok, nil, http.StatusBadRequest},
			{"POST", "/programs", tok, map[string]any{"programName": "mine"}, http.StatusForbidden},
			{"PUT", "/programs/limited_pause", tok, map[string]any{"programName": "limited_pause"}, http.StatusForbidden},
			{"DELETE", "/programs/limited_pause", tok, nil, http.StatusForbidden},
			{"GET", "/programs", "", nil, http.StatusUnauthorized},
			{"GET", "/programs", "not-a-token", nil, http.StatusUnauthorized},
		} {
			status, body := oadrCall(tc.method, tc.path, tc.token, tc.body)
			Expect(status).To(Equal(tc.status), "%s %s: %s", tc.method, tc.path, body)
		}
	})
})
