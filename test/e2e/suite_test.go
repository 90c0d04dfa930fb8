package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
	admission "github.com/flexsite/flexsite/webhook"
)

// The end-to-end suite drives Flexsite the way its users do: platform teams with the
// project's own kubectl (built from source to match the API server, in $KUBEBUILDER_ASSETS)
// and API clients over HTTP. Behind both doors runs the real thing: a kube-apiserver + etcd
// (envtest) with Flexsite's CRDs, default rules and admission webhooks, the manager running
// every controller and serving the webhooks, and the REST API behind an HTTP server.

var (
	env       *testenv.Env
	apiServer *httptest.Server
	// kubeconfig is the file kubectl reads: an admin user (system:masters) of the API server.
	kubeconfig string
	// kubeCacheDir keeps kubectl's discovery cache away from the user's ~/.kube.
	kubeCacheDir string
)

const (
	keysNamespace = "flexsite-system"
	// convergeTimeout bounds how long controllers may take to converge.
	convergeTimeout = 30 * time.Second
)

func TestE2E(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "End-to-end suite (envtest + kubectl + REST API)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	env, err = testenv.Start(ctx, testenv.WithWebhooks)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	// Cleanups run last-in first-out: the manager and the HTTP server stop before the API
	// server does.
	suiteCtx, cancel := context.WithCancel(context.Background())
	DeferCleanup(cancel)

	// The manager's namespace: the token key ring lives here, and the installer spec
	// dry-runs its namespaced objects into it.
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNamespace}})).To(Succeed())

	// Flexsite's PostgreSQL, as the manager has it (there is no mode without one).
	testDB, err := dbtest.ForSuite(ctx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	mgr, err := env.NewManager()
	Expect(err).NotTo(HaveOccurred())
	Expect(controllers.SetupWithManager(suiteCtx, mgr, controllers.Options{DB: testDB.Pool})).To(Succeed())
	Expect(admission.Setup(mgr, admission.Options{})).To(Succeed())

	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNamespace, "flexsite-token-keys")
	Expect(keys.Ensure(ctx)).To(Succeed())
	srv := server.NewServer(server.Config{
		Log:           ctrl.Log.WithName("api"),
		Cache:         mgr.GetCache(),
		APIReader:     mgr.GetAPIReader(),
		Client:        mgr.GetClient(),
		Issuer:        auth.NewIssuer(keys, time.Now),
		Authenticator: auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:       server.RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30},
		Now:           time.Now,
		DB:            testDB.Pool,
	})
	apiServer = httptest.NewServer(srv)
	DeferCleanup(apiServer.Close)

	go func() {
		defer GinkgoRecover()
		Expect(mgr.Start(suiteCtx)).To(Succeed())
	}()

	// Wait for the webhook server to accept TLS connections: every Flexsite write passes it.
	Eventually(env.WebhookServerUp).WithTimeout(convergeTimeout).Should(Succeed())
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	// kubectl talks to the API server as an admin user, through a kubeconfig file.
	dir, err := os.MkdirTemp("", "flexsite-e2e-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	user, err := env.AddUser(envtest.User{Name: "e2e-admin", Groups: []string{"system:masters"}}, nil)
	Expect(err).NotTo(HaveOccurred())
	data, err := user.KubeConfig()
	Expect(err).NotTo(HaveOccurred())
	kubeconfig = filepath.Join(dir, "kubeconfig")
	Expect(os.WriteFile(kubeconfig, data, 0o600)).To(Succeed())
	kubeCacheDir = filepath.Join(dir, "kube-cache")
	Expect(kubectlBinary()).To(BeAnExistingFile(), "the project's kubectl must be in $KUBEBUILDER_ASSETS")

	SetDefaultEventuallyTimeout(convergeTimeout)
	SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	SetDefaultConsistentlyDuration(3 * time.Second)
	SetDefaultConsistentlyPollingInterval(500 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

// ---- kubectl ----

func kubectlBinary() string {
	return filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
}

// run is the outcome of one kubectl invocation.
type run struct {
	Args           []string
	Stdout, Stderr string
	Err            error
}

func (r run) String() string {
	return fmt.Sprintf("kubectl %s\n--- err: %v\n--- stdout:\n%s\n--- stderr:\n%s", strings.Join(r.Args, " "), r.Err, r.Stdout, r.Stderr)
}

// kubectlIn runs the project's kubectl as the admin user, feeding it stdin (when not empty).
func kubectlIn(ctx context.Context, stdin string, args ...string) run {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlBinary(), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "KUBECACHEDIR="+kubeCacheDir)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	r := run{Args: args, Stdout: stdout.String(), Stderr: stderr.String(), Err: err}
	fmt.Fprintf(GinkgoWriter, "$ kubectl %s (err: %v)\n%s%s", strings.Join(args, " "), err, r.Stdout, r.Stderr)
	return r
}

// kubectl runs the project's kubectl as the admin user.
func kubectl(ctx context.Context, args ...string) run { return kubectlIn(ctx, "", args...) }

// mustKubectl runs kubectl, which must succeed, and returns its stdout.
func mustKubectl(g Gomega, ctx context.Context, args ...string) string {
	r := kubectl(ctx, args...)
	g.ExpectWithOffset(1, r.Err).NotTo(HaveOccurred(), "%s", r)
	return r.Stdout
}

// mustKubectlIn runs kubectl with stdin, which must succeed.
func mustKubectlIn(ctx context.Context, stdin string, args ...string) {
	r := kubectlIn(ctx, stdin, args...)
	ExpectWithOffset(1, r.Err).NotTo(HaveOccurred(), "%s", r)
}

// newNamespace creates a fresh organisation namespace with kubectl and returns its name.
func newNamespace(ctx context.Context, prefix string) string {
	name := fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano()%1_000_000_000)
	manifest := fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    %s: %s\n",
		name, flexv1.OrganisationLabel, name)
	r := kubectlIn(ctx, manifest, "apply", "-f", "-")
	ExpectWithOffset(1, r.Err).NotTo(HaveOccurred(), "%s", r)
	return name
}

// ---- the REST API ----

// org is an organisation's API client, for the REST door.
type org struct {
	Namespace, Username, Password string
}

// newOrg creates (or completes) the organisation ns with an API client holding every role.
func newOrg(ctx context.Context, ns string) org {
	o := org{Namespace: ns, Username: "e2e-" + ns, Password: "e2e-password-" + ns}
	ExpectWithOffset(1, bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.Organisation{
		Namespace: ns, Username: o.Username, Password: o.Password,
		Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents},
	})).To(Succeed())
	return o
}

// token logs the organisation's client in through /auth/token-form, waiting for the
// manager's cache to see the new API client.
func (o org) token() string {
	var tok string
	EventuallyWithOffset(1, func(g Gomega) {
		status, body := call("POST", "/auth/token-form", "", form{"username": o.Username, "password": o.Password, "grant_type": "password"})
		g.Expect(status).To(Equal(http.StatusOK), "%s", body)
		t, ok := body.MapG(g)["access_token"].(string)
		g.Expect(ok).To(BeTrue(), "%s", body)
		tok = t
	}).Should(Succeed())
	return tok
}

// form is a form-encoded request body.
type form = testenv.Form

// response is an answer's body.
type response []byte

func (r response) Map() map[string]any { return r.MapG(Default) }

// MapG is Map for a polled function: it asserts through g.
func (r response) MapG(g Gomega) map[string]any {
	var m map[string]any
	g.ExpectWithOffset(1, json.Unmarshal(r, &m)).To(Succeed(), "%s", r)
	return m
}

func (r response) String() string { return string(r) }

// call sends one request to the REST API; body may be nil, a form, or anything JSON-encodable.
// It asserts nothing, so polled functions may call it: a request that got no answer is status
// 0, with the error as the body.
func call(method, path, token string, body any) (int, response) {
	status, data, err := testenv.Call(apiServer.URL, method, path, token, body)
	if err != nil {
		return 0, response(err.Error())
	}
	return status, data
}
