package pricing

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/prices"
)

// The market prices' use cases (docs/api.md, "Prices"): an organisation declares a UK
// day's half-hourly prices of a market whole and reads them back; a site or asset actively
// enrolled in price_curve reads its market's curve. The rules (a day's periods, two decimals,
// the horizon) are internal/prices'.

// Declaration is a day's prices as a request declares them: the market and the date already
// read (prices.CheckMarket, prices.ParseDay), each price's start and amount too
// (prices.ParsePrice); whether they make the day whole is the use case's (prices.CheckDay).
type Declaration struct {
	Market string
	Day    prices.Day
	Prices []prices.Price
}

// HalfHourlyPrice is one settlement period's price as the API writes it: its start in UTC,
// the price in £/MWh (two decimals). Production declares the price a required number, so a
// period without one is not listed (a curve's undeclared periods).
type HalfHourlyPrice struct {
	StartTimestamp time.Time `json:"start_timestamp"`
	PriceGBPPerMWh float64   `json:"price_gbp_per_mwh"`
}

// MarketPricesResponse is a declared day: GET and PUT /market-prices/{market}/{date}.
type MarketPricesResponse struct {
	Market           string            `json:"market"`
	Date             string            `json:"date"`
	HalfHourlyPrices []HalfHourlyPrice `json:"half_hourly_prices"`
	UpdatedAt        time.Time         `json:"updated_at"`
	UpdatedBy        string            `json:"updated_by"`
}

// PriceCurveResponse is prod's price curve of a site or an asset.
type PriceCurveResponse struct {
	HalfHourlyTradedPrices []HalfHourlyPrice `json:"half_hourly_traded_prices"`
}

// ErrMarketPricesNotFound answers a day the organisation never declared for that market
// (another organisation's days are not found either).
var ErrMarketPricesNotFound = app.Fail(app.NotFound, "Market prices not found for that market and day")

// pricesLoc is where a declaration's prices are in the request.
var pricesLoc = []any{"body", "half_hourly_prices"}

// DeclarePrices keeps a day's prices, replacing what was declared for it, in one transaction:
// created tells a first declaration (201) from a replacement (200). A day that is not whole
// is refused (422), naming every problem; nothing is stored then, nor when the database is
// down (503).
func (s *Service) DeclarePrices(ctx context.Context, p *auth.Principal, d Declaration) (MarketPricesResponse, bool, error) {
	if err := organisationOnly(p); err != nil {
		return MarketPricesResponse{}, false, err
	}
	sorted, problems := prices.CheckDay(d.Day, d.Prices)
	if len(problems) > 0 {
		items := make([]app.FieldError, 0, len(problems))
		for _, pr := range problems {
			loc := pricesLoc
			if pr.Index >= 0 {
				loc = append(append([]any{}, pricesLoc...), pr.Index)
				if pr.Field != "" {
					loc = append(loc, pr.Field)
				}
			}
			items = append(items, app.Field(pr.Err.Msg, pr.Err.Type, loc...))
		}
		return MarketPricesResponse{}, false, app.InvalidFields(items...)
	}
	// PostgreSQL keeps microseconds: the answer says what a later GET reads.
	now := s.Now().UTC().Truncate(time.Microsecond)
	replaced, err := s.Prices.Put(ctx, p.Namespace, d.Market, d.Day, sorted, p.Username, now)
	// Whatever happened (a commit whose answer was lost included), this replica's next read
	// asks the database: read-your-writes here without waiting for the notification.
	s.kept.Invalidate(marketKey{p.Namespace, d.Market})
	if err != nil {
		return MarketPricesResponse{}, false, s.failed(err)
	}
	return marketPrices(d.Market, d.Day, sorted, now, p.Username), !replaced, nil
}

// MarketPrices reads a declared day of the caller's organisation.
func (s *Service) MarketPrices(ctx context.Context, p *auth.Principal, market string, day prices.Day) (MarketPricesResponse, error) {
	if err := organisationOnly(p); err != nil {
		return MarketPricesResponse{}, err
	}
	declared, ok, err := s.Prices.Day(ctx, p.Namespace, market, day)
	if err != nil {
		return MarketPricesResponse{}, s.failed(err)
	}
	if !ok {
		return MarketPricesResponse{}, ErrMarketPricesNotFound
	}
	return marketPrices(market, day, declared.Prices, declared.UpdatedAt, declared.UpdatedBy), nil
}

func marketPrices(market string, day prices.Day, ps []prices.Price, at time.Time, by string) MarketPricesResponse {
	out := MarketPricesResponse{Market: market, Date: day.String(), UpdatedAt: at.UTC(), UpdatedBy: by,
		HalfHourlyPrices: make([]HalfHourlyPrice, len(ps))}
	for i, pr := range ps {
		out.HalfHourlyPrices[i] = HalfHourlyPrice{StartTimestamp: pr.Start.UTC(), PriceGBPPerMWh: pr.Centi.Float()}
	}
	return out
}

// SitePriceCurve is the price curve of the caller's site actively enrolled in price_curve
// (app.ErrSiteNotFound otherwise), encoded as prod's PriceCurveResponse.
func (s *Service) SitePriceCurve(ctx context.Context, p *auth.Principal, siteID string) (app.EncodedJSON, error) {
	if _, err := s.siteEnrolledIn(ctx, p, siteID, flexv1.PropositionPriceCurve); err != nil {
		return nil, err
	}
	return s.priceCurve(ctx, p.Namespace)
}

// AssetPriceCurve is the price curve of the caller's asset whose site is actively enrolled in
// price_curve (app.ErrAssetNotFound otherwise): its site's, encoded as prod's
// PriceCurveResponse.
func (s *Service) AssetPriceCurve(ctx context.Context, p *auth.Principal, assetID string) (app.EncodedJSON, error) {
	if _, _, err := s.assetEnrolledIn(ctx, p, assetID, flexv1.PropositionPriceCurve); err != nil {
		return nil, err
	}
	return s.priceCurve(ctx, p.Namespace)
}

// priceCurve is the price_curve market's curve over the horizon at now, encoded. It is the
// same answer for every site of the organisation at a given moment: kept with the horizon's
// prices (priceCache) while they are unchanged, else read in one query (up to tomorrow's 23:00
// and whether tomorrow is declared, which decides where the horizon ends) and encoded.
func (s *Service) priceCurve(ctx context.Context, organisation string) (app.EncodedJSON, error) {
	market, err := s.marketOf(ctx, flexv1.PropositionPriceCurve)
	if err != nil {
		return nil, err
	}
	now := s.Now()
	kept, epoch, err := s.horizonPrices(ctx, organisation, market, now)
	if err != nil {
		return nil, err
	}
	if kept.curve != nil {
		return kept.curve, nil
	}
	from, to := prices.Horizon(now, kept.span.DayDeclared)
	curve := prices.Curve(from, to, kept.span.Prices)
	out := PriceCurveResponse{HalfHourlyTradedPrices: make([]HalfHourlyPrice, 0, len(curve))}
	for _, period := range curve {
		if period.Centi != nil { // an undeclared period is not listed
			out.HalfHourlyTradedPrices = append(out.HalfHourlyTradedPrices,
				HalfHourlyPrice{StartTimestamp: period.Start, PriceGBPPerMWh: period.Centi.Float()})
		}
	}
	// Encoded as the REST API's encoder would (HTML-safe, a trailing newline): the kept bytes
	// are the answer.
	var buf bytes.Buffer
	if err := json.NewEncoder(&buf).Encode(out); err != nil {
		return nil, err
	}
	encoded := app.EncodedJSON(buf.Bytes())
	s.kept.keep(marketKey{organisation, market}, epoch, kept.periodStart, kept.span, encoded)
	return encoded, nil
}

// horizonPrices are the market's prices over the horizon at now (from the current settlement
// period's start to tomorrow's 23:00, and whether tomorrow is declared): kept, else read in
// one query and kept when nothing was declared meanwhile. epoch is the token of the read, for
// keeping what it derives from them (the encoded curve). The entry is read-only.
func (s *Service) horizonPrices(ctx context.Context, organisation, market string, now time.Time) (*keptPrices, uint64, error) {
	k := marketKey{organisation, market}
	start := prices.PeriodStart(now)
	// The token is taken with the entry (one lock): an invalidation after it makes whatever
	// this read derives unkeepable.
	e, epoch := s.kept.lookup(k, start)
	if e != nil {
		return e, epoch, nil
	}
	tomorrow := prices.Tomorrow(now)
	span, err := s.Prices.Range(ctx, organisation, market, start, tomorrow.At(23, 0), tomorrow)
	if err != nil {
		return nil, 0, s.failed(err)
	}
	s.kept.keep(k, epoch, start, span, nil)
	return &keptPrices{periodStart: start, span: span}, epoch, nil
}

// organisationOnly refuses a caller that is not an organisation's API client: prices are an
// organisation's, never a household's.
func organisationOnly(p *auth.Principal) error {
	if p == nil || p.Kind != auth.KindOrganisation {
		return app.Fail(app.Forbidden, "Market prices are declared and read with an organisation's token")
	}
	return nil
}
