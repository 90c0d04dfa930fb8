package ven_test

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/openadr/oadrtest"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/test/ven"
)

// The VEN suite runs Flexsite as a VTN end to end, as the server suite does: a kube-apiserver
// + etcd (envtest), the manager with every controller and the notification deliverer, a real
// PostgreSQL, and the REST API with the OpenADR door behind a real HTTP server. The VEN that
// speaks to it is package ven: a client generated from the Alliance's document, with tokens
// from a real OAuth 2.0 library (golang.org/x/oauth2/clientcredentials). The VEN's callback
// is an HTTPS receiver on loopback, which the deliverer is allowed to reach.

const keysNamespace = "flexsite-system"

var (
	env       *testenv.Env
	k8sClient client.Client
	// serverURL is the REST API's (and the OpenADR door's) origin.
	serverURL string
	// testDB is the suite's PostgreSQL database.
	testDB *dbtest.Database
	// clock is the REST API's and the flex events' time (server.Config.Now and
	// controllers.Options.FlexEventNow): a walkthrough moves it through an event's window.
	clock atomic.Pointer[time.Time]
	// receiverRoots trusts the VENs' HTTPS receivers (httptest's TLS servers share one
	// certificate).
	receiverRoots *x509.CertPool
)

func TestVEN(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "VEN suite: a generated OpenADR 3 VEN against Flexsite (envtest, PostgreSQL)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			Fail(msg)
		} else {
			Skip(msg)
		}
	}
	var err error
	env, err = testenv.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	k8sClient = env.Client
	suiteCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	Expect(k8sClient.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}})).To(Succeed())

	testDB, err = dbtest.New(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	// The readings partitions, made as the manager's leader makes them on start.
	Expect((&db.ReadingPartitions{Pool: testDB.Pool, Back: readings.PartitionsBack, Ahead: readings.PartitionsAhead}).Round(ctx)).
		To(Succeed())

	now := time.Now()
	clock.Store(&now)
	tick := func() time.Time { return *clock.Load() }

	// Deliveries may reach loopback (the VENs' receivers), over HTTPS with their certificate.
	probe := httptest.NewTLSServer(http.NotFoundHandler())
	receiverRoots = x509.NewCertPool()
	receiverRoots.AddCert(probe.Certificate())
	probe.Close()
	loopback := events.AddressPolicy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

	mgr, err := env.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool, FlexEventNow: tick})).To(Succeed())
	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	Expect(keys.Ensure(ctx)).To(Succeed())
	srv := server.NewServer(server.Config{
		DB:                 testDB.Pool,
		HostedNamespace:    keysNamespace,
		Log:                ctrl.Log.WithName("api"),
		Cache:              mgr.GetCache(),
		APIReader:          mgr.GetAPIReader(),
		Client:             mgr.GetClient(),
		Issuer:             auth.NewIssuer(keys, time.Now),
		Authenticator:      auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:            server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30},
		Now:                tick,
		NotificationPolicy: loopback,
	})
	// The deliverer, as cmd/manager sets it up: every replica delivers.
	Expect((&delivery.Deliverer{Store: &outboxstore.Store{Pool: testDB.Pool}, Policy: loopback, RootCAs: receiverRoots,
		Interval: 100 * time.Millisecond, OpenADR: srv.OpenADRNotifications()}).SetupWithManager(suiteCtx, mgr)).To(Succeed())
	api := httptest.NewServer(srv)
	DeferCleanup(api.Close)
	serverURL = api.URL

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

// setClock moves the REST API's and the flex events' clock to t. Time passing in the real
// world would requeue the FlexEvent reconcilers' waits; here the clock jumps, so each flex
// event named is woken as a change of its dispatches wakes it (dispatchstore.Channel).
func setClock(ctx context.Context, t time.Time, organisation string, flexEvents ...string) {
	GinkgoHelper()
	clock.Store(&t)
	for _, e := range flexEvents {
		_, err := testDB.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, dispatchstore.Channel, organisation+"/"+e)
		Expect(err).NotTo(HaveOccurred())
	}
}

// org is an organisation (namespace) with two API clients: the business logic's (entity_read,
// entity_write, flex_events_write) and a VEN maker's (entity_read, entity_write).
type org struct {
	Namespace                    string
	Business, BusinessPassword   string
	VENClient, VENClientPassword string
}

func newOrg(ctx context.Context) org {
	GinkgoHelper()
	ns, err := env.Namespace(ctx)
	Expect(err).NotTo(HaveOccurred())
	o := org{Namespace: ns, Business: "business-" + ns, BusinessPassword: "pw-business-" + ns,
		VENClient: "ven-" + ns, VENClientPassword: "pw-ven-" + ns}
	Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: ns, Username: o.Business,
		Password: o.BusinessPassword, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite,
			flexv1.RoleFlexEventsWrite, flexv1.RoleRewards}})).To(Succeed())
	Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: ns, Username: o.VENClient,
		Password: o.VENClientPassword, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}})).To(Succeed())
	return o
}

// restToken logs the business logic's client in to the REST API.
func (o org) restToken() string {
	GinkgoHelper()
	var tok string
	Eventually(func(g Gomega) {
		status, body := call(g, "POST", "/auth/token-form", "", testenv.Form{"username": o.Business,
			"password": o.BusinessPassword, "grant_type": "password"})
		g.Expect(status).To(Equal(http.StatusOK), "%v", body)
		tok = body["access_token"].(string)
	}).Should(Succeed())
	return tok
}

// call sends one request to the REST API (body nil, a form or anything JSON-encodable).
func call(g Gomega, method, path, token string, body any) (int, map[string]any) {
	status, data, err := testenv.Call(serverURL, method, path, token, body)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var out map[string]any
	if len(data) > 0 && strings.HasPrefix(strings.TrimSpace(string(data)), "{") {
		g.ExpectWithOffset(1, json.Unmarshal(data, &out)).To(Succeed(), "%s", data)
	}
	return status, out
}

// credentials are an API client's OAuth 2.0 client credentials at the door's token endpoint
// (HTTP Basic, RFC 6749 §2.3.1), for scopes.
func credentials(id, secret string, scopes ...string) *clientcredentials.Config {
	return &clientcredentials.Config{ClientID: id, ClientSecret: secret, Scopes: scopes,
		TokenURL: serverURL + oadr.BasePath + "/auth/token", AuthStyle: oauth2.AuthStyleInHeader}
}

// vtn is the generated client on the door, its requests carrying the token source's tokens.
// ctx is conforming's: every answer the VEN gets, tokens included, is checked against the
// document.
func vtn(ctx context.Context, cc *clientcredentials.Config) *ven.ClientWithResponses {
	GinkgoHelper()
	c, err := ven.NewClientWithResponses(serverURL+oadr.BasePath+"/", ven.WithHTTPClient(cc.Client(ctx)))
	Expect(err).NotTo(HaveOccurred())
	return c
}

// conforming is ctx with the HTTP client the OAuth 2.0 library and the generated client use:
// an answer of the door that breaks the Alliance's document is an error of the call, so a
// lenient generated client (unknown fields ignored, required ones left zero) cannot hide it.
func conforming(ctx context.Context) context.Context {
	GinkgoHelper()
	contract, err := oadrtest.Load(serverURL)
	Expect(err).NotTo(HaveOccurred())
	return context.WithValue(ctx, oauth2.HTTPClient, &http.Client{Transport: checked{contract}})
}

// checked validates the door's answers against the document (401, 429 and 503, which every
// door may answer, as problems too).
type checked struct{ contract *oadrtest.Contract }

func (c checked) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || !strings.HasPrefix(req.URL.Path, oadr.BasePath+"/") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	call, err := oadrtest.Request(req.Method, req.URL.String())
	if err != nil {
		return nil, err
	}
	if err := c.contract.Check(call, resp.StatusCode, resp.Header, body,
		http.StatusUnauthorized, http.StatusTooManyRequests, http.StatusServiceUnavailable); err != nil {
		return nil, fmt.Errorf("%s %s answered %d, not as the Alliance's document says: %w: %s",
			req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
	return resp, nil
}
