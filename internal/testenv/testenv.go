// Package testenv starts what the envtest suites share: a real kube-apiserver + etcd with
// Flexsite's CRDs and default rules installed, and a manager running the controllers.
// The binaries come from hack/ensure-k8s-binaries.sh through $KUBEBUILDER_ASSETS (make test
// sets it).
package testenv

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/shards"
)

// Scheme knows the built-in kinds and Flexsite's.
var Scheme = newScheme()

func newScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flexv1.AddToScheme(s))
	utilruntime.Must(shards.AddToScheme(s))
	return s
}

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Env is a running API server plus a direct (uncached) client to it.
type Env struct {
	*envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Start brings up the API server with the CRDs and the default rules of config/rules.
func Start(ctx context.Context, opts ...func(*envtest.Environment)) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, " +
			"or export KUBEBUILDER_ASSETS=$(hack/ensure-k8s-binaries.sh)")
	}
	env := &envtest.Environment{
		// Flexsite's CRDs, and the sharder's ControllerRing (external: upstream's, as shipped).
		CRDDirectoryPaths: []string{filepath.Join(RepoRoot(), "config", "crd", "bases"),
			filepath.Join(RepoRoot(), "config", "crd", "external")},
		ErrorIfCRDPathMissing: true,
		// envtest's defaults (20 s to start, 20 s to stop) are too short for a machine whose
		// two cores run several suites at once: an API server that comes up in 40 s is not a
		// failure of the code under test.
		ControlPlaneStartTimeout: 2 * time.Minute,
		ControlPlaneStopTimeout:  time.Minute,
	}
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	if _, err := bootstrap.ApplyDefaults(ctx, c, filepath.Join(RepoRoot(), "config", "rules")); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &Env{Environment: env, Config: cfg, Client: c}, nil
}

// WithWebhooks installs Flexsite's admission webhook configurations (config/webhook),
// pointed at a local webhook server with a generated certificate: pass it to Start, and
// start the manager with ServeWebhooks.
func WithWebhooks(env *envtest.Environment) {
	env.WebhookInstallOptions = envtest.WebhookInstallOptions{Paths: []string{filepath.Join(RepoRoot(), "config", "webhook")}}
}

// WebhookServerUp reports whether the webhook server the installed configurations point at
// accepts TLS connections (every Flexsite write passes it, so suites wait for it).
func (e *Env) WebhookServerUp() error {
	wh := e.WebhookInstallOptions
	addr := net.JoinHostPort(wh.LocalServingHost, strconv.Itoa(wh.LocalServingPort))
	//nolint:gosec // a readiness probe of our own test server, whose certificate is generated
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		return err
	}
	return conn.Close()
}

// NewManager returns a manager for the environment with metrics and probes off, serving the
// installed webhooks (if any); opts change those options (e.g. a metrics endpoint).
func (e *Env) NewManager(opts ...func(*ctrl.Options)) (ctrl.Manager, error) {
	return e.NewManagerWithConfig(e.Config, opts...)
}

// NewManagerWithConfig is NewManager talking to the API server as cfg says (e.g. a user agent
// of its own, which the API server's audit log then names).
func (e *Env) NewManagerWithConfig(cfg *rest.Config, opts ...func(*ctrl.Options)) (ctrl.Manager, error) {
	wh := e.WebhookInstallOptions
	o := ctrl.Options{
		Scheme:                 Scheme,
		Cache:                  index.CacheOptions(), // as cmd/manager's
		Client:                 index.ClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: wh.LocalServingHost, Port: wh.LocalServingPort, CertDir: wh.LocalServingCertDir}),
	}
	for _, opt := range opts {
		opt(&o)
	}
	return ctrl.NewManager(cfg, o)
}

// Namespace creates a fresh organisation namespace for one test.
func (e *Env) Namespace(ctx context.Context) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: "org-", Labels: map[string]string{flexv1.OrganisationLabel: "test"}}}
	if err := e.Client.Create(ctx, ns); err != nil {
		return "", err
	}
	return ns.Name, nil
}
