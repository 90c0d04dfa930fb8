package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/db/pgserver"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/settlementstore"
)

// Settlement (issue 26): settling one flex event over S sites with 11 days of half-hourly
// readings each, against one raw SQL query that computes the same per-site sums (the energy
// of the readings settlement reads: the event's window laid on each day, an hour wider either
// side) on the same database. Rounds alternate A B B A …, and the ratio of the medians is
// reported in one run. It needs no manager: settlementstore, as the FlexEvent controller
// calls it, on a PostgreSQL of its own (FLEXSITE_POSTGRES_BIN, durability off as in tests).

// settlementDays is how many days of readings each site has (the event's day and the 10 before).
const settlementDays = 11

const settlementOrg = "bench-settlement"

// scenarioSettlement is the scenario's name: its step, its report key.
const scenarioSettlement = "settlement"

func settlementSites(quick bool) int {
	if quick {
		return 1000
	}
	return 10000
}

func runSettlement(ctx context.Context, b *bench, rep *report) error {
	sites := settlementSites(b.p.Mode == modeQuick)
	diag, err := newSettlementDiagnosis(os.Getenv(settlementExplainEnv))
	if err != nil {
		return err
	}
	defer diag.close()
	pool, stop, err := settlementDatabase(ctx, diag.postgresLog)
	if err != nil {
		return err
	}
	defer stop()

	// The event: 17:30–18:30 UK time on a Tuesday at least a week ago (its deadline passed).
	d := time.Now().In(settlement.London).AddDate(0, 0, -8)
	for d.Weekday() != time.Tuesday {
		d = d.AddDate(0, 0, -1)
	}
	start := time.Date(d.Year(), d.Month(), d.Day(), 17, 30, 0, 0, settlement.London)
	rules := settlement.Event{Start: start, End: start.Add(time.Hour), Direction: settlement.TurnDown, RateCentipence: 2500}
	first := time.Date(d.Year(), d.Month(), d.Day()-(settlementDays-1), 0, 0, 0, 0, settlement.London)
	last := time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, settlement.London)

	seeded := time.Now()
	readings, err := seedSettlement(ctx, pool, sites, first, last)
	if err != nil {
		return err
	}
	logf("seeded %d sites, %d readings in %s", sites, readings, time.Since(seeded).Round(time.Second))
	if err := diag.explainFrom(ctx, pool); err != nil {
		return err
	}

	store := &settlementstore.Store{Pool: pool}
	targets := make([]settlementstore.Site, sites)
	for i := range targets {
		targets[i] = settlementstore.Site{Source: settlementstore.Source{SiteID: fmt.Sprintf("site-%05d", i)}}
	}
	starts, ends := settlementstore.Windows(rules)
	raw := func() (time.Duration, error) {
		t0 := time.Now()
		rows, err := pool.Query(ctx, `SELECT site_id, count(*), sum(value * extract(epoch FROM end_at - start_at) / 3600)
			FROM readings WHERE organisation = $1 AND start_at >= $2 AND start_at < $3
			AND tstzrange(start_at, end_at, '[]') && (SELECT range_agg(tstzrange(s, e))
				FROM unnest($4::timestamptz[], $5::timestamptz[]) AS w(s, e))
			GROUP BY site_id`, settlementOrg, starts[len(starts)-1], ends[0], starts, ends)
		if err != nil {
			return 0, err
		}
		n := 0
		var site string
		var count int64
		var kwh float64
		_, err = pgx.ForEachRow(rows, []any{&site, &count, &kwh}, func() error { n++; return nil })
		if err == nil && n != sites {
			err = fmt.Errorf("the raw query summed %d sites, want %d", n, sites)
		}
		return time.Since(t0), err
	}
	round := 0
	settle := func() (time.Duration, error) {
		round++
		ev := settlementstore.EventOf(fmt.Sprintf("bench-event-%d", round), rules)
		t0 := time.Now()
		pending, err := store.SettleSites(ctx, settlementOrg, ev, rules, targets, true)
		took := time.Since(t0)
		if err != nil || pending != 0 {
			return took, fmt.Errorf("settling: %d pending, %w", pending, err)
		}
		var settled, credited int
		if err := pool.QueryRow(ctx, `SELECT count(*), count(transaction_id) FROM flex_event_settlements
			WHERE organisation = $1 AND event_id = $2 AND status = 'settled'`, settlementOrg, ev.ID).Scan(&settled, &credited); err != nil {
			return took, err
		}
		if settled != sites {
			return took, fmt.Errorf("settled %d sites of %d", settled, sites)
		}
		if round == 1 {
			logf("settlement: %d sites settled, %d credited", settled, credited)
		}
		return took, nil
	}
	// A warm-up of each (caches, plans), then mirrored rounds: A B B A A B B A.
	if _, err := raw(); err != nil {
		return err
	}
	if _, err := settle(); err != nil {
		return err
	}
	if err := diag.startProfile(); err != nil {
		return err
	}
	var settleTimes, rawTimes []time.Duration
	for i := range 4 {
		order := []bool{true, false}
		if i%2 == 1 {
			order = []bool{false, true}
		}
		for _, isSettle := range order {
			if isSettle {
				t, err := settle()
				if err != nil {
					return err
				}
				settleTimes = append(settleTimes, t)
			} else {
				t, err := raw()
				if err != nil {
					return err
				}
				rawTimes = append(rawTimes, t)
			}
		}
	}
	diag.stopProfile()
	s, r := median(settleTimes), median(rawTimes)
	logf("settlement %s (median of %v), raw SQL %s (median of %v)", s, settleTimes, r, rawTimes)
	rep.add(scenarioSettlement, "sites", float64(sites), unitCount)
	rep.add(scenarioSettlement, "readings", float64(readings), unitCount)
	rep.add(scenarioSettlement, "settle_seconds", s.Seconds(), unitSeconds)
	rep.add(scenarioSettlement, "raw_sql_seconds", r.Seconds(), unitSeconds)
	rep.addTarget(scenarioSettlement, "settle_to_raw_sql_ratio", s.Seconds()/r.Seconds(), unitRatio, target{Op: "<=", Bound: 3})
	return nil
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// settlementDatabase starts a PostgreSQL of the bench's own under dir and migrates a database.
func settlementDatabase(ctx context.Context, log io.Writer) (*pgxpool.Pool, func(), error) {
	bin, err := dbtest.Find()
	if err != nil {
		return nil, nil, err
	}
	pgDir, err := os.MkdirTemp("", "flexsite-bench-pg-")
	if err != nil {
		return nil, nil, err
	}
	srv, err := pgserver.Start(ctx, pgserver.Options{BinDir: bin, Dir: pgDir, Throwaway: true, Log: log})
	if err != nil {
		_ = os.RemoveAll(pgDir)
		return nil, nil, err
	}
	stop := func() { _ = srv.Stop(); _ = os.RemoveAll(pgDir) }
	conn, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err == nil {
		_, err = conn.Exec(ctx, "CREATE DATABASE flexsite_bench")
		_ = conn.Close(ctx)
	}
	var pool *pgxpool.Pool
	if err == nil {
		pool, err = db.Open(ctx, srv.URL("flexsite_bench"))
	}
	if err == nil {
		err = db.Migrate(ctx, pool)
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return pool, func() { pool.Close(); stop() }, nil
}

// seedSettlement writes half-hourly boundary readings (kW) for every site over [from, to),
// in monthly partitions, and answers how many.
func seedSettlement(ctx context.Context, pool *pgxpool.Pool, sites int, from, to time.Time) (int64, error) {
	if err := db.EnsureReadingPartitions(ctx, pool, from, 2); err != nil {
		return 0, err
	}
	var total int64
	for lo := 0; lo < sites; lo += 1000 {
		tag, err := pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
			SELECT $1, 'site-' || lpad(s::text, 5, '0'), 'meter-' || s, 'boundary_import_kw', t, t + interval '30 minutes',
				0.2 + ((s * 7919 + (extract(epoch FROM t)::bigint / 1800) * 104729) % 997) / 250.0
			FROM generate_series($2::int, $3::int) AS s,
				generate_series($4::timestamptz, $5::timestamptz - interval '30 minutes', interval '30 minutes') AS t`,
			settlementOrg, lo, min(lo+1000, sites)-1, from, to)
		if err != nil {
			return total, err
		}
		total += tag.RowsAffected()
	}
	_, err := pool.Exec(ctx, "ANALYZE readings")
	return total, err
}
