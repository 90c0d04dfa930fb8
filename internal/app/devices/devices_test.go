package devices_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/apptest"
	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/testing/oauthprovider"
)

// One API server and one indexed cache for the package's tests (the use cases keep nothing in
// PostgreSQL: the tokens live in Secrets), a real OAuth 2.0 authorisation server on loopback
// (internal/testing/oauthprovider), and the use cases built on them as cmd/manager builds them
// (no HTTP).
var (
	env      *testenv.Env
	svc      *devices.Service
	provider *oauthprovider.Provider
	// clock is the use cases' now: the real time unless a test moves it.
	clock atomic.Pointer[time.Time]
)

const (
	keysNamespace = "flexsite-system"
	// example is the catalogue's provider run by the authorisation server; chargerModel is an
	// AssetModel it controls.
	example      = "example"
	chargerModel = "example_charger"
	// down has the authorisation server's consent page but a token and revocation URL where
	// nothing listens; private's URLs are on an address the manager may not call; nosecret's
	// client secret is missing.
	down     = "example-down"
	private  = "example-private"
	nosecret = "example-nosecret"
	// elsewhereModel is controlled by a provider the catalogue does not hold.
	elsewhereModel = "elsewhere_battery"
	// callbackURL is Flexsite's callback as the door would give it (registered at the provider).
	callbackURL   = "http://127.0.0.1/oauth/callback"
	registeredURI = "https://app.example.com/done"
	allowedOrigin = "https://household.example.com"
)

func now() time.Time {
	if t := clock.Load(); t != nil {
		return *t
	}
	return time.Now()
}

func TestMain(m *testing.M) {
	testenv.MainCached(m, func(ctx context.Context, e *testenv.Env, mgr ctrl.Manager) (func(), error) {
		p, err := oauthprovider.Start("127.0.0.1:0", oauthprovider.Options{ClientID: "flexsite",
			ClientSecret: "provider-secret", RedirectURIs: []string{callbackURL}, DisplayName: "Example Energy"})
		if err != nil {
			return nil, err
		}
		if err := catalogue(ctx, e.Client, p); err != nil {
			return p.Close, err
		}
		env, provider = e, p
		svc = devices.New(devices.Config{Log: logr.Discard(), Households: apptest.Households(mgr), Now: now,
			Dialer: deviceauth.Dialer{SecretNamespace: keysNamespace, Policy: events.AddressPolicy{
				Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
		return p.Close, nil
	})
}

// catalogue declares the providers and models the tests use, as a platform team would.
func catalogue(ctx context.Context, c client.Client, p *oauthprovider.Provider) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	nowhere := "http://" + ln.Addr().String() // closed at once: connections to it are refused
	_ = ln.Close()
	spec := func(token, revoke, secret string) flexv1.DeviceProviderSpec {
		return flexv1.DeviceProviderSpec{DisplayName: "Example Energy", AuthorizationURL: p.AuthorizationURL(),
			TokenURL: token, RevocationURL: revoke, Scopes: []string{"devices"}, ClientID: "flexsite",
			ClientSecretRef: flexv1.ProviderSecretRef{Name: secret}, AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger}}
	}
	privateSpec := spec("https://10.20.30.40/token", "", "example-provider")
	privateSpec.AuthorizationURL = "https://10.20.30.40/authorize"
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keysNamespace, Name: "example-provider"},
			StringData: map[string]string{"client-secret": "provider-secret"}},
		&flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: example},
			Spec: spec(p.TokenURL(), p.RevocationURL(), "example-provider")},
		&flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: down},
			Spec: spec(nowhere+"/token", nowhere+"/revoke", "example-provider")},
		&flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: private}, Spec: privateSpec},
		&flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: nosecret},
			Spec: spec(p.TokenURL(), p.RevocationURL(), "no-such-secret")},
		&flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "example-charger"},
			Spec: flexv1.AssetModelSpec{ModelName: chargerModel, Manufacturer: "Example",
				AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger}, CoP11Qualified: true, Provider: example}},
		&flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere-battery"},
			Spec: flexv1.AssetModelSpec{ModelName: elsewhereModel, Manufacturer: "Elsewhere",
				AssetTypes: []flexv1.AssetType{flexv1.AssetTypeBattery}, Provider: "not-in-catalogue"}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func org(t *testing.T) *auth.Principal { return apptest.Organisation(t, env, "client") }

func kindOf(err error) app.Kind {
	if e := app.As(err); e != nil {
		return e.Kind
	}
	return app.Internal
}

// home is a site of p's organisation (API id siteID) with a charger of the example's model
// (API id siteID+"-charger"), a battery of a model whose provider is not in the catalogue and
// a battery of no model; userID, when given, is the end user it was made for.
type home struct {
	site                          *flexv1.Site
	id, charger, elsewhere, plain string
}

func household(t *testing.T, g *WithT, p *auth.Principal, siteID, userID string) home {
	t.Helper()
	ctx := t.Context()
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "site-" + siteID,
		Labels: map[string]string{flexv1.IDLabel: siteID}}, Spec: flexv1.SiteSpec{Postcode: "SW1A 1AA"}}
	if userID != "" {
		site.Annotations = map[string]string{flexv1.UserIDAnnotation: userID}
	}
	g.Expect(env.Client.Create(ctx, site)).To(Succeed())
	h := home{site: site, id: siteID, charger: siteID + "-charger", elsewhere: siteID + "-elsewhere", plain: siteID + "-plain"}
	for _, a := range []struct {
		id, model string
		typ       flexv1.AssetType
	}{{h.charger, chargerModel, flexv1.AssetTypeCharger}, {h.elsewhere, elsewhereModel, flexv1.AssetTypeBattery},
		{h.plain, "", flexv1.AssetTypeBattery}} {
		asset := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: a.id,
			Labels: map[string]string{flexv1.IDLabel: a.id}}, Spec: flexv1.AssetSpec{SiteName: site.Name,
			ExternalID: "ext-" + a.id, Type: a.typ, Model: a.model, PowerW: ptr.To[int64](7400)}}
		if a.typ == flexv1.AssetTypeBattery {
			asset.Spec.CapacityWh = ptr.To[int64](10000)
		}
		g.Expect(env.Client.Create(ctx, asset)).To(Succeed())
	}
	// The use cases read the site and its assets from the cache.
	g.Eventually(func(g Gomega) {
		_, err := svc.Households.SiteToRead(ctx, p, siteID)
		g.Expect(err).NotTo(HaveOccurred())
		for _, id := range []string{h.charger, h.elsewhere, h.plain} {
			_, err := svc.Households.FindAsset(ctx, p, id, false)
			g.Expect(err).NotTo(HaveOccurred())
		}
	}).WithTimeout(10 * time.Second).Should(Succeed())
	return h
}

// endUser is the component token of the end user userID of site h.
func endUser(p *auth.Principal, h home, userID string) *auth.Principal {
	return &auth.Principal{Kind: auth.KindEndUser, Namespace: p.Namespace, ClientName: p.ClientName, SiteName: h.site.Name,
		UserID: userID, AllowedOrigin: allowedOrigin}
}

// registerRedirect registers uris on p's API client and waits for the cache to have them.
func registerRedirect(t *testing.T, g *WithT, p *auth.Principal, uris ...string) {
	t.Helper()
	ctx := t.Context()
	cl := &flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.ClientName},
		Spec: flexv1.APIClientSpec{Username: p.Username, PasswordHashSecretRef: flexv1.SecretKeyRef{Name: "credentials"},
			RedirectURIs: uris}}
	g.Expect(env.Client.Create(ctx, cl)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &flexv1.APIClient{}
		g.Expect(svc.Households.Cache.Get(ctx, client.ObjectKeyFromObject(cl), got)).To(Succeed())
		g.Expect(got.Spec.RedirectURIs).To(Equal(uris))
	}).WithTimeout(10 * time.Second).Should(Succeed())
}

// connection reads the site's connection at prov and its token Secret from the API server
// (nil when absent).
func connection(g *WithT, ctx context.Context, h home, prov string) (*flexv1.DeviceConnection, *corev1.Secret) {
	conn := &flexv1.DeviceConnection{}
	err := env.Client.Get(ctx, client.ObjectKey{Namespace: h.site.Namespace, Name: identity.DeviceConnectionName(h.site.Name, prov)}, conn)
	if apierrors.IsNotFound(err) {
		conn = nil
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	sec := &corev1.Secret{}
	err = env.Client.Get(ctx, client.ObjectKey{Namespace: h.site.Namespace,
		Name: identity.DeviceTokensSecretName(identity.DeviceConnectionName(h.site.Name, prov))}, sec)
	if apierrors.IsNotFound(err) {
		sec = nil
	} else {
		g.Expect(err).NotTo(HaveOccurred())
	}
	return conn, sec
}

// connectionsOf counts the DeviceConnections of p's organisation as stored.
func connectionsOf(g *WithT, ctx context.Context, p *auth.Principal) []flexv1.DeviceConnection {
	list := &flexv1.DeviceConnectionList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(p.Namespace))).To(Succeed())
	return list.Items
}

// consent plays the household's browser at the provider (Allow or Deny) and answers the
// callback the provider sends it to, as the callback door reads it.
func consent(g *WithT, authURL string, allow bool) devices.CallbackInput {
	loc, err := oauthprovider.Consent(authURL, allow)
	g.Expect(err).NotTo(HaveOccurred())
	u, err := url.Parse(loc)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Scheme + "://" + u.Host + u.Path).To(Equal(callbackURL))
	q := u.Query()
	return devices.CallbackInput{State: q.Get("state"), Code: q.Get("code"), Error: q.Get("error"), CallbackURL: callbackURL}
}

// initiate starts an authorisation at prov for p's site h (no redirect): its URL.
func initiate(t *testing.T, g *WithT, p *auth.Principal, h home, prov string) string {
	t.Helper()
	res, err := svc.Initiate(t.Context(), p, devices.InitiateInput{SiteID: h.id, Provider: prov, CallbackURL: callbackURL})
	g.Expect(err).NotTo(HaveOccurred())
	return res.AuthorizationURL
}

// crHolds reports whether the connection, as stored, holds any of secrets anywhere.
func crHolds(g *WithT, conn *flexv1.DeviceConnection, secrets ...string) bool {
	raw, err := json.Marshal(conn)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range secrets {
		if s != "" && strings.Contains(string(raw), s) {
			return true
		}
	}
	return false
}

func TestStatusOf(t *testing.T) {
	for phase, want := range map[flexv1.ConnectionPhase]string{
		flexv1.ConnectionConnected: "connected", flexv1.ConnectionNeedsReauthorisation: "needs_reauthorisation",
		flexv1.ConnectionRevoked: "revoked", flexv1.ConnectionPending: "pending", "": "pending",
	} {
		if got := devices.StatusOf(phase); got != want {
			t.Errorf("StatusOf(%q) = %q, want %q", phase, got, want)
		}
	}
}

// Initiate answers the provider's authorisation URL with a single-use state and the PKCE
// S256 challenge; the state is stored only hashed and the verifier only in the connection's
// Secret. The callback exchanges the code at the provider and stores the tokens in that Secret
// alone; the connection is Connected, listed with the assets it covers, and the state is
// spent.
func TestInitiateAndCallbackConnect(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "connect-1", "")
	registerRedirect(t, g, p, registeredURI)

	res, err := svc.Initiate(ctx, p, devices.InitiateInput{SiteID: h.id, Provider: example, RedirectURI: registeredURI,
		CallbackURL: callbackURL})
	g.Expect(err).NotTo(HaveOccurred())
	u, err := url.Parse(res.AuthorizationURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Scheme + "://" + u.Host + u.Path).To(Equal(provider.AuthorizationURL()))
	q := u.Query()
	g.Expect(q.Get("client_id")).To(Equal("flexsite"))
	g.Expect(q.Get("redirect_uri")).To(Equal(callbackURL))
	g.Expect(q.Get("response_type")).To(Equal("code"))
	g.Expect(q.Get("code_challenge_method")).To(Equal("S256"))
	state := q.Get("state")
	g.Expect(len(state)).To(BeNumerically(">=", 32))

	conn, sec := connection(g, ctx, h, example)
	g.Expect(conn).NotTo(BeNil())
	g.Expect(conn.Spec).To(Equal(flexv1.DeviceConnectionSpec{SiteName: h.site.Name, Provider: example}))
	g.Expect(metav1.GetControllerOf(conn)).To(HaveField("UID", h.site.UID))
	g.Expect(conn.Annotations[flexv1.OAuthStateAnnotation]).To(Equal(deviceauth.HashState(state)))
	g.Expect(sec).NotTo(BeNil())
	g.Expect(metav1.GetControllerOf(sec)).To(HaveField("UID", conn.UID))
	g.Expect(sec.Labels[flexv1.OAuthStateLabel]).To(Equal(deviceauth.HashState(state)))
	verifier := string(sec.Data[deviceauth.KeyVerifier])
	sum := sha256.Sum256([]byte(verifier))
	g.Expect(q.Get("code_challenge")).To(Equal(base64.RawURLEncoding.EncodeToString(sum[:])))
	g.Expect(string(sec.Data[deviceauth.KeyRedirectURI])).To(Equal(registeredURI))
	for k, v := range sec.Data {
		g.Expect(string(v)).NotTo(Equal(state), "the state is stored in the Secret's %s", k)
	}
	g.Expect(crHolds(g, conn, state, verifier)).To(BeFalse(), "the connection holds the state or the verifier")

	grants := provider.CodeGrants()
	cb := consent(g, res.AuthorizationURL, true)
	g.Expect(cb.State).To(Equal(state))
	out, err := svc.Callback(ctx, cb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(devices.CallbackResult{RedirectURI: registeredURI, Provider: example, DisplayName: "Example Energy",
		Connected: true}))
	g.Expect(provider.CodeGrants()).To(Equal(grants + 1))

	conn, sec = connection(g, ctx, h, example)
	tok := deviceauth.Read(sec)
	g.Expect(tok.AccessToken).NotTo(BeEmpty())
	g.Expect(tok.RefreshToken).NotTo(BeEmpty())
	g.Expect(tok.ConnectedAt).NotTo(BeZero())
	g.Expect(tok.Expiry).To(BeTemporally(">", time.Now()))
	// The authorisation in progress is spent: no state, verifier or redirect left.
	g.Expect(sec.Labels).NotTo(HaveKey(flexv1.OAuthStateLabel))
	g.Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyVerifier))
	g.Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyRedirectURI))
	g.Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyStateExpires))
	g.Expect(conn.Status.Phase).To(Equal(flexv1.ConnectionConnected))
	g.Expect(conn.Status.ConnectedAt).NotTo(BeNil())
	g.Expect(conn.Status.ExpiresAt).NotTo(BeNil())
	g.Expect(crHolds(g, conn, tok.AccessToken, tok.RefreshToken, verifier, state)).To(BeFalse(),
		"the connection holds a token")

	// The same callback again: the state was single use; nothing is exchanged or stored.
	again, err := svc.Callback(ctx, cb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Connected).To(BeFalse())
	g.Expect(again.Reason).To(Equal(devices.ReasonInvalidState))
	g.Expect(again.RedirectURI).To(BeEmpty())
	g.Expect(provider.CodeGrants()).To(Equal(grants + 1))
	_, sec = connection(g, ctx, h, example)
	g.Expect(deviceauth.Read(sec).AccessToken).To(Equal(tok.AccessToken))

	list, err := svc.Connections(ctx, p, h.id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Connections).To(HaveLen(1))
	rec := list.Connections[0]
	g.Expect(rec.Provider).To(Equal(example))
	g.Expect(rec.DisplayName).To(Equal("Example Energy"))
	g.Expect(rec.Status).To(Equal("connected"))
	g.Expect(rec.ConnectedAt).NotTo(BeNil())
	g.Expect(rec.ExpiresAt).NotTo(BeNil())
	g.Expect(rec.Assets).To(Equal([]string{h.charger}))
	raw, err := json.Marshal(list)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring(tok.AccessToken))
	g.Expect(string(raw)).NotTo(ContainSubstring(tok.RefreshToken))
}

// What Initiate refuses, and that a refusal leaves no connection behind.
func TestInitiateRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p, other := org(t), org(t)
	h := household(t, g, p, "refuse-1", "")
	theirs := household(t, g, other, "refuse-theirs", "")
	registerRedirect(t, g, p, registeredURI)
	start := func(p *auth.Principal, site, prov, redirect string) error {
		_, err := svc.Initiate(ctx, p, devices.InitiateInput{SiteID: site, Provider: prov, RedirectURI: redirect,
			CallbackURL: callbackURL})
		return err
	}

	g.Expect(start(p, "no-such-site", example, "")).To(MatchError(app.ErrSiteNotFound))
	g.Expect(start(p, theirs.id, example, "")).To(MatchError(app.ErrSiteNotFound))
	// Not in the catalogue, the client's own, none, a provider at an address the manager may
	// not call, one whose client secret is missing: all "not configured".
	for _, prov := range []string{"", flexv1.ClientProvider, "nosuchprovider", "Not/A/Name", private, nosecret} {
		err := start(p, h.id, prov, "")
		g.Expect(err).To(MatchError(devices.ErrProviderUnknown), "provider %q", prov)
		g.Expect(kindOf(err)).To(Equal(app.BadRequest))
	}
	for _, bad := range []string{"https://app.example.com/elsewhere", "http://app.example.com/done", "javascript:alert(1)",
		"com.example.app:/oauth/done", "not a uri"} {
		err := start(p, h.id, example, bad)
		g.Expect(kindOf(err)).To(Equal(app.Invalid), "redirect %q: %v", bad, err)
		g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"query", "redirect_uri"})), "redirect %q", bad)
	}
	// A household may not send itself elsewhere than its allowed origin or a registered URI.
	user := household(t, g, p, "refuse-user", "user-refuse")
	err := start(endUser(p, user, "user-refuse"), user.id, example, "https://evil.example.net/done")
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	// ... nor reach another household's site.
	g.Expect(start(endUser(p, user, "user-refuse"), h.id, example, "")).To(MatchError(app.ErrSiteNotFound))
	g.Expect(start(endUser(p, user, "someone-else"), user.id, example, "")).To(MatchError(app.ErrSiteNotFound))

	g.Expect(connectionsOf(g, ctx, p)).To(BeEmpty(), "a refused initiate left a connection")
	g.Expect(connectionsOf(g, ctx, other)).To(BeEmpty())
}

// Where the browser may be sent back to: a URI the API client registered (a private-use
// scheme once the client declares it), or, for a household's token, its allowed origin.
func TestInitiateRedirects(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "redirect-1", "user-redirect")
	const appURI = "com.example.app:/oauth/done"
	cl := &flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.ClientName},
		Spec: flexv1.APIClientSpec{Username: p.Username, PasswordHashSecretRef: flexv1.SecretKeyRef{Name: "credentials"},
			RedirectURIs:    []string{registeredURI, appURI},
			RedirectSchemes: []string{"com.example.app"}}}
	g.Expect(env.Client.Create(ctx, cl)).To(Succeed())

	redirectOf := func(p *auth.Principal, redirect string) string {
		var sec *corev1.Secret
		g.Eventually(func(g Gomega) {
			_, err := svc.Initiate(ctx, p, devices.InitiateInput{SiteID: h.id, Provider: example, RedirectURI: redirect,
				CallbackURL: callbackURL})
			g.Expect(err).NotTo(HaveOccurred())
		}).WithTimeout(10 * time.Second).Should(Succeed())
		_, sec = connection(g, ctx, h, example)
		return string(sec.Data[deviceauth.KeyRedirectURI])
	}
	g.Expect(redirectOf(p, appURI)).To(Equal(appURI))
	g.Expect(redirectOf(p, registeredURI)).To(Equal(registeredURI))
	user := endUser(p, h, "user-redirect")
	g.Expect(redirectOf(user, allowedOrigin+"/back")).To(Equal(allowedOrigin + "/back"))
	g.Expect(redirectOf(user, registeredURI)).To(Equal(registeredURI))
	// No redirect: the callback shows its own page; a redirect given before is forgotten.
	g.Expect(redirectOf(p, "")).To(BeEmpty())

	// Its app's scheme at a URI the client did not register is refused.
	_, err := svc.Initiate(ctx, p, devices.InitiateInput{SiteID: h.id, Provider: example,
		RedirectURI: "com.example.app:/elsewhere", CallbackURL: callbackURL})
	g.Expect(kindOf(err)).To(Equal(app.Invalid))
	// One connection throughout: each initiate replaced the authorisation in progress.
	g.Expect(connectionsOf(g, ctx, p)).To(HaveLen(1))
}

// A callback that names no authorisation in progress, a denial at the provider, a missing
// code, an expired state and a provider removed meanwhile store nothing, and say why.
func TestCallbackRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "callback-1", "")
	registerRedirect(t, g, p, registeredURI)
	grants := provider.CodeGrants()
	invalid := func(in devices.CallbackInput) {
		t.Helper()
		out, err := svc.Callback(ctx, in)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Connected).To(BeFalse())
		g.Expect(out.Reason).To(Equal(devices.ReasonInvalidState), "%+v", in)
		g.Expect(out.Message).To(ContainSubstring("not valid or was already used"))
	}
	noTokens := func() {
		t.Helper()
		_, sec := connection(g, ctx, h, example)
		g.Expect(deviceauth.Read(sec).Has()).To(BeFalse())
	}

	invalid(devices.CallbackInput{Code: "x", CallbackURL: callbackURL})
	invalid(devices.CallbackInput{State: strings.Repeat("s", 513), Code: "x", CallbackURL: callbackURL})
	invalid(devices.CallbackInput{State: "forged-state-forged-state-forged-state", Code: "x", CallbackURL: callbackURL})

	// Denied at the provider.
	cb := consent(g, initiate(t, g, p, h, example), false)
	g.Expect(cb.Error).To(Equal("access_denied"))
	out, err := svc.Callback(ctx, cb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(devices.CallbackResult{Provider: example, DisplayName: "Example Energy",
		Reason: devices.ReasonAccessDenied, Message: "You did not allow access at Example Energy. Nothing was connected."}))
	noTokens()
	invalid(cb) // spent

	// Another error at the provider.
	authURL := initiate(t, g, p, h, example)
	state, _ := url.Parse(authURL)
	out, err = svc.Callback(ctx, devices.CallbackInput{State: state.Query().Get("state"), Error: "server_error",
		CallbackURL: callbackURL})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Reason).To(Equal(devices.ReasonProviderError))
	noTokens()

	// No code and no error: nothing to exchange; the state is spent all the same.
	cb = consent(g, initiate(t, g, p, h, example), true)
	code := cb.Code
	cb.Code = ""
	invalid(cb)
	cb.Code = code
	invalid(cb)
	noTokens()

	// Expired: more than 10 minutes between initiate and callback; the state is spent.
	cb = consent(g, initiate(t, g, p, h, example), true)
	later := time.Now().Add(deviceauth.StateTTL + time.Minute)
	clock.Store(&later)
	out, err = svc.Callback(ctx, cb)
	clock.Store(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Reason).To(Equal(devices.ReasonExpiredState))
	g.Expect(out.Provider).To(Equal(example))
	noTokens()
	invalid(cb)

	// A newer initiate replaces the authorisation in progress: the older state is refused,
	// and the older code with the newer state fails PKCE at the provider.
	older := consent(g, initiate(t, g, p, h, example), true)
	newer := consent(g, initiate(t, g, p, h, example), true)
	invalid(older)
	refused := provider.Refused()
	out, err = svc.Callback(ctx, devices.CallbackInput{State: newer.State, Code: older.Code, CallbackURL: callbackURL})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Reason).To(Equal(devices.ReasonExchangeFailed))
	g.Expect(provider.Refused()).To(Equal(refused + 1))
	noTokens()
	g.Expect(provider.CodeGrants()).To(Equal(grants))
}

// A provider removed from the catalogue between initiate and callback: nothing is exchanged.
func TestCallbackProviderRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "removed-1", "")
	const gone = "example-gone"
	dp := &flexv1.DeviceProvider{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Name: example}, dp)).To(Succeed())
	g.Expect(env.Client.Create(ctx, &flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: gone}, Spec: dp.Spec})).To(Succeed())
	cb := consent(g, initiate(t, g, p, h, gone), true)
	g.Expect(env.Client.Delete(ctx, &flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: gone}})).To(Succeed())

	out, err := svc.Callback(ctx, cb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Reason).To(Equal(devices.ReasonProviderError))
	g.Expect(out.Message).To(ContainSubstring("not available any more"))
	_, sec := connection(g, ctx, h, gone)
	g.Expect(deviceauth.Read(sec).Has()).To(BeFalse())
}

// A failed code exchange (the provider down, answering 503 or garbage) is a reason, never an
// error: nothing is stored, the Secret says why in words (no code), and the connection is
// touched for its controller; the next successful connect clears it.
func TestCallbackExchangeFails(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "exchange-1", "")

	failed := func(h home, prov, cause string) {
		t.Helper()
		cb := consent(g, initiate(t, g, p, h, prov), true)
		out, err := svc.Callback(ctx, cb)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out.Connected).To(BeFalse())
		g.Expect(out.Reason).To(Equal(devices.ReasonExchangeFailed))
		g.Expect(out.Message).To(ContainSubstring(cause))
		g.Expect(out.Message).NotTo(ContainSubstring(cb.Code))
		conn, sec := connection(g, ctx, h, prov)
		tok := deviceauth.Read(sec)
		g.Expect(tok.Has()).To(BeFalse())
		g.Expect(tok.LastError).To(HavePrefix("the code exchange failed: "))
		g.Expect(tok.LastError).To(ContainSubstring(cause))
		g.Expect(tok.LastError).NotTo(ContainSubstring(cb.Code))
		g.Expect(conn.Annotations).To(HaveKey(flexv1.TokensChangedAnnotation))
		g.Expect(conn.Status.Phase).NotTo(Equal(flexv1.ConnectionConnected))
	}

	// Nothing listens at the token URL.
	failed(h, down, "refused the connection")

	// The provider answers 503, then garbage.
	provider.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		w.Header().Set("Retry-After", "30")
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	t.Cleanup(func() { provider.SetFault(nil) })
	failed(h, example, "HTTP 503")
	provider.SetFault(func(w http.ResponseWriter, _ *http.Request) bool {
		_, _ = w.Write([]byte("<html>not json"))
		return true
	})
	failed(h, example, "could not be used")

	// Back: the household connects, and the failure is forgotten.
	provider.SetFault(nil)
	out, err := svc.Callback(ctx, consent(g, initiate(t, g, p, h, example), true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Connected).To(BeTrue())
	conn, sec := connection(g, ctx, h, example)
	g.Expect(deviceauth.Read(sec).LastError).To(BeEmpty())
	g.Expect(conn.Status.Phase).To(Equal(flexv1.ConnectionConnected))
}

// Two callbacks with the same state at once (a double click, a replayed request): exactly
// one exchanges the code.
func TestCallbackRaceExchangesOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "race-1", "")
	cb := consent(g, initiate(t, g, p, h, example), true)
	grants := provider.CodeGrants()

	results := make([]devices.CallbackResult, 4)
	errs := make([]error, len(results))
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i], errs[i] = svc.Callback(ctx, cb) })
	}
	wg.Wait()
	connected := 0
	for i, r := range results {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		if r.Connected {
			connected++
		} else {
			g.Expect(r.Reason).To(Equal(devices.ReasonInvalidState))
		}
	}
	g.Expect(connected).To(Equal(1))
	g.Expect(provider.CodeGrants()).To(Equal(grants + 1))
}

// A household that disconnects while its authorisation is at the provider: the callback
// finds nothing in progress and stores nothing, and no Secret comes back.
func TestCallbackAfterDisconnect(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "disconnected-1", "")
	cb := consent(g, initiate(t, g, p, h, example), true)
	g.Expect(svc.Disconnect(ctx, p, h.id, example)).To(Succeed())
	grants := provider.CodeGrants()

	out, err := svc.Callback(ctx, cb)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Reason).To(Equal(devices.ReasonInvalidState))
	g.Expect(provider.CodeGrants()).To(Equal(grants))
	conn, sec := connection(g, ctx, h, example)
	g.Expect(conn).To(BeNil())
	g.Expect(sec).To(BeNil())
}

// A token the API client obtained itself is stored as the site's connection: its own
// ("client", covering every asset of the site) by default, or at a provider of the catalogue.
func TestStoreToken(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p, other := org(t), org(t)
	h := household(t, g, p, "token-1", "")
	theirs := household(t, g, other, "token-theirs", "")
	expires := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)

	in := devices.TokenInput{SiteID: h.id, AccessToken: "client-access-1", RefreshToken: "client-refresh-1",
		TokenType: "Bearer", ExpiresAt: expires}
	g.Expect(svc.StoreToken(ctx, p, in)).To(Succeed())
	conn, sec := connection(g, ctx, h, flexv1.ClientProvider)
	g.Expect(conn.Spec.Provider).To(Equal(flexv1.ClientProvider))
	g.Expect(conn.Status.Phase).To(Equal(flexv1.ConnectionConnected))
	g.Expect(conn.Status.ExpiresAt.Time).To(BeTemporally("==", expires))
	tok := deviceauth.Read(sec)
	g.Expect(tok).To(HaveField("AccessToken", "client-access-1"))
	g.Expect(tok).To(HaveField("RefreshToken", "client-refresh-1"))
	g.Expect(tok).To(HaveField("TokenType", "Bearer"))
	g.Expect(crHolds(g, conn, "client-access-1", "client-refresh-1")).To(BeFalse())

	// A new token replaces the old one, and any refresh claim with it.
	base := sec.DeepCopy()
	sec.Data[deviceauth.KeyRefreshClaim] = []byte("a-replica until later")
	g.Expect(env.Client.Patch(ctx, sec, client.MergeFrom(base))).To(Succeed())
	in.AccessToken, in.RefreshToken = "client-access-2", "client-refresh-2"
	g.Expect(svc.StoreToken(ctx, p, in)).To(Succeed())
	_, sec = connection(g, ctx, h, flexv1.ClientProvider)
	g.Expect(deviceauth.Read(sec).AccessToken).To(Equal("client-access-2"))
	g.Expect(sec.Data).NotTo(HaveKey(deviceauth.KeyRefreshClaim))

	// At a provider of the catalogue.
	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, Provider: example, AccessToken: "example-access",
		RefreshToken: "example-refresh"})).To(Succeed())
	conn, sec = connection(g, ctx, h, example)
	g.Expect(conn.Status.Phase).To(Equal(flexv1.ConnectionConnected))
	g.Expect(deviceauth.Read(sec).AccessToken).To(Equal("example-access"))
	g.Expect(crHolds(g, conn, "example-access", "example-refresh")).To(BeFalse())

	// The client's own covers every asset of the site; the provider's, its models' assets.
	list, err := svc.Connections(ctx, p, h.id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Connections).To(HaveLen(2))
	g.Expect(list.Connections[0]).To(And(HaveField("Provider", flexv1.ClientProvider), HaveField("Status", "connected"),
		HaveField("Assets", ConsistOf(h.charger, h.elsewhere, h.plain)), HaveField("DisplayName", flexv1.ClientProvider)))
	g.Expect(*list.Connections[0].ExpiresAt).To(Equal(expires.Format(time.RFC3339)))
	g.Expect(list.Connections[1]).To(And(HaveField("Provider", example), HaveField("Assets", []string{h.charger}),
		HaveField("ExpiresAt", BeNil())))

	// Refusals: a provider not in the catalogue, a site that is not the caller's.
	for _, prov := range []string{"nosuchprovider", "Not/A/Name", "UPPER", ".."} {
		err = svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, Provider: prov, AccessToken: "a", RefreshToken: "r"})
		g.Expect(kindOf(err)).To(Equal(app.Invalid), "provider %q: %v", prov, err)
		g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"body", "provider"})))
	}
	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: theirs.id, AccessToken: "a", RefreshToken: "r"})).
		To(MatchError(app.ErrSiteNotFound))
	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: "no-such-site", AccessToken: "a", RefreshToken: "r"})).
		To(MatchError(app.ErrSiteNotFound))
	g.Expect(connectionsOf(g, ctx, other)).To(BeEmpty())
	g.Expect(connectionsOf(g, ctx, p)).To(HaveLen(2))
}

// Connections lists the site's connections (pending until the first tokens), sorted by
// provider, to the site's organisation and its household only.
func TestConnections(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p, other := org(t), org(t)
	h := household(t, g, p, "list-1", "user-list")
	neighbour := household(t, g, p, "list-2", "user-neighbour")

	list, err := svc.Connections(ctx, p, h.id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list).To(Equal(devices.ConnectionsResult{Connections: []devices.ConnectionRecord{}}))

	initiate(t, g, p, h, down)
	initiate(t, g, p, h, example)
	// A connection to a provider of the site's assets is read under its name at once; one to
	// another provider once the cache has it.
	list, err = svc.Connections(ctx, endUser(p, h, "user-list"), h.id)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(list.Connections).To(ContainElement(devices.ConnectionRecord{Provider: example, DisplayName: "Example Energy",
		Status: "pending", Assets: []string{h.charger}}))
	g.Eventually(func(g Gomega) {
		list, err := svc.Connections(ctx, endUser(p, h, "user-list"), h.id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Connections).To(Equal([]devices.ConnectionRecord{
			{Provider: example, DisplayName: "Example Energy", Status: "pending", Assets: []string{h.charger}},
			{Provider: down, DisplayName: "Example Energy", Status: "pending", Assets: []string{}},
		}))
	}).WithTimeout(10 * time.Second).Should(Succeed())

	_, err = svc.Connections(ctx, other, h.id)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.Connections(ctx, endUser(p, neighbour, "user-neighbour"), h.id)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.Connections(ctx, p, "no-such-site")
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
}

// The hosted flow's Connect step: the catalogue's providers of the household's own assets,
// with their state; an asset of no model or of a provider outside the catalogue asks for
// nothing.
func TestHouseholdProviders(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "hosted-1", "user-hosted")
	user := endUser(p, h, "user-hosted")

	got, site, err := svc.HouseholdProviders(ctx, user)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(site.UID).To(Equal(h.site.UID))
	g.Expect(got).To(Equal([]devices.ProviderState{{Provider: example, DisplayName: "Example Energy", Status: "not_connected"}}))

	initiate(t, g, user, h, example)
	got, _, err = svc.HouseholdProviders(ctx, user)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ConsistOf(HaveField("Status", "pending")))

	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, Provider: example, AccessToken: "a",
		RefreshToken: "r"})).To(Succeed())
	got, _, err = svc.HouseholdProviders(ctx, user)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(ConsistOf(HaveField("Status", "connected")))

	// Only the household's own token reaches it: an organisation's names no household.
	_, _, err = svc.HouseholdProviders(ctx, p)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, _, err = svc.HouseholdProviders(ctx, endUser(p, h, "someone-else"))
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
}

// Disconnect revokes the tokens at the provider (RFC 7009), deletes them and the connection;
// a connection that is not there is ErrConnectionNotFound. A provider that cannot be reached
// does not keep the tokens alive here.
func TestDisconnect(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p, other := org(t), org(t)
	h := household(t, g, p, "disconnect-1", "user-disconnect")

	out, err := svc.Callback(ctx, consent(g, initiate(t, g, p, h, example), true))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Connected).To(BeTrue())
	_, sec := connection(g, ctx, h, example)
	active, revoked := provider.ActiveAccessTokens(), provider.Revocations()

	g.Expect(svc.Disconnect(ctx, other, h.id, example)).To(MatchError(app.ErrSiteNotFound))
	g.Expect(svc.Disconnect(ctx, p, h.id, "nosuchprovider")).To(MatchError(devices.ErrConnectionNotFound))
	g.Expect(kindOf(devices.ErrConnectionNotFound)).To(Equal(app.NotFound))
	g.Expect(svc.Disconnect(ctx, p, h.id, down)).To(MatchError(devices.ErrConnectionNotFound))
	for _, prov := range []string{"", "Not/A/Name", ".."} {
		g.Expect(svc.Disconnect(ctx, p, h.id, prov)).To(MatchError(devices.ErrConnectionNotFound), "provider %q", prov)
	}

	g.Expect(svc.Disconnect(ctx, endUser(p, h, "user-disconnect"), h.id, example)).To(Succeed())
	g.Expect(provider.Revocations()).To(Equal(revoked + 2)) // the refresh token, then the access token
	g.Expect(provider.ActiveAccessTokens()).To(Equal(active - 1))
	conn, gone := connection(g, ctx, h, example)
	g.Expect(conn).To(BeNil())
	g.Expect(gone).To(BeNil())
	g.Expect(deviceauth.Read(sec).AccessToken).NotTo(BeEmpty())
	g.Expect(svc.Disconnect(ctx, p, h.id, example)).To(MatchError(devices.ErrConnectionNotFound))

	// The client's own token: nothing to revoke at a provider.
	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, AccessToken: "a", RefreshToken: "r"})).To(Succeed())
	revoked = provider.Revocations()
	g.Expect(svc.Disconnect(ctx, p, h.id, flexv1.ClientProvider)).To(Succeed())
	g.Expect(provider.Revocations()).To(Equal(revoked))
	conn, gone = connection(g, ctx, h, flexv1.ClientProvider)
	g.Expect(conn).To(BeNil())
	g.Expect(gone).To(BeNil())

	// A provider that does not answer the revocation: the tokens are deleted all the same.
	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, Provider: down, AccessToken: "a", RefreshToken: "r"})).
		To(Succeed())
	g.Expect(svc.Disconnect(ctx, p, h.id, down)).To(Succeed())
	conn, gone = connection(g, ctx, h, down)
	g.Expect(conn).To(BeNil())
	g.Expect(gone).To(BeNil())

	// A connection started but never connected (no tokens yet) is removed too.
	initiate(t, g, p, h, example)
	g.Expect(svc.Disconnect(ctx, p, h.id, example)).To(Succeed())
	g.Expect(connectionsOf(g, ctx, p)).To(BeEmpty())
}

// A connection being removed (its finalizer not yet done) is not there for Disconnect and
// Connections, and a new one cannot start until it is gone: Unavailable, retry in a second.
func TestConnectionBeingRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	h := household(t, g, p, "removing-1", "")
	g.Expect(svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, Provider: example, AccessToken: "a",
		RefreshToken: "r"})).To(Succeed())
	conn, _ := connection(g, ctx, h, example)
	const hold = "test.flexsite.io/hold"
	base := conn.DeepCopy()
	conn.Finalizers = append(conn.Finalizers, hold)
	g.Expect(env.Client.Patch(ctx, conn, client.MergeFrom(base))).To(Succeed())
	g.Expect(env.Client.Delete(ctx, conn)).To(Succeed())
	t.Cleanup(func() {
		c := &flexv1.DeviceConnection{}
		if env.Client.Get(context.Background(), client.ObjectKeyFromObject(conn), c) == nil {
			b := c.DeepCopy()
			c.Finalizers = nil
			_ = env.Client.Patch(context.Background(), c, client.MergeFrom(b))
		}
	})

	_, err := svc.Initiate(ctx, p, devices.InitiateInput{SiteID: h.id, Provider: example, CallbackURL: callbackURL})
	g.Expect(kindOf(err)).To(Equal(app.Unavailable))
	g.Expect(app.As(err).RetryAfter).To(Equal("1"))
	err = svc.StoreToken(ctx, p, devices.TokenInput{SiteID: h.id, Provider: example, AccessToken: "b", RefreshToken: "s"})
	g.Expect(kindOf(err)).To(Equal(app.Unavailable))
	g.Expect(svc.Disconnect(ctx, p, h.id, example)).To(MatchError(devices.ErrConnectionNotFound))
	g.Eventually(func(g Gomega) {
		list, err := svc.Connections(ctx, p, h.id)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(list.Connections).To(BeEmpty())
	}).WithTimeout(10 * time.Second).Should(Succeed())
	_, sec := connection(g, ctx, h, example)
	g.Expect(deviceauth.Read(sec).AccessToken).To(Equal("a"))
}
