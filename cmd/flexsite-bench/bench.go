package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/db/pgserver"
	"github.com/flexsite/flexsite/internal/embedded"
	"github.com/flexsite/flexsite/internal/probe"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/server"
)

// tokenKeysNamespace holds the manager's token signing keys; it must exist before it starts.
const tokenKeysNamespace = "flexsite-system"

var scheme = newScheme()

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(flexv1.AddToScheme(s))
	return s
}

// bench is everything the scenarios share: the control plane, a direct client, the bench's
// own watch on Sites, the API server's write counter and the manager subprocess.
type bench struct {
	p        params
	tmp      string
	cp       *embedded.ControlPlane
	c        client.Client // straight to the API server, no cache, no client-side rate limit
	watch    *watcher
	requests *requestCounter
	mgr      *managerProc
	mgrCfg   managerConfig
	// http is the keep-alive client of every REST call (one transport, C+ idle connections).
	http *http.Client
	// fleet is the households of scenario 4, which the later scenarios read and change.
	fleet *org
	// fleetRaw are the raw-write households beside the fleet (fleetRawHouseholds).
	fleetRaw *households
	// later: steps follow the one running in this run (one that changes the cluster for its
	// own measure puts it back then).
	later bool
	// trivial is the read-path baseline server, while it runs.
	trivial *childProc
	// empty is the manager's memory before any household existed (nil until measured).
	empty *memory
	// pg is the manager's PostgreSQL (the bench's own server); db a pool on the manager's
	// database, for the raw baselines.
	pg    *pgserver.Server
	pgDir string
	db    *pgxpool.Pool
	// rewards writes reward history as a rewards system's credits do (internal/rewardstore).
	rewards *rewardstore.Store
}

// newBench starts the control plane, the bench's watch and the manager, and waits until the
// manager is ready. On error, whatever was started is stopped.
func newBench(ctx context.Context, o options, p params) (_ *bench, err error) {
	// envtest and the bench's cache log through controller-runtime: keep their errors only.
	ctrl.SetLogger(funcr.New(func(prefix, args string) {
		if strings.Contains(args, `"error"=`) {
			logf("%s %s", prefix, args)
		}
	}, funcr.Options{}))
	b := &bench{p: p, http: newHTTPClient(p.Concurrency)}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	if b.tmp, err = os.MkdirTemp("", "flexsite-bench-"); err != nil {
		return nil, err
	}
	if err := b.startControlPlane(ctx, o.binDir); err != nil {
		return nil, err
	}
	if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tokenKeysNamespace}}); err != nil {
		return nil, err
	}
	if b.watch, err = startWatcher(ctx, b.cp.Config, convergenceNamespace); err != nil {
		return nil, err
	}
	if err := b.startDatabase(ctx); err != nil {
		return nil, err
	}
	if b.mgrCfg, err = b.managerConfig(o); err != nil {
		return nil, err
	}
	if err := b.startManager(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *bench) startControlPlane(ctx context.Context, binDir string) error {
	logf("starting etcd + kube-apiserver (%s)", binDir)
	start := time.Now()
	cp, err := embedded.Start(embedded.Options{BinaryDir: binDir, CRDDir: "config/crd/bases", WebhookDir: "config/webhook",
		DataDir: "", KubeconfigPath: filepath.Join(b.tmp, "kubeconfig")})
	if err != nil {
		return err
	}
	b.cp = cp
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg := rest.CopyConfig(cp.Config)
	// No client-side throttle: the baseline is the API server's write path, not client-go's
	// default 5 requests per second (the manager runs unthrottled too).
	cfg.QPS, cfg.Burst = -1, 0
	if b.c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	if b.requests, err = newRequestCounter(cp.Config); err != nil {
		return err
	}
	logf("control plane up in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// benchDatabase is the manager's database on the bench's PostgreSQL.
const benchDatabase = "flexsite"

// startDatabase starts the manager's PostgreSQL (from $FLEXSITE_POSTGRES_BIN, as make bench
// sets it; durable, as deployed) and creates its database; the manager migrates it. Its URL
// reaches the manager through $FLEXSITE_DATABASE_URL, not a flag: the manager's log prints
// its flags, and the URL holds the password.
func (b *bench) startDatabase(ctx context.Context) error {
	bin := os.Getenv("FLEXSITE_POSTGRES_BIN")
	if bin == "" {
		var err error
		if bin, err = dbtest.Find(); err != nil {
			return err
		}
	}
	// Its own directory under /tmp: run as root, the server runs as another user, who must
	// reach it (the bench's temporary directory is root's alone).
	dir, err := os.MkdirTemp("", "flexsite-bench-pg-")
	if err != nil {
		return err
	}
	b.pgDir = dir
	start := time.Now()
	if b.pg, err = pgserver.Start(ctx, pgserver.Options{BinDir: bin, Dir: dir}); err != nil {
		return fmt.Errorf("starting PostgreSQL: %w", err)
	}
	conn, err := pgx.Connect(ctx, b.pg.URL("postgres"))
	if err != nil {
		return err
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+benchDatabase)
	_ = conn.Close(ctx)
	if err != nil {
		return err
	}
	if err := os.Setenv("FLEXSITE_DATABASE_URL", b.pg.URL(benchDatabase)); err != nil {
		return err
	}
	if b.db, err = db.Open(ctx, b.pg.URL(benchDatabase)); err != nil {
		return err
	}
	// The manager migrates on start; the bench writes once it has.
	b.rewards = &rewardstore.Store{Pool: b.db}
	logf("PostgreSQL up in %s (%s)", time.Since(start).Round(100*time.Millisecond), b.pg.Redacted(benchDatabase))
	return nil
}

// managerConfig chooses the manager's free loopback ports and flags.
func (b *bench) managerConfig(o options) (managerConfig, error) {
	ports, err := freePorts(3)
	if err != nil {
		return managerConfig{}, err
	}
	if err := os.MkdirAll(o.logDir, 0o755); err != nil {
		return managerConfig{}, err
	}
	wh := b.cp.Webhook
	cfg := managerConfig{
		binary:      o.manager,
		logPath:     filepath.Join(o.logDir, "manager.log"),
		apiAddr:     fmt.Sprintf("127.0.0.1:%d", ports[0]),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		pprofAddr:   fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	cfg.args = []string{
		"--kubeconfig=" + filepath.Join(b.tmp, "kubeconfig"),
		fmt.Sprintf("--webhook-host=%s", wh.Host), fmt.Sprintf("--webhook-port=%d", wh.Port), "--webhook-cert-dir=" + wh.CertDir,
		// Metrics over plain HTTP on loopback: the bench scrapes them itself, without a token.
		"--api-addr=" + cfg.apiAddr, "--metrics-bind-address=" + cfg.metricsAddr, "--metrics-secure=false",
		"--pprof-bind-address=" + cfg.pprofAddr,
		"--install-default-rules", "--rules-dir=config/rules",
		"--token-keys-secret=" + tokenKeysNamespace + "/flexsite-token-keys",
		// As deployed (config/manager): JSON logs at info level, not the development logger.
		"--zap-devel=false",
		// The bench measures capacity from one API client per organisation, far above the
		// per-client limit (100/s by default) that would answer 429: the per-client limit is
		// off (the "limits off"), and the report says so (reads.rate_limits_on).
		"--rate-limit-per-client=0",
		// The hostile scenario's callbacks come from one address: each must be looked up (what
		// it measures), not refused by the per-address limit of failed callbacks.
		"--callback-failures-burst=1000",
		// The meters step makes more lookups than an organisation's hourly budget (1,000): it
		// measures the register's capacity, not the budget (whose 429s the server suite tests).
		"--meter-lookups-per-hour=0", "--meter-lookups-per-day=0", "--meter-searches-per-household-hour=0",
	}
	// The read path's second baseline: a trivial read behind the manager's whole stack
	// (stackTrivialTarget). The manager inherits the bench's environment (startChild).
	if err := os.Setenv(server.StackBaselineEnv, "1"); err != nil {
		return managerConfig{}, err
	}
	// Notifications go to the bench's receivers on loopback, whose certificate it trusts.
	caFile, err := notifyCAFile(b.tmp)
	if err != nil {
		return managerConfig{}, err
	}
	cfg.args = append(cfg.args, "--notification-allow-cidrs=127.0.0.0/8", "--notification-ca-file="+caFile)
	// A fresh log per run: a run's log is read next to its results.
	return cfg, os.WriteFile(cfg.logPath, nil, 0o644)
}

// startManager starts the manager subprocess and waits for its /readyz.
func (b *bench) startManager(ctx context.Context) error {
	mgr, err := startManager(b.mgrCfg)
	if err != nil {
		return err
	}
	b.mgr = mgr
	ready, err := mgr.waitReady(ctx, b.p.Settle)
	if err != nil {
		return err
	}
	logf("manager ready in %s (pid %d, api %s, pprof %s)", ready.Round(10*time.Millisecond), mgr.pid(), mgr.apiURL, mgr.pprofURL)
	return nil
}

// close stops everything that was started, children first: the manager and the trivial
// server, then the watch, then the control plane. It is safe on a partly started bench.
func (b *bench) close() {
	if b.trivial != nil {
		b.trivial.stop()
	}
	if b.mgr != nil {
		b.mgr.stop()
	}
	if b.watch != nil {
		b.watch.stop()
	}
	if b.db != nil {
		b.db.Close()
	}
	if b.pg != nil {
		if err := b.pg.Stop(); err != nil {
			logf("stopping PostgreSQL: %v", err)
		}
	}
	if b.pgDir != "" {
		_ = os.RemoveAll(b.pgDir)
	}
	if b.cp != nil {
		if err := b.cp.Stop(); err != nil {
			logf("stopping the control plane: %v", err)
		}
	}
	if b.tmp != "" {
		_ = os.RemoveAll(b.tmp)
	}
}

// org is an organisation (namespace) the bench writes to, with its households' ids.
type org struct {
	ns       string
	username string
	password string
	api      *apiClient
	h        *households
	mu       sync.Mutex // guards the lists below
	// siteIDs of the households onboarded so far, in order.
	siteIDs []string
	// siteNames in the same order.
	siteNames []string
}

// organisation creates an organisation with an API client holding every role, and logs in.
func (b *bench) organisation(ctx context.Context, ns string, mpanPrefix int) (*org, error) {
	o := &org{ns: ns, username: ns + "-client", password: "bench-" + ns, h: newHouseholds(ns, mpanPrefix)}
	if err := bootstrap.EnsureOrganisation(ctx, b.c, bootstrap.Organisation{
		Namespace: ns, Username: o.username, Password: o.password,
		Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents,
			flexv1.RoleFlexEventsWrite, flexv1.RolePricesWrite},
	}); err != nil {
		return nil, err
	}
	o.api = &apiClient{base: b.mgr.apiURL, http: b.http, username: o.username, password: o.password}
	// The API client reaches the manager's cache a moment after it is created.
	return o, probe.Retry(ctx, 30*time.Second, 200*time.Millisecond, func() error { return o.api.login(ctx) })
}

// namespace creates a plain organisation namespace for objects written directly.
func (b *bench) namespace(ctx context.Context, ns string) error {
	return b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: ns, Labels: map[string]string{flexv1.OrganisationLabel: ns}}})
}

// freePorts finds n free loopback ports. They are released before use, so another process
// could take one in between; on this bench's scale of things that is a risk worth taking.
func freePorts(n int) ([]int, error) {
	var ports []int
	var listeners []net.Listener
	defer func() {
		for _, l := range listeners {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		listeners = append(listeners, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// firstLine keeps error bodies short in messages.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}
