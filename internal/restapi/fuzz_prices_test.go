package restapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/schedulestore"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// FuzzMarketPricesBodies fuzzes PUT /market-prices/{market}/{date}: the handler answers a
// well-formed 4xx (at ["path", ...] or ["body", ...]) without storing anything, or, for a whole
// day, reaches the database (down here: 503). Never a 500.
func FuzzMarketPricesBodies(f *testing.F) {
	whole := func(date string, n int, price string) string {
		day, _ := prices.ParseDay(date)
		items := make([]string, 0, n)
		for i, t := range day.Periods() {
			if i == n {
				break
			}
			items = append(items, fmt.Sprintf(`{"start_timestamp": %q, "price_gbp_per_mwh": %s}`, t.Format("2006-01-02T15:04:05Z07:00"), price))
		}
		return `{"half_hourly_prices": [` + strings.Join(items, ",") + `]}`
	}
	for _, seed := range []struct{ market, date, body string }{
		{"price_curve", "2027-01-12", whole("2027-01-12", 48, "45.67")},
		{"price_curve", "2027-03-28", whole("2027-03-28", 46, "-1")},
		{"price_curve", "2027-10-31", whole("2027-10-31", 50, "0.5")},
		{"price_curve", "2027-01-12", whole("2027-01-12", 47, "45.67")},
		{"price_curve", "2027-01-12", whole("2027-01-12", 48, "45.678")},
		{"price_curve", "2027-01-12", whole("2027-01-12", 48, "null")},
		{"price_curve", "2027-01-12", whole("2027-01-12", 48, `"1"`)},
		{"Price Curve", "2027-02-30", `{}`},
		{"price_curve", "2027-01-12", `{"half_hourly_prices": [{"start_timestamp": "2027-01-12T00:00:00", "price_gbp_per_mwh": 1e400}]}`},
		{"price_curve", "2027-01-12", `[]`}, {"price_curve", "2027-01-12", `not json`}, {"", "", ""},
	} {
		f.Add(seed.market, seed.date, []byte(seed.body))
	}
	a := fuzzAPI()
	down := webtest.DownDatabase()
	a.Pricing = pricing.New(a.Households, pricing.Stores{Prices: &pricestore.Store{Pool: down},
		Schedules: &schedulestore.Store{Pool: down}, Dispatches: &dispatchstore.Store{Pool: down},
		AssetEvents: &asseteventstore.Store{Pool: down}})
	f.Fuzz(func(t *testing.T, market, date string, body []byte) {
		r := httptest.NewRequest(http.MethodPut, "/market-prices/x/y", bytes.NewReader(body))
		r.SetPathValue("market", market)
		r.SetPathValue("date", date)
		answer, err := a.putMarketPrices(r, fuzzPrincipal)
		if err == nil {
			t.Fatalf("answered %v without the database", answer)
		}
		if errors.Is(err, pricing.ErrDatabaseUnavailable) {
			return // a whole day: the database was asked
		}
		checkAnswer(t, err, "path", "body")
	})
}
