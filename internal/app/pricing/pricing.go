// Package pricing holds the use cases of prices and schedules (docs/api.md, "Prices", "Battery
// schedule" and "The EV schedule"): an organisation's half-hourly market prices declared per UK day
// and read back, the price curve of a site or asset actively enrolled in price_curve, an EV's
// plug-in schedule (internal/evschedule's rule, each answer kept), a battery's schedule
// (internal/batteryschedule's rule), the example OCPP charging profile (internal/ocpp), and what
// the household's pages show of them. The rules live in those pure packages; this package reads
// their inputs (the cache, the prices, the asset events, the dispatches) and speaks no HTTP.
package pricing

import (
	"time"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/schedulestore"
)

// Service runs the prices' and schedules' use cases.
type Service struct {
	Log logr.Logger
	// Households finds the caller's sites and assets (the cache first, then the API server).
	Households  *app.Service
	Prices      *pricestore.Store
	Schedules   *schedulestore.Store
	Dispatches  *dispatchstore.Store
	AssetEvents *asseteventstore.Store
	Now         func() time.Time

	// kept holds the prices of the current horizon while Listen hears their declarations.
	kept priceCache
	// reads are the cache's stores the hot reads look objects up in.
	reads cacheReads
}

// Stores are the PostgreSQL stores the use cases read and write.
type Stores struct {
	Prices      *pricestore.Store
	Schedules   *schedulestore.Store
	Dispatches  *dispatchstore.Store
	AssetEvents *asseteventstore.Store
}

// New builds the use cases on the household use cases and the stores; every store is required.
func New(households *app.Service, st Stores) *Service {
	if st.Prices == nil || st.Prices.Pool == nil || st.Schedules == nil || st.Schedules.Pool == nil ||
		st.Dispatches == nil || st.Dispatches.Pool == nil || st.AssetEvents == nil || st.AssetEvents.Pool == nil {
		panic("pricing.New: the prices', schedules', dispatches' and asset events' stores are required")
	}
	now := households.Now
	if now == nil {
		now = time.Now
	}
	return &Service{Log: households.Log.WithName("pricing"), Households: households, Prices: st.Prices,
		Schedules: st.Schedules, Dispatches: st.Dispatches, AssetEvents: st.AssetEvents, Now: now,
		kept: newPriceCache(maxKeptPriceBytes)}
}

// ErrDatabaseUnavailable answers a request the database cannot serve now: nothing is kept; the
// client tries again (503 with Retry-After).
var ErrDatabaseUnavailable = &app.Error{Kind: app.Unavailable,
	Detail: "The prices and schedules store is unavailable; nothing was stored, retry", RetryAfter: db.RetryAfterSeconds}

// failed is a database error as the caller is told it: unavailable (try again), or internal.
func (s *Service) failed(err error) error {
	if db.Unavailable(err) {
		s.Log.Info("pricing: the database is unavailable", "error", err.Error())
		return ErrDatabaseUnavailable
	}
	return err
}
