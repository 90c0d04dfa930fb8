package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5/pgxpool"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/embedded"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/shards"
)

// leaderElectionID is the lease organisation-wide work runs under (the whole manager's,
// without shards).
const leaderElectionID = "flexsite-manager.flexsite.io"

// wiring is what run builds before the tiers add their work: the manager, and what it and
// the tiers' setups share.
type wiring struct {
	o                options
	cfg              *rest.Config
	scheme           *runtime.Scheme
	mgr              manager.Manager
	pool             *pgxpool.Pool
	keysNS, keysName string // --token-keys-secret
	// Catalogue fan-outs yield to the REST requests that write (one Gate for both).
	background *priority.Gate
	// notifier is the notification deliverer (the API tier's, with a database; nil
	// otherwise): the FlexEvent reconciler writes its dispatches' delivery rows for the
	// subscriptions it names (setupNotifier sets it up).
	notifier *delivery.Deliverer
}

// run wires the manager for the tier (--tier, docs/scale.md "Two tiers") and runs it: what
// every tier does, then the controller tier's (the ring, the per-site reconcilers) or the API
// tier's (doors, notifications, organisation-wide leader work) additions.
func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	if err := o.validate(); err != nil {
		return err
	}
	if !o.embedded && o.database.url == "" && os.Getenv("FLEXSITE_DATABASE_URL") == "" {
		return errNoDatabase // before anything starts
	}
	cfg, webhookOpts, caData, stop, err := connect(o)
	if err != nil {
		return err
	}
	defer stop()
	pool, closeDB, err := openDatabase(ctx, o)
	if err != nil {
		return err
	}
	defer closeDB()
	w, err := newManager(o, cfg, webhookOpts, pool)
	if err != nil {
		return err
	}
	if o.tier != tierControllers && pool != nil {
		w.notifier = &delivery.Deliverer{Store: &outboxstore.Store{Pool: pool}}
	}
	lm, err := setupReconcilers(ctx, w, webhookOpts, caData)
	if err != nil {
		return err
	}
	if o.tier == tierControllers {
		// No door: the probes are the manager's own (--health-probe-bind-address).
		if err := addProbes(w.mgr, nil); err != nil {
			return err
		}
		log.Info("starting the manager", "tier", o.tier, "shard", o.shardName)
		return w.mgr.Start(ctx)
	}
	if err := setupAPITier(ctx, w, lm); err != nil {
		return err
	}
	if url := metricsURL(o.metricsAddr, o.metricsSecure); url != "" {
		log.Info("metrics: "+url, "secure", o.metricsSecure)
		if o.embedded {
			fmt.Printf("metrics: %s\n\n", url)
		}
	}
	log.Info("starting the manager")
	return w.mgr.Start(ctx)
}

// connect answers the cluster to talk to, and its admission webhook server's options: with
// --embedded a local control plane it starts (stop stops it), else the kubeconfig's or the
// in-cluster one. caData is the embedded webhook server's CA (the in-process sharder's
// webhook needs it).
func connect(o options) (cfg *rest.Config, webhookOpts webhook.Options, caData []byte, stop func(), err error) {
	webhookOpts = webhook.Options{Host: o.webhookHost, Port: o.webhookPort, CertDir: o.webhookCertDir}
	if !o.embedded {
		if cfg, err = ctrl.GetConfig(); err != nil {
			return nil, webhookOpts, nil, nil,
				fmt.Errorf("no cluster to talk to (use --kubeconfig, $KUBECONFIG, in-cluster config, or --embedded): %w", err)
		}
		return cfg, webhookOpts, nil, func() {}, nil
	}
	log := ctrl.Log.WithName("setup")
	log.Info("starting the embedded control plane", "binaries", o.binDir, "data", o.dataDir)
	cp, err := embedded.Start(embedded.Options{BinaryDir: o.binDir, CRDDir: o.crdDir, DataDir: o.dataDir,
		KubeconfigPath: o.kubeconfigOut, WebhookDir: o.webhookDir})
	if err != nil {
		return nil, webhookOpts, nil, nil, err
	}
	stop = func() {
		log.Info("stopping the embedded control plane")
		if err := cp.Stop(); err != nil {
			log.Error(err, "stopping the embedded control plane")
		}
	}
	webhookOpts = webhook.Options{Host: cp.Webhook.Host, Port: cp.Webhook.Port, CertDir: cp.Webhook.CertDir}
	kubeconfig, _ := filepath.Abs(o.kubeconfigOut)
	fmt.Printf("\nEmbedded control plane is up. In another shell:\n    export KUBECONFIG=%s\n\n", kubeconfig)
	return cp.Config, webhookOpts, cp.Webhook.CAData, stop, nil
}

// newManager makes the manager every tier runs in, with the tier's cache and leader lease.
func newManager(o options, cfg *rest.Config, webhookOpts webhook.Options, pool *pgxpool.Pool) (*wiring, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flexv1.AddToScheme(scheme))
	utilruntime.Must(shards.AddToScheme(scheme))

	keysNS, keysName, ok := strings.Cut(o.tokenKeysSecret, "/")
	if !ok {
		return nil, fmt.Errorf("--token-keys-secret must be namespace/name, not %q", o.tokenKeysSecret)
	}
	cacheOpts, apiLease, err := o.tierOptions(cfg, keysNS)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme,
		// The cache holds no Secret; the client reads the few the manager needs from the API
		// server, by name, in its own namespace and the organisations'.
		// The reward history is the database's: the cache keeps ledgers without transactions.
		Cache:                  cacheOpts,
		Client:                 index.ClientOptions(),
		Metrics:                metrics.ServerOptions(o.metricsAddr, o.metricsSecure, o.metricsCertDir),
		HealthProbeBindAddress: o.probeAddr,
		WebhookServer:          webhook.NewServer(webhookOpts),
		PprofBindAddress:       o.pprofAddr,
		// A shard holds its two leases itself (shards.Join).
		LeaderElection:                      o.leaderElect && !o.shard,
		LeaderElectionID:                    leaderElectionID,
		LeaderElectionResourceLockInterface: apiLease,
		LeaderElectionReleaseOnCancel:       true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	return &wiring{o: o, cfg: cfg, scheme: scheme, mgr: mgr, pool: pool, keysNS: keysNS, keysName: keysName,
		background: priority.NewGate(max(o.concurrency, 1), priority.Options{Share: o.backgroundShare})}, nil
}

// tierOptions are the tier's cache and, for the API tier, its leader lease. A shard of the
// controller tier caches only its own households (and whole the small kinds every shard
// needs): its memory falls with the number of shards. The API tier's holder identity says it
// runs no per-site reconciler: the controller tier's shards reconcile beside it, and wait only
// for a leader without shards.
func (o options) tierOptions(cfg *rest.Config, leaseNS string) (cache.Options, resourcelock.Interface, error) {
	cacheOpts := index.CacheOptions()
	if o.tier == tierControllers {
		cacheOpts = shards.OwnCache(cacheOpts, o.shardName)
	}
	if o.tier != tierAPI || !o.leaderElect {
		return cacheOpts, nil, nil
	}
	lease, err := shards.APITierLease(cfg, leaseNS, leaderElectionID, o.shardName)
	return cacheOpts, lease, err
}

// addProbes adds the health and readiness checks: ready once the caches have synced (the
// doors read through them; synced is theirs, or nil where there is no door).
func addProbes(mgr ctrl.Manager, synced *atomic.Bool) error {
	if synced == nil {
		synced = &atomic.Bool{}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", func(_ *http.Request) error { return readyErr(synced.Load()) }); err != nil {
		return err
	}
	return mgr.Add(cacheSyncedMarker(mgr.GetCache(), synced))
}

// cacheSyncedMarker sets synced once the cache has synced. Every replica runs it, leader or
// not: in a shard, mgr is the leader's group, and a marker run only there would keep every
// other replica's REST API unready (503) for ever.
func cacheSyncedMarker(c cache.Cache, synced *atomic.Bool) manager.Runnable {
	return everyReplica(func(ctx context.Context) error {
		if c.WaitForCacheSync(ctx) {
			synced.Store(true)
		}
		return nil
	})
}

// everyReplica is a runnable that needs no leader.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }

func (everyReplica) NeedLeaderElection() bool { return false }

type runnableFunc func(context.Context) error

func (f runnableFunc) Start(ctx context.Context) error { return f(ctx) }

func readyErr(ok bool) error {
	if !ok {
		return errors.New("caches not synced")
	}
	return nil
}
