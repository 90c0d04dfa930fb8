// Package restapi is the REST API's door: its routes (checked against the OpenAPI document it
// serves), the reading of each request into a use case's typed input, and the translation of
// what the use case answers into the documented JSON and statuses. It decides no rule: the
// use cases are internal/app's.
package restapi

import (
	"net/http"
	"time"

	"github.com/go-logr/logr"

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
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/restapi/apidocs"
	"github.com/flexsite/flexsite/internal/restapi/meterroutes"
	"github.com/flexsite/flexsite/internal/web"
)

// The REST API's own permissions (the controllers' are on the reconcilers, the Secrets' on
// internal/auth's Authenticator and KeyRing, which read them).
// +kubebuilder:rbac:groups=flexsite.io,resources=sites;assets;enrolments,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=rewardledgers,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=mpanclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolmentclaims,verbs=get
// +kubebuilder:rbac:groups=flexsite.io,resources=apiclients,verbs=get;list;watch
// +kubebuilder:rbac:groups=flexsite.io,resources=propositions;assetmodels;deviceproviders,verbs=get;list;watch
// +kubebuilder:rbac:groups=flexsite.io,resources=deviceconnections,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=deviceconnections/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=flexsite.io,resources=flexevents,verbs=get;list;watch;create

// The API's shapes are the use cases' results.
type (
	// EligibilityRecord is the eligibility of a site, as the API reports it.
	EligibilityRecord = app.EligibilityRecord
	// SitePropertiesRecord is the eligibility record's `site_properties`.
	SitePropertiesRecord = app.SitePropertiesRecord
	// AssetEligibilityRecord is one item of the eligibility record's `assets`.
	AssetEligibilityRecord = app.AssetEligibilityRecord
	// PropositionEligibilityRecord is an asset's eligibility for one proposition.
	PropositionEligibilityRecord = app.PropositionEligibilityRecord
	// TransactionRecord is one item of `transactions`.
	TransactionRecord = rewards.TransactionRecord
	// TransactionsResponse answers GET /rewards/{site_id}/transactions.
	TransactionsResponse = rewards.TransactionsResponse
)

// Config wires the REST API to the use cases.
type Config struct {
	Log logr.Logger
	// Ready reports whether the server can answer (the manager's caches have synced).
	Ready func() bool
	// Households, Rewards and Subscriptions are the use cases.
	Households    *app.Service
	Rewards       *rewards.Service
	Subscriptions *subscriptions.Service
	// Devices are the device-connection use cases.
	Devices *devices.Service
	// Readings takes the assets' readings.
	Readings *readings.Service
	// FlexEvents are the flex events' use cases.
	FlexEvents *flexevents.Service
	// AssetEvents keeps what the devices tell Flexsite.
	AssetEvents *assetevents.Service
	// Pricing declares and reads market prices, and answers the price curves and schedules.
	Pricing *pricing.Service
	// Meters answers the meter-point register's lookups (docs/api.md, "Meters: finding a household's
	// meter").
	Meters *meterpoints.Service
	// Dispatches take the asset controllers' status callbacks.
	Dispatches *dispatches.Service
	// Guard authenticates the routes and checks a login's password (under its budgets); Issuer
	// issues the tokens.
	Guard  *web.Authenticator
	Issuer *auth.Issuer
	// Now is the clock (tests replace it): installation dates and consent times are judged by it.
	Now func() time.Time
	// PublicURL is the scheme and host the rewards links point at (empty: the request's).
	PublicURL string
	// NotificationPolicy decides which addresses a subscription may be delivered to (the
	// deliverer's): a URL naming a refused address is refused at once.
	NotificationPolicy events.AddressPolicy
}

// API is the REST API door.
type API struct{ Config }

// New builds the REST API.
func New(cfg Config) *API {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &API{Config: cfg}
}

// siteRoute is one site's path: read, changed and deleted there.
const siteRoute = "/entities/site/{site_id}"

const (
	subscriptionsRoute = "/notifications/subscriptions"
	subscriptionRoute  = subscriptionsRoute + "/{subscription_id}"
)

// Routes lists every route of the REST API: the server mounts them, and the OpenAPI test
// compares them with the document, so neither can drift from the other.
func (a *API) Routes() []web.Route {
	org := func(h web.Handler, roles ...flexv1.Role) http.Handler { return a.Guard.Guard(h, false, roles...) }
	orgOrUser := func(h web.Handler, roles ...flexv1.Role) http.Handler {
		return web.EndUserRoute{Handler: a.Guard.Guard(h, true, roles...)}
	}
	docs := apidocs.Handler()
	read, write := flexv1.RoleEntityRead, flexv1.RoleEntityWrite
	const assetByID = "/entities/asset/{asset_id}"
	// Every GET /entities/asset/{asset_id}/<word> shares one mux pattern with the external-id
	// read (assetPairPattern): add its word here and its route below with that Pattern.
	assetPair := assetPairHandler(org(a.getAssetByExternalID, read), map[string]http.Handler{
		"intent":           org(a.latestIntent, read),
		"battery-schedule": org(a.batterySchedule, read),
		"price-curve":      org(a.assetPriceCurve, read),
	})
	meters := meterroutes.Handlers{Meters: a.Meters}
	meterPair := meterroutes.PairHandler(org(meters.ByRef, read), http.HandlerFunc(notFound))
	return []web.Route{
		{Method: "GET", Path: "/healthz", Handler: http.HandlerFunc(healthz)},
		{Method: "GET", Path: "/readyz", Handler: http.HandlerFunc(a.readyz)},
		{Method: "GET", Path: "/openapi.json", Handler: docs},
		{Method: "GET", Path: "/docs", Handler: docs},

		{Method: "POST", Path: "/auth/token-form", Handler: http.HandlerFunc(a.tokenForm)},
		{Method: "POST", Path: "/auth/component-token", Handler: org(a.componentToken, flexv1.RoleComponents)},
		{Method: "GET", Path: "/auth/users/me/", Handler: org(usersMe)},

		{Method: "POST", Path: "/entities/site/onboard", Handler: org(a.onboard, write)},
		{Method: "POST", Path: "/entities/site/initialise", Handler: org(a.initialise, write)},
		{Method: "POST", Path: "/entities/site/onboard-site-and-asset", Handler: org(a.legacyOnboard, write)},
		{Method: "GET", Path: "/entities/site", Handler: org(a.listSites, read)},
		{Method: "POST", Path: "/entities/site", Handler: org(a.createSite, write)},
		{Method: "GET", Path: siteRoute, Handler: orgOrUser(a.getSite, read)},
		{Method: "PATCH", Path: siteRoute, Handler: orgOrUser(a.patchSite, write)},
		{Method: "POST", Path: "/entities/site/{site_id}/offboard-site-and-assets", Handler: org(a.offboard, write)},
		{Method: "GET", Path: "/entities/site/{site_id}/eligibility", Handler: orgOrUser(a.eligibility, read)},
		{Method: "GET", Path: "/entities/site/{site_id}/flex-events", Handler: org(a.siteFlexEvents, read)},
		{Method: "GET", Path: "/entities/site/{site_id}/price-curve", Handler: org(a.sitePriceCurve, read)},
		{Method: "POST", Path: "/entities/site/{site_id}/enrol", Handler: orgOrUser(a.enrol, write)},
		{Method: "POST", Path: "/entities/site/{site_id}/unenrol", Handler: orgOrUser(a.unenrol, write)},
		{Method: "POST", Path: "/entities/site/{site_id}/meter-consent", Handler: orgOrUser(a.meterConsent, write)},
		// The site lifecycle. check-eligibility stores nothing: entity_read. Its literal path is
		// more specific than /entities/site/{site_id}, so the mux never confuses the two.
		{Method: "DELETE", Path: siteRoute, Handler: org(a.deleteSite, write)},
		{Method: "POST", Path: "/entities/site/check-eligibility", Handler: org(a.checkEligibility, read)},
		{Method: "POST", Path: "/entities/site/{site_id}/dispatch-consent", Handler: orgOrUser(a.dispatchConsent, write)},
		{Method: "POST", Path: "/entities/site/{site_id}/dispatch-deconsent", Handler: orgOrUser(a.dispatchDeconsent, write)},
		// The meter-point register (docs/api.md, "Meters: finding a household's meter"): organisation
		// tokens only. The literal /meter/search is more specific than /meter/{mpan}; by-ref and the
		// deprecated {meter_ref}/mpan share meterroutes.PairPattern; GET /meter/ is that path alone.
		{Method: "GET", Path: "/meter/search", Handler: org(meters.Search, read)},
		{Method: "GET", Path: "/meter/by-ref/{meter_ref}", Handler: meterPair, Pattern: meterroutes.PairPattern},
		{Method: "GET", Path: "/meter/{meter_ref}/mpan", Handler: meterPair, Pattern: meterroutes.PairPattern},
		{Method: "POST", Path: "/meter/by-mpan", Handler: org(meters.ByMPAN, read)},
		{Method: "GET", Path: "/meter/{mpan}", Handler: org(meters.ByMPANPath, read)},
		{Method: "POST", Path: "/meter/by-address", Handler: org(meters.ByAddress, read)},
		{Method: "GET", Path: "/meter/", Handler: meterroutes.DocumentedAs("GET /meter/", org(meters.ByAddressQuery, read)),
			Pattern: meterroutes.ByAddressPattern},
		// Device connections (docs/api.md, "Device connections").
		{Method: "GET", Path: siteRoute + "/oauth/{provider}/initiate", Handler: orgOrUser(a.initiateOAuth, write)},
		{Method: "POST", Path: siteRoute + "/token", Handler: org(a.siteToken, write)},
		{Method: "GET", Path: siteRoute + "/connections", Handler: orgOrUser(a.connections, read)},
		{Method: http.MethodDelete, Path: siteRoute + "/connections/{provider}", Handler: orgOrUser(a.disconnect, write)},
		{Method: "POST", Path: "/entities/asset", Handler: org(a.createAsset, write)},
		{Method: "GET", Path: "/entities/asset", Handler: org(a.listAssets, read)},
		{Method: "GET", Path: assetByID, Handler: org(a.getAsset, read)},
		{Method: "PATCH", Path: assetByID, Handler: org(a.updateAsset, write)},
		{Method: "DELETE", Path: assetByID, Handler: org(a.deleteAsset, write)},
		{Method: "GET", Path: "/entities/asset/external-id/{external_id}", Handler: assetPair, Pattern: assetPairPattern},
		// What the devices tell Flexsite (docs/api.md, "Asset events: what the devices tell Flexsite").
		{Method: "POST", Path: assetEventRoute, Handler: org(a.assetEventHandler(""), write)},
		{Method: "POST", Path: assetEventRoute + "/plug-in", Handler: org(a.assetEventHandler("/plug-in"), write)},
		{Method: "POST", Path: assetEventRoute + "/plug-out", Handler: org(a.assetEventHandler("/plug-out"), write)},
		{Method: "POST", Path: assetEventRoute + "/intent", Handler: org(a.assetEventHandler("/intent"), write)},
		{Method: "POST", Path: assetEventRoute + "/charge-now", Handler: org(a.assetEventHandler("/charge-now"), write)},
		{Method: "POST", Path: assetEventRoute + "/charge-now-deleted", Handler: org(a.assetEventHandler("/charge-now-deleted"), write)},
		{Method: "POST", Path: assetEventRoute + "/tariff-update", Handler: org(a.assetEventHandler("/tariff-update"), write)},
		{Method: "POST", Path: assetEventRoute + "/plug-in-schedule", Handler: org(a.plugInSchedule, write)},
		{Method: "GET", Path: assetByID + "/intent", Handler: assetPair, Pattern: assetPairPattern},
		{Method: "GET", Path: assetByID + "/battery-schedule", Handler: assetPair, Pattern: assetPairPattern},
		{Method: "GET", Path: assetByID + "/price-curve", Handler: assetPair, Pattern: assetPairPattern},
		{Method: "POST", Path: assetByID + "/callback/{event_id}", Handler: org(a.dispatchCallback, write)},
		{Method: "GET", Path: "/examples/dispatch-event", Handler: org(a.exampleDispatchEvent)},
		// The plain example needs any organisation token (prod's); ?asset_id= reads the
		// caller's asset's answers, an asset read: entity_read, as every other.
		{Method: "GET", Path: "/examples/ocpp-charging-profile", Handler: withQuery("asset_id",
			org(a.exampleChargingProfile), org(a.exampleChargingProfile, read))},
		// Market prices (docs/api.md, "Prices").
		{Method: "PUT", Path: marketPricesRoute, Handler: org(a.putMarketPrices, flexv1.RolePricesWrite)},
		{Method: "GET", Path: marketPricesRoute, Handler: org(a.getMarketPrices, read)},

		{Method: "POST", Path: "/validation/mpan", Handler: org(a.validateMPAN)},

		{Method: "POST", Path: "/data/readings", Handler: org(a.postReadings, write)},

		{Method: "GET", Path: "/rewards/{site_id}/transactions", Handler: org(a.transactions, flexv1.RoleRewards)},
		{Method: "POST", Path: "/rewards/{site_id}/transactions", Handler: org(a.createTransaction, flexv1.RoleRewardsWrite)},
		{Method: http.MethodPatch, Path: "/rewards/{site_id}/transactions/{transaction_id}",
			Handler: org(a.patchTransaction, flexv1.RoleRewardsAdmin)},
		{Method: "GET", Path: "/rewards/{site_id}/info", Handler: org(a.rewardInfo, flexv1.RoleRewards)},
		{Method: "GET", Path: "/rewards/{site_id}/url/balance", Handler: org(a.balanceURL, flexv1.RoleRewards)},

		{Method: "POST", Path: "/flex-events", Handler: org(a.createFlexEvent, flexv1.RoleFlexEventsWrite)},
		{Method: "GET", Path: "/flex-events", Handler: org(a.listFlexEvents, read)},
		{Method: "GET", Path: "/flex-events/{id}", Handler: org(a.getFlexEvent, read)},

		{Method: "POST", Path: subscriptionsRoute, Handler: org(a.createSubscription, write)},
		{Method: "GET", Path: subscriptionsRoute, Handler: org(a.listSubscriptions, read)},
		{Method: "GET", Path: subscriptionRoute, Handler: org(a.getSubscription, read)},
		{Method: http.MethodDelete, Path: subscriptionRoute, Handler: org(a.deleteSubscription, write)},
		{Method: "POST", Path: subscriptionRoute + "/test", Handler: org(a.testSubscription, write)},
		{Method: "GET", Path: subscriptionRoute + "/deliveries", Handler: org(a.subscriptionDeliveries, read)},
	}
}

// Extra are the handlers the API serves beside its documented routes: the CORS preflights of
// the routes an end-user token may call, the documentation's assets, and the JSON 404 that
// API clients expect for anything else (not net/http's text).
func (a *API) Extra() map[string]http.Handler {
	out := map[string]http.Handler{"GET /docs/": apidocs.Handler(), "/": http.HandlerFunc(notFound)}
	for path, methods := range web.EndUserMethods(a.Routes()) {
		out["OPTIONS "+path] = web.Preflight(methods, a.preflightGranted)
	}
	return out
}

func notFound(w http.ResponseWriter, _ *http.Request) {
	web.WriteJSON(w, http.StatusNotFound, map[string]any{"detail": "Not Found"})
}

func healthz(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }

func (a *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if a.Ready != nil && !a.Ready() {
		http.Error(w, "caches not synced", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ok"))
}

// preflightGranted answers a preflight from the origins recorded on the path's site: the
// cache first, then (for an origin the cache does not know) the API server, which an
// unauthenticated caller pays for from the budget of failed authentications of its address.
func (a *API) preflightGranted(r *http.Request, origin string) bool {
	id, err := validationID(r.PathValue("site_id"))
	if err != nil {
		return false
	}
	ctx := r.Context()
	if a.Households.OriginAllowed(ctx, id, origin, false) {
		return true
	}
	address := a.Guard.TrustedProxies.ClientAddress(r)
	limits := a.Guard.Limits
	if limits.AuthFailures.Exhausted(address) {
		return false
	}
	limits.AuthFailures.Charge(address)
	return a.Households.OriginAllowed(ctx, id, origin, true)
}
