package server_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/oauth2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/identity"
)

// uuidPattern matches a lower-case UUID as the API hands them out.
const uuidPattern = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`

// notFoundSite is the one answer for an unknown site and for another organisation's site.
const notFoundSite = "Site not found or not authorized"

// tokenKeysSecret is the Secret the suite's key ring keeps the signing keys in.
const tokenKeysSecret = "flexsite-token-keys"

// authAnswer is a response with its headers, for the checks call cannot make.
type authAnswer struct {
	status int
	header http.Header
	body   response
}

// authRequest sends one request with exactly the given Authorization header values (none when
// empty); body is nil, a form, or raw JSON text.
func authRequest(g Gomega, method, path string, authorization []string, body any) authAnswer {
	var reader io.Reader
	contentType := ""
	switch b := body.(type) {
	case nil:
	case form:
		values := url.Values{}
		for k, v := range b {
			values.Set(k, v)
		}
		reader, contentType = strings.NewReader(values.Encode()), "application/x-www-form-urlencoded"
	case raw:
		reader, contentType = strings.NewReader(string(b)), "application/json"
	default:
		Fail(fmt.Sprintf("authRequest: unsupported body %T", body))
	}
	req, err := http.NewRequest(method, apiServer.URL+path, reader)
	g.Expect(err).NotTo(HaveOccurred())
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for _, a := range authorization {
		req.Header.Add("Authorization", a)
	}
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return authAnswer{status: resp.StatusCode, header: resp.Header, body: data}
}

// login posts the token form.
func login(username, password string) authAnswer { return loginG(Default, username, password) }

// loginG is login for a polled function: it asserts through g.
func loginG(g Gomega, username, password string) authAnswer {
	return authRequest(g, "POST", "/auth/token-form", nil,
		form{"username": username, "password": password, "grant_type": "password"})
}

// expectUnauthorized checks the 401 form every endpoint answers: a JSON detail and the
// Bearer challenge.
func expectUnauthorized(a authAnswer) {
	GinkgoHelper()
	Expect(a.status).To(Equal(http.StatusUnauthorized), "%s", a.body)
	Expect(a.header.Get("WWW-Authenticate")).To(Equal("Bearer"))
	Expect(a.body.Detail()).To(BeAssignableToTypeOf(""))
}

// expectValidationItem checks a 422 that names loc with type typ.
func expectValidationItem(status int, resp response, loc []any, typ string) {
	GinkgoHelper()
	Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
	items, ok := resp.Detail().([]any)
	Expect(ok).To(BeTrue(), "detail is not a validation list: %s", resp)
	for _, it := range items {
		item := it.(map[string]any)
		if equalLoc(item["loc"].([]any), loc) && (typ == "" || item["type"] == typ) {
			Expect(item["msg"]).NotTo(BeEmpty())
			return
		}
	}
	Fail(fmt.Sprintf("no %q item at %v in %s", typ, loc, resp))
}

// apiClientKey is the APIClient object of an org (bootstrap names it after the username).
func apiClientKey(o org) client.ObjectKey {
	return client.ObjectKey{Namespace: o.Namespace, Name: strings.ToLower(o.Username)}
}

// patchAPIClient changes the org's APIClient on the API server.
func patchAPIClient(ctx SpecContext, o org, mutate func(*flexv1.APIClient)) {
	GinkgoHelper()
	apiClient := &flexv1.APIClient{}
	Expect(k8sClient.Get(ctx, apiClientKey(o), apiClient)).To(Succeed())
	patch := client.MergeFrom(apiClient.DeepCopy())
	mutate(apiClient)
	Expect(k8sClient.Patch(ctx, apiClient, patch)).To(Succeed())
}

// unverifiedClaims decodes a JWT's payload without checking it.
func unverifiedClaims(token string) (jwt.MapClaims, map[string]any) {
	GinkgoHelper()
	claims := jwt.MapClaims{}
	parsed, _, err := jwt.NewParser().ParseUnverified(token, claims)
	Expect(err).NotTo(HaveOccurred())
	return claims, parsed.Header
}

// orgClaims are the claims of a well-formed organisation token of o, valid now.
func orgClaims(o org) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": "flexsite", "sub": o.Username, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "jti": "x",
		"org": o.Namespace, "cli": apiClientKey(o).Name, "usr": o.Username, "kind": "organisation",
		"roles": []string{"entity_read", "entity_write", "rewards", "components"},
	}
}

// suiteIssuer is an issuer over the suite's signing keys (a second key ring reading the same
// Secret) with its own clock.
func suiteIssuer(ctx SpecContext, now func() time.Time) *auth.Issuer {
	GinkgoHelper()
	keys := auth.NewKeyRing(k8sClient, k8sClient, keysNamespace, tokenKeysSecret)
	Expect(keys.Ensure(ctx)).To(Succeed())
	return auth.NewIssuer(keys, now)
}

func orgPrincipal(o org, roles ...flexv1.Role) auth.Principal {
	return auth.Principal{Namespace: o.Namespace, ClientName: apiClientKey(o).Name, Username: o.Username, Roles: roles}
}

// activeSigningKey reads the suite's active signing key and its kid from the Secret.
func activeSigningKey(ctx SpecContext) (string, ed25519.PrivateKey) {
	GinkgoHelper()
	secret := &corev1.Secret{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: keysNamespace, Name: tokenKeysSecret}, secret)).To(Succeed())
	kid := string(secret.Data["active"])
	block, _ := pem.Decode(secret.Data[kid+".key"])
	Expect(block).NotTo(BeNil())
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	Expect(err).NotTo(HaveOccurred())
	return kid, key.(ed25519.PrivateKey)
}

// onboardedSite onboards a household for tok and returns its site id.
func onboardedSite(tok, mpan string) string {
	GinkgoHelper()
	body := mustCall("POST", "/entities/site/onboard", tok, household(mpan))
	return body["site"].(map[string]any)["site_id"].(string)
}

// userSite reads the Site the component-token flow made for an external user.
func userSite(ctx SpecContext, ns, externalUserID string) *flexv1.Site {
	GinkgoHelper()
	site := &flexv1.Site{}
	Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.SiteNameForExternalUser(externalUserID)}, site)).
		To(Succeed())
	return site
}

func sitesIn(ctx SpecContext, ns string) []flexv1.Site {
	GinkgoHelper()
	list := &flexv1.SiteList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// componentForm is a component-token request for an external user.
func componentForm(externalUserID string, extra ...string) form {
	f := form{"external_user_id": externalUserID, "allowed_origin": "https://app.example.com"}
	for i := 0; i+1 < len(extra); i += 2 {
		f[extra[i]] = extra[i+1]
	}
	return f
}

var _ = Describe("Authentication: POST /auth/token-form", func() {
	var o org
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		o.token() // waits until the cache knows the client
	})

	It("issues an hour-long bearer token that is not to be cached", func() {
		a := login(o.Username, o.Password)
		Expect(a.status).To(Equal(http.StatusOK), "%s", a.body)
		Expect(a.header.Get("Cache-Control")).To(Equal("no-store"))
		Expect(a.header.Get("Content-Type")).To(HavePrefix("application/json"))
		body := a.body.Map()
		Expect(body["token_type"]).To(Equal("bearer"))
		Expect(body["expires_in"]).To(BeNumerically("==", 3600))
		Expect(body["access_token"]).To(BeAssignableToTypeOf(""))
		claims, header := unverifiedClaims(body["access_token"].(string))
		Expect(header["alg"]).To(Equal("EdDSA"))
		Expect(header["kid"]).NotTo(BeEmpty())
		exp, err := claims.GetExpirationTime()
		Expect(err).NotTo(HaveOccurred())
		iat, err := claims.GetIssuedAt()
		Expect(err).NotTo(HaveOccurred())
		Expect(exp.Sub(iat.Time)).To(Equal(time.Hour))
		Expect(mustCall("GET", "/auth/users/me/", body["access_token"].(string), nil)["username"]).To(Equal(o.Username))
	})

	It("refuses a wrong password with 401 and a Bearer challenge", func() {
		a := login(o.Username, o.Password+"x")
		expectUnauthorized(a)
		Expect(a.body).NotTo(ContainSubstring("access_token"))
	})

	It("refuses an unknown username with the same 401 as a wrong password", func() {
		unknown := login("nobody-"+o.Namespace, o.Password)
		expectUnauthorized(unknown)
		Expect(unknown.body.Detail()).To(Equal(login(o.Username, "wrong").body.Detail()))
	})

	It("answers missing credentials with 422 naming each missing field", func() {
		status, resp := call("POST", "/auth/token-form", "", form{"grant_type": "password"})
		expectValidationItem(status, resp, []any{"body", "username"}, "missing")
		expectValidationItem(status, resp, []any{"body", "password"}, "missing")
	})

	It("accepts a login without grant_type, and refuses any grant_type but password", func() {
		status, resp := call("POST", "/auth/token-form", "", form{"username": o.Username, "password": o.Password})
		Expect(status).To(Equal(http.StatusOK), "%s", resp)

		status, resp = call("POST", "/auth/token-form", "", form{
			"username": o.Username, "password": o.Password, "grant_type": "client_credentials"})
		expectValidationItem(status, resp, []any{"body", "grant_type"}, "")
	})

	It("answers a JSON body with 422, not 500", func() {
		status, resp := call("POST", "/auth/token-form", "", map[string]any{
			"username": o.Username, "password": o.Password, "grant_type": "password"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.Detail()).To(BeAssignableToTypeOf([]any{}))
		status, resp = call("POST", "/auth/token-form", "", raw(`{"username":`))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
	})

	It("stops a disabled client from logging in, and refuses the tokens it already holds", func(ctx SpecContext) {
		orgToken := o.token()
		user := mustCall("POST", "/auth/component-token", orgToken, componentForm("disabled-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userToken := user["access_token"].(string)
		userSiteID := userSite(ctx, o.Namespace, "disabled-user").Labels[flexv1.IDLabel]
		mustCall("GET", "/entities/site/"+userSiteID+"/eligibility", userToken, nil)

		patchAPIClient(ctx, o, func(c *flexv1.APIClient) { c.Spec.Disabled = true })

		Eventually(func(g Gomega) {
			a := loginG(g, o.Username, o.Password)
			g.Expect(a.status).To(Equal(http.StatusUnauthorized), "%s", a.body)
			g.Expect(a.header.Get("WWW-Authenticate")).To(Equal("Bearer"))
		}).Should(Succeed())
		// Without the password, nobody learns the client is disabled: same answer as a bad login.
		Expect(login(o.Username, o.Password).body.Detail()).To(Equal(login(o.Username, "wrong").body.Detail()))

		Eventually(func(g Gomega) int {
			return authRequest(g, "GET", "/auth/users/me/", []string{"Bearer " + orgToken}, nil).status
		}).Should(Equal(http.StatusUnauthorized))
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + orgToken}, nil))
		expectUnauthorized(authRequest(Default, "GET", "/entities/site/"+userSiteID+"/eligibility", []string{"Bearer " + userToken}, nil))
	})
})

var _ = Describe("Authentication: API client lifecycle", func() {
	It("refuses the tokens of a deleted API client", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		Expect(k8sClient.Delete(ctx, &flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{
			Namespace: o.Namespace, Name: apiClientKey(o).Name}})).To(Succeed())
		Eventually(func(g Gomega) int {
			return authRequest(g, "GET", "/auth/users/me/", []string{"Bearer " + tok}, nil).status
		}).Should(Equal(http.StatusUnauthorized))
		expectUnauthorized(login(o.Username, o.Password))
	})

	It("refuses to log in a username that two organisations share", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		ns, err := env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: ns, Username: o.Username,
			Password: "other-" + o.Password, Roles: []flexv1.Role{flexv1.RoleEntityRead}})).To(Succeed())
		Eventually(func(g Gomega) int { return loginG(g, o.Username, o.Password).status }).Should(Equal(http.StatusUnauthorized))
		expectUnauthorized(login(o.Username, "other-"+o.Password))
	})

	// Disabling a client takes effect on its tokens at once (the REST API looks the client up on
	// every request); taking a role away must too, or a client keeps a revoked privilege for
	// the rest of its token's hour.
	It("stops honouring a role the API client no longer holds", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		siteID := onboardedSite(tok, "1200000000011")
		mustCall("GET", "/rewards/"+siteID+"/transactions", tok, nil)

		patchAPIClient(ctx, o, func(c *flexv1.APIClient) { c.Spec.Roles = []flexv1.Role{flexv1.RoleEntityRead} })
		Eventually(func(g Gomega) []any {
			return mustCallG(g, "GET", "/auth/users/me/", o.token(), nil)["roles"].([]any)
		}).Should(Equal([]any{"entity_read"}), "a new token carries the new roles")

		status, resp := call("GET", "/rewards/"+siteID+"/transactions", tok, nil)
		Expect(status).To(Equal(http.StatusForbidden), "a token issued before the role was removed: %s", resp)
		status, resp = call("POST", "/entities/site/onboard", tok, household("2301234567894"))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
	})
})

var _ = Describe("Authentication: an OAuth2 client library (password flow)", func() {
	It("gets a token from /auth/token-form and uses it", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleRewards)
		o.token() // the cache knows the client
		cfg := oauth2.Config{Endpoint: oauth2.Endpoint{
			TokenURL: apiServer.URL + "/auth/token-form", AuthStyle: oauth2.AuthStyleInParams}}

		tok, err := cfg.PasswordCredentialsToken(ctx, o.Username, o.Password)
		Expect(err).NotTo(HaveOccurred())
		Expect(tok.Type()).To(Equal("Bearer"))
		Expect(tok.Expiry).To(BeTemporally("~", time.Now().Add(time.Hour), time.Minute))

		resp, err := cfg.Client(ctx, tok).Get(apiServer.URL + "/auth/users/me/")
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		var me map[string]any
		Expect(json.NewDecoder(resp.Body).Decode(&me)).To(Succeed())
		Expect(me).To(Equal(map[string]any{"username": o.Username, "roles": []any{"entity_read", "rewards"}}))

		_, err = cfg.PasswordCredentialsToken(ctx, o.Username, "wrong")
		var retrieveErr *oauth2.RetrieveError
		Expect(errors.As(err, &retrieveErr)).To(BeTrue(), "%v", err)
		Expect(retrieveErr.Response.StatusCode).To(Equal(http.StatusUnauthorized))
	})
})

var _ = Describe("Authentication: bearer tokens", func() {
	public := map[string]bool{
		"GET /healthz": true, "GET /readyz": true, "GET /openapi.json": true, "GET /docs": true,
		"POST /auth/token-form": true,
		// The hosted flow's page and assets (no token until the page has loaded).
		"GET /hosted/flow": true, "GET /hosted/flow.js": true, "GET /hosted/flow.css": true,
		// The hosted rewards page: a one-time link, then a session cookie (rewardspage_test.go).
		"GET /hosted/rewards/link/{code}": true, "GET /hosted/rewards": true, "POST /hosted/rewards/code": true,
		"POST /hosted/rewards/verify": true, "POST /hosted/rewards/bank": true, "POST /hosted/rewards/withdraw": true,
		"POST /hosted/rewards/finish": true,
		// The OAuth callback: the provider sends the household's browser back; the state is the proof.
		"GET /oauth/callback": true,
	}
	concrete := strings.NewReplacer("{site_id}", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e",
		"{asset_id}", "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e", "{external_id}", "charger-1")

	// everyProtectedRoute sends authorization to every route but the public ones and returns
	// the routes whose answer is not a proper 401.
	everyProtectedRoute := func(authorization []string) []string {
		var wrong []string
		checked := 0
		for _, r := range apiSrv.Routes() {
			if public[r.Method+" "+r.Path] {
				continue
			}
			checked++
			var body any
			if r.Method == "POST" {
				body = raw(`{}`)
			}
			a := authRequest(Default, r.Method, concrete.Replace(r.Path), authorization, body)
			if a.status != http.StatusUnauthorized || a.header.Get("WWW-Authenticate") != "Bearer" {
				wrong = append(wrong, fmt.Sprintf("%s %s: %d %q %s", r.Method, r.Path, a.status,
					a.header.Get("WWW-Authenticate"), a.body))
			}
		}
		Expect(checked).To(BeNumerically(">=", 18), "the route table shrank")
		return wrong
	}

	It("refuses every authenticated endpoint without a token", func() {
		Expect(everyProtectedRoute(nil)).To(BeEmpty())
	})

	It("refuses every authenticated endpoint with a malformed Authorization header", func() {
		for _, authorization := range [][]string{
			{"Bearer not-a-jwt"},
			{"Bearer a.b.c"},
			{"Bearer "},
			{"Basic dXNlcjpwYXNz"},
			{"Bearertoken"},
		} {
			Expect(everyProtectedRoute(authorization)).To(BeEmpty(), "Authorization: %q", authorization)
		}
	})

	It("accepts a good token only once, not in two Authorization headers", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		Expect(authRequest(Default, "GET", "/auth/users/me/", []string{"bearer " + tok}, nil).status).To(Equal(http.StatusOK))
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + tok, "Bearer " + tok}, nil))
	})

	It("refuses a token signed by a key the ring does not hold", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		_, foreign, err := ed25519.GenerateKey(rand.Reader)
		Expect(err).NotTo(HaveOccurred())

		unknownKid := jwt.NewWithClaims(jwt.SigningMethodEdDSA, orgClaims(o))
		unknownKid.Header["kid"] = "00112233deadbeef"
		signed, err := unknownKid.SignedString(foreign)
		Expect(err).NotTo(HaveOccurred())
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + signed}, nil))

		// The suite's kid, but the wrong key behind it.
		kid, _ := activeSigningKey(ctx)
		knownKid := jwt.NewWithClaims(jwt.SigningMethodEdDSA, orgClaims(o))
		knownKid.Header["kid"] = kid
		signed, err = knownKid.SignedString(foreign)
		Expect(err).NotTo(HaveOccurred())
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + signed}, nil))
	})

	It("refuses an expired token, while the same issuer's current token works", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		current, _, err := suiteIssuer(ctx, time.Now).IssueOrganisationToken(orgPrincipal(o, flexv1.RoleEntityRead))
		Expect(err).NotTo(HaveOccurred())
		Expect(mustCall("GET", "/auth/users/me/", current, nil)["roles"]).To(Equal([]any{"entity_read"}))

		past := func() time.Time { return time.Now().Add(-2 * time.Hour) }
		expired, _, err := suiteIssuer(ctx, past).IssueOrganisationToken(orgPrincipal(o, flexv1.RoleEntityRead))
		Expect(err).NotTo(HaveOccurred())
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + expired}, nil))
		expectUnauthorized(authRequest(Default, "GET", "/entities/site", []string{"Bearer " + expired}, nil))
	})

	It("refuses an unsigned token (alg none)", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		kid, _ := activeSigningKey(ctx)
		for _, alg := range []string{"none", "None", "NONE"} {
			header := base64.RawURLEncoding.EncodeToString([]byte(fmt.Sprintf(`{"alg":%q,"typ":"JWT","kid":%q}`, alg, kid)))
			payload, err := json.Marshal(orgClaims(o))
			Expect(err).NotTo(HaveOccurred())
			unsigned := header + "." + base64.RawURLEncoding.EncodeToString(payload) + "."
			expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + unsigned}, nil))
		}
		// And as the library itself writes it.
		none := jwt.NewWithClaims(jwt.SigningMethodNone, orgClaims(o))
		none.Header["kid"] = kid
		signed, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
		Expect(err).NotTo(HaveOccurred())
		expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + signed}, nil))
	})

	It("refuses an HS256 token keyed with the public key (algorithm confusion)", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		kid, key := activeSigningKey(ctx)
		public := key.Public().(ed25519.PublicKey)
		der, err := x509.MarshalPKIXPublicKey(public)
		Expect(err).NotTo(HaveOccurred())
		for _, secret := range [][]byte{public, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})} {
			hs := jwt.NewWithClaims(jwt.SigningMethodHS256, orgClaims(o))
			hs.Header["kid"] = kid
			signed, err := hs.SignedString(secret)
			Expect(err).NotTo(HaveOccurred())
			expectUnauthorized(authRequest(Default, "GET", "/auth/users/me/", []string{"Bearer " + signed}, nil))
		}
	})

	It("refuses a genuine token whose claims were altered", func(ctx SpecContext) {
		a, b := newOrg(ctx), newOrg(ctx)
		tok := a.token()
		b.token()
		parts := strings.Split(tok, ".")
		Expect(parts).To(HaveLen(3))
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		Expect(err).NotTo(HaveOccurred())
		claims := map[string]any{}
		Expect(json.Unmarshal(payload, &claims)).To(Succeed())
		claims["org"] = b.Namespace
		altered, err := json.Marshal(claims)
		Expect(err).NotTo(HaveOccurred())
		forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString(altered) + "." + parts[2]
		expectUnauthorized(authRequest(Default, "GET", "/entities/site", []string{"Bearer " + forged}, nil))
	})
})

var _ = Describe("Authorisation: roles", func() {
	It("lets an entity_read client read but not write, and not reach rewards or component tokens", func(ctx SpecContext) {
		writer := newOrg(ctx)
		siteID := onboardedSite(writer.token(), "1200000000011")
		reader := newOrg(ctx, flexv1.RoleEntityRead)
		tok := reader.token()

		status, resp := call("POST", "/entities/site/onboard", tok, household("1200000000011"))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("entity_write"))
		Expect(sitesIn(ctx, reader.Namespace)).To(BeEmpty())

		list := mustCall("GET", "/entities/site", tok, nil)
		Expect(list["sites"]).To(BeEmpty())
		Expect(list["total_num_sites"]).To(BeNumerically("==", 0))

		for _, path := range []string{"/rewards/" + siteID + "/transactions", "/rewards/" + siteID + "/info"} {
			status, resp = call("GET", path, tok, nil)
			Expect(status).To(Equal(http.StatusForbidden), "%s: %s", path, resp)
		}
		status, resp = call("POST", "/auth/component-token", tok, componentForm("u1", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		Expect(sitesIn(ctx, reader.Namespace)).To(BeEmpty())
	})

	It("requires the rewards role for the rewards endpoints", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleComponents)
		tok := o.token()
		siteID := onboardedSite(tok, "2301234567894")
		for _, path := range []string{"/rewards/" + siteID + "/transactions", "/rewards/" + siteID + "/info"} {
			status, resp := call("GET", path, tok, nil)
			Expect(status).To(Equal(http.StatusForbidden), "%s: %s", path, resp)
			Expect(resp.Detail()).To(ContainSubstring("rewards"))
		}
		mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
	})

	It("requires the components role for component tokens", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards)
		tok := o.token()
		status, resp := call("POST", "/auth/component-token", tok, componentForm("u1", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("components"))
		Expect(sitesIn(ctx, o.Namespace)).To(BeEmpty())
	})
})

var _ = Describe("Organisation isolation", func() {
	It("answers another organisation's site as not found on every site endpoint and leaves it alone", func(ctx SpecContext) {
		a, b := newOrg(ctx), newOrg(ctx)
		tokA, tokB := a.token(), b.token()
		siteID := onboardedSite(tokA, "1012345678903")
		assetID := mustCall("GET", "/entities/site/"+siteID, tokA, nil)["asset_ids"].([]any)[0].(string)
		ledger := &flexv1.RewardLedger{}
		ledger.Namespace, ledger.Name = a.Namespace, identity.RewardLedgerName(identity.SiteNameForMPAN("1012345678903"))
		ledger.Spec.SiteName = identity.SiteNameForMPAN("1012345678903")
		ledger.Spec.Transactions = []flexv1.RewardTransaction{{ID: identity.NewID(), Type: "signup bonus", CreditPence: 500,
			SettlementDate: "2026-01-01"}}
		Expect(k8sClient.Create(ctx, ledger)).To(Succeed())
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+siteID+"/transactions", tokA, nil)["transactions"]
		}).Should(HaveLen(1))
		before := snapshot(Default, ctx, a.Namespace)

		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/entities/site/" + siteID + "/eligibility", nil},
			{"GET", "/entities/site/" + siteID, nil},
			{"POST", "/entities/site/" + siteID + "/enrol", map[string]any{"proposition": "price_curve"}},
			{"POST", "/entities/site/" + siteID + "/unenrol", map[string]any{"proposition": "limited_pause"}},
			{"POST", "/entities/site/" + siteID + "/meter-consent", map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T00:00:00Z"}},
			{"POST", "/entities/site/" + siteID + "/offboard-site-and-assets", nil},
			{"GET", "/rewards/" + siteID + "/transactions", nil},
			{"GET", "/rewards/" + siteID + "/info", nil},
		} {
			status, resp := call(c.method, c.path, tokB, c.body)
			Expect(status).To(Equal(http.StatusNotFound), "%s %s: %s", c.method, c.path, resp)
			Expect(resp.Detail()).To(Equal(notFoundSite), "%s %s", c.method, c.path)
		}
		status, resp := call("POST", "/entities/asset", tokB, map[string]any{
			"external_id": "intruder", "type": "battery", "site_id": siteID})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		for _, path := range []string{"/entities/asset/" + assetID, "/entities/asset/external-id/charger-1012345678903"} {
			status, resp := call("GET", path, tokB, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", path, resp)
		}
		list := mustCall("GET", "/entities/site?mpan=1012345678903", tokB, nil)
		Expect(list["sites"]).To(BeEmpty())

		Expect(snapshot(Default, ctx, a.Namespace)).To(Equal(before))
		Expect(sitesIn(ctx, b.Namespace)).To(BeEmpty())
		Expect(mustCall("GET", "/entities/site/"+siteID, tokA, nil)["id"]).To(Equal(siteID))
	})
})

var _ = Describe("POST /auth/component-token", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("refuses a new user without consent, and creates nothing", func(ctx SpecContext) {
		status, resp := call("POST", "/auth/component-token", tok, componentForm("new-user", "user_email", "a@example.com"))
		expectValidationItem(status, resp, []any{"body", "gave_boundary_meter_consent_at"}, "missing")
		Expect(sitesIn(ctx, o.Namespace)).To(BeEmpty())
	})

	It("creates the user and their site on first use, and finds them again after", func(ctx SpecContext) {
		first := mustCall("POST", "/auth/component-token", tok, componentForm("user-42",
			"user_email", "first@example.com", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00+01:00"))
		Expect(first["id"]).To(MatchRegexp(uuidPattern))
		Expect(first["token_type"]).To(Equal("bearer"))
		Expect(first["access_token"]).NotTo(BeEmpty())
		claims, _ := unverifiedClaims(first["access_token"].(string))
		exp, err := claims.GetExpirationTime()
		Expect(err).NotTo(HaveOccurred())
		iat, err := claims.GetIssuedAt()
		Expect(err).NotTo(HaveOccurred())
		Expect(exp.Sub(iat.Time)).To(Equal(24*time.Hour), "an end-user token lives 24 hours")

		site := userSite(ctx, o.Namespace, "user-42")
		Expect(site.Spec.ExternalUserID).To(Equal("user-42"))
		Expect(site.Spec.Email).To(Equal("first@example.com"))
		Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 1, 15, 9, 30, 0, 0, time.UTC)))
		Expect(site.Labels[flexv1.IDLabel]).To(MatchRegexp(uuidPattern))

		// The same user again: same id, one site, the latest email and consent kept.
		Eventually(func(g Gomega) {
			status, resp := call("POST", "/auth/component-token", tok, componentForm("user-42",
				"user_email", "second@example.com", "gave_boundary_meter_consent_at", "2026-03-01T08:00:00Z"))
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			g.Expect(resp.MapG(g)["id"]).To(Equal(first["id"]))
		}).Should(Succeed())
		site = userSite(ctx, o.Namespace, "user-42")
		Expect(site.Spec.Email).To(Equal("second@example.com"))
		Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)))

		// Later calls need no consent and no email, and keep what is stored.
		again := mustCall("POST", "/auth/component-token", tok, componentForm("user-42"))
		Expect(again["id"]).To(Equal(first["id"]))
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(1))
		site = userSite(ctx, o.Namespace, "user-42")
		Expect(site.Spec.Email).To(Equal("second@example.com"))
		Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)))
	})

	// The lookup of an existing user reads the cache first. A repeat call right after the
	// first, without consent (the documented "must be sent on the first call" only), must find
	// the user the first call created rather than treat them as new.
	It("finds a user it created a moment ago, even before the cache has seen them", func(ctx SpecContext) {
		var wrong []string
		for i := range 20 {
			user := fmt.Sprintf("quick-%d", i)
			first := mustCall("POST", "/auth/component-token", tok, componentForm(user,
				"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
			status, resp := call("POST", "/auth/component-token", tok, componentForm(user))
			if status != http.StatusOK || resp.Map()["id"] != first["id"] {
				wrong = append(wrong, fmt.Sprintf("%s: %d %s", user, status, resp))
			}
		}
		Expect(wrong).To(BeEmpty())
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(20))
	})

	DescribeTable("validates the form",
		func(ctx SpecContext, body any, loc []any, typ string) {
			status, resp := call("POST", "/auth/component-token", tok, body)
			if loc == nil {
				Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			} else {
				expectValidationItem(status, resp, loc, typ)
			}
			Expect(sitesIn(ctx, o.Namespace)).To(BeEmpty())
		},
		Entry("invalid user_email", componentForm("u", "user_email", "not an email",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"), []any{"body", "user_email"}, ""),
		Entry("naive consent timestamp", componentForm("u", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00"),
			[]any{"body", "gave_boundary_meter_consent_at"}, "timezone_aware"),
		Entry("consent not a timestamp", componentForm("u", "gave_boundary_meter_consent_at", "yesterday"),
			[]any{"body", "gave_boundary_meter_consent_at"}, ""),
		Entry("missing external_user_id", form{"allowed_origin": "https://app.example.com",
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"}, []any{"body", "external_user_id"}, "missing"),
		Entry("missing allowed_origin", form{"external_user_id": "u",
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"}, []any{"body", "allowed_origin"}, "missing"),
		Entry("external_user_id longer than a Site can hold", componentForm(strings.Repeat("x", 300),
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"), []any{"body", "external_user_id"}, ""),
		Entry("a JSON body", map[string]any{"external_user_id": "u", "allowed_origin": "https://app.example.com",
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"}, nil, ""),
	)

	It("stores the user's email as an address, without surrounding blanks", func(ctx SpecContext) {
		status, resp := call("POST", "/auth/component-token", tok, componentForm("padded",
			"user_email", " padded@example.com ", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		if status == http.StatusUnprocessableEntity {
			expectValidationItem(status, resp, []any{"body", "user_email"}, "")
			return
		}
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(userSite(ctx, o.Namespace, "padded").Spec.Email).To(Equal("padded@example.com"))
	})

	It("lets a consent-exempt client create users without consent", func(ctx SpecContext) {
		patchAPIClient(ctx, o, func(c *flexv1.APIClient) { c.Spec.ConsentExempt = true })
		var id any
		Eventually(func(g Gomega) {
			status, resp := call("POST", "/auth/component-token", tok, componentForm("exempt-user"))
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			id = resp.MapG(g)["id"]
		}).Should(Succeed())
		Expect(id).To(MatchRegexp(uuidPattern))
		site := userSite(ctx, o.Namespace, "exempt-user")
		Expect(site.Spec.BoundaryMeterConsentAt).To(BeNil())
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(1))
	})

	It("gives a token that reaches its own site only, and no organisation endpoint", func(ctx SpecContext) {
		otherSiteID := onboardedSite(tok, "1234567890126")
		user := mustCall("POST", "/auth/component-token", tok, componentForm("end-user",
			"user_email", "end@example.com", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok := user["access_token"].(string)
		ownID := userSite(ctx, o.Namespace, "end-user").Labels[flexv1.IDLabel]
		Expect(ownID).To(MatchRegexp(uuidPattern))
		Expect(user["id"]).To(Equal(ownID), "the component token's id is the household's site id")

		eligibility := mustCall("GET", "/entities/site/"+ownID+"/eligibility", userTok, nil)
		Expect(eligibility["site_id"]).To(Equal(ownID))
		Expect(eligibility["site_properties"].(map[string]any)["has_meter_consent"]).To(BeTrue())
		Expect(mustCall("GET", "/entities/site/"+ownID, userTok, nil)["id"]).To(Equal(ownID))

		// Another site of the same organisation does not exist for this user.
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/entities/site/" + otherSiteID + "/eligibility", nil},
			{"GET", "/entities/site/" + otherSiteID, nil},
			{"POST", "/entities/site/" + otherSiteID + "/enrol", map[string]any{"proposition": "limited_pause"}},
			{"POST", "/entities/site/" + otherSiteID + "/unenrol", map[string]any{"proposition": "limited_pause"}},
			{"POST", "/entities/site/" + otherSiteID + "/meter-consent", map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T00:00:00Z"}},
		} {
			status, resp := call(c.method, c.path, userTok, c.body)
			Expect(status).To(Equal(http.StatusNotFound), "%s %s: %s", c.method, c.path, resp)
			Expect(resp.Detail()).To(Equal(notFoundSite))
		}

		// Organisation endpoints are closed to it.
		for _, c := range []struct {
			method, path string
			body         any
		}{
			{"GET", "/rewards/" + ownID + "/transactions", nil},
			{"GET", "/rewards/" + ownID + "/info", nil},
			{"POST", "/entities/site/onboard", household("2301234567894")},
			{"POST", "/entities/site/initialise", household("2301234567894")},
			{"POST", "/entities/site", map[string]any{"mpan": "2301234567894", "postcode": "SW1A 1AA"}},
			{"POST", "/entities/site/" + ownID + "/offboard-site-and-assets", nil},
			{"GET", "/entities/site", nil},
			{"POST", "/entities/asset", map[string]any{"external_id": "e1", "type": "battery", "site_id": ownID}},
			{"POST", "/auth/component-token", componentForm("someone-else", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z")},
		} {
			status, resp := call(c.method, c.path, userTok, c.body)
			Expect(status).To(Equal(http.StatusForbidden), "%s %s: %s", c.method, c.path, resp)
		}
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(2))

		// Its own site: enrol and unenrol are the end user's to make, once the household has
		// its MPAN (the organisation fills it in through initialise with the same user).
		filled := mustCall("POST", "/entities/site/initialise", tok, map[string]any{
			"site": map[string]any{"mpan": "2301234567894", "postcode": "SW1A 1AA", "external_user_id": "end-user"},
			"assets": []any{map[string]any{"external_id": "end-user-charger", "type": "charger",
				"asset_model": "zappi", "installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}}})
		Expect(filled["site"].(map[string]any)["site_id"]).To(Equal(ownID))
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/site/"+ownID+"/eligibility", userTok, nil)["eligible_propositions"]
		}).Should(ContainElement("limited_pause"))
		Expect(mustCall("POST", "/entities/site/"+ownID+"/enrol", userTok, map[string]any{"proposition": "limited_pause"})).
			To(Equal(map[string]any{"site_id": ownID, "status": "enrolled"}))
		Expect(mustCall("POST", "/entities/site/"+ownID+"/unenrol", userTok, map[string]any{"proposition": "limited_pause"})).
			To(Equal(map[string]any{"site_id": ownID, "status": "unenrolled"}))
		Expect(mustCall("POST", "/entities/site/"+ownID+"/meter-consent", userTok,
			map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T00:00:00Z"})["gave_boundary_meter_consent_at"]).
			To(Equal("2026-02-01T00:00:00Z"))
	})
})

var _ = Describe("GET /auth/users/me/", func() {
	It("names the client and its roles", func(ctx SpecContext) {
		o := newOrg(ctx)
		me := mustCall("GET", "/auth/users/me/", o.token(), nil)
		Expect(me["username"]).To(Equal(o.Username))
		Expect(me["roles"]).To(ConsistOf("entity_read", "entity_write", "rewards", "components"))

		few := newOrg(ctx, flexv1.RoleComponents)
		me = mustCall("GET", "/auth/users/me/", few.token(), nil)
		Expect(me).To(Equal(map[string]any{"username": few.Username, "roles": []any{"components"}}))
	})
})

var _ = Describe("Credential storage", func() {
	It("keeps only a bcrypt hash of the password, never the password", func(ctx SpecContext) {
		o := newOrg(ctx)
		o.token()
		apiClient := &flexv1.APIClient{}
		Expect(k8sClient.Get(ctx, apiClientKey(o), apiClient)).To(Succeed())
		ref := apiClient.Spec.PasswordHashSecretRef
		secret := &corev1.Secret{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: ref.Name}, secret)).To(Succeed())
		key := ref.Key
		if key == "" {
			key = "password-hash"
		}
		Expect(string(secret.Data[key])).To(HavePrefix("$2"))

		// Nowhere in the organisation's Secrets, nor in the APIClient, is the password.
		secrets := &corev1.SecretList{}
		Expect(k8sClient.List(ctx, secrets, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(secrets.Items).NotTo(BeEmpty())
		for _, s := range secrets.Items {
			for k, v := range s.Data {
				Expect(string(v)).NotTo(ContainSubstring(o.Password), "secret %s key %s", s.Name, k)
			}
			for k, v := range s.StringData {
				Expect(v).NotTo(ContainSubstring(o.Password), "secret %s key %s", s.Name, k)
			}
		}
		Expect(specJSON(apiClient)).NotTo(ContainSubstring(o.Password))
	})
})
