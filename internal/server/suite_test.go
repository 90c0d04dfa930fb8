package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/mail"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The REST API suite runs the real thing end to end: a kube-apiserver + etcd (envtest), the
// manager with every controller, and the REST API behind a real HTTP server. Tests speak
// HTTP to it and check the stored objects through a direct (uncached) client.

var (
	env       *testenv.Env
	k8sClient client.Client
	apiServer *httptest.Server
	apiSrv    *server.Server
	// serverCache is the cache the REST API reads (the manager's).
	serverCache client.Reader
	// clock is the REST API's time, settable by tests (rewards wait times, installation dates).
	clock atomic.Pointer[time.Time]
	// mailDir is the Maildir the REST API's mail goes to (the rewards page's codes).
	mailDir string
	// testDB is the suite's PostgreSQL database (reward history, readings); tests may stop
	// and start it. database is the same (the readings specs' name for it).
	testDB, database *dbtest.Database
	// dbMissing says why no PostgreSQL can run here (the suite skips, or fails in CI).
	dbMissing error
	// meterRefKeys seal the REST API's meter references (tests rotate them).
	meterRefKeys *sealing.KeyRing
)

const keysNamespace = "flexsite-system"

func TestServer(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Server suite: every door on the use cases (envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	k8sClient = env.Client
	// Cleanups run last-in first-out: the manager stops (closing its watches) before the API
	// server does.
	suiteCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)

	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}})).To(Succeed())
	// A real PostgreSQL (a fresh database on the process's server): the reward history.
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			Fail(msg)
		} else {
			Skip(msg)
		}
	}
	testDB, err = dbtest.New(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	database = testDB
	// The readings partitions, made as the manager's leader makes them on start.
	Expect((&db.ReadingPartitions{Pool: testDB.Pool, Back: readings.PartitionsBack, Ahead: readings.PartitionsAhead}).Round(ctx)).
		To(Succeed())
	// The manager's API-server requests are counted per REST request tag (apiCalls).
	counted := *env
	counted.Config = rest.CopyConfig(env.Config)
	counted.Config.Wrap(countAPICalls)
	mgr, err := counted.NewManager() // its cache as cmd/manager's (index.CacheOptions)
	Expect(err).NotTo(HaveOccurred())
	// Device providers on loopback: the test's own authorisation server (devices_test.go).
	startDeviceProvider(ctx)
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool, Devices: providerDialer})).To(Succeed())

	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	Expect(keys.Ensure(ctx)).To(Succeed())
	now := time.Now()
	clock.Store(&now)
	mailDir = GinkgoT().TempDir()
	mailer, err := mail.NewMaildir(mailDir, "Flexsite <no-reply@flexsite.test>")
	Expect(err).NotTo(HaveOccurred())
	serverCache = mgr.GetCache()
	// The REST API's own pool on the suite's database, as cmd/manager opens one: after the
	// server is stopped and started again (the outage specs) it reconnects by itself.
	serverPool, err := db.Open(ctx, testDB.URL)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(serverPool.Close)
	meterRefKeys = sealing.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, meterpoints.DefaultKeysSecret,
		"meter references")
	apiSrv = server.NewServer(server.Config{
		DB:              serverPool,
		MeterRefKeys:    meterRefKeys,
		Mailer:          mailer,
		HostedNamespace: keysNamespace,
		Log:             ctrl.Log.WithName("api"),
		Cache:           mgr.GetCache(),
		APIReader:       mgr.GetAPIReader(),
		Client:          mgr.GetClient(),
		Issuer:          auth.NewIssuer(keys, time.Now),
		Authenticator:   auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:         server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30},
		Now:             func() time.Time { return *clock.Load() },
		ProviderPolicy:  &providerDialer.Policy,
		// The manager's budgets: every meter spec counts its lookups as production does (and
		// the outage specs meet the count's 503 first).
		MeterBudgets: server.DefaultMeterBudgets,
	})
	apiServer = httptest.NewServer(tagAPICalls(apiSrv))
	DeferCleanup(apiServer.Close)
	// The kept transactions pages are in use, as in a manager (Server.Start runs the same).
	go func() { _ = apiSrv.ListenRewardChanges(suiteCtx) }()
	// The kept prices likewise.
	go apiSrv.ListenPriceChanges(suiteCtx)

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

// needDatabase skips a spec that needs PostgreSQL when none can run here (fails it in CI).
func needDatabase() {
	if dbMissing == nil {
		return
	}
	if fail, msg := dbtest.MissingVerdict(dbMissing); fail {
		Fail(msg)
	} else {
		Skip(msg)
	}
}

// org is an organisation (namespace) with one API client, for one test.
type org struct {
	Namespace, Username, Password string
}

// newOrg creates a fresh organisation whose API client holds the given roles (all four when
// none are given).
func newOrg(ctx context.Context, roles ...flexv1.Role) org {
	ns, err := env.Namespace(ctx)
	Expect(err).NotTo(HaveOccurred())
	if len(roles) == 0 {
		roles = []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents}
	}
	o := org{Namespace: ns, Username: "client-" + ns, Password: "pw-" + ns}
	Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{
		Namespace: ns, Username: o.Username, Password: o.Password, Roles: roles})).To(Succeed())
	return o
}

// token logs the organisation's client in through /auth/token-form, waiting for the cache
// to see the new API client.
func (o org) token() string {
	var tok string
	Eventually(func(g Gomega) {
		status, body := call("POST", "/auth/token-form", "", form{"username": o.Username, "password": o.Password, "grant_type": "password"})
		g.Expect(status).To(Equal(http.StatusOK), "%s", body)
		tok = body.MapG(g)["access_token"].(string)
	}).Should(Succeed())
	return tok
}

// form is a form-encoded request body.
type form = testenv.Form

// raw is a request body sent verbatim.
type raw = testenv.Raw

// response is a decoded JSON answer.
type response []byte

func (r response) Map() map[string]any { return r.MapG(Default) }

// MapG is Map for a polled function: it asserts through g.
func (r response) MapG(g Gomega) map[string]any {
	var m map[string]any
	g.ExpectWithOffset(1, json.Unmarshal(r, &m)).To(Succeed(), "%s", r)
	return m
}

// Detail returns the "detail" member of an error answer.
func (r response) Detail() any { return r.Map()["detail"] }

func (r response) String() string { return string(r) }

// call sends one request to the REST API; body may be nil, a form, raw text, or anything
// JSON-encodable. It asserts nothing, so polled functions may call it: a request that got no
// answer is status 0, with the error as the body.
func call(method, path, token string, body any) (int, response) {
	status, data, err := testenv.Call(apiServer.URL, method, path, token, body)
	if err != nil {
		return 0, response(err.Error())
	}
	return status, data
}

// mustCall sends a request that must answer 200 and returns its body.
func mustCall(method, path, token string, body any) map[string]any {
	status, resp := call(method, path, token, body)
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), "%s %s: %s", method, path, resp)
	return resp.Map()
}

// mustCallG is mustCall for a polled function: it asserts through g.
func mustCallG(g Gomega, method, path, token string, body any) map[string]any {
	status, resp := call(method, path, token, body)
	g.ExpectWithOffset(1, status).To(Equal(http.StatusOK), "%s %s: %s", method, path, resp)
	return resp.MapG(g)
}

// household is an onboard request: a site with a qualifying charger and a battery.
func household(mpan string, mutate ...func(map[string]any)) map[string]any {
	body := map[string]any{
		"site": map[string]any{
			"mpan": mpan, "postcode": "SW1A 1AA", "street_address": "10 Downing Street",
			"email": "resident@example.com", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z",
		},
		"assets": []any{
			map[string]any{"external_id": "charger-" + mpan, "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}},
			map[string]any{"external_id": "battery-" + mpan, "type": "battery",
				"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}},
		},
		"proposition": "limited_pause",
	}
	for _, m := range mutate {
		m(body)
	}
	return body
}

// snapshot dumps every Flexsite object of a namespace (specs, labels, annotations,
// finalizers; not status or resourceVersion, which controllers move), to compare stored
// state before and after.
func snapshot(g Gomega, ctx context.Context, ns string) string {
	var b strings.Builder
	lists := []client.ObjectList{&flexv1.SiteList{}, &flexv1.AssetList{}, &flexv1.EnrolmentList{}, &flexv1.RewardLedgerList{},
		&flexv1.MPANClaimList{}}
	for _, list := range lists {
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
		switch l := list.(type) {
		case *flexv1.SiteList:
			for _, o := range l.Items {
				fmt.Fprintf(&b, "site %s %v %v %v %s\n", o.Name, o.Labels, o.Annotations, o.Finalizers, specJSON(o.Spec))
			}
		case *flexv1.AssetList:
			for _, o := range l.Items {
				fmt.Fprintf(&b, "asset %s %v %v %+v\n", o.Name, o.Labels, o.Annotations, specJSON(o.Spec))
			}
		case *flexv1.EnrolmentList:
			for _, o := range l.Items {
				fmt.Fprintf(&b, "enrolment %s %v %+v\n", o.Name, o.Finalizers, o.Spec)
			}
		case *flexv1.RewardLedgerList:
			for _, o := range l.Items {
				fmt.Fprintf(&b, "ledger %s %d\n", o.Name, len(o.Spec.Transactions))
			}
		case *flexv1.MPANClaimList:
			for _, o := range l.Items {
				fmt.Fprintf(&b, "claim %s %+v\n", o.Name, o.Spec)
			}
		}
	}
	return b.String()
}

func specJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
