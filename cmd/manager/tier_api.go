package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/schedulestore"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/server"
	admission "github.com/flexsite/flexsite/webhook"
)

// setupAPITier adds what the API tier runs beside its reconcilers: notification delivery, the
// readings partitions, the admission webhooks, the default rules (and with --embedded the
// demo organisation), the keys, and the server with every door. lm is where what needs a
// leader goes (setupReconcilers).
func setupAPITier(ctx context.Context, w *wiring, lm manager.Manager) error {
	o, mgr, log := w.o, w.mgr, ctrl.Log.WithName("setup")
	openADR := &openADRNotifications{}
	if err := setupNotifier(ctx, lm, o, w.notifier, openADR); err != nil {
		return err
	}
	// The readings partitions are made ahead by the leader, on start and hourly; a request
	// never makes one. The same round deletes what is past its retention (docs/operations.md,
	// "Retention").
	if err := lm.Add(&db.ReadingPartitions{Pool: w.pool, Back: readings.PartitionsBack, Ahead: readings.PartitionsAhead,
		Expire: []db.Expiry{
			{Name: "ev_schedules", Delete: (&schedulestore.Store{Pool: w.pool}).DeleteExpired},
			{Name: "asset_events", Delete: (&asseteventstore.Store{Pool: w.pool}).DeleteExpired},
			{Name: "dispatch_status_changes", Delete: (&dispatchstore.Store{Pool: w.pool}).DeleteExpiredStatusChanges},
		},
		Log: ctrl.Log.WithName("readings-partitions")}); err != nil {
		return err
	}
	if err := admission.Setup(mgr, admission.Options{MaxSubscriptions: o.maxSubscriptions}); err != nil {
		return fmt.Errorf("setting up the webhooks: %w", err)
	}

	if o.embedded || o.installRules {
		if err := installDefaults(ctx, w.cfg, w.scheme, o); err != nil {
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

	keys := auth.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), w.keysNS, w.keysName)
	if err := keys.Ensure(ctx); err != nil {
		return fmt.Errorf("loading the token signing keys from %s: %w", o.tokenKeysSecret, err)
	}

	bankKeys := sealing.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), w.keysNS, o.bankKeysSecret, "bank details")
	if err := bankKeys.Ensure(ctx); err != nil {
		return fmt.Errorf("loading the bank details keys from %s/%s: %w", w.keysNS, o.bankKeysSecret, err)
	}

	meterRefKeys := sealing.NewKeyRing(mgr.GetAPIReader(), mgr.GetClient(), w.keysNS, o.meterRefKeysSecret, "meter references")
	if err := meterRefKeys.Ensure(ctx); err != nil {
		return fmt.Errorf("loading the meter reference keys from %s/%s: %w", w.keysNS, o.meterRefKeysSecret, err)
	}

	// Every replica re-reads the meter reference keys every minute; whichever finds a rotation
	// or a removal due writes it (docs/operations.md, "Rotating the meter reference keys").
	if err := lm.Add(&sealing.Rotator{Ring: meterRefKeys, Rotation: meterpoints.KeyRotation(o.meterRefKeyRotation),
		Failed: func(err error) { log.Error(err, "rotating the meter reference keys; trying again in a minute") }}); err != nil {
		return err
	}
	return setupServer(lm, o, keys, bankKeys, meterRefKeys, w.keysNS, w.background, w.pool, openADR)
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

// setupNotifier adds the notification deliverer, on the outbox in the database (every
// replica delivers); the embedded control plane allows delivery to loopback only, so that a
// developer can try a receiver on their own machine.
func setupNotifier(ctx context.Context, mgr ctrl.Manager, o options, d *delivery.Deliverer, openADR *openADRNotifications) error {
	if d == nil {
		return nil // no outbox: nothing to deliver
	}
	allow := o.notificationAllowed()
	roots, err := notificationRoots(o.notificationCAFile)
	if err != nil {
		return err
	}
	d.Policy, d.RootCAs, d.OpenADR = events.AddressPolicy{Allow: allow}, roots, openADR
	if err := d.SetupWithManager(ctx, mgr); err != nil {
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

// defaultDemoPassword is the embedded demo client's password when FLEXSITE_DEMO_PASSWORD is
// not set. It is for a developer's machine only: --embedded never runs against a cluster.
const defaultDemoPassword = "flexsite-demo"

func ptr[T any](v T) *T { return &v }
