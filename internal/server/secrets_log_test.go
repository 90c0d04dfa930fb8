package server_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/bcrypt"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/web"
)

// lockedBuffer is a log sink safe for the concurrent writes of an HTTP server.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// errInjected is the failure failingLedgerReads injects.
var errInjected = errors.New("injected cache failure (test)")

// failingLedgerReads is the suite's cache, except that reading a RewardLedger fails: the
// rewards endpoints then answer 500, which the REST API logs.
type failingLedgerReads struct{ client.Reader }

func (c failingLedgerReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if _, ok := obj.(*flexv1.RewardLedger); ok {
		return errInjected
	}
	return c.Reader.Get(ctx, key, obj, opts...)
}

// answer is a full response: status, headers, body.
type answer struct {
	status int
	header http.Header
	body   string
}

// send makes one request to srv; authorization is the whole header value (none when empty).
func send(srv *httptest.Server, method, path, authorization, contentType, body string) answer {
	GinkgoHelper()
	return sendG(Default, srv, method, path, authorization, contentType, body)
}

// sendG is send for a polled function: it asserts through g.
func sendG(g Gomega, srv *httptest.Server, method, path, authorization, contentType, body string) answer {
	GinkgoHelper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return answer{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

func loginForm(username, password string) string {
	return url.Values{"username": {username}, "password": {password}, "grant_type": {"password"}}.Encode()
}

const formContentType = "application/x-www-form-urlencoded"

var _ = Describe("Secrets in the logs", func() {
	It("never logs a password, a token or a password hash, whatever happens", func(ctx SpecContext) {
		var logs lockedBuffer
		logger := zap.New(zap.WriteTo(&logs), zap.UseDevMode(true))
		cfg := apiSrv.Config
		cfg.Log = logger
		// /info reads the site's RewardLedger summary from the cache: the injected failure is
		// what it meets, a 500, logged.
		cfg.Cache = failingLedgerReads{Reader: apiSrv.Cache}
		srv := server.NewServer(cfg)
		// The authenticator logs through the request's context (controller-runtime's
		// logf.FromContext): give every request the buffer's logger too.
		api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			srv.ServeHTTP(w, r.WithContext(logf.IntoContext(r.Context(), logger)))
		}))
		DeferCleanup(api.Close)

		o := newOrg(ctx)
		o.token() // the cache knows the client
		wrongPassword, unknownUserPassword := "Wrong-"+o.Password+"-guess", "Unknown-"+o.Password+"-guess"
		tokens := make([]string, 0, 2)

		// Logins: right, wrong, unknown user, malformed.
		a := send(api, "POST", "/auth/token-form", "", formContentType, loginForm(o.Username, o.Password))
		Expect(a.status).To(Equal(http.StatusOK), a.body)
		orgToken := response(a.body).Map()["access_token"].(string)
		tokens = append(tokens, orgToken)
		Expect(send(api, "POST", "/auth/token-form", "", formContentType, loginForm(o.Username, wrongPassword)).status).
			To(Equal(http.StatusUnauthorized))
		Expect(send(api, "POST", "/auth/token-form", "", formContentType, loginForm("nobody-"+o.Namespace, unknownUserPassword)).status).
			To(Equal(http.StatusUnauthorized))
		Expect(send(api, "POST", "/auth/token-form", "", "application/json",
			fmt.Sprintf(`{"username":%q,"password":%q}`, o.Username, o.Password)).status).To(Equal(http.StatusUnprocessableEntity))
		Expect(send(api, "POST", "/auth/token-form", "", formContentType, "password="+url.QueryEscape(o.Password)).status).
			To(Equal(http.StatusUnprocessableEntity))

		// A component token, an onboard, reads.
		bearer := "Bearer " + orgToken
		a = send(api, "POST", "/auth/component-token", bearer, formContentType, url.Values{
			"external_user_id": {"log-user"}, "allowed_origin": {"https://app.example.com"},
			"gave_boundary_meter_consent_at": {"2026-01-15T10:30:00Z"}}.Encode())
		Expect(a.status).To(Equal(http.StatusOK), a.body)
		userToken := response(a.body).Map()["access_token"].(string)
		tokens = append(tokens, userToken)
		a = send(api, "POST", "/entities/site/onboard", bearer, "application/json", specJSON(household("1200000000011")))
		Expect(a.status).To(Equal(http.StatusOK), a.body)
		siteID := response(a.body).Map()["site"].(map[string]any)["site_id"].(string)
		Expect(send(api, "GET", "/entities/site/"+siteID+"/eligibility", bearer, "", "").status).To(Equal(http.StatusOK))

		// Failures: a 500 from the cache, a timestamp the store cannot hold (a 500 until
		// ef28a6e, see "Consent timestamps at the end of year 9999"), tampered and misplaced
		// credentials, validation errors.
		a = send(api, "GET", "/rewards/"+siteID+"/info", bearer, "", "")
		Expect(a.status).To(Equal(http.StatusInternalServerError), a.body)
		Expect(a.body).NotTo(ContainSubstring(errInjected.Error()), "a 500 reveals nothing of its cause")
		send(api, "POST", "/entities/site/onboard", bearer, "application/json", specJSON(household("2301234567894",
			func(b map[string]any) {
				b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = "9999-12-31T23:59:59-01:00"
			})))
		for _, authorization := range []string{
			"Bearer " + orgToken + "x",
			"Bearer " + userToken[:len(userToken)-10],
			"Basic " + base64.StdEncoding.EncodeToString([]byte(o.Username+":"+o.Password)),
			"Bearer " + o.Password,
			o.Password,
		} {
			Expect(send(api, "GET", "/auth/users/me/", authorization, "", "").status).To(Equal(http.StatusUnauthorized))
		}
		Expect(send(api, "POST", "/entities/site/onboard", bearer, "application/json",
			`{"site":{"mpan":"`+o.Password+`"},"assets":[]}`).status).To(Equal(http.StatusUnprocessableEntity))
		Expect(send(api, "GET", "/rewards/"+siteID+"/transactions", "Bearer "+userToken, "", "").status).
			To(Equal(http.StatusForbidden))

		// Logins the authenticator refuses with a log line: a client whose hash Secret is gone,
		// and a username two organisations share.
		m := newOrg(ctx)
		m.token()
		mClient := &flexv1.APIClient{}
		Expect(k8sClient.Get(ctx, apiClientKey(m), mClient)).To(Succeed())
		Expect(k8sClient.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: m.Namespace, Name: mClient.Spec.PasswordHashSecretRef.Name}})).To(Succeed())
		// The manager's cache sees the deletion a moment later.
		Eventually(func(g Gomega) int {
			return sendG(g, api, "POST", "/auth/token-form", "", formContentType, loginForm(m.Username, m.Password)).status
		}).Should(Equal(http.StatusUnauthorized))
		dupNamespace, err := env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: dupNamespace,
			Username: o.Username, Password: "Dup-" + o.Password, Roles: []flexv1.Role{flexv1.RoleEntityRead}})).To(Succeed())
		Eventually(func(g Gomega) int {
			return sendG(g, api, "POST", "/auth/token-form", "", formContentType, loginForm(o.Username, o.Password)).status
		}).Should(Equal(http.StatusUnauthorized))

		// The password hash the REST API checked against.
		apiClient := &flexv1.APIClient{}
		Expect(k8sClient.Get(ctx, apiClientKey(o), apiClient)).To(Succeed())
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: apiClient.Spec.PasswordHashSecretRef.Name},
			secret)).To(Succeed())
		hash := string(secret.Data[apiClient.Spec.PasswordHashSecretRef.Key])
		Expect(hash).To(HavePrefix("$2"))

		logged := logs.String()
		Expect(logged).To(ContainSubstring("request failed"), "the scenario logged its 500s:\n%s", logged)
		Expect(logged).To(ContainSubstring(errInjected.Error()))
		Expect(logged).To(ContainSubstring("no password hash"), "the missing hash was logged")
		Expect(logged).To(ContainSubstring("more than one API client"), "the shared username was logged")
		secrets := map[string]string{"password": o.Password, "wrong password": wrongPassword,
			"other client's password": m.Password, "shared username's other password": "Dup-" + o.Password,
			"unknown user's password": unknownUserPassword, "bcrypt hash": hash,
			"bcrypt hash body": hash[len(hash)-31:]} // the hash without its $2a$10$ prefix and salt
		for i, tok := range tokens {
			secrets[fmt.Sprintf("token %d", i)] = tok
			secrets[fmt.Sprintf("token %d signature", i)] = tok[strings.LastIndexByte(tok, '.')+1:]
		}
		for what, secret := range secrets {
			Expect(logged).NotTo(ContainSubstring(secret), "the logs hold the %s", what)
		}
		GinkgoWriter.Printf("checked %d bytes of logs for %d secrets\n", len(logged), len(secrets))
	})
})

var _ = Describe("Login answers", func() {
	// A login must not tell an unknown username from a wrong password: same status, same
	// body, same headers (but Date and the request id). Timing is deliberately not asserted (too noisy for a
	// test); the Authenticator compares against a dummy bcrypt hash of the real hashes' cost
	// when the username is unknown, so both take one bcrypt comparison.
	It("answers an unknown username and a wrong password byte for byte alike", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		api := httptest.NewServer(apiSrv)
		DeferCleanup(api.Close)
		wrong := send(api, "POST", "/auth/token-form", "", formContentType, loginForm(o.Username, "not-"+o.Password))
		unknown := send(api, "POST", "/auth/token-form", "", formContentType, loginForm("nobody-"+o.Namespace, "not-"+o.Password))
		Expect(wrong.status).To(Equal(http.StatusUnauthorized))
		Expect(unknown.status).To(Equal(wrong.status))
		Expect(unknown.body).To(Equal(wrong.body))
		for _, h := range []string{"Date", web.HeaderRequestID} {
			wrong.header.Del(h)
			unknown.header.Del(h)
		}
		Expect(unknown.header).To(Equal(wrong.header))

		// The real hash has the cost the dummy hash is documented to have.
		apiClient := &flexv1.APIClient{}
		Expect(k8sClient.Get(ctx, apiClientKey(o), apiClient)).To(Succeed())
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: apiClient.Spec.PasswordHashSecretRef.Name},
			secret)).To(Succeed())
		cost, err := bcrypt.Cost(secret.Data[apiClient.Spec.PasswordHashSecretRef.Key])
		Expect(err).NotTo(HaveOccurred())
		Expect(cost).To(Equal(bcrypt.DefaultCost))
	})
})

// A regression guard. Until ef28a6e, ParseAwareTimestamp accepted any offset up to 23:59 on
// any date up to 9999-12-31, but the Site stores the time in UTC: late on 31 December 9999
// with a negative offset is year 10000 in UTC, which metav1.Time writes as "10000-01-01T..."
// and the CRD's format: date-time refuses. The API server's 422 reached the client as a 500
// on onboard, initialise, the legacy onboard, enrol, meter consent and the component token.
// FuzzDecodeJSONOnboard found it; the regression seeds of testdata/fuzz/*/consent-year-10000-*
// reproduce it without a cluster.
var _ = Describe("Consent timestamps at the end of year 9999", func() {
	It("are refused with a 422 at the field, not a 500", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		const late = "9999-12-31T23:59:59-01:00"
		siteID := onboardedSite(tok, "1200000000011")
		var wrong []string
		check := func(what string, status int, resp response, loc ...any) {
			if status != http.StatusUnprocessableEntity || !strings.Contains(resp.String(), "gave_boundary_meter_consent_at") {
				wrong = append(wrong, fmt.Sprintf("%s: %d %s, want 422 at %v", what, status, resp, loc))
			}
		}
		status, resp := call("POST", "/entities/site/onboard", tok, household("2301234567894", func(b map[string]any) {
			b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = late
		}))
		check("onboard", status, resp, "body", "site", "gave_boundary_meter_consent_at")
		status, resp = call("POST", "/entities/site/"+siteID+"/meter-consent", tok,
			map[string]any{"gave_boundary_meter_consent_at": late})
		check("meter-consent", status, resp, "body", "gave_boundary_meter_consent_at")
		status, resp = call("POST", "/auth/component-token", tok, componentForm("late-user", "gave_boundary_meter_consent_at", late))
		check("component-token", status, resp, "body", "gave_boundary_meter_consent_at")
		Expect(wrong).To(BeEmpty())
	})
})

// Found by FuzzDecodeJSONOnboard's idempotence check: a consent timestamp with a fraction of a
// second is stored in whole seconds (metav1.Time), and mergeSite compares the stored time with
// the request's exactly, so repeating the very same request finds the consent "changed"
// every time: onboard and initialise report gave_boundary_meter_consent_at in fields_updated
// on every repeat (and send an update the API server discards). Expected: a repeat of the
// same request updates nothing.
var _ = Describe("Repeating a request whose consent has a fraction of a second", func() {
	It("reports no field updated the second time", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		body := household("1200000000011", func(b map[string]any) {
			b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = "2026-01-15T10:30:00.5Z"
		})
		first := mustCall("POST", "/entities/site/onboard", tok, body)
		Expect(first["site"]).To(HaveKeyWithValue("site_created", true))
		var again map[string]any
		Eventually(func(g Gomega) {
			status, resp := call("POST", "/entities/site/onboard", tok, body)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			again = resp.MapG(g)
		}).Should(Succeed())
		Expect(again["site"]).To(HaveKeyWithValue("site_created", false))
		Expect(again["site"]).To(HaveKeyWithValue("fields_updated", BeEmpty()), "the same request, repeated")
		Expect(mustCall("POST", "/entities/site/initialise", tok, body)["site"]).
			To(HaveKeyWithValue("fields_updated", BeEmpty()), "the same request, as an initialise")
	})
})
