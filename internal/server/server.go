// Package server is the one HTTP listener of a replica: it builds the use cases
// (internal/app) on the manager's cache and client, and mounts every door on one mux — the
// REST API (internal/restapi), the hosted flow (internal/hostedflow) and the rewards page
// (internal/rewardspage) — behind the shared plumbing (internal/web: request ids, the access
// log, metrics, rate limits). It holds no route of its own and no rule.
package server

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/assetevents"
	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/app/subscriptions"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/delivery"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/devicecallback"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/mail"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/openadr"
	"github.com/flexsite/flexsite/internal/outboxstore"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/restapi"
	"github.com/flexsite/flexsite/internal/rewardspage"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/schedulestore"
	"github.com/flexsite/flexsite/internal/sealing"
	"github.com/flexsite/flexsite/internal/settlementstore"
	"github.com/flexsite/flexsite/internal/vtnstore"
	"github.com/flexsite/flexsite/internal/web"
)

// Names the manager and its tools take from the doors, which they may not import.
type (
	// RewardPolicy holds the configurable withdrawal thresholds.
	RewardPolicy = household.RewardPolicy
	// Limits bound what one caller may ask.
	Limits = web.Limits
)

// The doors' bounds the manager and the bench are given.
const (
	DefaultInFlightTimeout = app.DefaultInFlightTimeout
	// StackBaselineEnv, set in the environment, mounts the bench's trivial read behind the
	// whole stack at StackBaselinePath + "{n}" (web.StackBaselinePattern).
	StackBaselineEnv  = web.StackBaselineEnv
	StackBaselinePath = web.StackBaselinePath
)

// DefaultLimits are the manager's defaults.
var DefaultLimits = web.DefaultLimits

// MeterBudgets bound the meter register's lookups of an organisation and of a household
// (internal/meters' Budgets; zero values: unbounded), and DefaultMeterBudgets are the manager's.
type MeterBudgets = meters.Budgets

// DefaultMeterBudgets are the manager's defaults.
var DefaultMeterBudgets = meters.DefaultBudgets

// Config wires the server to the cluster.
type Config struct {
	// Addr to listen on, e.g. 127.0.0.1:8080.
	Addr string
	// Ready reports whether the server can answer (the manager's caches have synced).
	Ready func() bool
	Log   logr.Logger
	// Cache is the manager's cache (with the internal/index indexes): most reads come from it.
	Cache client.Reader
	// APIReader reads past the cache.
	APIReader client.Reader
	// Client writes through the API server.
	Client client.Client
	// Interactive, when set, is told of every request that may write (Begin when it starts,
	// the returned end when it is answered): background work of the controllers yields to
	// them (internal/priority's Gate).
	Interactive interface{ Begin() (end func()) }

	Issuer        *auth.Issuer
	Authenticator *auth.Authenticator
	Rewards       RewardPolicy
	// Now is the clock (tests replace it).
	Now func() time.Time
	// Limits bound what one caller may ask (zero values: no limit).
	Limits Limits
	// MaxSubscriptions is how many notification subscriptions an organisation may have (0:
	// DefaultMaxSubscriptions); the admission webhook must be given the same number.
	MaxSubscriptions int
	// MeterBudgets bound the meter register's lookups per organisation and per household,
	// counted in PostgreSQL, so across replicas (zero values: no budget).
	MeterBudgets MeterBudgets
	// InFlightTimeout is how long a request that creates a site has to finish writing it
	// before the Site controller deletes it as abandoned (default DefaultInFlightTimeout).
	InFlightTimeout time.Duration
	// Mailer sends the rewards page's emailed codes (nil: none can be sent).
	Mailer mail.Mailer
	// HostedNamespace is the manager's namespace (default DefaultHostedNamespace): the bank
	// details key Secret and the device providers' client secrets are there.
	HostedNamespace string
	// BankKeys seal the bank details (nil: the key Secret pagestore.DefaultKeysSecret of
	// HostedNamespace, loaded, or created, on first use).
	BankKeys *sealing.KeyRing
	// MeterRefKeys seal the meter references a search answers (nil: the key Secret
	// meterpoints.DefaultKeysSecret of HostedNamespace, loaded, or created, on first use).
	MeterRefKeys *sealing.KeyRing
	// MeterRegister answers the meter lookups (nil: the PostgreSQL register of DB,
	// internal/meterstore; a deployment may answer from an upstream meter service instead).
	MeterRegister meters.Register
	// PublicURL is the scheme and host the rewards links point at (empty: the request's).
	PublicURL string
	// TrustedProxies are the networks of the reverse proxies in front of the API: only from
	// them is the client's address taken from X-Forwarded-For or Forwarded.
	TrustedProxies []netip.Prefix
	// NotificationPolicy decides which addresses subscriptions may be delivered to: the
	// deliverer's (a subscription to a refused address literal is refused at once).
	NotificationPolicy events.AddressPolicy
	// DB is Flexsite's PostgreSQL (internal/db): reward history, withdrawals, readings,
	// settlements, the outbox and the rewards page's links and bank details. Required:
	// NewServer refuses a Config without it.
	DB *pgxpool.Pool
	// ProviderPolicy decides which addresses calls to device providers may reach (the same
	// allow-list as notifications'; zero: the NotificationPolicy).
	ProviderPolicy *events.AddressPolicy
}

// Route is one (method, path template) a door serves.
type Route struct{ Method, Path string }

// Server serves every door. It runs in every replica of the manager (it does not need the
// leader lease): reads come from the shared cache, writes go to the API server.
type Server struct {
	Config
	routes []web.Route
	// openadrRoutes are the OpenADR door's, checked against the Alliance's document rather
	// than the served one.
	openadrRoutes []web.Route
	handler       http.Handler
	rewards       *rewards.Service
	pricing       *pricing.Service
	openADR       *openadr.Door
}

// OpenADRNotifications shapes the notifications of OpenADR subscriptions for the deliverer:
// the OpenADR door's own shape of an event, the one its GET /events answers.
func (s *Server) OpenADRNotifications() delivery.OpenADRNotifier { return s.openADR }

// NewServer builds the use cases and mounts the doors.
func NewServer(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DB == nil {
		panic("server.NewServer: Config.DB is required (Flexsite has no mode without its database)")
	}
	appCfg := app.Config{Log: cfg.Log, Cache: cfg.Cache, APIReader: cfg.APIReader, Client: cfg.Client,
		Issuer: cfg.Issuer, Now: cfg.Now, InFlightTimeout: cfg.InFlightTimeout}
	// The gate the controllers share (internal/priority) also takes the sites a read waits on.
	if first, ok := cfg.Interactive.(interface{ Awaited(namespace, name string) }); ok {
		appCfg.EvaluateFirst = first.Awaited
	}
	households := app.New(appCfg)
	hostedNS := cfg.HostedNamespace
	if hostedNS == "" {
		hostedNS = rewards.DefaultHostedNamespace
	}
	keys := cfg.BankKeys
	if keys == nil {
		keys = sealing.NewKeyRing(cfg.APIReader, cfg.Client, hostedNS, pagestore.DefaultKeysSecret, "bank details")
	}
	meterKeys := cfg.MeterRefKeys
	if meterKeys == nil {
		meterKeys = sealing.NewKeyRing(cfg.APIReader, cfg.Client, hostedNS, meterpoints.DefaultKeysSecret, "meter references")
	}
	register := cfg.MeterRegister
	if register == nil {
		register = &meterstore.Store{Pool: cfg.DB}
	}
	meterPoints := &meterpoints.Service{Log: cfg.Log.WithName("meters"), Register: register, Keys: meterKeys, Now: cfg.Now,
		Budgets: cfg.MeterBudgets, Lookups: &meterstore.LookupCounts{Pool: cfg.DB}}
	rewardsSvc := rewards.New(rewards.Config{Log: cfg.Log, Sites: households, APIReader: cfg.APIReader,
		Client: households.Client, Cache: cfg.Cache, Policy: cfg.Rewards, Mailer: cfg.Mailer,
		HostedNamespace: cfg.HostedNamespace, Now: cfg.Now,
		Store: &rewardstore.Store{Pool: cfg.DB, Now: cfg.Now}, Private: &pagestore.Store{Pool: cfg.DB, Keys: keys}})
	providerPolicy := cfg.NotificationPolicy
	if cfg.ProviderPolicy != nil {
		providerPolicy = *cfg.ProviderPolicy
	}
	devicesSvc := devices.New(devices.Config{Log: cfg.Log.WithName("devices"), Households: households, Now: cfg.Now,
		Dialer: deviceauth.Dialer{Policy: providerPolicy, SecretNamespace: hostedNS}})
	settlements := &settlementstore.Store{Pool: cfg.DB}
	outbox := &outboxstore.Store{Pool: cfg.DB}
	limits := web.NewLimiters(cfg.Limits)
	guard := &web.Authenticator{Log: cfg.Log, Issuer: cfg.Issuer, Authenticator: cfg.Authenticator, Limits: limits,
		TrustedProxies: cfg.TrustedProxies}

	flexEvents := flexevents.New(households, settlements)
	readingsSvc := readings.New(readings.Config{Log: cfg.Log.WithName("readings"), Cache: cfg.Cache, DB: cfg.DB, Now: cfg.Now})
	assetEventStore := &asseteventstore.Store{Pool: cfg.DB}
	assetEvents := assetevents.New(households, assetEventStore)
	pricingSvc := pricing.New(households, pricing.Stores{Prices: &pricestore.Store{Pool: cfg.DB},
		Schedules: &schedulestore.Store{Pool: cfg.DB}, Dispatches: flexEvents.Dispatches, AssetEvents: assetEventStore})
	subs := subscriptions.New(households, outbox)
	subs.MaxSubscriptions = cfg.MaxSubscriptions
	rest := restapi.New(restapi.Config{Log: cfg.Log, Ready: cfg.Ready, Households: households, Rewards: rewardsSvc,
		Subscriptions: subs, Devices: devicesSvc, Readings: readingsSvc,
		FlexEvents: flexEvents, Guard: guard, AssetEvents: assetEvents,
		Dispatches: dispatches.New(households, flexEvents.Dispatches), Pricing: pricingSvc, Meters: meterPoints,
		Issuer: cfg.Issuer, Now: cfg.Now, PublicURL: cfg.PublicURL, NotificationPolicy: cfg.NotificationPolicy})
	hosted := &hostedflow.Door{Log: cfg.Log, Households: households, Rewards: rewardsSvc, Devices: devicesSvc,
		FlexEvents: flexEvents, Pricing: pricingSvc, Meters: meterPoints, Guard: guard, Now: cfg.Now, PublicURL: cfg.PublicURL}
	callback := &devicecallback.Door{Log: cfg.Log, Devices: devicesSvc, PublicURL: cfg.PublicURL, Limits: limits,
		TrustedProxies: cfg.TrustedProxies}
	page := &rewardspage.Door{Log: cfg.Log, Rewards: rewardsSvc, Limits: limits, TrustedProxies: cfg.TrustedProxies,
		PublicURL: cfg.PublicURL, FlexEvents: flexEvents, Pricing: pricingSvc}

	vtnSvc := vtn.New(households, &vtnstore.Store{Pool: cfg.DB})
	vtnSvc.Dispatches, vtnSvc.Readings = dispatches.New(households, flexEvents.Dispatches), readingsSvc
	vtnDoor := openadr.New(openadr.Config{Log: cfg.Log.WithName("openadr"), VTN: vtnSvc,
		FlexEvents: flexEvents, Subscriptions: subs, NotificationPolicy: cfg.NotificationPolicy,
		Guard: guard, Issuer: cfg.Issuer})
	s := &Server{Config: cfg, rewards: rewardsSvc, pricing: pricingSvc, openADR: vtnDoor}

	mux := http.NewServeMux()
	// One mux for every door, so that the access log and the metrics name each route's own
	// pattern whichever door serves it.
	s.routes = append(append(append(rest.Routes(), hosted.Routes()...), page.Routes()...), callback.Routes()...)
	s.openadrRoutes = vtnDoor.Routes()
	mounted := map[string]bool{}
	for _, e := range slices.Concat(s.routes, s.openadrRoutes) {
		pattern := e.Method + " " + cmp.Or(e.Pattern, e.Path)
		if !mounted[pattern] {
			mux.Handle(pattern, e.Handler)
			mounted[pattern] = true
		}
	}
	if web.StackBaselineEnabled() {
		// The bench's baseline: guarded as the eligibility read is (an organisation's or an
		// end user's token, entity_read).
		mux.Handle(web.StackBaselinePattern, guard.Guard(web.StackBaseline, true, flexv1.RoleEntityRead))
	}
	for _, extra := range []map[string]http.Handler{rest.Extra(), page.Extra()} {
		for pattern, h := range extra {
			mux.Handle(pattern, h)
		}
	}
	s.handler = web.Observe(cfg.Log, cfg.TrustedProxies, mux)
	if cfg.Interactive != nil {
		s.handler = web.MarkInteractive(cfg.Interactive, s.handler)
	}
	return s
}

// Routes returns every route the server serves.
func (s *Server) Routes() []Route {
	out := make([]Route, len(s.routes))
	for i, e := range s.routes {
		out[i] = Route{Method: e.Method, Path: e.Path}
	}
	return out
}

// OpenADRRoutes returns every route of the OpenADR door.
func (s *Server) OpenADRRoutes() []Route {
	out := make([]Route, len(s.openadrRoutes))
	for i, e := range s.openadrRoutes {
		out[i] = Route{Method: e.Method, Path: e.Path}
	}
	return out
}

// LinkSweeper deletes the rewards links nobody can use any more (a leader's runnable).
func (s *Server) LinkSweeper() *rewards.Sweeper { return &rewards.Sweeper{Rewards: s.rewards} }

// LegacyImporter moves bank details older versions kept in Secrets into the database (a
// leader's runnable, done once per installation).
func (s *Server) LegacyImporter() *rewards.LegacyImporter {
	return &rewards.LegacyImporter{Rewards: s.rewards}
}

// ImportLegacyBankDetails runs the LegacyImporter's move once: true when all are moved.
func (s *Server) ImportLegacyBankDetails(ctx context.Context) (bool, error) {
	return s.rewards.ImportLegacyBankDetails(ctx)
}

// ServeHTTP makes the server usable in httptest.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// ListenRewardChanges keeps the transactions pages and balances the REST API reads while it
// hears PostgreSQL's notifications of ledger changes, until ctx ends (Start runs it; without
// it every page is read from the database).
func (s *Server) ListenRewardChanges(ctx context.Context) error { return s.rewards.Listen(ctx) }

// ListenPriceChanges keeps the horizon's market prices and encoded price curves the REST API
// reads while it hears PostgreSQL's notifications of declarations, until ctx ends (Start runs
// it; without it every read asks the database).
func (s *Server) ListenPriceChanges(ctx context.Context) { s.pricing.Listen(ctx) }

// KeepsPrices tells whether the kept prices are in use (ListenPriceChanges listens): tests
// wait for it.
func (s *Server) KeepsPrices() bool { return s.pricing.KeepsPrices() }

// NeedLeaderElection tells the manager to run the server in every replica.
func (s *Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then drains in-flight requests for up to 10 s.
func (s *Server) Start(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	s.Log.Info("REST API listening", "address", "http://"+ln.Addr().String(), "docs", "http://"+ln.Addr().String()+"/docs")
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	// The kept transactions pages are served only while their invalidations are heard.
	listenCtx, stopListening := context.WithCancel(ctx)
	defer stopListening()
	go func() { _ = s.ListenRewardChanges(listenCtx) }()
	go s.ListenPriceChanges(listenCtx)
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
