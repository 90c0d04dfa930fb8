// Command manager runs Flexsite: the Site, Asset and Enrolment controllers and the REST
// REST API, in one process. Against a cluster it uses the kubeconfig (--kubeconfig, $KUBECONFIG)
// or in-cluster config, with leader election for the controllers; with --embedded it first
// starts a local control plane (etcd + kube-apiserver) and bootstraps a demo organisation.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/embedded"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/schedulestore"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/validation"
	admission "github.com/flexsite/flexsite/webhook"
)

// defaultDemoPassword is the embedded demo client's password when FLEXSITE_DEMO_PASSWORD is
// not set. It is for a developer's machine only: --embedded never runs against a cluster.
const defaultDemoPassword = "flexsite-demo"

type options struct {
	apiAddr, metricsAddr, probeAddr string
	leaderElect                     bool
	tier                            string
	shardSet                        bool // --shard was given
	shard, sharder                  bool
	shardName                       string
	sharderWebhookURL               string
	sharderWebhookCAFile            string
	embedded                        bool
	binDir, crdDir, rulesDir        string
	dataDir, kubeconfigOut          string
	webhookDir                      string
	webhookHost, webhookCertDir     string
	webhookPort                     int
	pprofAddr                       string
	metricsSecure                   bool
	metricsCertDir                  string
	trustedProxies                  []netip.Prefix
	pprofAllowRemote                bool
	installRules                    bool
	tokenKeysSecret                 string
	bankKeysSecret                  string
	meterRefKeysSecret              string
	meterRefKeyRotation             time.Duration
	embeddedMeterPoints             int
	organisationSecretsRole         string
	serviceAccount                  string
	controllersServiceAccount       string
	notificationAllow               []netip.Prefix
	providerAllow                   []netip.Prefix
	notificationCAFile              string
	rewards                         server.RewardPolicy
	limits                          server.Limits
	meterBudgets                    server.MeterBudgets
	maxSubscriptions                int
	concurrency                     int
	backgroundShare                 float64
	mail                            mailOptions
	database                        databaseOptions
}

func main() {
	var o options
	flag.StringVar(&o.apiAddr, "api-addr", envOr("FLEXSITE_API_ADDR", "127.0.0.1:8080"),
		"Address the REST API listens on ($FLEXSITE_API_ADDR).")
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"Address of the metrics endpoint (e.g. :8443); 0 disables it. With --embedded the default is "+embeddedMetricsAddr+".")
	flag.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve the metrics over HTTPS to scrapers the API server authenticates and authorizes (GET /metrics, "+
			"e.g. the metrics-reader ClusterRole). With --embedded the default is false: plain HTTP.")
	flag.StringVar(&o.metricsCertDir, "metrics-cert-dir", "",
		"With --metrics-secure: directory of the metrics server's tls.crt and tls.key (default: a self-signed certificate).")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", "0",
		"Address of the manager's own /healthz and /readyz; 0 disables it (the REST API serves both too).")
	flag.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so that only one replica reconciles; every replica serves the REST API.")
	flag.StringVar(&o.tier, "tier", tierAll,
		"What this replica runs (docs/scale.md, \"Two tiers\"): \"api\" the REST API, hosted flow, rewards page, OAuth "+
			"callbacks, admission webhooks, notification delivery and the organisation-wide leader work, caching every "+
			"household, with no per-site reconciler; \"controllers\" the per-site reconcilers only, as a shard of "+
			"ControllerRing \""+shards.RingName+"\" (implies --shard) caching only its own households; \"all\" both (one workload).")
	flag.BoolVar(&o.shard, "shard", false,
		"Run the per-site reconcilers as a shard of ControllerRing \""+shards.RingName+"\" (every replica reconciles the sites "+
			"the sharder assigns it, under its own shard lease); organisation-wide work keeps the --leader-elect lease.")
	flag.StringVar(&o.shardName, "shard-name", envOr("POD_NAME", hostname()), "With --shard: this replica's shard (and shard lease) name.")
	flag.BoolVar(&o.sharder, "sharder", false,
		"Run the sharder (its controllers and webhook, on this manager's webhook server) inside the manager, under the "+
			"leader lease; implied by --shard --embedded. In a cluster the chart runs the sharder as its own Deployment.")
	flag.StringVar(&o.sharderWebhookURL, "sharder-webhook-url", "",
		"With --sharder: the URL the API server calls the sharder's webhook at (with --embedded: the local webhook server).")
	flag.StringVar(&o.sharderWebhookCAFile, "sharder-webhook-ca-file", "",
		"With --sharder: the CA (PEM) of the webhook server's certificate (with --embedded: the local one's).")
	flag.BoolVar(&o.embedded, "embedded", false,
		"Start a local control plane (etcd + kube-apiserver) and a demo organisation, for development.")
	flag.StringVar(&o.binDir, "embedded-bin-dir", "bin/k8s/1.37.1",
		"With --embedded: directory of the etcd and kube-apiserver binaries (hack/ensure-k8s-binaries.sh).")
	flag.StringVar(&o.crdDir, "embedded-crd-dir", "config/crd/bases", "With --embedded: CRDs to install.")
	flag.StringVar(&o.dataDir, "embedded-data-dir", "bin/embedded/etcd",
		"With --embedded: etcd data directory, kept between runs; empty for a throwaway one.")
	flag.StringVar(&o.webhookDir, "embedded-webhook-dir", "config/webhook",
		"With --embedded: admission webhook configurations to install (empty: none).")
	flag.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the admission webhook server (TLS).")
	flag.StringVar(&o.webhookHost, "webhook-host", "", "Address the admission webhook server binds to (default: all).")
	flag.StringVar(&o.webhookCertDir, "webhook-cert-dir", "",
		"Directory of the webhook server's tls.crt and tls.key (default /tmp/k8s-webhook-server/serving-certs, e.g. from cert-manager).")
	flag.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address of the pprof endpoints, on the loopback interface (e.g. 127.0.0.1:6060); empty disables them.")
	flag.BoolVar(&o.pprofAllowRemote, "pprof-allow-remote", false,
		"Let --pprof-bind-address listen beyond the loopback interface. pprof has no authentication: put it behind some.")
	flag.IntVar(&o.embeddedMeterPoints, "embedded-meter-points", 3000,
		"With --embedded: how many synthetic meter points to load into an empty meter register (0: none), so that "+
			"a meter search finds some at the samples' postcodes (SW1A 1AA, M1 1AE). Never without --embedded.")
	flag.StringVar(&o.kubeconfigOut, "embedded-kubeconfig", "bin/embedded/kubeconfig",
		"With --embedded: where to write the admin kubeconfig for kubectl.")
	flag.BoolVar(&o.installRules, "install-default-rules", false,
		"Create the default Propositions and AssetModels of --rules-dir that do not exist yet (always on with --embedded).")
	flag.StringVar(&o.rulesDir, "rules-dir", "config/rules", "Directory of the default Propositions and AssetModels.")
	flag.StringVar(&o.tokenKeysSecret, "token-keys-secret", envOr("POD_NAMESPACE", "flexsite-system")+"/flexsite-token-keys",
		"namespace/name of the Secret holding the token signing keys (created with a fresh key if missing).")
	flag.StringVar(&o.meterRefKeysSecret, "meter-ref-keys-secret", meterpoints.DefaultKeysSecret,
		"name of the Secret, in the token keys' namespace, holding the keys that seal the meter references "+
			"a meter search answers (created with a fresh key if missing; docs/operations.md for rotation).")
	flag.DurationVar(&o.meterRefKeyRotation, "meter-ref-key-rotation", meterpoints.DefaultKeyRotation,
		"How often a fresh key seals the meter references (a retired key is removed once every reference it sealed "+
			"has expired; 0: no fresh key is made, retired keys are still removed).")
	flag.StringVar(&o.organisationSecretsRole, "organisation-secrets-role", bootstrap.DefaultOrganisationSecretsRole,
		"ClusterRole of the Secrets verbs the manager binds itself to in every organisation's namespace (it may bind no other).")
	flag.StringVar(&o.serviceAccount, "service-account", os.Getenv("POD_SERVICE_ACCOUNT"),
		"the manager's ServiceAccount (in the token keys' namespace), which organisations' RoleBindings name; "+
			"empty: none are made (the manager then needs its Secrets access some other way, as with --embedded).")
	flag.StringVar(&o.controllersServiceAccount, "controllers-service-account", "",
		"With --tier=api: the controller tier's ServiceAccount (in the token keys' namespace), which organisations' "+
			"RoleBindings name beside --service-account (its device connections' tokens are the organisations' Secrets).")
	flag.StringVar(&o.bankKeysSecret, "bank-keys-secret", pagestore.DefaultKeysSecret,
		"name of the Secret, in the token keys' namespace, holding the keys that seal bank details "+
			"(created with a fresh key if missing; docs/operations.md for rotation).")
	flag.Int64Var(&o.rewards.MinimumWithdrawalPence, "min-withdrawal-pence", 1000,
		"Smallest balance, in pence, a household may withdraw.")
	flag.IntVar(&o.rewards.WithdrawalMinWaitDays, "withdrawal-min-wait-days", 30,
		"Days after its first reward before a household may withdraw.")
	flag.IntVar(&o.concurrency, "concurrency", controllers.DefaultConcurrency, "Objects of one kind reconciled at once.")
	flag.Float64Var(&o.backgroundShare, "background-share", priority.DefaultShare,
		"Share of the time (0-1] a catalogue change's re-evaluations may hold the API server while REST writes are in flight.")
	o.limits = server.DefaultLimits
	flag.Float64Var(&o.limits.PerClient.Rate, "rate-limit-per-client", o.limits.PerClient.Rate,
		"Requests per second one API client (or end user) may make; 0 disables the limit.")
	flag.IntVar(&o.limits.PerClient.Burst, "rate-limit-burst", o.limits.PerClient.Burst, "Burst of the per-client rate limit.")
	flag.Float64Var(&o.limits.CallbackFailuresPerAddress.Rate, "callback-failures-rate", o.limits.CallbackFailuresPerAddress.Rate,
		"Failed OAuth callbacks (a state not in progress) per second one client address may make once its burst is spent; "+
			"0 disables the limit.")
	flag.IntVar(&o.limits.CallbackFailuresPerAddress.Burst, "callback-failures-burst", o.limits.CallbackFailuresPerAddress.Burst,
		"Failed OAuth callbacks one client address may make at once before 429.")
	o.meterBudgets = server.DefaultMeterBudgets
	flag.Int64Var(&o.meterBudgets.OrganisationPerHour, "meter-lookups-per-hour", o.meterBudgets.OrganisationPerHour,
		"Meter register lookups (search, by reference, MPAN or address) one organisation may make in a UTC hour, "+
			"every replica and client together; past it, 429 with Retry-After. 0 disables.")
	flag.Int64Var(&o.meterBudgets.OrganisationPerDay, "meter-lookups-per-day", o.meterBudgets.OrganisationPerDay,
		"Meter register lookups one organisation may make in a UTC day; 0 disables.")
	flag.Int64Var(&o.meterBudgets.HouseholdPerHour, "meter-searches-per-household-hour", o.meterBudgets.HouseholdPerHour,
		"Meter searches one household may make in the hosted flow in a UTC hour, besides its organisation's budget; 0 disables.")
	flag.IntVar(&o.maxSubscriptions, "max-subscriptions", validation.DefaultMaxSubscriptions,
		"Notification subscriptions one organisation may have (REST and kubectl alike); at least 1.")
	zapOpts := zap.Options{Development: true}
	flag.Func("notification-allow-cidrs", "Comma-separated networks (CIDR) notifications may be delivered to although "+
		"they are not public (loopback, private, link-local, CGNAT, documentation, the other IANA special-purpose ranges "+
		"and IPv6 forms carrying them). With --embedded the default is loopback only.",
		func(v string) (err error) {
			o.notificationAllow, err = events.ParseCIDRs(strings.Split(v, ","))
			return err
		})
	flag.Func("provider-allow-cidrs", "Comma-separated networks (CIDR) device providers (DeviceProvider URLs) may be "+
		"called at although they are not public; a provider on a loopback address may then also be http://. "+
		"Default: --notification-allow-cidrs's (with --embedded, loopback only).",
		func(v string) (err error) {
			o.providerAllow, err = events.ParseCIDRs(strings.Split(v, ","))
			return err
		})
	flag.StringVar(&o.notificationCAFile, "notification-ca-file", "",
		"PEM file of CA certificates trusted for notification receivers, beside the system's (a private CA).")
	flag.Func("trusted-proxies", "Comma-separated networks (CIDR) of the reverse proxies in front of the REST API: "+
		"only from them is the client's address taken from X-Forwarded-For/Forwarded (default: none).", func(v string) error {
		for _, cidr := range strings.Split(v, ",") {
			if cidr = strings.TrimSpace(cidr); cidr == "" {
				continue
			}
			p, err := netip.ParsePrefix(cidr)
			if err != nil {
				return fmt.Errorf("not a network: %q", cidr)
			}
			o.trustedProxies = append(o.trustedProxies, p.Masked())
		}
		return nil
	})
	o.mail.bind(flag.CommandLine)
	o.database.bind(flag.CommandLine)
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { o.shardSet = o.shardSet || f.Name == "shard" })
	if o.tier == tierControllers && !o.shardSet {
		o.shard = true // the controller tier is made of shards
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if o.embedded {
		// A developer's machine: metrics on by default, in plain HTTP on the loopback interface
		// (there is no cluster whose API server could authenticate a scraper).
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["metrics-bind-address"] {
			o.metricsAddr = embeddedMetricsAddr
		}
		if !set["metrics-secure"] {
			o.metricsSecure = false
		}
	}

	if err := run(ctrl.SetupSignalHandler(), o); err != nil {
		ctrl.Log.Error(err, "manager stopped")
		os.Exit(1)
	}
}

// validate refuses flags that cannot work together, before anything starts.
func (o options) validate() error {
	if err := checkPprofAddr(o.pprofAddr, o.pprofAllowRemote); err != nil {
		return err
	}
	if err := o.validateTier(); err != nil {
		return err
	}
	if o.sharder && !o.shard {
		return errors.New("--sharder runs the sharder for this manager's shards: it needs --shard")
	}
	if o.maxSubscriptions < 1 {
		return fmt.Errorf("--max-subscriptions must be at least 1, not %d", o.maxSubscriptions)
	}
	if o.meterBudgets.OrganisationPerHour < 0 || o.meterBudgets.OrganisationPerDay < 0 || o.meterBudgets.HouseholdPerHour < 0 {
		return errors.New("--meter-lookups-per-hour, --meter-lookups-per-day and --meter-searches-per-household-hour " +
			"must not be negative (0 disables)")
	}
	if o.backgroundShare <= 0 || o.backgroundShare > 1 {
		return fmt.Errorf("--background-share must be in (0, 1], not %g", o.backgroundShare)
	}
	return nil
}

// The tiers (--tier).
const (
	tierAll         = "all"
	tierAPI         = "api"
	tierControllers = "controllers"
)

// validateTier refuses a tier that is none of the three, and flags that contradict the tier.
func (o options) validateTier() error {
	switch o.tier {
	case tierAll:
		return nil
	case tierAPI:
		if o.shard || o.sharder {
			return errors.New("--tier=api runs no per-site reconciler: --shard and --sharder are the controller tier's " +
				"(--tier=controllers), or --tier=all's")
		}
		return nil
	case tierControllers:
		switch {
		case !o.shard:
			return errors.New("--tier=controllers runs the per-site reconcilers as shards of the ring: it cannot have --shard=false")
		case o.sharder:
			return errors.New("--tier=controllers takes no leader lease, which the sharder runs under: run the sharder " +
				"as its own Deployment (the chart does), or use --tier=all")
		case o.embedded:
			return errors.New("--embedded is one process for development: it needs --tier=all (the default)")
		case o.installRules:
			return errors.New("--install-default-rules is the API tier's work (--tier=api or all), not the controller tier's")
		}
		return nil
	}
	return fmt.Errorf("--tier must be one of %s, %s or %s, not %q", tierAll, tierAPI, tierControllers, o.tier)
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

func run(ctx context.Context, o options) error {
	log := ctrl.Log.WithName("setup")
	if err := o.validate(); err != nil {
		return err
	}
	var cfg *rest.Config
	if !o.embedded && o.database.url == "" && os.Getenv("FLEXSITE_DATABASE_URL") == "" {
		return errNoDatabase // before anything starts
	}
	webhookOpts := webhook.Options{Host: o.webhookHost, Port: o.webhookPort, CertDir: o.webhookCertDir}
	var caData []byte // the embedded webhook server's CA (the in-process sharder's webhook needs it)
	if o.embedded {
		log.Info("starting the embedded control plane", "binaries", o.binDir, "data", o.dataDir)
		cp, err := embedded.Start(embedded.Options{BinaryDir: o.binDir, CRDDir: o.crdDir, DataDir: o.dataDir,
			KubeconfigPath: o.kubeconfigOut, WebhookDir: o.webhookDir})
		if err != nil {
			return err
		}
		defer func() {
			log.Info("stopping the embedded control plane")
			if err := cp.Stop(); err != nil {
				log.Error(err, "stopping the embedded control plane")
			}
		}()
		cfg = cp.Config
		webhookOpts = webhook.Options{Host: cp.Webhook.Host, Port: cp.Webhook.Port, CertDir: cp.Webhook.CertDir}
		caData = cp.Webhook.CAData
		kubeconfig, _ := filepath.Abs(o.kubeconfigOut)
		fmt.Printf("\nEmbedded control plane is up. In another shell:\n    export KUBECONFIG=%s\n\n", kubeconfig)
	} else {
		var err error
		if cfg, err = ctrl.GetConfig(); err != nil {
			return fmt.Errorf("no cluster to talk to (use --kubeconfig, $KUBECONFIG, in-cluster config, or --embedded): %w", err)
		}
	}

	pool, closeDB, err := openDatabase(ctx, o)
	if err != nil {
		return err
	}
	defer closeDB()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(flexv1.AddToScheme(scheme))
	utilruntime.Must(shards.AddToScheme(scheme))

	keysNS, keysName, ok := strings.Cut(o.tokenKeysSecret, "/")
	if !ok {
		return fmt.Errorf("--token-keys-secret must be namespace/name, not %q", o.tokenKeysSecret)
	}
	cacheOpts, apiLease, err := o.tierOptions(cfg, keysNS)
	if err != nil {
		return err
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
		return fmt.Errorf("creating the manager: %w", err)
	}
	// Catalogue fan-outs yield to the REST requests that write (one Gate for both).
	background := priority.NewGate(max(o.concurrency, 1), priority.Options{Share: o.backgroundShare})
	openADR := &openADRNotifications{}
	lm, err := setupWork(ctx, mgr, o, pool, background, keysNS, webhookOpts, caData, openADR)
	if err != nil {
		return err
	}
	if o.tier == tierControllers {
		// No door: the probes are the manager's own (--health-probe-bind-address).
		if err := addProbes(mgr, nil); err != nil {
			return err
		}
		log.Info("starting the manager", "tier", o.tier, "shard", o.shardName)
		return mgr.Start(ctx)
	}
	if err := admission.Setup(mgr, admission.Options{MaxSubscriptions: o.maxSubscriptions}); err != nil {
		return fmt.Errorf("setting up the webhooks: %w", err)
	}

	if o.embedded || o.installRules {
		if err := installDefaults(ctx, cfg, scheme, o); err != nil {
			return err
		}
	}
	if o.embedded {
		// The demo organisation's APIClient must pass the APIClient admission webhook, which
		// this manager serves: it is created once the webhook server is up.
		if err := lm.Add(runnableFunc(func(ctx context.Context) error {
			return bootstrapDemo(ctx, mgr.GetClient(), mgr.GetWebhookServer().StartedChecker())
		})); err != nil {
			return err
		}
	}

	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNS, keysName)
	if err := keys.Ensure(ctx); err != nil {
		return fmt.Errorf("loading the token signing keys from %s: %w", o.tokenKeysSecret, err)
	}

	bankKeys := sealing.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNS, o.bankKeysSecret, "bank details")
	if err := bankKeys.Ensure(ctx); err != nil {
		return fmt.Errorf("loading the bank details keys from %s/%s: %w", keysNS, o.bankKeysSecret, err)
	}

	meterRefKeys := sealing.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), keysNS, o.meterRefKeysSecret, "meter references")
	if err := meterRefKeys.Ensure(ctx); err != nil {
		return fmt.Errorf("loading the meter reference keys from %s/%s: %w", keysNS, o.meterRefKeysSecret, err)
	}

	// Every replica re-reads the meter reference keys every minute; whichever finds a rotation
	// or a removal due writes it (docs/operations.md, "Rotating the meter reference keys").
	if err := lm.Add(&sealing.Rotator{Ring: meterRefKeys, Rotation: meterpoints.KeyRotation(o.meterRefKeyRotation),
		Failed: func(err error) { log.Error(err, "rotating the meter reference keys; trying again in a minute") }}); err != nil {
		return err
	}
	if err := setupServer(lm, o, keys, bankKeys, meterRefKeys, keysNS, background, pool, openADR); err != nil {
		return err
	}

	if url := metricsURL(o.metricsAddr, o.metricsSecure); url != "" {
		log.Info("metrics: "+url, "secure", o.metricsSecure)
		if o.embedded {
			fmt.Printf("metrics: %s\n\n", url)
		}
	}
	log.Info("starting the manager")
	return mgr.Start(ctx)
}

// setupServer adds the HTTP listener (every door: REST API, hosted flow, rewards page), the
// rewards link sweeper, and the health and readiness checks: ready once the caches the
// doors read through have synced.
func setupServer(mgr ctrl.Manager, o options, keys *auth.KeyRing, bankKeys *sealing.KeyRing, meterRefKeys *sealing.KeyRing,
	keysNS string, background *priority.Gate,
	pool *pgxpool.Pool, openADR *openADRNotifications) error {
	var synced atomic.Bool
	mailer, err := o.mail.mailer(o.embedded, mgr.GetAPIReader(), ctrl.Log.WithName("mail"))
	if err != nil {
		return err
	}
	srv := server.NewServer(server.Config{
		Mailer:           mailer,
		HostedNamespace:  keysNS,
		BankKeys:         bankKeys,
		MeterRefKeys:     meterRefKeys,
		PublicURL:        o.mail.publicURL,
		Addr:             o.apiAddr,
		Ready:            synced.Load,
		Log:              ctrl.Log.WithName("api"),
		Cache:            mgr.GetCache(),
		APIReader:        mgr.GetAPIReader(),
		Client:           mgr.GetClient(),
		Interactive:      background,
		Issuer:           auth.NewIssuer(keys, time.Now),
		Authenticator:    auth.NewAuthenticator(mgr.GetCache(), mgr.GetAPIReader()),
		Rewards:          o.rewards,
		Limits:           o.limits,
		MeterBudgets:     o.meterBudgets,
		MaxSubscriptions: o.maxSubscriptions,
		TrustedProxies:   o.trustedProxies,
		// The same policy as the deliverer's: a subscription it would never deliver to is refused.
		NotificationPolicy: events.AddressPolicy{Allow: o.notificationAllowed()},
		DB:                 pool,
		ProviderPolicy:     ptr(o.providerPolicy()),
	})
	openADR.srv.Store(srv)
	if err := mgr.Add(srv); err != nil {
		return err
	}
	// Rewards links nobody can use any more are deleted in the background (the leader's).
	if err := mgr.Add(srv.LinkSweeper()); err != nil {
		return err
	}
	// Bank details older versions kept in Secrets move into the database, once (the leader's).
	if err := mgr.Add(srv.LegacyImporter()); err != nil {
		return err
	}
	return addProbes(mgr, &synced)
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

// setupWork adds the reconcilers, the notification deliverer and the readings partitions. It
// answers where what needs a leader goes: the manager itself, or, in a shard (--shard), the
// group that runs under the leader lease.
func setupWork(ctx context.Context, mgr manager.Manager, o options, pool *pgxpool.Pool, background *priority.Gate,
	keysNS string, webhookOpts webhook.Options, caData []byte, openADR *openADRNotifications) (manager.Manager, error) {
	var replica *shards.Replica
	lm := mgr
	if o.shard {
		var err error
		if replica, lm, err = joinRing(ctx, mgr, o, keysNS, webhookOpts, caData); err != nil {
			return nil, err
		}
	}
	work := controllers.AllWork
	switch o.tier {
	case tierAPI:
		work = controllers.OrgWideWork
	case tierControllers:
		work = controllers.PerSiteWork
	}
	if err := controllers.SetupWithManager(ctx, lm, controllers.Options{Concurrency: o.concurrency, Background: background,
		Work: work, Shard: replica, DB: pool, Devices: deviceauth.Dialer{Policy: o.providerPolicy(), SecretNamespace: keysNS},
		OrganisationAccess: bootstrap.OrganisationAccess{ClusterRole: o.organisationSecretsRole,
			ServiceAccountNamespace: keysNS, ServiceAccountName: o.serviceAccount,
			ControllersServiceAccountName: o.controllersServiceAccount},
		PublicURL: callbackURL(o.mail.publicURL, o.apiAddr)}); err != nil {
		return nil, fmt.Errorf("setting up the controllers: %w", err)
	}
	if o.tier == tierControllers {
		return mgr, nil // delivery and the partitions are the API tier's
	}
	if err := setupNotifier(ctx, lm, o, pool, openADR); err != nil {
		return nil, err
	}
	// The readings partitions are made ahead by the leader, on start and hourly; a request
	// never makes one. The same round deletes what is past its retention (docs/operations.md,
	// "Retention").
	if err := lm.Add(&db.ReadingPartitions{Pool: pool, Back: readings.PartitionsBack, Ahead: readings.PartitionsAhead,
		Expire: []db.Expiry{
			{Name: "ev_schedules", Delete: (&schedulestore.Store{Pool: pool}).DeleteExpired},
			{Name: "asset_events", Delete: (&asseteventstore.Store{Pool: pool}).DeleteExpired},
			{Name: "dispatch_status_changes", Delete: (&dispatchstore.Store{Pool: pool}).DeleteExpiredStatusChanges},
		},
		Log: ctrl.Log.WithName("readings-partitions")}); err != nil {
		return nil, err
	}
	return lm, nil
}

// leaderElectionID is the lease organisation-wide work runs under (the whole manager's,
// without shards).
const leaderElectionID = "flexsite-manager.flexsite.io"

// joinRing makes the manager a shard of the ring, and, with --sharder (implied with
// --embedded, where no other sharder can run), runs the sharder in it. It answers the replica
// and the manager that what needs a leader is added to.
func joinRing(ctx context.Context, mgr manager.Manager, o options, leaseNS string, wh webhook.Options,
	caData []byte) (*shards.Replica, manager.Manager, error) {
	id := ""
	if o.leaderElect {
		id = leaderElectionID
	}
	replica, err := shards.Join(mgr, shards.Options{Shard: o.shardName, Namespace: leaseNS, LeaderElectionID: id,
		PerSiteOnly: o.tier == tierControllers})
	if err != nil {
		return nil, nil, err
	}
	if o.tier == tierControllers {
		return replica, mgr, nil // no organisation-wide work (validate refuses --sharder)
	}
	if !o.sharder && !o.embedded {
		return replica, replica.OrgWide, nil
	}
	url := o.sharderWebhookURL
	if url == "" && o.embedded {
		url = "https://" + net.JoinHostPort(wh.Host, strconv.Itoa(wh.Port)) + "/"
	}
	if o.sharderWebhookCAFile != "" {
		if caData, err = os.ReadFile(o.sharderWebhookCAFile); err != nil {
			return nil, nil, fmt.Errorf("--sharder-webhook-ca-file: %w", err)
		}
	}
	if url == "" || len(caData) == 0 {
		return nil, nil, errors.New("--sharder needs --sharder-webhook-url and --sharder-webhook-ca-file (they default only with --embedded)")
	}
	err = shards.AddSharder(ctx, replica.OrgWide, shards.SharderOptions{
		Webhook: admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caData}})
	return replica, replica.OrgWide, err
}

// hostname is the machine's name ("" if it has none to tell).
func hostname() string {
	h, _ := os.Hostname()
	return h
}

// notificationAllowed are the ranges deliveries may reach although not public: the flag's, or
// with the embedded control plane loopback only, so that a developer can try a receiver on
// their own machine.
func (o options) notificationAllowed() []netip.Prefix {
	if o.embedded && o.notificationAllow == nil {
		return []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	return o.notificationAllow
}

// providerPolicy is what calls to device providers may reach: --provider-allow-cidrs, else
// the notifications' allow-list (with --embedded, loopback).
func (o options) providerPolicy() events.AddressPolicy {
	if o.providerAllow != nil {
		return events.AddressPolicy{Allow: o.providerAllow}
	}
	return events.AddressPolicy{Allow: o.notificationAllowed()}
}

func ptr[T any](v T) *T { return &v }

// setupNotifier adds the notification deliverer, on the outbox in the database (every
// replica delivers); the embedded control plane allows delivery to loopback only, so that a
// developer can try a receiver on their own machine.
func setupNotifier(ctx context.Context, mgr ctrl.Manager, o options, pool *pgxpool.Pool, openADR *openADRNotifications) error {
	if pool == nil {
		return nil // no outbox: nothing to deliver
	}
	allow := o.notificationAllowed()
	roots, err := notificationRoots(o.notificationCAFile)
	if err != nil {
		return err
	}
	if err := (&delivery.Deliverer{Store: &outboxstore.Store{Pool: pool}, Policy: events.AddressPolicy{Allow: allow},
		RootCAs: roots, OpenADR: openADR}).
		SetupWithManager(ctx, mgr); err != nil {
		return fmt.Errorf("setting up the notification deliverer: %w", err)
	}
	return nil
}

// openADRNotifications hands the deliverer the server's shape of OpenADR notifications (the
// OpenADR door's), once the server is built: the deliverer is set up first.
type openADRNotifications struct{ srv atomic.Pointer[server.Server] }

func (n *openADRNotifications) Notification(ctx context.Context, sub *flexv1.Subscription, ev *events.Event) ([]byte, bool, error) {
	srv := n.srv.Load()
	if srv == nil {
		return nil, false, errors.New("the server is not built yet")
	}
	return srv.OpenADRNotifications().Notification(ctx, sub, ev)
}

// installDefaults creates the default rules and, in embedded mode, the manager's namespace.
func installDefaults(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o options) error {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return err
	}
	n, err := bootstrap.ApplyDefaults(ctx, c, o.rulesDir)
	if err != nil {
		return fmt.Errorf("installing the default rules: %w", err)
	}
	ctrl.Log.WithName("setup").Info("default rules installed", "created", n, "from", o.rulesDir)
	if !o.embedded {
		return nil
	}
	// The manager's own namespace holds the token signing keys.
	keysNS, _, _ := strings.Cut(o.tokenKeysSecret, "/")
	return client.IgnoreAlreadyExists(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: keysNS}}))
}

// bootstrapDemo creates the embedded setup's demo organisation once webhookUp says the
// admission webhook server accepts connections, retrying while the API server cannot reach
// it yet.
func bootstrapDemo(ctx context.Context, c client.Client, webhookUp healthz.Checker) error {
	password := envOr("FLEXSITE_DEMO_PASSWORD", defaultDemoPassword)
	org := bootstrap.DemoOrganisation(password)
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if last = webhookUp(nil); last == nil {
			last = bootstrap.EnsureOrganisation(ctx, c, org)
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("bootstrapping the demo organisation: %w (last: %w)", err, last)
	}
	ctrl.Log.WithName("setup").Info("demo organisation ready", "namespace", "demo", "username", "demo",
		"password", "$FLEXSITE_DEMO_PASSWORD or the documented default")
	return nil
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

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// notificationRoots is the system's CA pool plus the certificates of file (nil: the system's).
func notificationRoots(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("--notification-ca-file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--notification-ca-file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// callbackURL is where asset controllers reach the REST API for the dispatches' status
// callbacks: --public-url, else the REST API's own address over http (a wildcard host as the
// loopback), which only an asset controller on the same machine reaches: set --public-url
// wherever they run elsewhere.
func callbackURL(publicURL, apiAddr string) string {
	if publicURL != "" {
		return publicURL
	}
	host, port, err := net.SplitHostPort(apiAddr)
	if err != nil {
		return ""
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
