package browser_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/mail"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/test/browser"
)

// The browser suite runs the real thing end to end and drives it from a real headless
// Chromium: a kube-apiserver + etcd (envtest), the manager with every controller, the REST
// REST API behind a real HTTP server at http://localhost:<port>, and an organisation's app (the
// Embedder) on another origin, http://127.0.0.1:<port2>. Without Chromium the suite is skipped,
// or fails when CI=true (hack/ensure-chromium.sh installs it).

const keysNamespace = "flexsite-system"

// step bounds one browser interaction: a guard against a hung browser, not a speed assertion.
const step = 60 * time.Second

var (
	env       *testenv.Env
	k8sClient client.Client
	// serverURL is the REST API's origin as the browser sees it (localhost, not 127.0.0.1, so
	// that it is another origin than the embedder's).
	serverURL string
	embedder  *browser.Embedder
	// serverSeen records every request path+query the REST API received (a cross-check of the
	// browser's own network log).
	serverSeen = &requestLog{}
	// mailDir is the Maildir the REST API's mail to households goes to (rewards_test.go).
	mailDir string
	// testDB is the suite's PostgreSQL database; nil without one.
	testDB *dbtest.Database
)

func TestBrowser(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Browser suite (headless Chromium, envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	if _, err := browser.Find(); err != nil {
		if fail, msg := browser.MissingVerdict(err); fail {
			Fail(msg)
		} else {
			Skip(msg)
		}
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	k8sClient = env.Client
	suiteCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)

	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}})).To(Succeed())
	mgr, err := env.NewManager()
	Expect(err).NotTo(HaveOccurred())
	// PostgreSQL, for the flex events' settlements (the rewards page's charts); without it
	// that spec skips (and fails in CI, as every database suite does).
	var pool *pgxpool.Pool
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			Fail(msg)
		}
	} else {
		testDB, err = dbtest.New(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { testDB.Close(context.Background()) })
		pool = testDB.Pool
	}
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: pool, Devices: providerDialer})).To(Succeed())

	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	Expect(keys.Ensure(ctx)).To(Succeed())
	mailDir = GinkgoT().TempDir()
	mailer, err := mail.NewMaildir(mailDir, "Flexsite <no-reply@flexsite.test>")
	Expect(err).NotTo(HaveOccurred())
	srv := server.NewServer(server.Config{
		Mailer:          mailer,
		HostedNamespace: keysNamespace,
		Log:             ctrl.Log.WithName("api"),
		Cache:           mgr.GetCache(),
		APIReader:       mgr.GetAPIReader(),
		Client:          mgr.GetClient(),
		Issuer:          auth.NewIssuer(keys, time.Now),
		Authenticator:   auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:         server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30},
		ProviderPolicy:  &providerDialer.Policy,
		DB:              pool,
	})
	api := httptest.NewServer(serverSeen.wrap(srv))
	DeferCleanup(api.Close)
	u, err := url.Parse(api.URL)
	Expect(err).NotTo(HaveOccurred())
	serverURL = "http://localhost:" + u.Port()
	startDeviceProvider(ctx)

	embedder = browser.NewEmbedder()
	DeferCleanup(embedder.Close)

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

// newBrowser starts a headless Chromium for one spec (closed when the spec ends).
func newBrowser() *browser.Browser {
	b, err := browser.Start(browser.Options{UserDataDir: GinkgoT().TempDir(),
		Log: func(format string, args ...any) { GinkgoWriter.Printf("browser: "+format+"\n", args...) }})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(b.Close)
	return b
}

// requestLog keeps every request URI a handler received.
type requestLog struct {
	seen chan string
	all  []string
}

func (l *requestLog) wrap(h http.Handler) http.Handler {
	l.seen = make(chan string, 1<<16)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case l.seen <- r.RequestURI + " referer=" + r.Header.Get("Referer"):
		default:
		}
		h.ServeHTTP(w, r)
	})
}

// URIs drains and returns everything received so far.
func (l *requestLog) URIs() []string {
	for {
		select {
		case s := <-l.seen:
			l.all = append(l.all, s)
		default:
			return l.all
		}
	}
}

// org is an organisation (namespace) with one API client holding every role.
type org struct{ Namespace, Username, Password string }

func newOrg(ctx context.Context) org {
	ns, err := env.Namespace(ctx)
	Expect(err).NotTo(HaveOccurred())
	o := org{Namespace: ns, Username: "client-" + ns, Password: "pw-" + ns}
	Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: ns, Username: o.Username,
		Password: o.Password, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards,
			flexv1.RoleComponents, flexv1.RoleFlexEventsWrite}})).To(Succeed())
	// Its end users give their meter consent in the flow, not when their token is issued.
	clients := &flexv1.APIClientList{}
	Expect(k8sClient.List(ctx, clients, client.InNamespace(ns))).To(Succeed())
	for i := range clients.Items {
		c := clients.Items[i].DeepCopy()
		c.Spec.ConsentExempt = true
		Expect(k8sClient.Update(ctx, c)).To(Succeed())
	}
	return o
}

// call sends one request to the REST API.
func call(g Gomega, method, path, token string, body any) (int, map[string]any) {
	status, data, err := testenv.Call(serverURL, method, path, token, body)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out map[string]any
	if len(data) > 0 && strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		g.ExpectWithOffset(1, json.Unmarshal(data, &out)).To(Succeed(), "%s", data)
	}
	return status, out
}

// token logs the organisation's API client in.
func (o org) token() string {
	var tok string
	Eventually(func(g Gomega) {
		status, body := call(g, "POST", "/auth/token-form", "", testenv.Form{"username": o.Username, "password": o.Password,
			"grant_type": "password"})
		g.Expect(status).To(Equal(http.StatusOK), "%v", body)
		tok = body["access_token"].(string)
	}).Should(Succeed())
	return tok
}

// componentToken asks for an end user's component token for allowedOrigin: the site id it
// answers and the token.
func (o org) componentToken(orgToken, externalUserID, allowedOrigin string) (id, token string) {
	form := testenv.Form{"external_user_id": externalUserID, "allowed_origin": allowedOrigin}
	status, body := call(Default, "POST", "/auth/component-token", orgToken, form)
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), "%v", body)
	return body["id"].(string), body["access_token"].(string)
}
