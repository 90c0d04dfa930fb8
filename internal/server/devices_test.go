package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testing/oauthprovider"
)

// Device connections (docs/api.md, "Device connections") against a real OAuth 2.0 authorisation
// server on loopback (internal/testing/oauthprovider: ory/fosite, PKCE S256, refresh-token
// rotation, revocation, a consent page).

const (
	// deviceProviderName is the suite's DeviceProvider; deviceModel is an AssetModel it controls.
	deviceProviderName = "example"
	deviceModel        = "example_charger"
	// deviceTokenLife is the provider's access-token lifetime: short, so refreshes happen in tests.
	deviceTokenLife = 4 * time.Second
	registeredURI   = "https://app.example.com/done"
)

var (
	deviceProvider *oauthprovider.Provider
	providerDialer = deviceauth.Dialer{SecretNamespace: keysNamespace, Policy: events.AddressPolicy{
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}
)

// startDeviceProvider runs the authorisation server and declares it as a DeviceProvider, with
// its client secret in the manager's namespace, and an AssetModel whose assets it controls.
func startDeviceProvider(ctx context.Context) {
	var err error
	deviceProvider, err = oauthprovider.Start("127.0.0.1:0", oauthprovider.Options{ClientID: "flexsite",
		ClientSecret: "provider-secret", RedirectURIs: []string{"http://127.0.0.1/oauth/callback"},
		AccessTokenLifespan: deviceTokenLife, DisplayName: "Example Energy"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(deviceProvider.Close)
	Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keysNamespace, Name: "example-provider"},
		StringData: map[string]string{"client-secret": "provider-secret"}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: deviceProviderName},
		Spec: flexv1.DeviceProviderSpec{DisplayName: "Example Energy", AuthorizationURL: deviceProvider.AuthorizationURL(),
			TokenURL: deviceProvider.TokenURL(), RevocationURL: deviceProvider.RevocationURL(), Scopes: []string{"devices"},
			ClientID: "flexsite", ClientSecretRef: flexv1.ProviderSecretRef{Name: "example-provider"},
			AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger}}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "example-charger"},
		Spec: flexv1.AssetModelSpec{ModelName: deviceModel, Manufacturer: "Example", AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger},
			CoP11Qualified: true, Provider: deviceProviderName}})).To(Succeed())
}

// deviceHousehold onboards a household whose charger is of the provider's model; it answers
// the site id and the charger's asset id.
func deviceHousehold(tok, mpan string) (siteID, chargerID string) {
	GinkgoHelper()
	body := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
		b["assets"].([]any)[0].(map[string]any)["asset_model"] = deviceModel
	}))
	siteID = body["site"].(map[string]any)["site_id"].(string)
	for _, a := range body["assets"].([]any) {
		if a.(map[string]any)["external_id"] == "charger-"+mpan {
			chargerID = a.(map[string]any)["asset_id"].(string)
		}
	}
	Expect(chargerID).NotTo(BeEmpty(), "%v", body)
	return siteID, chargerID
}

// noFollow is a browser that shows where it is sent instead of going.
var noFollow = &http.Client{Timeout: 20 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// openCallback follows the provider's redirect to Flexsite's callback: its status, Location and body.
func openCallback(callback string) (int, *url.URL, string) {
	GinkgoHelper()
	resp, err := noFollow.Get(callback)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	var body strings.Builder
	buf := make([]byte, 4096)
	for {
		n, rerr := resp.Body.Read(buf)
		body.Write(buf[:n])
		if rerr != nil {
			break
		}
	}
	loc, _ := resp.Location()
	return resp.StatusCode, loc, body.String()
}

// connect runs initiate → consent (Allow) → callback and answers where the callback sent the browser.
func connect(tok, siteID, redirect string) *url.URL {
	GinkgoHelper()
	path := "/entities/site/" + siteID + "/oauth/" + deviceProviderName + "/initiate"
	if redirect != "" {
		path += "?redirect_uri=" + url.QueryEscape(redirect)
	}
	authURL := mustCall("GET", path, tok, nil)["authorization_url"].(string)
	cb, err := oauthprovider.Consent(authURL, true)
	Expect(err).NotTo(HaveOccurred())
	status, loc, body := openCallback(cb)
	Expect(status).To(Equal(http.StatusSeeOther), "%s", body)
	return loc
}

func connectionOf(ctx context.Context, ns, siteID string) (*flexv1.DeviceConnection, *corev1.Secret) {
	GinkgoHelper()
	site := siteNamed(ctx, ns, siteID)
	conn := &flexv1.DeviceConnection{}
	key := client.ObjectKey{Namespace: ns, Name: identity.DeviceConnectionName(site.Name, deviceProviderName)}
	if err := k8sClient.Get(ctx, key, conn); err != nil {
		return nil, nil
	}
	sec := &corev1.Secret{}
	if err := k8sClient.Get(ctx, deviceauth.SecretKey(conn), sec); err != nil {
		sec = nil
	}
	return conn, sec
}

func siteNamed(ctx context.Context, ns, siteID string) *flexv1.Site {
	GinkgoHelper()
	list := &flexv1.SiteList{}
	Expect(k8sClient.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{flexv1.IDLabel: siteID})).To(Succeed())
	Expect(list.Items).To(HaveLen(1))
	return &list.Items[0]
}

func allowRedirect(ctx SpecContext, o org) {
	patchAPIClient(ctx, o, func(c *flexv1.APIClient) { c.Spec.RedirectURIs = []string{registeredURI} })
}

var _ = Describe("Device connections: initiate, callback, list, disconnect", func() {
	var (
		o                 org
		tok               string
		siteID, chargerID string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		allowRedirect(ctx, o)
		siteID, chargerID = deviceHousehold(tok, validMPAN(8101))
	})

	It("connects through the provider's consent page with PKCE S256, stores the tokens only in the connection's Secret, lists and revokes", func(ctx SpecContext) {
		authURL := mustCall("GET", "/entities/site/"+siteID+"/oauth/example/initiate?redirect_uri="+url.QueryEscape(registeredURI),
			tok, nil)["authorization_url"].(string)
		u, err := url.Parse(authURL)
		Expect(err).NotTo(HaveOccurred())
		q := u.Query()
		Expect(q.Get("code_challenge_method")).To(Equal("S256"))
		Expect(q.Get("code_challenge")).NotTo(BeEmpty())
		state := q.Get("state")
		Expect(len(state)).To(BeNumerically(">=", 32))
		// The state is stored nowhere but as a hash; the verifier in no CR.
		conn, sec := connectionOf(ctx, o.Namespace, siteID)
		Expect(conn).NotTo(BeNil())
		crJSON, _ := json.Marshal(conn)
		Expect(string(crJSON)).NotTo(ContainSubstring(state))
		Expect(sec.Labels[flexv1.OAuthStateLabel]).To(Equal(deviceauth.HashState(state)))
		for _, v := range sec.Data {
			Expect(string(v)).NotTo(Equal(state))
		}

		grants := deviceProvider.CodeGrants()
		cb, err := oauthprovider.Consent(authURL, true)
		Expect(err).NotTo(HaveOccurred())
		status, loc, body := openCallback(cb)
		Expect(status).To(Equal(http.StatusSeeOther), body)
		Expect(loc.Scheme + "://" + loc.Host + loc.Path).To(Equal(registeredURI))
		Expect(loc.Query().Get("connection")).To(Equal("connected"))
		Expect(loc.Query().Get("provider")).To(Equal("example"))
		Expect(deviceProvider.CodeGrants()).To(Equal(grants + 1))

		conn, sec = connectionOf(ctx, o.Namespace, siteID)
		// Created with its site as controller (the sharder's assignment): nothing patches it for that.
		Expect(metav1.GetControllerOf(conn)).To(HaveField("Kind", "Site"))
		for _, w := range writesOf(o.Namespace) {
			Expect(w.Body).NotTo(ContainSubstring("ownerReferences"), "%s", w)
		}
		t := deviceauth.Read(sec)
		Expect(t.AccessToken).NotTo(BeEmpty())
		Expect(t.RefreshToken).NotTo(BeEmpty())
		Expect(sec.OwnerReferences).To(HaveLen(1))
		Expect(sec.OwnerReferences[0].UID).To(Equal(conn.UID))
		crJSON, _ = json.Marshal(conn)
		Expect(string(crJSON)).NotTo(ContainSubstring(t.AccessToken))
		Expect(string(crJSON)).NotTo(ContainSubstring(t.RefreshToken))
		Expect(conn.Status.Phase).To(Equal(flexv1.ConnectionConnected))
		Eventually(func(g Gomega) {
			c, _ := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(c.Status.ObservedGeneration).To(Equal(c.Generation))
			g.Expect(c.Status.Conditions).To(ContainElement(And(
				HaveField("Type", flexv1.ReadyCondition), HaveField("Status", metav1.ConditionTrue))))
		}).Should(Succeed())

		// The same callback again: the state was single-use; nothing is exchanged or stored.
		// (The state is gone, and with it the redirect_uri: the plain page says so in words.)
		status, _, body = openCallback(cb)
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring("not valid or was already used"))
		Expect(deviceProvider.CodeGrants()).To(Equal(grants + 1))

		list := mustCall("GET", "/entities/site/"+siteID+"/connections", tok, nil)["connections"].([]any)
		Expect(list).To(HaveLen(1))
		rec := list[0].(map[string]any)
		Expect(rec["provider"]).To(Equal("example"))
		Expect(rec["status"]).To(Equal("connected"))
		Expect(rec["assets"]).To(Equal([]any{chargerID}))
		raw := mustCall("GET", "/entities/site/"+siteID+"/connections", tok, nil)
		rawJSON, _ := json.Marshal(raw)
		Expect(string(rawJSON)).NotTo(ContainSubstring(t.AccessToken))
		Expect(mustCall("GET", "/entities/asset/"+chargerID, tok, nil)["needs_reauthorisation"]).To(BeFalse())

		revoked := deviceProvider.Revocations()
		status, resp := call("DELETE", "/entities/site/"+siteID+"/connections/example", tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		Expect(deviceProvider.Revocations()).To(BeNumerically(">", revoked))
		Eventually(func() bool {
			c, s := connectionOf(ctx, o.Namespace, siteID)
			return c == nil && s == nil
		}).Should(BeTrue())
		status, _ = call("DELETE", "/entities/site/"+siteID+"/connections/example", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound))
	})

	It("sends the household back to a mobile app's private-use scheme only when the API client declares it and registers the URI", func(ctx SpecContext) {
		const appURI = "com.example.app:/oauth/done"
		initiate := func(redirect string) (int, response) {
			return call("GET", "/entities/site/"+siteID+"/oauth/example/initiate?redirect_uri="+url.QueryEscape(redirect), tok, nil)
		}
		status, resp := initiate(appURI)
		expectValidationItem(status, resp, []any{"query", "redirect_uri"}, "url_scheme_undeclared")

		patchAPIClient(ctx, o, func(c *flexv1.APIClient) {
			c.Spec.RedirectSchemes = []string{"com.example.app"}
			c.Spec.RedirectURIs = []string{registeredURI, appURI}
		})
		var authURL string
		Eventually(func(g Gomega) {
			status, resp := initiate(appURI)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			authURL = resp.MapG(g)["authorization_url"].(string)
		}).Should(Succeed())
		By("refusing the declared scheme at a URI the client did not register")
		status, resp = initiate("com.example.app:/elsewhere")
		expectValidationItem(status, resp, []any{"query", "redirect_uri"}, "value_error")

		cb, err := oauthprovider.Consent(authURL, true)
		Expect(err).NotTo(HaveOccurred())
		status, loc, body := openCallback(cb)
		Expect(status).To(Equal(http.StatusSeeOther), body)
		Expect(loc.Scheme + ":" + loc.Path).To(Equal(appURI))
		Expect(loc.Query().Get("connection")).To(Equal("connected"))
	})

	It("answers bad input as the spec says, and a denied or failed authorisation in words", func(ctx SpecContext) {
		initiate := func(site, provider, redirect string) (int, response) {
			return call("GET", "/entities/site/"+site+"/oauth/"+provider+"/initiate?redirect_uri="+url.QueryEscape(redirect), tok, nil)
		}
		status, resp := initiate(siteID, "nosuchprovider", registeredURI)
		Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
		status, _ = initiate("9b1f0a52-8a7e-4c59-9a53-3f8a2b6d7e10", "example", registeredURI)
		Expect(status).To(Equal(http.StatusNotFound))
		other := newOrg(ctx)
		otherSite, _ := deviceHousehold(other.token(), validMPAN(8102))
		status, _ = initiate(otherSite, "example", registeredURI)
		Expect(status).To(Equal(http.StatusNotFound))
		status, resp = initiate(siteID, "example", "javascript:alert(1)")
		expectValidationItem(status, resp, []any{"query", "redirect_uri"}, "")

		// Denied at the provider: nothing stored.
		authURL := mustCall("GET", "/entities/site/"+siteID+"/oauth/example/initiate?redirect_uri="+url.QueryEscape(registeredURI),
			tok, nil)["authorization_url"].(string)
		cb, err := oauthprovider.Consent(authURL, false)
		Expect(err).NotTo(HaveOccurred())
		_, loc, _ := openCallback(cb)
		Expect(loc.Query().Get("connection")).To(Equal("error"))
		Expect(loc.Query().Get("reason")).To(Equal("access_denied"))

		// A forged state, and no redirect_uri: the plain page says it in words.
		status, _, body := openCallback(apiServer.URL + "/oauth/callback?code=x&state=forged-state-forged-state-forged-state")
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring("not valid or was already used"))

		// A provider that answers the exchange with garbage: a clear error, nothing stored.
		deviceProvider.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
			_, _ = w.Write([]byte("<html>not json"))
			return true
		})
		DeferCleanup(func() { deviceProvider.SetFault(nil) })
		authURL = mustCall("GET", "/entities/site/"+siteID+"/oauth/example/initiate", tok, nil)["authorization_url"].(string)
		cb, err = oauthprovider.Consent(authURL, true)
		Expect(err).NotTo(HaveOccurred())
		status, _, body = openCallback(cb)
		Expect(status).To(Equal(http.StatusBadRequest))
		Expect(body).To(ContainSubstring("did not complete the connection"))
		_, sec := connectionOf(ctx, o.Namespace, siteID)
		Expect(deviceauth.Read(sec).Has()).To(BeFalse())
		// ... and the connection's status says so, in words.
		Eventually(func(g Gomega) {
			c, _ := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(c.Status.Phase).To(Equal(flexv1.ConnectionPending))
			g.Expect(c.Status.Conditions).To(ContainElement(And(HaveField("Type", flexv1.ReadyCondition),
				HaveField("Message", ContainSubstring("the code exchange failed: the provider's answer could not be used")))))
		}).Should(Succeed())
	})

	It("builds the OAuth callback and the page's postMessage target from --public-url behind TLS termination, not from the request's Host", func(ctx SpecContext) {
		// The manager behind a TLS-terminating ingress: requests arrive as plain http to the
		// pod with the proxy's Host.
		cfg := apiSrv.Config
		cfg.PublicURL = "https://flexsite.example.com"
		srv := httptest.NewServer(server.NewServer(cfg))
		DeferCleanup(srv.Close)

		resp := limitedCall(srv, "GET", "/entities/site/"+siteID+"/oauth/example/initiate", tok, "", "")
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s", body)
		var answer struct {
			AuthorizationURL string `json:"authorization_url"`
		}
		Expect(json.Unmarshal(body, &answer)).To(Succeed())
		u, err := url.Parse(answer.AuthorizationURL)
		Expect(err).NotTo(HaveOccurred())
		Expect(u.Query().Get("redirect_uri")).To(Equal("https://flexsite.example.com/oauth/callback"))

		resp = limitedCall(srv, "GET", "/oauth/callback?code=x&state=forged-state-forged-state-forged-state", "", "", "")
		body, err = io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		page := strings.ReplaceAll(string(body), `\/`, "/")
		Expect(page).To(ContainSubstring(`postMessage(msg, "https://flexsite.example.com")`))
		Expect(page).NotTo(ContainSubstring(strings.TrimPrefix(srv.URL, "http://")))
	})

	It("lets the household's component token connect its own site with its allowed origin as redirect", func(ctx SpecContext) {
		userTok := mustCall("POST", "/auth/component-token", tok, componentForm("device-user-"+o.Namespace,
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))["access_token"].(string)
		userSiteID := userSite(ctx, o.Namespace, "device-user-"+o.Namespace).Labels[flexv1.IDLabel]
		loc := connect(userTok, userSiteID, "https://app.example.com/back")
		Expect(loc.Query().Get("connection")).To(Equal("connected"))
		Expect(mustCall("GET", "/entities/site/"+userSiteID+"/connections", userTok, nil)["connections"]).To(HaveLen(1))
		status, _ := call("GET", "/entities/site/"+siteID+"/connections", userTok, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = call("DELETE", "/entities/site/"+userSiteID+"/connections/example", userTok, nil)
		Expect(status).To(Equal(http.StatusNoContent))
	})
})

var _ = Describe("Device connections: kept alive, lapsed, reconnected", func() {
	var (
		o                 org
		tok               string
		siteID, chargerID string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		allowRedirect(ctx, o)
		siteID, chargerID = deviceHousehold(tok, validMPAN(8201))
	})

	It("refreshes before expiry with rotation; on invalid_grant the asset needs reauthorisation (REST, kubectl, notification, Event); reconnecting clears it", func(ctx SpecContext) {
		status, resp := call("POST", "/notifications/subscriptions", tok, map[string]any{
			"url": "https://hooks.flexsite.invalid/devices", "events": []any{"asset.changed"}})
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		connect(tok, siteID, registeredURI)
		_, sec := connectionOf(ctx, o.Namespace, siteID)
		first := deviceauth.Read(sec)

		// Refreshed (rotated) before the 4 s token expires, and again.
		Eventually(func(g Gomega) {
			c, s := connectionOf(ctx, o.Namespace, siteID)
			t := deviceauth.Read(s)
			g.Expect(t.RefreshToken).NotTo(Equal(first.RefreshToken))
			g.Expect(t.AccessToken).NotTo(Equal(first.AccessToken))
			g.Expect(c.Status.LastRefreshAt).NotTo(BeNil())
			g.Expect(c.Status.Phase).To(Equal(flexv1.ConnectionConnected))
		}, 15*time.Second).Should(Succeed())

		// The household withdraws the grant at the provider: the next refresh is invalid_grant.
		deviceProvider.RevokeEverything()
		Eventually(func(g Gomega) {
			c, _ := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(c.Status.Phase).To(Equal(flexv1.ConnectionNeedsReauthorisation))
			g.Expect(c.Status.Conditions).To(ContainElement(And(HaveField("Type", flexv1.StalledCondition),
				HaveField("Status", metav1.ConditionTrue))))
		}, 15*time.Second).Should(Succeed())
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/asset/"+chargerID, tok, nil)["needs_reauthorisation"]
		}).Should(BeTrue())
		asset := &flexv1.Asset{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.AssetName("charger-" + validMPAN(8201))}, asset)).To(Succeed())
		Expect(asset.Status.NeedsReauthorisation).To(BeTrue())
		Expect(slices.ContainsFunc(outboxEvents(ctx, o.Namespace, flexv1.EventAssetChanged), func(e outboxEvent) bool {
			return strings.Contains(e.Data, `"needs_reauthorisation": true`)
		})).To(BeTrue(), "an asset.changed notification carrying needs_reauthorisation: true, in the outbox")
		Eventually(func() int { return lifecycleEvents(ctx, Default, o.Namespace, "NeedsReauthorisation", asset.Name) }).
			Should(BeNumerically(">=", 1))

		// Reconnecting clears it.
		loc := connect(tok, siteID, registeredURI)
		Expect(loc.Query().Get("connection")).To(Equal("connected"))
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/asset/"+chargerID, tok, nil)["needs_reauthorisation"]
		}).Should(BeFalse())
	})

	It("retries a transient refresh failure without changing anything visible while the token is valid", func(ctx SpecContext) {
		connect(tok, siteID, registeredURI)
		Eventually(func(g Gomega) {
			c, _ := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
		}).Should(Succeed())

		// The provider fails every refresh. Those of this connection's grant, once it is
		// armed, it holds until the spec lets each answer: the controller reconciles a
		// connection once at a time, so attempt n arriving proves that the reconcile of
		// attempt n-1 has returned, and while attempt n is held nothing else writes the status.
		var (
			mu    sync.Mutex
			armed string // the refresh token whose attempts are held
		)
		attempts := make(chan chan struct{})
		ended := make(chan struct{})
		deviceProvider.SetFault(func(w http.ResponseWriter, r *http.Request) bool {
			if r.PostFormValue("grant_type") != "refresh_token" {
				return false
			}
			mu.Lock()
			held := armed != "" && r.PostFormValue("refresh_token") == armed
			mu.Unlock()
			if held {
				release := make(chan struct{})
				select {
				case attempts <- release:
					select {
					case <-release:
					case <-ended:
					case <-r.Context().Done():
					}
				case <-ended:
				case <-r.Context().Done():
				}
			}
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		})
		DeferCleanup(func() {
			deviceProvider.SetFault(nil)
			close(ended)
		})

		// The stored access token is made valid for another hour and due for refresh now, in a
		// version of the Secret that holds no refresh claim: no refresh is in flight, and every
		// later one starts from this version (a refresh claims on top of the version it read).
		// So every attempt from here fails while the token is valid, however loaded the
		// machine: 4 s tokens would expire between two attempts.
		var stored deviceauth.Tokens
		Eventually(func(g Gomega) {
			_, sec := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(sec).NotTo(BeNil())
			g.Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyRefreshClaim))
			stored = deviceauth.Read(sec)
			stored.IssuedAt, stored.Expiry = time.Now().Add(-10*time.Hour), time.Now().Add(time.Hour)
			deviceauth.Write(sec, stored)
			g.Expect(k8sClient.Update(ctx, sec)).To(Succeed())
		}).Should(Succeed())
		mu.Lock()
		armed = stored.RefreshToken
		mu.Unlock()

		held := func() chan struct{} {
			GinkgoHelper()
			var release chan struct{}
			Eventually(attempts, 30*time.Second).Should(Receive(&release))
			return release
		}
		// The status as it stands with the first held attempt in flight ...
		release := held()
		before, _ := connectionOf(ctx, o.Namespace, siteID)
		close(release)
		// ... is the status once that attempt has failed, and once the retry has failed too.
		for range 2 {
			release = held()
			c, _ := connectionOf(ctx, o.Namespace, siteID)
			Expect(c.Status).To(Equal(before.Status))
			close(release)
		}
		_, sec := connectionOf(ctx, o.Namespace, siteID)
		Expect(deviceauth.Read(sec).RefreshToken).To(Equal(stored.RefreshToken), "nothing was refreshed meanwhile")

		// The provider recovers: the next retry refreshes.
		deviceProvider.SetFault(nil)
		Eventually(func(g Gomega) {
			c, s := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(deviceauth.Read(s).RefreshToken).NotTo(Equal(stored.RefreshToken))
			g.Expect(c.Status.Phase).To(Equal(flexv1.ConnectionConnected))
			g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
			g.Expect(c.Status.ExpiresAt.Time).To(BeTemporally(">", before.Status.ExpiresAt.Time))
		}, 30*time.Second).Should(Succeed())
	})

	It("stores a token the client obtained itself; one past expires_utc makes every asset of the site need reauthorisation", func(ctx SpecContext) {
		path := "/entities/site/" + siteID + "/token"
		status, resp := call("POST", path, tok, map[string]any{"access_token": "a"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(mustCall("POST", path, tok, map[string]any{"token_type": "API_KEY", "access_token": "k"})).To(BeEmpty())
		status, _ = call("POST", "/entities/site/9b1f0a52-8a7e-4c59-9a53-3f8a2b6d7e10/token", tok,
			map[string]any{"refresh_token": "r", "expires_in": 3600})
		Expect(status).To(Equal(http.StatusNotFound))
		expires := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
		mustCall("POST", path, tok, map[string]any{"access_token": "a", "refresh_token": "r", "token_type": "Bearer",
			"expires_utc": expires})
		list := mustCall("GET", "/entities/site/"+siteID+"/connections", tok, nil)["connections"].([]any)
		Expect(list).To(HaveLen(1))
		Expect(list[0].(map[string]any)["provider"]).To(Equal("client"))
		Expect(list[0].(map[string]any)["assets"]).To(HaveLen(2))
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/asset/"+chargerID, tok, nil)["needs_reauthorisation"]
		}, 15*time.Second).Should(BeTrue())
		// A fresh token clears it.
		mustCall("POST", path, tok, map[string]any{"access_token": "a2", "refresh_token": "r2", "expires_in": 3600})
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/entities/asset/"+chargerID, tok, nil)["needs_reauthorisation"]
		}).Should(BeFalse())
	})

	It("revokes and deletes a site's connections when it is offboarded", func(ctx SpecContext) {
		connect(tok, siteID, registeredURI)
		conn, _ := connectionOf(ctx, o.Namespace, siteID)
		revoked := deviceProvider.Revocations()
		mustCall("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Eventually(func() bool {
			err := k8sClient.Get(ctx, client.ObjectKeyFromObject(conn), &flexv1.DeviceConnection{})
			return apierrors.IsNotFound(err)
		}).Should(BeTrue())
		Expect(deviceProvider.Revocations()).To(BeNumerically(">", revoked))
		err := k8sClient.Get(ctx, deviceauth.SecretKey(conn), &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})

	// rotateThroughAFault connects the household and lets a second manager refresh: its
	// DeviceConnection controller sees every token due 3 s early, and its first write of the
	// tokens the provider answered fails (always: every one); the fault stops that manager at
	// once, as a restart in the window would. It answers, once that manager has stopped, the
	// refresh token that refresh replaced and the one the provider had rotated to.
	rotateThroughAFault := func(always bool) (first, rotatedTo string) {
		mgr, err := env.NewManager()
		Expect(err).NotTo(HaveOccurred())
		mctx, stop := context.WithCancel(context.Background())
		DeferCleanup(stop)
		faulty := &tokenWriteFault{CachedClient: index.CachedClient{Client: mgr.GetClient(), Cache: mgr.GetCache()},
			namespace: o.Namespace, always: always, fired: make(chan [2]string, 1), onFire: stop}
		Expect((&controllers.DeviceConnectionReconciler{Client: faulty, Recorder: mgr.GetEventRecorder("restarting"),
			Dialer: providerDialer, Holder: "restarting-replica", DB: database.Pool,
			Now: func() time.Time { return time.Now().Add(3 * time.Second) }}).
			SetupWithManager(mgr, controller.Options{SkipNameValidation: ptr.To(true)})).To(Succeed())
		stopped := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(stopped)
			Expect(mgr.Start(ctrl.LoggerInto(mctx, ctrl.Log.WithName("restarting")))).To(Succeed())
		}()

		connect(tok, siteID, registeredURI)

		// The fault happened: the provider had answered (rotated) and the first store failed.
		// (The suite's own controller may have refreshed once before: first is the token the
		// failed refresh replaced.)
		var fired [2]string
		Eventually(faulty.fired, 20*time.Second).Should(Receive(&fired))
		first, rotatedTo = fired[0], fired[1]
		Expect(first).NotTo(BeEmpty())
		Expect(rotatedTo).NotTo(BeEmpty())
		Expect(rotatedTo).NotTo(Equal(first))
		Eventually(stopped, 40*time.Second).Should(BeClosed())
		return first, rotatedTo
	}

	// keepsRefreshing waits for two more rotations after rotatedTo, with the connection
	// connected, and no refresh refused by the provider since refused.
	keepsRefreshing := func(ctx context.Context, first, rotatedTo string, refused int64) {
		seen := map[string]bool{first: true, rotatedTo: true}
		Eventually(func(g Gomega) {
			c, s := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(c.Status.Phase).To(Equal(flexv1.ConnectionConnected))
			seen[deviceauth.Read(s).RefreshToken] = true
			g.Expect(len(seen)).To(BeNumerically(">=", 4))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(deviceProvider.Refused()).To(Equal(refused), "a rotated-away refresh token was used (invalid_grant)")
	}

	It("stores a rotated refresh token before anything else: a failed Secret write and a shutdown in that window lose nothing", func(ctx SpecContext) {
		refused := deviceProvider.Refused()
		first, rotatedTo := rotateThroughAFault(false)

		// The stopping manager stored the rotated token before it went; the suite's controller
		// refreshes with it from there, rotation after rotation, and the provider never refused.
		_, sec := connectionOf(ctx, o.Namespace, siteID)
		Expect(deviceauth.Read(sec).RefreshToken).To(Equal(rotatedTo))
		Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyRefreshClaim))
		Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyHandoverKey))
		keepsRefreshing(ctx, first, rotatedTo, refused)
	})

	It("continues a grant whose rotated refresh token never reached the Secret before the process died: handed over through PostgreSQL, sealed with the claim's key", func(ctx SpecContext) {
		refused := deviceProvider.Refused()
		first, rotatedTo := rotateThroughAFault(true)
		// The stopped manager could store nothing: the Secret still holds the token the
		// provider rotated away, and the dead refresh's claim and key.
		c, sec := connectionOf(ctx, o.Namespace, siteID)
		Expect(deviceauth.Read(sec).RefreshToken).To(Equal(first), "rotated to %s; the Secret: %v", rotatedTo, secretKeys(sec))
		Expect(sec.Data).To(HaveKey(deviceauth.KeyRefreshClaim))
		Expect(sec.Data).To(HaveKey(deviceauth.KeyHandoverKey))
		var sealed []byte
		Expect(database.Pool.QueryRow(ctx, `SELECT sealed FROM device_token_handovers WHERE connection_uid = $1`,
			string(c.UID)).Scan(&sealed)).To(Succeed())
		Expect(string(sealed)).NotTo(ContainSubstring(rotatedTo), "the hand-over is sealed")

		// Once the dead claim expires, the suite's controller stores the handed-over tokens
		// instead of calling the provider with the rotated-away one, and refreshes from there.
		Eventually(func(g Gomega) {
			_, s := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(deviceauth.Read(s).RefreshToken).NotTo(Equal(first))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
		keepsRefreshing(ctx, first, rotatedTo, refused)
		Eventually(func() error {
			return database.Pool.QueryRow(ctx, `SELECT 1 FROM device_token_handovers WHERE connection_uid = $1`, string(c.UID)).Scan(new(int))
		}).Should(MatchError(pgx.ErrNoRows))
	})

	It("never refreshes one token twice at once: a rotation race across two managers", func(ctx SpecContext) {
		// A second manager against the same API server, running its own DeviceConnection
		// controller beside the suite's: both see every connection and both want to refresh.
		mgr, err := env.NewManager()
		Expect(err).NotTo(HaveOccurred())
		Expect((&controllers.DeviceConnectionReconciler{Client: index.CachedClient{Client: mgr.GetClient(), Cache: mgr.GetCache()},
			Recorder: mgr.GetEventRecorder("second"),
			Dialer:   providerDialer, Holder: "second-replica", DB: database.Pool}).SetupWithManager(mgr,
			controller.Options{SkipNameValidation: ptr.To(true), MaxConcurrentReconciles: 4})).To(Succeed())
		mctx, cancel := context.WithCancel(context.Background())
		DeferCleanup(cancel)
		go func() {
			defer GinkgoRecover()
			Expect(mgr.Start(ctrl.LoggerInto(mctx, ctrl.Log.WithName("second")))).To(Succeed())
		}()

		refused := deviceProvider.Refused()
		connect(tok, siteID, registeredURI)
		_, sec := connectionOf(ctx, o.Namespace, siteID)
		seen := map[string]bool{deviceauth.Read(sec).RefreshToken: true}
		// Three rotations: each refresh token is used once, the connection never lapses.
		Eventually(func(g Gomega) {
			c, s := connectionOf(ctx, o.Namespace, siteID)
			g.Expect(c.Status.Phase).To(Equal(flexv1.ConnectionConnected))
			seen[deviceauth.Read(s).RefreshToken] = true
			g.Expect(len(seen)).To(BeNumerically(">=", 4))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		c, _ := connectionOf(ctx, o.Namespace, siteID)
		Expect(c.Status.Phase).To(Equal(flexv1.ConnectionConnected))
		Expect(deviceProvider.Refused()).To(Equal(refused), "a refresh token was used twice (invalid_grant)")
	})
})

// tokenWriteFault is a controller's client whose first write of a token Secret of namespace
// that stores tokens (not the write that takes a refresh claim) fails with a server error, and with
// always every such write after it: it reports the refresh token the first carried on fired
// and calls onFire.
type tokenWriteFault struct {
	index.CachedClient
	// namespace is the organisation whose token writes fail (the manager sees every one).
	namespace string
	always    bool
	// fired receives, on the first failure, the refresh token the failed refresh replaced
	// (the one its claim was taken over) and the one it had obtained.
	fired  chan [2]string
	onFire func()

	mu      sync.Mutex
	failed  int
	claimed string
}

func (c *tokenWriteFault) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	sec, ok := obj.(*corev1.Secret)
	if ok && sec.Namespace == c.namespace && sec.Data[deviceauth.KeyRefreshClaim] != nil {
		c.mu.Lock()
		c.claimed = string(sec.Data[deviceauth.KeyRefreshToken])
		c.mu.Unlock()
	}
	if ok && sec.Namespace == c.namespace && sec.Data[deviceauth.KeyRefreshClaim] == nil && sec.Data[deviceauth.KeyRefreshToken] != nil {
		c.mu.Lock()
		hit := c.failed == 0 || c.always
		c.failed++
		first, claimed := c.failed == 1, c.claimed
		c.mu.Unlock()
		if first {
			c.fired <- [2]string{claimed, string(sec.Data[deviceauth.KeyRefreshToken])}
			c.onFire()
		}
		if hit {
			return apierrors.NewInternalError(errors.New("injected: etcdserver: leader changed"))
		}
	}
	return c.CachedClient.Update(ctx, obj, opts...)
}

// secretKeys are a Secret's data keys with the claim (not the tokens), for a failure's message.
func secretKeys(sec *corev1.Secret) []string {
	keys := make([]string, 0, len(sec.Data))
	for k := range sec.Data {
		if k == deviceauth.KeyRefreshClaim {
			k += "=" + string(sec.Data[k])
		}
		keys = append(keys, k)
	}
	return keys
}
