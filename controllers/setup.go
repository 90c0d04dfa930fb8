package controllers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers/adoption"
	"github.com/flexsite/flexsite/controllers/organisation"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/settlementstore"
	"github.com/flexsite/flexsite/internal/shards"
)

// Options tune the reconcilers.
type Options struct {
	// Concurrency is how many objects of one kind are reconciled at once. Reconciles spend
	// most of their time waiting on the API server, so a few workers multiply throughput when
	// a catalogue change re-evaluates thousands of sites.
	Concurrency int
	// Background, when set, is shared with the REST API: the sites a catalogue change
	// re-evaluates yield to the requests it serves (internal/priority).
	Background *priority.Gate
	// DB is Flexsite's PostgreSQL (internal/db): the reward history, the outbox, settlements,
	// bank details and token hand-overs. Required: there is no mode without a database.
	DB *pgxpool.Pool
	// Devices says which providers the DeviceConnection controller may call (zero value: only
	// public addresses), and where their client secrets are.
	Devices deviceauth.Dialer
	// Holder names this replica in device connections' refresh claims (default: the host name
	// and a random suffix).
	Holder string
	// OrganisationAccess, when it names the manager's ServiceAccount, is the RoleBinding the
	// Organisation controller makes in every organisation's namespace (unset: no such
	// controller, as where the manager runs with an administrator's credentials).
	OrganisationAccess bootstrap.OrganisationAccess
	// PublicURL is the REST API's scheme and host as asset controllers reach it, where dispatch callbacks point (empty: DefaultPublicURL).
	PublicURL string
	// Shard, when set, makes the replica a shard of the ring (internal/shards): the per-site
	// reconcilers (Site, Asset, Enrolment, DeviceConnection, RewardLedger) run under its
	// shard lease for its own sites; the organisation-wide ones (FlexEvent, Organisation)
	// under the leader lease. Unset: every reconciler runs under the manager's own election.
	Shard *shards.Replica
	// Work is what this replica reconciles (zero: AllWork): the API tier OrgWideWork, the controller tier PerSiteWork (docs/scale.md).
	Work Work
	// Subscribers, when set, names the subscriptions dispatch events are owed (the deliverer): dispatchstore.Store.Subscribers.
	Subscribers dispatchstore.Subscribers
	// FlexEventNow is the clock the FlexEvent reconciler dispatches and settles by (nil: time.Now),
	// which a suite walking an event through its window moves; the other reconcilers keep time.Now.
	FlexEventNow func() time.Time
}

// Work names parts of the reconcilers.
type Work int

const (
	// PerSiteWork: the Site, Asset, Enrolment, DeviceConnection and RewardLedger reconcilers.
	PerSiteWork Work = 1 << iota
	// OrgWideWork: the FlexEvent and Organisation reconcilers, and, without PerSiteWork, the
	// adoption of children written without their site as controller (controllers/adoption).
	OrgWideWork
	// AllWork is every reconciler (one workload, the default).
	AllWork = PerSiteWork | OrgWideWork
)

// errNoDatabase refuses to set up a reconciler without Flexsite's PostgreSQL: every part of
// Flexsite needs it (cmd/manager refuses to start without one), so a missing pool is a wiring
// mistake, refused at setup rather than met by a reconcile.
var errNoDatabase = errors.New("controllers: no database (Options.DB): Flexsite's controllers need its PostgreSQL")

// DefaultConcurrency is the reconcilers' default worker count.
const DefaultConcurrency = 4

// SetupWithManager registers the cache indexes and every Flexsite reconciler with mgr.
func SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts ...Options) error {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.DB == nil {
		return errNoDatabase
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.Work == 0 {
		o.Work = AllWork
	}
	workers := controller.Options{MaxConcurrentReconciles: o.Concurrency}
	var notRead []client.Object
	if o.Work == PerSiteWork {
		notRead = append(notRead, &flexv1.APIClient{}) // only the doors authenticate API clients
	}
	if err := index.Register(ctx, mgr.GetFieldIndexer(), notRead...); err != nil {
		return err
	}
	// Every reconcile that may write a notification lists the namespace's Subscriptions:
	// start their informer with the others, so that the cache's sync (and readiness) covers
	// it, rather than lazily in the first reconcile, which would wait for it.
	if _, err := mgr.GetCache().GetInformer(ctx, &flexv1.Subscription{}, cache.BlockUntilSynced(false)); err != nil {
		return fmt.Errorf("watching Subscriptions: %w", err)
	}
	// The controllers' client: an index.NewLookup of it finds in the cache's stores.
	cl := index.CachedClient{Client: mgr.GetClient(), Cache: mgr.GetCache()}
	perSite, orgWide := mgr, mgr
	if o.Shard != nil {
		perSite, orgWide = o.Shard.PerSite, o.Shard.OrgWide
	}
	if o.Work&OrgWideWork != 0 && orgWide == nil {
		return errors.New("controllers: organisation-wide work on a shard that does none (shards.Options.PerSiteOnly)")
	}
	if o.Work&OrgWideWork != 0 {
		if err := setupOrgWide(orgWide, cl, o, workers); err != nil {
			return err
		}
	}
	if o.Work&PerSiteWork == 0 {
		return nil
	}
	bankDetails := &pagestore.Store{Pool: o.DB}
	// The events the controllers observe go to the outbox in PostgreSQL.
	notify := notifier{Subscriptions: cl, Store: &outboxstore.Store{Pool: o.DB}}
	if err := (&SiteReconciler{
		Client: cl, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("site-controller"), Now: time.Now,
		Background: o.Background, BankDetails: bankDetails, Notifier: notify, Shard: o.Shard,
	}).SetupWithManager(perSite, workers); err != nil {
		return err
	}
	if err := (&AssetReconciler{Client: cl, APIReader: mgr.GetAPIReader(),
		Recorder: mgr.GetEventRecorder("asset-controller"), Notifier: notify, Shard: o.Shard}).SetupWithManager(perSite, workers); err != nil {
		return err
	}
	if err := (&EnrolmentReconciler{
		Client: cl, APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("enrolment-controller"), Now: time.Now,
		Notifier: notify, Shard: o.Shard,
	}).SetupWithManager(perSite, workers); err != nil {
		return err
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		o.Holder = host + "-" + identity.NewID()[:8]
	}
	if err := (&DeviceConnectionReconciler{Client: cl, Recorder: mgr.GetEventRecorder("deviceconnection-controller"),
		Dialer: o.Devices, Now: time.Now, Holder: o.Holder, DB: o.DB, Shard: o.Shard}).SetupWithManager(perSite, workers); err != nil {
		return err
	}
	// Ingests RewardLedgers' transactions and copies the database's summary of the history.
	return (&RewardLedgerReconciler{Client: cl, APIReader: mgr.GetAPIReader(), Now: time.Now,
		Recorder: mgr.GetEventRecorder("rewardledger-controller"), Store: &rewardstore.Store{Pool: o.DB}, Shard: o.Shard}).
		SetupWithManager(perSite, workers)
}

// setupOrgWide adds the organisation-wide reconcilers to mgr (the leader's), and, where this
// replica runs no per-site reconciler (the API tier), the adoption of unadopted children.
func setupOrgWide(mgr ctrl.Manager, cl client.Client, o Options, workers controller.Options) error {
	if o.OrganisationAccess.ServiceAccountName != "" {
		if err := (&organisation.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
			Access: o.OrganisationAccess}).SetupWithManager(mgr); err != nil {
			return err
		}
	}
	if err := (&FlexEventReconciler{Client: cl, Recorder: mgr.GetEventRecorder("flexevent-controller"), PublicURL: o.PublicURL,
		Store: &settlementstore.Store{Pool: o.DB}, Dispatches: &dispatchstore.Store{Pool: o.DB, Subscribers: o.Subscribers},
		AssetEvents: &asseteventstore.Store{Pool: o.DB}, Now: o.FlexEventNow}).SetupWithManager(mgr, workers); err != nil {
		return err
	}
	if o.Work&PerSiteWork != 0 {
		return nil // the Site reconciler adopts its sites' children itself
	}
	return (&adoption.Reconciler{Client: cl}).SetupWithManager(mgr, workers)
}
