// Package facade serves Flexsite's REST API. Every call maps onto creating, updating and
// deleting the Site, Asset and Enrolment resources (and reward ledgers and credentials); the
// Kubernetes API is the only store.
package facade

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/facade/apidocs"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/mail"
)

// RewardPolicy holds the configurable withdrawal thresholds of the rewards endpoints (the
// rules are the household core's).
type RewardPolicy = household.RewardPolicy

// Config wires the facade to the cluster.
type Config struct {
	// Addr to listen on, e.g. 127.0.0.1:8080.
	Addr string
	// Ready reports whether the server can answer (the manager's caches have synced).
	Ready func() bool
	Log   logr.Logger
	// Cache is the manager's cache (with the internal/index indexes): most reads come from it.
	Cache client.Reader
	// APIReader reads past the cache: after a write conflict, and when the cache misses an
	// object this client may have just created.
	APIReader client.Reader
	// Client writes through the API server.
	Client client.Client
	// Interactive, when set, is told of every request that may write (Begin when it starts,
	// the returned end when it is answered): background work of the controllers yields to
	// them (internal/priority's Gate).
	Interactive interface{ Begin() (end func()) }
	// Ledgers holds the reward ledgers in compact form (internal/ledger's Feed, which the
	// manager runs); nil reads each from the API server instead.
	Ledgers       LedgerReader
	Issuer        *auth.Issuer
	Authenticator *auth.Authenticator
	Rewards       RewardPolicy
	// Now is the clock (tests replace it).
	Now func() time.Time
	// Limits bound what one caller may ask (zero values: no limit). The manager uses
	// DefaultLimits unless told otherwise.
	Limits Limits
	// InFlightTimeout is how long a request that creates a site has to finish writing it
	// before the Site controller deletes it as abandoned (default DefaultInFlightTimeout).
	InFlightTimeout time.Duration
	// Mailer sends the rewards page's emailed codes (nil: none can be sent, and a link that
	// enforces them cannot reach the bank details form).
	Mailer mail.Mailer
	// HostedNamespace holds the rewards links' Secrets (default DefaultHostedNamespace).
	HostedNamespace string
	// PublicURL is the scheme and host the rewards links point at (empty: the request's).
	PublicURL string
	// TrustedProxies are the networks of the reverse proxies in front of the API: only from
	// them is the client's address taken from X-Forwarded-For or Forwarded (none: the
	// connection's address is the client's).
	TrustedProxies []netip.Prefix
}

// The facade's own permissions (the controllers' are on the reconcilers, the Secrets' on
// internal/auth's Authenticator and KeyRing, which read them).
// +kubebuilder:rbac:groups=flexsite.io,resources=sites;assets;enrolments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=mpanclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=apiclients,verbs=get;list;watch
// +kubebuilder:rbac:groups=flexsite.io,resources=propositions;assetmodels,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Server is the REST facade's HTTP server. It runs in every replica of the manager (it does
// not need the leader lease): reads come from the shared cache, writes go to the API server.
type Server struct {
	Config
	mux     *http.ServeMux
	handler http.Handler // mux, observed (request id, access log, metrics)
	limiter rateLimiters
	// catalogue follows the rules for reads (rules.go).
	catalogue *household.Catalogue
	// reads finds sites and assets for the hot reads (readindex.go).
	reads *readIndexes
}

// NewServer builds the facade's routes.
func NewServer(cfg Config) *Server {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.InFlightTimeout == 0 {
		cfg.InFlightTimeout = DefaultInFlightTimeout
	}
	// Every write names the API client that made it (managedFields).
	cfg.Client = ownedClient{cfg.Client}
	s := &Server{Config: cfg, mux: http.NewServeMux(), limiter: newRateLimiters(cfg.Limits),
		catalogue: newCatalogue(cfg), reads: newReadIndexes(cfg.Cache)}
	s.routes()
	s.handler = s.observe(s.mux)
	if cfg.Interactive != nil {
		s.handler = markInteractive(cfg.Interactive, s.handler)
	}
	return s
}

// inFlightDeadline is when a site created now must be complete. It uses the wall clock, not
// the (test-settable) Now: the Site controller compares it with the wall clock.
func (s *Server) inFlightDeadline() time.Time { return time.Now().Add(s.InFlightTimeout) }

// siteRoute is one site's path: read, changed and deleted there.
const siteRoute = "/entities/site/{site_id}"

// Route is one (method, path template) the facade serves.
type Route struct{ Method, Path string }

// routeTable lists every route; routes() registers them and the OpenAPI test compares them
// with the document, so neither can drift from the other.
func (s *Server) routeTable() []struct {
	Route
	h http.Handler
} {
	org := func(h handler, roles ...flexv1.Role) http.Handler { return s.authenticated(h, false, roles...) }
	orgOrUser := func(h handler, roles ...flexv1.Role) http.Handler {
		return endUserRoute{s.authenticated(h, true, roles...)}
	}
	docs := apidocs.Handler()
	type entry = struct {
		Route
		h http.Handler
	}
	read, write := flexv1.RoleEntityRead, flexv1.RoleEntityWrite
	const assetByID = "/entities/asset/{asset_id}"
	return append([]entry{
		{Route{"GET", "/healthz"}, http.HandlerFunc(s.healthz)},
		{Route{"GET", "/readyz"}, http.HandlerFunc(s.readyz)},
		{Route{"GET", "/openapi.json"}, docs},
		{Route{"GET", "/docs"}, docs},

		{Route{"POST", "/auth/token-form"}, http.HandlerFunc(s.tokenForm)},
		{Route{"POST", "/auth/component-token"}, org(s.componentToken, flexv1.RoleComponents)},
		{Route{"GET", "/auth/users/me/"}, org(s.usersMe)},

		{Route{"POST", "/entities/site/onboard"}, org(s.onboard, write)},
		{Route{"POST", "/entities/site/initialise"}, org(s.initialise, write)},
		{Route{"POST", "/entities/site/onboard-site-and-asset"}, org(s.legacyOnboard, write)},
		{Route{"GET", "/entities/site"}, org(s.listSites, read)},
		{Route{"GET", siteRoute}, orgOrUser(s.getSite, read)},
		{Route{"PATCH", siteRoute}, orgOrUser(s.patchSite, write)},
		{Route{"POST", "/entities/site/{site_id}/offboard-site-and-assets"}, org(s.offboard, write)},
		{Route{"GET", "/entities/site/{site_id}/eligibility"}, orgOrUser(s.eligibility, read)},
		{Route{"POST", "/entities/site/{site_id}/enrol"}, orgOrUser(s.enrol, write)},
		{Route{"POST", "/entities/site/{site_id}/unenrol"}, orgOrUser(s.unenrol, write)},
		{Route{"POST", "/entities/site/{site_id}/meter-consent"}, orgOrUser(s.meterConsent, write)},
		// The site lifecycle (sitelifecycle.go). check-eligibility stores nothing: entity_read.
		// Its literal path is more specific than /entities/site/{site_id}, so the mux never
		// confuses the two.
		{Route{"DELETE", siteRoute}, org(s.deleteSite, write)},
		{Route{"POST", "/entities/site/check-eligibility"}, org(s.checkEligibility, read)},
		{Route{"POST", "/entities/site/{site_id}/dispatch-consent"}, orgOrUser(s.dispatchConsent, write)},
		{Route{"POST", "/entities/site/{site_id}/dispatch-deconsent"}, orgOrUser(s.dispatchDeconsent, write)},
		{Route{"POST", "/entities/asset"}, org(s.createAsset, write)},
		{Route{"GET", "/entities/asset"}, org(s.listAssets, read)},
		{Route{"GET", assetByID}, org(s.getAsset, read)},
		{Route{"PATCH", assetByID}, org(s.updateAsset, write)},
		{Route{"DELETE", assetByID}, org(s.deleteAsset, write)},
		{Route{"GET", "/entities/asset/external-id/{external_id}"}, org(s.getAssetByExternalID, read)},

		{Route{"POST", "/validation/mpan"}, org(s.validateMPAN)},

		{Route{"GET", "/rewards/{site_id}/transactions"}, org(s.transactions, flexv1.RoleRewards)},
		{Route{"GET", "/rewards/{site_id}/info"}, org(s.rewardInfo, flexv1.RoleRewards)},
		{Route{"GET", "/rewards/{site_id}/url/balance"}, org(s.balanceURL, flexv1.RoleRewards)},

		// The hosted rewards page (rewardspage.go): a one-time link, then a session cookie.
		{Route{"GET", "/hosted/rewards/link/{code}"}, s.pageGuard(s.rewardsRedeem)},
		{Route{"GET", "/hosted/rewards"}, s.pageGuard(s.rewardsPage)},
		{Route{"POST", "/hosted/rewards/code"}, s.pageGuard(s.rewardsAction(fieldCode))},
		{Route{"POST", "/hosted/rewards/verify"}, s.pageGuard(s.rewardsAction("verify"))},
		{Route{"POST", "/hosted/rewards/bank"}, s.pageGuard(s.rewardsAction("bank"))},
		{Route{"POST", "/hosted/rewards/withdraw"}, s.pageGuard(s.rewardsAction("withdraw"))},
		{Route{"POST", "/hosted/rewards/finish"}, s.pageGuard(s.rewardsAction("finish"))},

		// Notifications (notifications.go).
		{Route{"POST", subscriptionsRoute}, org(s.createSubscription, write)},
		{Route{"GET", subscriptionsRoute}, org(s.listSubscriptions, read)},
		{Route{"GET", subscriptionRoute}, org(s.getSubscription, read)},
		{Route{http.MethodDelete, subscriptionRoute}, org(s.deleteSubscription, write)},
		{Route{"POST", subscriptionRoute + "/test"}, org(s.testSubscription, write)},
		{Route{"GET", subscriptionRoute + "/deliveries"}, org(s.subscriptionDeliveries, read)},
	}, s.hostedRoutes()...) // the hosted flow's page and its own JSON routes (hosted.go)
}

func (s *Server) routes() {
	for _, e := range s.routeTable() {
		s.mux.Handle(e.Method+" "+e.Path, e.h)
	}
	// CORS preflights of the routes an end-user token may call (cors.go).
	for path, methods := range endUserMethods(s.routeTable()) {
		s.mux.Handle("OPTIONS "+path, s.preflight(methods))
	}
	s.mux.Handle("GET /docs/", apidocs.Handler())
	s.mux.HandleFunc("GET /hosted/rewards/style.css", s.rewardsStyle)
	// Anything else: the JSON 404 API clients expect, not net/http's text.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
	})
}

// Routes returns every route the facade serves.
func (s *Server) Routes() []Route {
	table := s.routeTable()
	out := make([]Route, len(table))
	for i, e := range table {
		out[i] = e.Route
	}
	return out
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if s.Ready != nil && !s.Ready() {
		http.Error(w, "caches not synced", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// ServeHTTP makes the server usable in httptest.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

// NeedLeaderElection tells the manager to run the facade in every replica.
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
