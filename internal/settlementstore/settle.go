package settlementstore

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/settlement"
)

// Site is one site of an event to settle.
type Site struct {
	Source
	// OtherEventDays are the days of the site's other events known outside the database (the
	// FlexEvents that name it); the windows of its settled events are added.
	OtherEventDays map[settlement.Date]bool
	// RatedPowerW is the sum of the site's assets' power ratings (settlement.Input's).
	RatedPowerW int64
}

// Compute reads a site's readings for the event and the LookbackDays before it and applies
// the rules (settlement.Settle): what the site would be settled at now.
func (s *Store) Compute(ctx context.Context, organisation, eventID string, ev settlement.Event, site Site) (settlement.Result, error) {
	readings, err := s.readingsOf(ctx, organisation, []string{site.SiteID}, ev)
	if err != nil {
		return settlement.Result{}, err
	}
	series, err := SeriesOf(only(readings[site.SiteID], site.BoundaryAssetIDs))
	if err != nil {
		return settlement.Result{}, err
	}
	windows, err := s.SettledWindows(ctx, organisation, site.SiteID, eventID)
	if err != nil {
		return settlement.Result{}, err
	}
	return settle(ev, series, windows, site)
}

func settle(ev settlement.Event, series settlement.Series, windows []Window, site Site) (settlement.Result, error) {
	days := EventDays(windows)
	for d := range site.OtherEventDays {
		days[d] = true
	}
	return settlement.Settle(settlement.Input{Event: ev, Energy: series, OtherEventDays: days, RatedPowerW: site.RatedPowerW})
}

// BatchSize is how many sites SettleSites reads and writes at once.
const BatchSize = 5000

// SettleSites settles sites of an event that has ended, BatchSize at a time: one query reads
// a batch's readings, one its other settled windows, and one SQL transaction records its
// settlements (SettleAll: each exactly once). A site is settled when its readings cover the
// whole window, or whatever they cover when final (the deadline has passed). It answers how
// many sites are still pending.
func (s *Store) SettleSites(ctx context.Context, organisation string, ev Event, rules settlement.Event, sites []Site,
	final bool) (pending int, err error) {
	for batch := range slices.Chunk(sites, BatchSize) {
		p, err := s.settleBatch(ctx, organisation, ev, rules, batch, final)
		pending += p
		if err != nil {
			return pending, err
		}
	}
	return pending, nil
}

func (s *Store) settleBatch(ctx context.Context, organisation string, ev Event, rules settlement.Event, sites []Site,
	final bool) (int, error) {
	ids := make([]string, len(sites))
	for i, site := range sites {
		ids[i] = site.SiteID
	}
	readings, err := s.readingsOf(ctx, organisation, ids, rules)
	if err != nil {
		return 0, err
	}
	windows, err := s.windowsOf(ctx, organisation, ids, ev.ID)
	if err != nil {
		return 0, err
	}
	var due []Due
	pending := 0
	for _, site := range sites {
		series, err := SeriesOf(only(readings[site.SiteID], site.BoundaryAssetIDs))
		if err != nil {
			return 0, err
		}
		res, err := settle(rules, series, windows[site.SiteID], site)
		if err != nil {
			return 0, err
		}
		if !final && res.CoveredSeconds < res.WindowSeconds {
			pending++
			continue
		}
		due = append(due, Due{SiteID: site.SiteID, Result: res})
	}
	_, err = s.SettleAll(ctx, organisation, ev, due)
	return pending, err
}

// Windows are the event's window laid on each day the rules may read (the event's day and
// the LookbackDays+1 before it, by UK local date), an hour wider either side (a register's
// previous reading, the clocks changing): the only readings settlement needs.
func Windows(ev settlement.Event) (starts, ends []time.Time) {
	start, end := ev.Start.In(settlement.London), ev.End.In(settlement.London)
	for k := 0; k <= settlement.LookbackDays+1; k++ {
		starts = append(starts, start.AddDate(0, 0, -k).Add(-time.Hour))
		ends = append(ends, end.AddDate(0, 0, -k).Add(time.Hour))
	}
	return starts, ends
}

// inWindows restricts a query of readings to Windows ($n and $n+1).
func inWindows(n int) string {
	return fmt.Sprintf(` AND tstzrange(start_at, end_at, '[]') && (SELECT range_agg(tstzrange(s, e))
		FROM unnest($%d::timestamptz[], $%d::timestamptz[]) AS w(s, e))`, n, n+1)
}

// assetReadings are a site's readings by asset and label.
type assetReadings = map[string]map[settlement.Label][]settlement.Reading

// only keeps the readings of the boundary meters, when the site has any.
func only(byAsset assetReadings, boundary []string) assetReadings {
	if len(boundary) == 0 {
		return byAsset
	}
	out := assetReadings{}
	for _, a := range boundary {
		if r, ok := byAsset[a]; ok {
			out[a] = r
		}
	}
	return out
}

// readingsOf reads the sites' readings the event's settlement needs (Windows), by site,
// asset and label, in one query.
func (s *Store) readingsOf(ctx context.Context, organisation string, siteIDs []string, ev settlement.Event) (
	map[string]map[string]map[settlement.Label][]settlement.Reading, error) {
	starts, ends := Windows(ev)
	rows, err := s.Pool.Query(ctx, `SELECT site_id, asset_id, label, start_at, end_at, value FROM readings
		WHERE organisation = $1 AND site_id = ANY($2) AND start_at >= $3 AND start_at < $4`+inWindows(5),
		organisation, siteIDs, starts[len(starts)-1], ends[0], starts, ends)
	if err != nil {
		return nil, db.Classify(err)
	}
	out := make(map[string]map[string]map[settlement.Label][]settlement.Reading, len(siteIDs))
	var site string
	var r reading
	_, err = pgx.ForEachRow(rows, []any{&site, &r.asset, &r.label, &r.Start, &r.End, &r.Value}, func() error {
		bySite := out[site]
		if bySite == nil {
			bySite = map[string]map[settlement.Label][]settlement.Reading{}
			out[site] = bySite
		}
		if bySite[r.asset] == nil {
			bySite[r.asset] = map[settlement.Label][]settlement.Reading{}
		}
		bySite[r.asset][r.label] = append(bySite[r.asset][r.label], r.Reading)
		return nil
	})
	return out, db.Classify(err)
}

// windowsOf are the windows of the sites' settled events other than eventID, by site.
func (s *Store) windowsOf(ctx context.Context, organisation string, siteIDs []string, eventID string) (map[string][]Window, error) {
	rows, err := s.Pool.Query(ctx, `SELECT site_id, start_at, end_at FROM flex_event_settlements
		WHERE organisation = $1 AND site_id = ANY($2) AND event_id <> $3 AND start_at IS NOT NULL`,
		organisation, siteIDs, eventID)
	if err != nil {
		return nil, db.Classify(err)
	}
	out := map[string][]Window{}
	var site string
	var w Window
	_, err = pgx.ForEachRow(rows, []any{&site, &w.Start, &w.End}, func() error {
		out[site] = append(out[site], w)
		return nil
	})
	return out, db.Classify(err)
}

// EventOf is what a settlement records of the rules' event.
func EventOf(id string, e settlement.Event) Event {
	return Event{ID: id, Start: e.Start.UTC(), End: e.End.UTC(), RateCentipence: e.RateCentipence}
}
