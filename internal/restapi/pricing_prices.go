package restapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/web"
)

// The market prices' routes (docs/api.md, "Prices"): a day's prices declared and read
// back, and the price curves of a site and of an asset. The path and each price are read
// here (422 naming every problem); whether the day is whole, and the rest, is the use case's.

// marketPricesRoute is one market's declared day.
const marketPricesRoute = "/market-prices/{market}/{date}"

// maxMarketPricesBodyBytes bounds a declaration's body: prices.MaxPeriods prices of under 100
// bytes each, with room for indentation. A larger body is a 413 before any of it is decoded.
const maxMarketPricesBodyBytes = 32 << 10

// marketAndDay reads the path's market and date.
func marketAndDay(f *fields, r *http.Request) (string, prices.Day) {
	market := r.PathValue("market")
	if err := prices.CheckMarket(market); err != nil {
		f.AddValidation(err, []any{"path", "market"})
	}
	day, err := prices.ParseDay(r.PathValue("date"))
	if err != nil {
		f.AddValidation(err, []any{"path", "date"})
	}
	return market, day
}

// putMarketPrices declares a day's prices: 201 with the stored day when first declared, 200
// when it replaces what was declared.
func (a *API) putMarketPrices(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	var d pricing.Declaration
	d.Market, d.Day = marketAndDay(f, r)
	body, err := web.DecodeJSONUpTo(r, maxMarketPricesBodyBytes)
	if err != nil {
		return nil, f.Join(err)
	}
	d.Prices = readDeclaredPrices(f, body)
	if err := f.Err(); err != nil {
		return nil, err
	}
	resp, created, err := a.Pricing.DeclarePrices(r.Context(), p, d)
	if err != nil {
		return nil, err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	return web.WithStatus{Status: status, Body: resp}, nil
}

// readDeclaredPrices reads half_hourly_prices: at most prices.MaxPeriods items, each a
// start_timestamp with its zone and a price_gbp_per_mwh with at most two decimals, read from
// the number's own text (never through a float).
func readDeclaredPrices(f *fields, body map[string]any) []prices.Price {
	loc := []any{"body"}
	items, ok := f.Array(body, loc, "half_hourly_prices", true)
	if !ok {
		return nil
	}
	loc = at(loc, "half_hourly_prices")
	if len(items) > prices.MaxPeriods {
		f.Add(fmt.Sprintf("List should have at most %d items after validation, not %d", prices.MaxPeriods, len(items)),
			"too_long", loc)
		return nil
	}
	out := make([]prices.Price, 0, len(items))
	for i, item := range items {
		iloc := at(loc, i)
		obj, ok := item.(map[string]any)
		if !ok {
			f.Add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", iloc)
			continue
		}
		var pr prices.Price
		valid := true
		if t, ok := f.Timestamp(obj, iloc, "start_timestamp", true); ok {
			pr.Start = t
		} else {
			valid = false
		}
		switch v, present := obj["price_gbp_per_mwh"]; n := v.(type) {
		case json.Number:
			c, err := prices.ParsePrice(n.String())
			if err != nil {
				f.AddValidation(err, at(iloc, "price_gbp_per_mwh"))
				valid = false
			}
			pr.Centi = c
		default:
			if present {
				f.Add("Input should be a valid number", "decimal_type", at(iloc, "price_gbp_per_mwh"))
			} else {
				f.Add("Field required", "missing", at(iloc, "price_gbp_per_mwh"))
			}
			valid = false
		}
		if valid {
			out = append(out, pr)
		}
	}
	return out
}

// getMarketPrices reads a declared day (404 when it never was).
func (a *API) getMarketPrices(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	market, day := marketAndDay(f, r)
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Pricing.MarketPrices(r.Context(), p, market, day)
}

// sitePriceCurve answers prod's PriceCurveResponse for a site actively enrolled in price_curve.
func (a *API) sitePriceCurve(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.Pricing.SitePriceCurve(r.Context(), p, id)
}

// assetPriceCurve answers prod's PriceCurveResponse for an asset whose site is actively
// enrolled in price_curve.
func (a *API) assetPriceCurve(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("asset_id"), "asset_id")
	if err != nil {
		return nil, err
	}
	return a.Pricing.AssetPriceCurve(r.Context(), p, id)
}
