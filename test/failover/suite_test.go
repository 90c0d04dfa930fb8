package failover_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The failover suite runs two replicas of the manager against one API server (envtest), as
// the Deployment does (2 replicas, leader election): each with every controller and its own
// REST API behind its own HTTP server, sharing the token signing keys through their
// Secret. It proves that one replica leads at a time, that both serve the API, and that when
// the leader dies without a word (no lease release) the other takes over and finishes the
// work that arrived in between.

const (
	managerNamespace = "flexsite-system"
	leaseName        = "flexsite-manager.flexsite.io"
	keysSecret       = "flexsite-token-keys"

	// Short leader election timings, so a failover takes seconds. RenewDeadline is 3 s rather
	// than 2 s: the CI machine is shared, and a leader that misses its renew deadline under
	// load steps down (and its manager exits), which is not what this suite is about.
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

var (
	env *testenv.Env
	// testDB is the replicas' one PostgreSQL, as the Deployment's replicas share theirs.
	testDB *dbtest.Database
)

func TestFailover(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Leader failover suite (envtest, two managers)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(ctx)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}})).To(Succeed())
	testDB, err = dbtest.ForSuite(ctx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })

	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

// replica is one running manager with its REST API.
type replica struct {
	name   string
	mgr    ctrl.Manager
	api    *httptest.Server
	cancel context.CancelFunc
	// done receives what mgr.Start returned, once.
	done chan error
}

// startReplica builds and starts a manager like cmd/manager's (leader election on, the
// controllers, the REST API) under its own context. releaseOnCancel false is a crash: the
// replica stops without handing the lease back.
func startReplica(ctx context.Context, name string, releaseOnCancel bool) *replica {
	GinkgoHelper()
	mgr, err := ctrl.NewManager(env.Config, ctrl.Options{
		Scheme:                        testenv.Scheme,
		Metrics:                       metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:        "0",
		Cache:                         index.CacheOptions(),
		Client:                        index.ClientOptions(),
		LeaderElection:                true,
		LeaderElectionID:              leaseName,
		LeaderElectionNamespace:       managerNamespace,
		LeaseDuration:                 ptr.To(leaseDuration),
		RenewDeadline:                 ptr.To(renewDeadline),
		RetryPeriod:                   ptr.To(retryPeriod),
		LeaderElectionReleaseOnCancel: releaseOnCancel,
		// Two managers in one process register controllers of the same names.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	Expect(err).NotTo(HaveOccurred())
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	Expect(controllers.SetupWithManager(runCtx, mgr, controllers.Options{DB: testDB.Pool, Devices: providerDialer, Holder: name})).To(Succeed())

	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), managerNamespace, keysSecret)
	Expect(keys.Ensure(ctx)).To(Succeed())
	srv := server.NewServer(server.Config{
		Log:           ctrl.Log.WithName(name).WithName("api"),
		Cache:         mgr.GetCache(),
		APIReader:     mgr.GetAPIReader(),
		Client:        mgr.GetClient(),
		Issuer:        auth.NewIssuer(keys, time.Now),
		Authenticator: auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:       server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30},
		Now:           time.Now,
		// Device providers on loopback: devices_test.go's authorisation server.
		ProviderPolicy: &providerDialer.Policy,
		DB:             testDB.Pool,
	})
	r := &replica{name: name, mgr: mgr, api: httptest.NewServer(srv), cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- mgr.Start(runCtx) }()
	DeferCleanup(func() {
		r.api.Close()
		r.stop()
	})
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	return r
}

// stop cancels the replica and waits for its manager to return (at most once).
func (r *replica) stop() {
	if r.done == nil {
		return
	}
	r.cancel()
	select {
	case err := <-r.done:
		// Stopped on purpose: nil, or (a leader whose context ended) that it lost the lease.
		if err != nil {
			Expect(err.Error()).To(Equal("leader election lost"), "replica %s", r.name)
		}
	case <-time.After(30 * time.Second):
		Fail("replica " + r.name + " did not stop")
	}
	r.done = nil
}

// leading reports whether the replica holds the lease.
func (r *replica) leading() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// failedEarly fails the spec if the replica's manager returned on its own (e.g. it lost
// the lease under load and stepped down).
func (r *replica) failedEarly() {
	GinkgoHelper()
	if r.done == nil {
		return
	}
	select {
	case err := <-r.done:
		r.done = nil
		Fail("replica " + r.name + " stopped on its own: " + errString(err))
	default:
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// call sends one request to a replica's REST API and decodes the JSON answer.
func (r *replica) call(g Gomega, method, path, token string, body any) (int, map[string]any) {
	GinkgoHelper()
	status, data, err := testenv.Call(r.api.URL, method, path, token, body)
	g.Expect(err).NotTo(HaveOccurred())
	var out map[string]any
	if err := json.Unmarshal(data, &out); err != nil && !errors.Is(err, io.EOF) {
		out = map[string]any{"raw": string(data)}
	}
	return status, out
}
