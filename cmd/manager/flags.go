package main

import (
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/validation"
)

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

// bindFlags defines the manager's flags on fs: the options they fill and the log's.
func bindFlags(fs *flag.FlagSet) (*options, *zap.Options) {
	o := &options{}
	fs.StringVar(&o.apiAddr, "api-addr", envOr("FLEXSITE_API_ADDR", "127.0.0.1:8080"),
		"Address the REST API listens on ($FLEXSITE_API_ADDR).")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", "0",
		"Address of the metrics endpoint (e.g. :8443); 0 disables it. With --embedded the default is "+embeddedMetricsAddr+".")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve the metrics over HTTPS to scrapers the API server authenticates and authorizes (GET /metrics, "+
			"e.g. the metrics-reader ClusterRole). With --embedded the default is false: plain HTTP.")
	fs.StringVar(&o.metricsCertDir, "metrics-cert-dir", "",
		"With --metrics-secure: directory of the metrics server's tls.crt and tls.key (default: a self-signed certificate).")
	fs.StringVar(&o.probeAddr, "health-probe-bind-address", "0",
		"Address of the manager's own /healthz and /readyz; 0 disables it (the REST API serves both too).")
	fs.BoolVar(&o.leaderElect, "leader-elect", false,
		"Elect a leader so that only one replica reconciles; every replica serves the REST API.")
	fs.StringVar(&o.tier, "tier", tierAll,
		"What this replica runs (docs/scale.md, \"Two tiers\"): \"api\" the REST API, hosted flow, rewards page, OAuth "+
			"callbacks, admission webhooks, notification delivery and the organisation-wide leader work, caching every "+
			"household, with no per-site reconciler; \"controllers\" the per-site reconcilers only, as a shard of "+
			"ControllerRing \""+shards.RingName+"\" (implies --shard) caching only its own households; \"all\" both (one workload).")
	fs.BoolVar(&o.shard, "shard", false,
		"Run the per-site reconcilers as a shard of ControllerRing \""+shards.RingName+"\" (every replica reconciles the sites "+
			"the sharder assigns it, under its own shard lease); organisation-wide work keeps the --leader-elect lease.")
	fs.StringVar(&o.shardName, "shard-name", envOr("POD_NAME", hostname()), "With --shard: this replica's shard (and shard lease) name.")
	fs.BoolVar(&o.sharder, "sharder", false,
		"Run the sharder (its controllers and webhook, on this manager's webhook server) inside the manager, under the "+
			"leader lease; implied by --shard --embedded. In a cluster the chart runs the sharder as its own Deployment.")
	fs.StringVar(&o.sharderWebhookURL, "sharder-webhook-url", "",
		"With --sharder: the URL the API server calls the sharder's webhook at (with --embedded: the local webhook server).")
	fs.StringVar(&o.sharderWebhookCAFile, "sharder-webhook-ca-file", "",
		"With --sharder: the CA (PEM) of the webhook server's certificate (with --embedded: the local one's).")
	fs.BoolVar(&o.embedded, "embedded", false,
		"Start a local control plane (etcd + kube-apiserver) and a demo organisation, for development.")
	fs.StringVar(&o.binDir, "embedded-bin-dir", "bin/k8s/1.37.1",
		"With --embedded: directory of the etcd and kube-apiserver binaries (hack/ensure-k8s-binaries.sh).")
	fs.StringVar(&o.crdDir, "embedded-crd-dir", "config/crd/bases", "With --embedded: CRDs to install.")
	fs.StringVar(&o.dataDir, "embedded-data-dir", "bin/embedded/etcd",
		"With --embedded: etcd data directory, kept between runs; empty for a throwaway one.")
	fs.StringVar(&o.webhookDir, "embedded-webhook-dir", "config/webhook",
		"With --embedded: admission webhook configurations to install (empty: none).")
	fs.IntVar(&o.webhookPort, "webhook-port", 9443, "Port of the admission webhook server (TLS).")
	fs.StringVar(&o.webhookHost, "webhook-host", "", "Address the admission webhook server binds to (default: all).")
	fs.StringVar(&o.webhookCertDir, "webhook-cert-dir", "",
		"Directory of the webhook server's tls.crt and tls.key (default /tmp/k8s-webhook-server/serving-certs, e.g. from cert-manager).")
	fs.StringVar(&o.pprofAddr, "pprof-bind-address", "",
		"Address of the pprof endpoints, on the loopback interface (e.g. 127.0.0.1:6060); empty disables them.")
	fs.BoolVar(&o.pprofAllowRemote, "pprof-allow-remote", false,
		"Let --pprof-bind-address listen beyond the loopback interface. pprof has no authentication: put it behind some.")
	fs.IntVar(&o.embeddedMeterPoints, "embedded-meter-points", 3000,
		"With --embedded: how many synthetic meter points to load into an empty meter register (0: none), so that "+
			"a meter search finds some at the samples' postcodes (SW1A 1AA, M1 1AE). Never without --embedded.")
	fs.StringVar(&o.kubeconfigOut, "embedded-kubeconfig", "bin/embedded/kubeconfig",
		"With --embedded: where to write the admin kubeconfig for kubectl.")
	fs.BoolVar(&o.installRules, "install-default-rules", false,
		"Create the default Propositions and AssetModels of --rules-dir that do not exist yet (always on with --embedded).")
	fs.StringVar(&o.rulesDir, "rules-dir", "config/rules", "Directory of the default Propositions and AssetModels.")
	fs.StringVar(&o.tokenKeysSecret, "token-keys-secret", envOr("POD_NAMESPACE", "flexsite-system")+"/flexsite-token-keys",
		"namespace/name of the Secret holding the token signing keys (created with a fresh key if missing).")
	fs.StringVar(&o.meterRefKeysSecret, "meter-ref-keys-secret", meterpoints.DefaultKeysSecret,
		"name of the Secret, in the token keys' namespace, holding the keys that seal the meter references "+
			"a meter search answers (created with a fresh key if missing; docs/operations.md for rotation).")
	fs.DurationVar(&o.meterRefKeyRotation, "meter-ref-key-rotation", meterpoints.DefaultKeyRotation,
		"How often a fresh key seals the meter references (a retired key is removed once every reference it sealed "+
			"has expired; 0: no fresh key is made, retired keys are still removed).")
	fs.StringVar(&o.organisationSecretsRole, "organisation-secrets-role", bootstrap.DefaultOrganisationSecretsRole,
		"ClusterRole of the Secrets verbs the manager binds itself to in every organisation's namespace (it may bind no other).")
	fs.StringVar(&o.serviceAccount, "service-account", os.Getenv("POD_SERVICE_ACCOUNT"),
		"the manager's ServiceAccount (in the token keys' namespace), which organisations' RoleBindings name; "+
			"empty: none are made (the manager then needs its Secrets access some other way, as with --embedded).")
	fs.StringVar(&o.controllersServiceAccount, "controllers-service-account", "",
		"With --tier=api: the controller tier's ServiceAccount (in the token keys' namespace), which organisations' "+
			"RoleBindings name beside --service-account (its device connections' tokens are the organisations' Secrets).")
	fs.StringVar(&o.bankKeysSecret, "bank-keys-secret", pagestore.DefaultKeysSecret,
		"name of the Secret, in the token keys' namespace, holding the keys that seal bank details "+
			"(created with a fresh key if missing; docs/operations.md for rotation).")
	fs.Int64Var(&o.rewards.MinimumWithdrawalPence, "min-withdrawal-pence", 1000,
		"Smallest balance, in pence, a household may withdraw.")
	fs.IntVar(&o.rewards.WithdrawalMinWaitDays, "withdrawal-min-wait-days", 30,
		"Days after its first reward before a household may withdraw.")
	fs.IntVar(&o.concurrency, "concurrency", controllers.DefaultConcurrency, "Objects of one kind reconciled at once.")
	fs.Float64Var(&o.backgroundShare, "background-share", priority.DefaultShare,
		"Share of the time (0-1] a catalogue change's re-evaluations may hold the API server while REST writes are in flight.")
	o.limits = server.DefaultLimits
	fs.Float64Var(&o.limits.PerClient.Rate, "rate-limit-per-client", o.limits.PerClient.Rate,
		"Requests per second one API client (or end user) may make; 0 disables the limit.")
	fs.IntVar(&o.limits.PerClient.Burst, "rate-limit-burst", o.limits.PerClient.Burst, "Burst of the per-client rate limit.")
	fs.Float64Var(&o.limits.CallbackFailuresPerAddress.Rate, "callback-failures-rate", o.limits.CallbackFailuresPerAddress.Rate,
		"Failed OAuth callbacks (a state not in progress) per second one client address may make once its burst is spent; "+
			"0 disables the limit.")
	fs.IntVar(&o.limits.CallbackFailuresPerAddress.Burst, "callback-failures-burst", o.limits.CallbackFailuresPerAddress.Burst,
		"Failed OAuth callbacks one client address may make at once before 429.")
	o.meterBudgets = server.DefaultMeterBudgets
	fs.Int64Var(&o.meterBudgets.OrganisationPerHour, "meter-lookups-per-hour", o.meterBudgets.OrganisationPerHour,
		"Meter register lookups (search, by reference, MPAN or address) one organisation may make in a UTC hour, "+
			"every replica and client together; past it, 429 with Retry-After. 0 disables.")
	fs.Int64Var(&o.meterBudgets.OrganisationPerDay, "meter-lookups-per-day", o.meterBudgets.OrganisationPerDay,
		"Meter register lookups one organisation may make in a UTC day; 0 disables.")
	fs.Int64Var(&o.meterBudgets.HouseholdPerHour, "meter-searches-per-household-hour", o.meterBudgets.HouseholdPerHour,
		"Meter searches one household may make in the hosted flow in a UTC hour, besides its organisation's budget; 0 disables.")
	fs.IntVar(&o.maxSubscriptions, "max-subscriptions", validation.DefaultMaxSubscriptions,
		"Notification subscriptions one organisation may have (REST and kubectl alike); at least 1.")
	zapOpts := zap.Options{Development: true}
	fs.Func("notification-allow-cidrs", "Comma-separated networks (CIDR) notifications may be delivered to although "+
		"they are not public (loopback, private, link-local, CGNAT, documentation, the other IANA special-purpose ranges "+
		"and IPv6 forms carrying them). With --embedded the default is loopback only.",
		func(v string) (err error) {
			o.notificationAllow, err = events.ParseCIDRs(strings.Split(v, ","))
			return err
		})
	fs.Func("provider-allow-cidrs", "Comma-separated networks (CIDR) device providers (DeviceProvider URLs) may be "+
		"called at although they are not public; a provider on a loopback address may then also be http://. "+
		"Default: --notification-allow-cidrs's (with --embedded, loopback only).",
		func(v string) (err error) {
			o.providerAllow, err = events.ParseCIDRs(strings.Split(v, ","))
			return err
		})
	fs.StringVar(&o.notificationCAFile, "notification-ca-file", "",
		"PEM file of CA certificates trusted for notification receivers, beside the system's (a private CA).")
	fs.Func("trusted-proxies", "Comma-separated networks (CIDR) of the reverse proxies in front of the REST API: "+
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
	o.mail.bind(fs)
	o.database.bind(fs)
	zapOpts.BindFlags(fs)
	return o, &zapOpts
}

// settle sets, once fs is parsed, the defaults that depend on which flags were given.
func (o *options) settle(fs *flag.FlagSet) {
	fs.Visit(func(f *flag.Flag) { o.shardSet = o.shardSet || f.Name == "shard" })
	if o.tier == tierControllers && !o.shardSet {
		o.shard = true // the controller tier is made of shards
	}
	if o.embedded {
		// A developer's machine: metrics on by default, in plain HTTP on the loopback interface
		// (there is no cluster whose API server could authenticate a scraper).
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["metrics-bind-address"] {
			o.metricsAddr = embeddedMetricsAddr
		}
		if !set["metrics-secure"] {
			o.metricsSecure = false
		}
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
