package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/prices"
)

// The battery schedule judged against the database (issue 49), as the cold transactions page
// is (scenario_txcold.go): a read of GET /entities/asset/{asset_id}/battery-schedule asks
// PostgreSQL for the battery's standing dispatches over the horizon (the prices are kept in
// memory), so its fair baseline is a handler that asks PostgreSQL the same question:
//
//   - the manager's route, walking the fleet's batteries in turn;
//   - against a raw server (this binary again, in the trivial server's place) whose pool is
//     made by db.OpenBounded from the same URL, as the manager's is, and whose handler runs
//     dispatchstore.Store.WindowsOfAsset over the same horizon (prices.Horizon with tomorrow
//     declared, as the pricing step declares it: the function the manager's read runs, so the
//     same SQL), scans every row, and writes as many bytes as the manager's answer for that
//     battery (a constant body: the door's encoder is a door's, which the bench may not
//     import; so the raw side is the SQL, the scan and the write, without authentication, the
//     asset and enrolment lookups, the schedule's rule or the encoding);
//
// over the same batteries in the same order, in the read path's mirrored passes. The ratio is
// the manager's throughput over the raw server's (target ≥ 0.8).

const (
	// batteryRawServerArg starts this binary as the raw battery schedule server (its only
	// argument the address): read before main's flags, as the raw transactions server's is.
	batteryRawServerArg = "-battery-schedule-raw-server"
	// batteryRawName is the raw side's name among the read targets.
	batteryRawName = "battery_schedule_same_sql"
	// windowsHeader is how many dispatch windows the raw server read, for the log.
	windowsHeader = "X-Windows"
	// batterySameSQLTarget bounds the battery schedule ÷ the same SQL.
	batterySameSQLTarget = 0.8
)

func init() {
	if len(os.Args) == 3 && os.Args[1] == batteryRawServerArg {
		if err := serveWithPool(os.Args[2], func(pool *pgxpool.Pool, mux *http.ServeMux) {
			batteryRoutes(&dispatchstore.Store{Pool: pool}, mux)
		}); err != nil {
			fmt.Fprintln(os.Stderr, "raw battery schedule server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// batteryRoutes are the raw battery schedule: GET /raw/battery-schedule/{namespace}/{asset_id}?bytes=n.
func batteryRoutes(store *dispatchstore.Store, mux *http.ServeMux) {
	body := sizedBody()
	mux.HandleFunc("GET /raw/battery-schedule/{namespace}/{asset_id}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.URL.Query().Get("bytes"))
		if err != nil || n < 2 || n > maxTrivialBytes {
			http.Error(w, "bad bytes", http.StatusBadRequest)
			return
		}
		from, to := prices.Horizon(time.Now(), true)
		windows, err := store.WindowsOfAsset(r.Context(), r.PathValue("namespace"), r.PathValue("asset_id"), from, to)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Header().Set(windowsHeader, strconv.Itoa(len(windows)))
		_, _ = w.Write(body[:n]) // one slice, as the REST API writes its answers
	})
}

// startBatteryRaw runs this same binary as the raw battery schedule server (startSelf).
func (b *bench) startBatteryRaw(ctx context.Context) (string, error) {
	return b.startSelf(ctx, "raw battery schedule server", "battery-raw.log", "healthz", func(addr string) []string {
		return []string{batteryRawServerArg, addr}
	})
}

// answerSizes reads every url(i), i < n, once (C clients) and returns each answer's size:
// what a raw side writes for the same item.
func (b *bench) answerSizes(ctx context.Context, what string, url func(int) string, n int, token string) ([]int, error) {
	sizes := make([]int, n)
	t, err := runConcurrent(ctx, n, b.p.Concurrency, func(ctx context.Context, i int) error {
		got, err := getCounting(ctx, b.http, url(i), token)
		sizes[i] = int(got)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading every %s once: %w", what, err)
	}
	logf("%s: every one of %d read once in %s (p50 %.1f ms, %d bytes the first)",
		what, n, t.wall.Round(time.Millisecond), t.percentileMS(50), sizes[0])
	return sizes, nil
}

// measureBatteryAgainstSQL loads the battery schedule over every battery in turn against the
// raw server running its SQL, in mirrored passes, and reports the ratio and each side's
// figures.
func (b *bench) measureBatteryAgainstSQL(ctx context.Context, rep *report, ns string, batteries []string,
	schedule func(int) string, token string) error {
	rawURL, err := b.startBatteryRaw(ctx)
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	sizes, err := b.answerSizes(ctx, "battery schedules", schedule, len(batteries), token)
	if err != nil {
		return err
	}
	raw := func(i int) string {
		k := i % len(batteries)
		return fmt.Sprintf("%sraw/battery-schedule/%s/%s?bytes=%d", rawURL, ns, batteries[k], sizes[k])
	}
	if n, err := getCounting(ctx, b.http, raw(0), token); err != nil || int(n) != sizes[0] {
		return fmt.Errorf("raw battery schedule: %d bytes (want %d): %v", n, sizes[0], err)
	}
	targets := []readTarget{{batteryScheduleTarget, schedule, roleManager}, {batteryRawName, raw, roleTrivial}}
	// Each side walks every battery in turn across its slots (one counter a side).
	var next [2]atomic.Int64
	c := b.p.Concurrency
	load := func(ctx context.Context, j int, slot time.Duration) (timings, error) {
		return runFor(ctx, c, slot, func(ctx context.Context, _, _ int) error {
			return getOK(ctx, b.http, targets[j].url(int(next[j].Add(1)-1)), token)
		})
	}
	results, err := b.mirrored(ctx, []string{targets[0].name, targets[1].name}, load)
	if err != nil {
		return err
	}
	page, same := results[batteryScheduleTarget], results[batteryRawName]
	total := 0
	for _, s := range sizes {
		total += s
	}
	pageRatio := ratio(page.t.rate(), same.t.rate())
	rep.add(pricingFigures, batteryRawName+"_answer_bytes_mean", ratio(float64(total), float64(len(sizes))), unitCount)
	rep.addTarget(pricingFigures, batteryScheduleTarget+"_vs_same_sql_ratio", pageRatio, unitRatio, target{">=", batterySameSQLTarget})
	for _, side := range []struct {
		name, role string
		r          *readResult
	}{{batteryScheduleTarget + "_sql_pass", roleManager, page}, {batteryRawName, roleTrivial, same}} {
		rep.add(pricingFigures, side.name+"_rps", side.r.t.rate(), unitPerSec)
		rep.add(pricingFigures, side.name+"_p99_ms", side.r.t.percentileMS(99), unitMS)
		rep.add(pricingFigures, side.name+"_server_cpu_us_per_request", side.r.cpuPerCallUS(side.role), unitCount)
		rep.add(pricingFigures, side.name+"_postgres_cpu_us_per_request", side.r.cpuPerCallUS(rolePostgres), unitCount)
	}
	rep.add(pricingFigures, batteryScheduleTarget+"_vs_same_sql_cpu_ratio",
		ratio(same.cpuPerCallUS(roleTrivial)+same.cpuPerCallUS(rolePostgres),
			page.cpuPerCallUS(roleManager)+page.cpuPerCallUS(rolePostgres)), unitRatio)
	logf("pricing battery_schedule over %d batteries: the manager %.0f/s (p99 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs) "+
		"against the same SQL raw %.0f/s (p99 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs): ratio %.2f",
		len(batteries), page.t.rate(), page.t.percentileMS(99), page.cpuPerCallUS(roleManager), page.cpuPerCallUS(rolePostgres),
		same.t.rate(), same.t.percentileMS(99), same.cpuPerCallUS(roleTrivial), same.cpuPerCallUS(rolePostgres), pageRatio)
	return nil
}
