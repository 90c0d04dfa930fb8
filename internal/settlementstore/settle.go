package settlementstore

import (
	"context"
	"fmt"
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
	var byAsset assetReadings
	err := s.eachSiteReadings(ctx, organisation, []string{site.SiteID}, ev, func(_ string, r assetReadings) error {
		byAsset = r
		return nil
	})
	if err != nil {
		return settlement.Result{}, err
	}
	series, err := SeriesOf(only(byAsset, site.BoundaryAssetIDs))
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

// BatchSize is how many sites SettleSites records in one SQL transaction (Store.BatchSize, when
// not set).
const BatchSize = 5000

func (s *Store) batchSize() int {
	if s.BatchSize > 0 {
		return s.BatchSize
	}
	return BatchSize
}

// SettleSites settles sites of an event that has ended. One query reads every site's readings
// (grouped by site, as they stream in: one pass over the readings however many sites, where a
// query a batch would scan them once a batch) and one the sites' other settled windows; each
// site is settled as its readings arrive, and each BatchSize of them is recorded in one SQL
// transaction (SettleAll: each exactly once; a failure leaves the batches before it recorded
// and nothing of its own). A site is settled when its readings cover the whole window, or
// whatever they cover when final (the deadline has passed). It answers how many sites are
// still pending.
func (s *Store) SettleSites(ctx context.Context, organisation string, ev Event, rules settlement.Event, sites []Site,
	final bool) (pending int, err error) {
	ids := make([]string, 0, len(sites))
	index := make(map[string]int, len(sites))
	for i, site := range sites {
		if _, dup := index[site.SiteID]; !dup {
			index[site.SiteID] = i
			ids = append(ids, site.SiteID)
		}
	}
	windows, err := s.windowsOf(ctx, organisation, ids, ev.ID)
	if err != nil {
		return 0, err
	}
	batch := s.batchSize()
	due := make([]Due, 0, min(batch, len(ids)))
	record := func() error {
		if len(due) == 0 {
			return nil
		}
		_, err := s.SettleAll(ctx, organisation, ev, due)
		due = due[:0]
		return err
	}
	one := func(site Site, byAsset assetReadings) error {
		series, err := SeriesOf(only(byAsset, site.BoundaryAssetIDs))
		if err != nil {
			return err
		}
		res, err := settle(rules, series, windows[site.SiteID], site)
		if err != nil {
			return err
		}
		if !final && res.CoveredSeconds < res.WindowSeconds {
			pending++
			return nil
		}
		due = append(due, Due{SiteID: site.SiteID, Result: res})
		if len(due) >= batch {
			return record()
		}
		return nil
	}
	read := make(map[string]bool, len(ids))
	err = s.eachSiteReadings(ctx, organisation, ids, rules, func(siteID string, byAsset assetReadings) error {
		read[siteID] = true
		return one(sites[index[siteID]], byAsset)
	})
	if err != nil {
		return pending, err
	}
	// The sites without a single reading in the windows settle too (skipped, or pending).
	for _, id := range ids {
		if !read[id] {
			if err := one(sites[index[id]], nil); err != nil {
				return pending, err
			}
		}
	}
	return pending, record()
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

// eachSiteReadings reads the sites' readings the event's settlement needs (Windows), in one
// query, and hands each site's (by asset and label) to each in turn, sites with no reading
// passed over. The query aggregates each asset's label's readings into arrays and orders the
// sites: the rows stream a whole site at a time, a few per site rather than one a reading,
// and no more than one site's readings are held at once. For more than one site it runs with
// a plan made for the sites at hand (QueryExecModeCacheDescribe: never the cached generic plan,
// which, blind to the number of sites, walks the primary key site by site: several times
// slower than one scan of the window's partition at fleet size).
func (s *Store) eachSiteReadings(ctx context.Context, organisation string, siteIDs []string, ev settlement.Event,
	each func(siteID string, byAsset assetReadings) error) error {
	starts, ends := Windows(ev)
	query := `SELECT site_id, asset_id, label, array_agg(start_at), array_agg(end_at), array_agg(value)
		FROM readings WHERE organisation = $1 AND site_id = ANY($2) AND start_at >= $3 AND start_at < $4` + inWindows(5) + `
		GROUP BY site_id, asset_id, label ORDER BY site_id`
	if len(siteIDs) == 1 {
		// One site (Compute: a household's pending event): a few hundred rows, which the
		// cached plan (the primary key) serves in one round trip.
		rows, err := s.Pool.Query(ctx, query, organisation, siteIDs, starts[len(starts)-1], ends[0], starts, ends)
		if err != nil {
			return db.Classify(err)
		}
		return eachSite(rows, each)
	}
	// One read-only transaction, for the work_mem of its sort (SET LOCAL).
	return pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{AccessMode: pgx.ReadOnly}, func(tx pgx.Tx) error {
		// The readings are sorted by site before they are aggregated: at 10,000 sites that is
		// 60 MB, which the default 4 MB sorts on disk, taking longer than the scan it sorts.
		if _, err := tx.Exec(ctx, "SET LOCAL work_mem = '64MB'"); err != nil {
			return db.Classify(err)
		}
		rows, err := tx.Query(ctx, query, pgx.QueryExecModeCacheDescribe,
			organisation, siteIDs, starts[len(starts)-1], ends[0], starts, ends)
		if err != nil {
			return db.Classify(err)
		}
		return eachSite(rows, each)
	})
}

// eachSite hands each site's rows of eachSiteReadings' query to each, a site at a time.
func eachSite(rows pgx.Rows, each func(siteID string, byAsset assetReadings) error) error {
	defer rows.Close()
	var (
		current     string
		byAsset     assetReadings
		site, asset string
		label       string
		from, to    []time.Time
		values      []float64
	)
	for rows.Next() {
		if err := rows.Scan(&site, &asset, &label, &from, &to, &values); err != nil {
			return db.Classify(err)
		}
		if site != current && byAsset != nil {
			if err := each(current, byAsset); err != nil {
				return err
			}
			byAsset = nil
		}
		if byAsset == nil {
			current, byAsset = site, assetReadings{}
		}
		if byAsset[asset] == nil {
			byAsset[asset] = map[settlement.Label][]settlement.Reading{}
		}
		rs := make([]settlement.Reading, len(values))
		for i := range values {
			rs[i] = settlement.Reading{Start: from[i], End: to[i], Value: values[i]}
		}
		byAsset[asset][settlement.Label(label)] = rs
	}
	if err := rows.Err(); err != nil {
		return db.Classify(err)
	}
	if byAsset != nil {
		return each(current, byAsset)
	}
	return nil
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
