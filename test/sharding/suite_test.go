package sharding_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The sharding suite runs Flexsite in its two tiers, as the chart does with sharding.enabled
// (docs/scale.md, "Two tiers"): an API tier replica (the REST API and the organisation-wide
// work under the leader lease, caching every household), the upstream sharder (its controllers
// and webhook, here in a manager of its own, as its Deployment) and two or three controller
// tier shards, each holding its shard lease and caching only its own households, against one
// API server (envtest) whose audit log tells which replica wrote what. It proves the faults: a
// shard added under load, a shard that dies with its lease, a shard that stops on SIGTERM, and
// a sharder that is down; and that a write through the API tier is reconciled by the owning
// shard, with no shard's cache holding another's households.
const (
	managerNamespace = "flexsite-system"
	leaderLease      = "flexsite-manager.flexsite.io"
	// controller-runtime's default lease timings (shards.DefaultTiming): a hand-over's bounds
	// are in lease durations, and a shorter lease leaves a loaded CI machine less room for the
	// rest (a shard that misses its renew deadline stops, which is not what this suite is about).
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
	// sharderResync is how often the sharder assigns what its webhook missed.
	sharderResync = 10 * time.Second
	// userAgentPrefix names a shard's requests in the audit log.
	userAgentPrefix = "flexsite-shard-"
	// keysSecret holds the API tier's token signing keys.
	keysSecret = "flexsite-token-keys"
	// The tiers' ServiceAccounts: each replica impersonates its tier's, bound to the roles
	// `make manifests` generates for it (config/rbac/*_tier_role.yaml), as the chart binds them.
	apiServiceAccount         = "flexsite-api"
	controllersServiceAccount = "flexsite-controllers"
)

// installTierRBAC creates each tier's roles as config/rbac has them and binds them, and the
// leader election Role, to the tier's ServiceAccount; and the organisation Secrets ClusterRole
// the API tier binds both to in every organisation's namespace.
func installTierRBAC(ctx context.Context) {
	GinkgoHelper()
	bind := func(role client.Object, sa string) {
		ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: role.GetObjectKind().GroupVersionKind().Kind, Name: role.GetName()}
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: managerNamespace, Name: sa}}
		name := sa + "-" + role.GetName()
		if ref.Kind == "ClusterRole" {
			Expect(env.Client.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef: ref, Subjects: subjects})).To(Succeed())
			return
		}
		Expect(env.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: name},
			RoleRef: ref, Subjects: subjects})).To(Succeed())
	}
	for file, sas := range map[string][]string{
		"api_tier_role.yaml":             {apiServiceAccount},
		"controller_tier_role.yaml":      {controllersServiceAccount},
		"leader_election_role.yaml":      {apiServiceAccount, controllersServiceAccount},
		"organisation_secrets_role.yaml": nil,
	} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
		Expect(err).NotTo(HaveOccurred())
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(obj); errors.Is(err, io.EOF) {
				break
			} else {
				Expect(err).NotTo(HaveOccurred())
			}
			if obj.GetKind() != "Role" && obj.GetKind() != "ClusterRole" {
				continue // the kustomize bindings: bound here instead
			}
			if obj.GetKind() == "Role" {
				obj.SetNamespace(managerNamespace)
			}
			if file == "organisation_secrets_role.yaml" {
				obj.SetName(bootstrap.DefaultOrganisationSecretsRole) // as the installers name it
			}
			Expect(env.Client.Create(ctx, obj)).To(Succeed())
			for _, sa := range sas {
				bind(obj, sa)
			}
		}
	}
}

// as is cfg acting as a tier's ServiceAccount.
func as(cfg *rest.Config, sa string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + managerNamespace + ":" + sa}
	return cfg
}

var (
	env      *testenv.Env
	testDB   *dbtest.Database
	auditLog string
	// reconciles records every sharded reconcile, to find two shards on one object at once.
	reconciles = newOverlaps()
)

func TestSharding(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Sharding suite (envtest, the sharder and shards of the ring)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	dir := GinkgoT().TempDir()
	auditLog = filepath.Join(dir, "audit.log")
	policy := filepath.Join(dir, "audit-policy.yaml")
	// Every write to Flexsite's objects, with the request and the stored answer.
	Expect(os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: RequestResponse
  verbs: ["create", "update", "patch"]
  resources:
  - group: flexsite.io
- level: None
`), 0o600)).To(Succeed())
	var err error
	env, err = testenv.Start(ctx, func(e *envtest.Environment) {
		e.ControlPlane.GetAPIServer().Configure().
			Set("audit-policy-file", policy).Set("audit-log-path", auditLog).Set("audit-log-format", "json")
	})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { Expect(env.Stop()).To(Succeed()) })
	Expect(env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}})).To(Succeed())
	installTierRBAC(ctx)
	testDB, err = dbtest.ForSuite(ctx, Fail, Skip)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func(ctx SpecContext) { testDB.Close(ctx) })
	SetDefaultEventuallyTimeout(60 * time.Second)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
}, NodeTimeout(3*time.Minute))

// process is one running manager: the sharder, the API tier replica, or a controller tier shard.
type process struct {
	name   string
	mgr    ctrl.Manager
	api    *httptest.Server // the API tier's REST API
	cancel context.CancelFunc
	// done receives what mgr.Start returned, once.
	done chan error
}

// stop cancels the manager and waits for it to return.
func (p *process) stop() {
	GinkgoHelper()
	if p.done == nil {
		return
	}
	p.cancel()
	select {
	case err := <-p.done:
		Expect(err).NotTo(HaveOccurred(), "%s stopping", p.name)
	case <-time.After(60 * time.Second):
		Fail(p.name + " did not stop")
	}
	p.done = nil
}

// startSharder runs the upstream sharder's controllers and webhook in a manager of their own
// (the chart's sharder Deployment), serving the webhook on envtest's local webhook address.
func startSharder(ctx context.Context) *process {
	GinkgoHelper()
	wh := env.WebhookInstallOptions
	// Its webhook server is the one NewManager gives it: on envtest's local webhook address.
	mgr, err := env.NewManager(func(o *ctrl.Options) {
		o.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	})
	Expect(err).NotTo(HaveOccurred())
	url := fmt.Sprintf("https://%s:%d/", wh.LocalServingHost, wh.LocalServingPort)
	Expect(shards.AddSharder(ctx, mgr, shards.SharderOptions{SyncPeriod: sharderResync,
		Webhook: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: wh.LocalServingCAData}})).To(Succeed())
	return run(ctx, "sharder", mgr)
}

// startAPI runs an API tier replica, as cmd/manager does with --tier=api --leader-elect: the
// REST API (here behind an httptest server) and the organisation-wide reconcilers under the
// leader lease, held with the API tier's identity; its cache holds every household.
func startAPI(ctx context.Context, name string) *process {
	GinkgoHelper()
	cfg := as(env.Config, apiServiceAccount)
	lease, err := shards.APITierLease(cfg, managerNamespace, leaderLease, name)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := env.NewManagerWithConfig(cfg, func(o *ctrl.Options) {
		o.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
		o.LeaderElection, o.LeaderElectionID, o.LeaderElectionNamespace = true, leaderLease, managerNamespace
		o.LeaderElectionResourceLockInterface, o.LeaderElectionReleaseOnCancel = lease, true
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = ptr.To(leaseDuration), ptr.To(renewDeadline), ptr.To(retryPeriod)
	})
	Expect(err).NotTo(HaveOccurred())
	runCtx := context.WithoutCancel(ctx)
	Expect(controllers.SetupWithManager(runCtx, mgr, controllers.Options{DB: testDB.Pool, Holder: name,
		Work: controllers.OrgWideWork, OrganisationAccess: bootstrap.OrganisationAccess{ServiceAccountNamespace: managerNamespace,
			ServiceAccountName: apiServiceAccount, ControllersServiceAccountName: controllersServiceAccount}})).To(Succeed())
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
		DB:            testDB.Pool,
	})
	api := httptest.NewServer(srv)
	DeferCleanup(api.Close)
	p := run(ctx, name, mgr)
	p.api = api
	return p
}

// startShard runs a controller tier shard, as cmd/manager does with --tier=controllers
// --leader-elect: the per-site reconcilers under its shard lease, and a cache of only its own
// households (shards.OwnCache). crash leaves its lease held when it stops, as a killed process
// does.
func startShard(ctx context.Context, name string, crash bool) *process {
	GinkgoHelper()
	cfg := as(env.Config, controllersServiceAccount)
	cfg.UserAgent = userAgentPrefix + name
	// Several managers in one process register controllers of the same names.
	mgr, err := env.NewManagerWithConfig(cfg, func(o *ctrl.Options) {
		o.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
		o.Cache = shards.OwnCache(o.Cache, name)
	})
	Expect(err).NotTo(HaveOccurred())
	replica, err := shards.Join(mgr, shards.Options{Shard: name, Namespace: managerNamespace, LeaderElectionID: leaderLease,
		PerSiteOnly: true, Timing: shards.Timing{LeaseDuration: leaseDuration, RenewDeadline: renewDeadline, RetryPeriod: retryPeriod},
		KeepLeasesOnStop: crash, Observe: reconciles.observe})
	Expect(err).NotTo(HaveOccurred())
	Expect(replica.OrgWide).To(BeNil(), "a controller tier shard does no organisation-wide work")
	runCtx := context.WithoutCancel(ctx)
	Expect(controllers.SetupWithManager(runCtx, mgr, controllers.Options{DB: testDB.Pool, Holder: name,
		Shard: replica, Work: controllers.PerSiteWork})).To(Succeed())
	return run(ctx, name, mgr)
}

func run(ctx context.Context, name string, mgr ctrl.Manager) *process {
	GinkgoHelper()
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	p := &process{name: name, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { p.done <- mgr.Start(runCtx) }()
	DeferCleanup(p.stop)
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	return p
}

// overlaps records the sharded reconciles in flight, per controller and object, and every
// moment two shards had one object at once.
type overlaps struct {
	mu       sync.Mutex
	inFlight map[string]map[string]int
	found    []string
	byShard  map[string]int
	// byKey: which shards reconciled each controller and object, how often.
	byKey map[string]map[string]int
}

func newOverlaps() *overlaps {
	return &overlaps{inFlight: map[string]map[string]int{}, byShard: map[string]int{}, byKey: map[string]map[string]int{}}
}

// reconciledBy tells which shards ran controller's reconcile of req, how often each.
func (o *overlaps) reconciledBy(controller string, req reconcile.Request) map[string]int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return maps.Clone(o.byKey[controller+" "+req.String()])
}

func (o *overlaps) observe(shard, controller string, req reconcile.Request) func() {
	key := controller + " " + req.String()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.inFlight[key] == nil {
		o.inFlight[key] = map[string]int{}
	}
	for other, n := range o.inFlight[key] {
		if other != shard && n > 0 {
			o.found = append(o.found, fmt.Sprintf("%s: %s and %s at once", key, other, shard))
		}
	}
	o.inFlight[key][shard]++
	o.byShard[shard]++
	if o.byKey[key] == nil {
		o.byKey[key] = map[string]int{}
	}
	o.byKey[key][shard]++
	return func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.inFlight[key][shard]--
	}
}

func (o *overlaps) seen() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.found...)
}

func (o *overlaps) count(shard string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.byShard[shard]
}

// auditEvent is what the suite reads of an audit log line.
type auditEvent struct {
	Verb      string `json:"verb"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource, Namespace, Name, Subresource string
	} `json:"objectRef"`
	ResponseStatus struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestObject  json.RawMessage `json:"requestObject"`
	ResponseObject struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	} `json:"responseObject"`
}

// foreignWrites reads the audit log for writes a shard made to a ring object it did not own:
// each successful write by a shard must answer an object assigned to that shard, unless it
// is the shard's acknowledgement of a drain (a patch that removes the shard label; the
// sharder's webhook assigns the next shard in the same request).
func foreignWrites() (foreign []string, examined int) {
	GinkgoHelper()
	f, err := os.Open(auditLog)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	ring := map[string]bool{"sites": true, "assets": true, "enrolments": true, "deviceconnections": true, "rewardledgers": true}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev auditEvent
		Expect(json.Unmarshal(sc.Bytes(), &ev)).To(Succeed())
		shard, ok := strings.CutPrefix(ev.UserAgent, userAgentPrefix)
		if !ok || !ring[ev.ObjectRef.Resource] || ev.ResponseStatus.Code >= 300 {
			continue
		}
		shard, _, _ = strings.Cut(shard, " ") // client-go may append its own words
		examined++
		if ev.ResponseObject.Metadata.Labels[shards.ShardLabel] == shard || drainAcknowledged(ev.RequestObject) {
			continue
		}
		foreign = append(foreign, fmt.Sprintf("%s %s %s/%s (%s) by %s: answered as %q's", ev.Verb, ev.ObjectRef.Resource,
			ev.ObjectRef.Namespace, ev.ObjectRef.Name, ev.ObjectRef.Subresource, shard,
			ev.ResponseObject.Metadata.Labels[shards.ShardLabel]))
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return foreign, examined
}

// assetsDropped reads the audit log for status writes a shard made, from since, to one of sites
// that left it with no asset: a site evaluated before its assets reached the shard's cache, and
// published as having lost them.
func assetsDropped(shard string, sites []client.ObjectKey, since time.Time) []string {
	GinkgoHelper()
	f, err := os.Open(auditLog)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = f.Close() }()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var ev struct {
			auditEvent
			Received metav1.MicroTime `json:"requestReceivedTimestamp"`
			// A refused write answers a Status, not the site: read once the write is known good.
			ResponseObject json.RawMessage `json:"responseObject"`
		}
		Expect(json.Unmarshal(sc.Bytes(), &ev)).To(Succeed())
		agent, ok := strings.CutPrefix(ev.UserAgent, userAgentPrefix)
		agent, _, _ = strings.Cut(agent, " ")
		key := client.ObjectKey{Namespace: ev.ObjectRef.Namespace, Name: ev.ObjectRef.Name}
		if !ok || agent != shard || ev.ObjectRef.Resource != "sites" || ev.ObjectRef.Subresource != "status" ||
			ev.ResponseStatus.Code >= 300 || ev.Received.Time.Before(since) || !slices.Contains(sites, key) {
			continue
		}
		var written struct {
			Status struct {
				Assets []json.RawMessage `json:"assets"`
			} `json:"status"`
		}
		Expect(json.Unmarshal(ev.ResponseObject, &written)).To(Succeed())
		if len(written.Status.Assets) == 0 {
			out = append(out, fmt.Sprintf("%s %s at %s", ev.Verb, key, ev.Received.Format(time.RFC3339Nano)))
		}
	}
	Expect(sc.Err()).NotTo(HaveOccurred())
	return out
}

// drainAcknowledged reports whether a patch removes the ring's shard label (the wrapper's
// acknowledgement of a drain).
func drainAcknowledged(patch json.RawMessage) bool {
	var p struct {
		Metadata struct {
			Labels map[string]*string `json:"labels"`
		} `json:"metadata"`
	}
	if json.Unmarshal(patch, &p) != nil {
		return false
	}
	v, ok := p.Metadata.Labels[shards.ShardLabel]
	return ok && v == nil
}
