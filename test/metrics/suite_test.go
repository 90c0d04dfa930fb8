package metrics_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The metrics suite runs the manager as cmd/manager does, with its metrics endpoint on a
// loopback port, and the REST API beside it; tests drive the API over HTTP and scrape the
// endpoint over HTTP, as Prometheus would. A second manager serves the same registry the
// secure way (HTTPS, TokenReview and SubjectAccessReview against the envtest API server).

const keysNamespace = "flexsite-system"

var (
	env *testenv.Env
	// metricsURL is the plain-HTTP endpoint, secureURL the authenticated one.
	metricsURL, secureURL string
	apiURL                string
)

func TestMetrics(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Metrics endpoint suite (envtest)")
}

// freeAddr is a loopback address with a port nothing listens on now. controller-runtime's
// metrics server does not report the port it bound for ":0", so the suite picks one first;
// another process could take it in between, which a test machine makes unlikely.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	return addr
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	suiteCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}})).To(Succeed())

	By("a manager with the controllers and a plain-HTTP metrics endpoint, as with --embedded")
	plainAddr := freeAddr()
	metricsURL = "http://" + plainAddr + "/metrics"
	mgr, err := env.NewManager(func(o *ctrl.Options) { o.Metrics = metrics.ServerOptions(plainAddr, false, "") })
	Expect(err).NotTo(HaveOccurred())
	testDB, err := dbtest.ForSuite(ctx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool})).To(Succeed())
	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	Expect(keys.Ensure(ctx)).To(Succeed())
	api := httptest.NewServer(server.NewServer(server.Config{
		Log:           ctrl.Log.WithName("api"),
		Cache:         mgr.GetCache(),
		APIReader:     mgr.GetAPIReader(),
		Client:        mgr.GetClient(),
		Issuer:        auth.NewIssuer(keys, time.Now),
		Authenticator: auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:       server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30},
		DB:            testDB.Pool,
	}))
	DeferCleanup(api.Close)
	apiURL = api.URL
	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	By("a second manager serving the metrics as a cluster install does: HTTPS, authenticated")
	secureAddr := freeAddr()
	secureURL = "https://" + secureAddr + "/metrics"
	secureMgr, err := env.NewManager(func(o *ctrl.Options) { o.Metrics = metrics.ServerOptions(secureAddr, true, "") })
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		Expect(secureMgr.Start(suiteCtx)).To(Succeed())
	}()

	SetDefaultEventuallyTimeout(20 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	Eventually(func() error { _, err := scrape(); return err }).Should(Succeed())
}, NodeTimeout(3*time.Minute))

// scrape reads the plain endpoint as Prometheus does and parses its text exposition.
func scrape() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(metricsURL) //nolint:noctx // a test's one-shot scrape
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("scrape: %d %s", resp.StatusCode, body)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

// mustScrape is scrape that must succeed.
func mustScrape(g Gomega) map[string]*dto.MetricFamily {
	families, err := scrape()
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return families
}

// value is the counter of family name whose labels include want (0 when there is none).
func value(families map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f, ok := families[name]
	if !ok {
		return 0
	}
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		matches := true
		for k, v := range want {
			matches = matches && labels[k] == v
		}
		if matches {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

// insecureClient talks HTTPS to the secure endpoint, whose certificate is self-signed.
var insecureClient = &http.Client{Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the endpoint's self-signed test certificate
}}
