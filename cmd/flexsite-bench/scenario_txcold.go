package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/probe"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// The two sides of the step: the manager's page, and the same SQL served raw.
const (
	txColdPage = "page"
	txColdRaw  = "raw"
)

// The transactions page judged against the database (issue 38). At 10,000 sites almost every
// read of GET /rewards/{site_id}/transactions misses the kept pages, so what a page costs is
// what a read that asks PostgreSQL costs, and the fair baseline is not a handler that answers
// from memory but one that asks PostgreSQL the same question:
//
//   - the manager, restarted with FLEXSITE_BENCH_NO_KEPT_PAGES=1 (no page or balance kept:
//     every read cold, as the bound of the kept pages makes it at a fleet past it), reading
//     every site of the fleet in turn;
//   - against a raw server (this binary again, as the trivial server is) whose pool is made
//     by db.OpenBounded from the same URL, as the manager's is (the same settings: at least 8
//     connections, the same health check and connect timeout), and whose handler runs
//     rewardstore.Store.PageWithBalance, the function the manager's read runs (one home for
//     the SQL), scans every row, and writes as many bytes as the manager's answer for that
//     site (a constant body: the door's encoder is a door's, which the bench may not import;
//     so the raw side is the SQL, the scan and the write, without the encoding);
//
// over the same sites in the same order, in the read path's mirrored passes. The ratio is
// the manager's throughput over the raw server's (target ≥ 0.8). After the passes the
// manager's CPU and allocations are profiled under the same load
// (cpu-reads-transactions-cold.pb.gz), and the manager is restarted as it was, kept pages on,
// for the steps that follow.

const (
	scenarioTxCold = "transactions cold"
	// txColdKey is the step's report key, in the read path's section of the table.
	txColdKey = "transactions_cold"
	// txColdRawServerArg starts this binary as the raw transactions server (its only argument
	// the address): read before main's flags, as the raw meter lookups' role is.
	txColdRawServerArg = "-transactions-raw-server"
	// noKeptPagesEnv is internal/app/rewards' switch of the same name (bench only): the
	// manager run with it keeps no transactions page nor balance.
	noKeptPagesEnv = "FLEXSITE_BENCH_NO_KEPT_PAGES"
	// txColdLimit is the page both sides read (and the read path's transactions target):
	// a page of 100, asked for with limit (without it the REST API answers the whole
	// history, the same 52 transactions of a bench ledger, but not as a page).
	txColdLimit = 100
	// txRowsHeader is how many transactions the raw server's page held, for the bench to check
	// that it read the whole page.
	txRowsHeader = "X-Transactions"
)

func init() {
	scenarioLabels[txColdKey] = labelReads
	if len(os.Args) == 3 && os.Args[1] == txColdRawServerArg {
		if err := serveTransactionsRaw(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "raw transactions server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

func runTxCold(ctx context.Context, b *bench, rep *report) (err error) {
	if b.fleet == nil { // the step alone: the fleet of the mode's largest size
		if b.fleet, err = b.organisation(ctx, "bench-fleet", 10); err != nil {
			return err
		}
	}
	if err := b.growFleetTo(ctx, b.p.ScaleLevels[len(b.p.ScaleLevels)-1]); err != nil {
		return err
	}
	ids, ns := b.fleet.siteIDs, b.fleet.ns
	if err := b.checkLedger(ctx, ids[len(ids)-1]); err != nil {
		return err
	}
	if err := b.restartManager(ctx, true); err != nil {
		return err
	}
	defer func() {
		if rerr := b.restartManager(ctx, false); err == nil {
			err = rerr
		}
	}()
	rawURL, err := b.startTransactionsRaw(ctx)
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return err
	}
	api := b.mgr.apiURL
	page := func(i int) string {
		return fmt.Sprintf("%s/rewards/%s/transactions?limit=%d", api, ids[i%len(ids)], txColdLimit)
	}
	sizes, err := b.pageSizes(ctx, page, len(ids), token)
	if err != nil {
		return err
	}
	raw := func(i int) string {
		k := i % len(ids)
		return fmt.Sprintf("%sraw/transactions/%s/%s?limit=%d&bytes=%d", rawURL, ns, ids[k], txColdLimit, sizes[k])
	}
	if err := b.checkTransactionsRaw(ctx, raw(0), sizes[0], token); err != nil {
		return err
	}
	if err := b.checkNoKeptPages(ctx); err != nil {
		return err
	}
	targets := []readTarget{{txColdPage, page, roleManager}, {txColdRaw, raw, roleTrivial}}
	// Each side walks every site in turn across its slots (one counter a side, not one a
	// slot), so the reads do not return to the first sites, hot in PostgreSQL's buffers, in
	// every slot.
	var next [2]atomic.Int64
	c := b.p.Concurrency
	results, err := b.mirrored(ctx, []string{txColdPage, txColdRaw}, func(ctx context.Context, j int, slot time.Duration) (timings, error) {
		return runFor(ctx, c, slot, func(ctx context.Context, _, _ int) error {
			return getOK(ctx, b.http, targets[j].url(int(next[j].Add(1)-1)), token)
		})
	})
	if err != nil {
		return err
	}
	reportTxCold(rep, len(ids), sizes, results)
	return b.profileReads(ctx, readTarget{"transactions-cold", page, roleManager}, token)
}

// restartManager stops the manager once it is idle and starts it again, with every read of a
// transactions page cold (noKeptPages) or as deployed, and waits until it is idle again: the
// cold start's reconciles must not fall into the measured reads.
func (b *bench) restartManager(ctx context.Context, noKeptPages bool) error {
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return err
	}
	b.mgr.stop()
	// The manager inherits the bench's environment (startChild); the bench's own setting is
	// put back once it has started.
	prev, had := os.LookupEnv(noKeptPagesEnv)
	if noKeptPages {
		_ = os.Setenv(noKeptPagesEnv, "1")
	} else {
		_ = os.Unsetenv(noKeptPagesEnv)
	}
	err := b.startManager(ctx)
	if had {
		_ = os.Setenv(noKeptPagesEnv, prev)
	} else {
		_ = os.Unsetenv(noKeptPagesEnv)
	}
	if err != nil {
		return err
	}
	_, err = b.mgr.waitIdle(ctx, b.p.Settle)
	logf("transactions cold: manager restarted with kept pages %s", map[bool]string{true: "off", false: "on"}[noKeptPages])
	return err
}

// pageSizes reads every site's page once through the manager (n sites, C clients) and
// returns each answer's size: what the raw side writes for the same site. The pass also
// brings both sides to the same start: PostgreSQL has read every site's history once.
func (b *bench) pageSizes(ctx context.Context, page func(int) string, n int, token string) ([]int, error) {
	sizes := make([]int, n)
	t, err := runConcurrent(ctx, n, b.p.Concurrency, func(ctx context.Context, i int) error {
		got, err := getCounting(ctx, b.http, page(i), token)
		sizes[i] = int(got)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading every page once: %w", err)
	}
	logf("transactions cold: every one of %d sites' pages read once in %s (p50 %.1f ms, %d bytes the first)",
		n, t.wall.Round(time.Millisecond), t.percentileMS(50), sizes[0])
	return sizes, nil
}

// checkTransactionsRaw makes sure the raw server answers a whole page: as many transactions
// as the bench credited each site, in as many bytes as the manager's answer.
func (b *bench) checkTransactionsRaw(ctx context.Context, url string, size int, token string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return err
	}
	want := min(txColdLimit, b.p.Transactions)
	if resp.StatusCode != http.StatusOK || resp.Header.Get(txRowsHeader) != strconv.Itoa(want) || body.Len() != size {
		return fmt.Errorf("raw transactions page: %s, %s transactions in %d bytes, want 200, %d in %d bytes",
			resp.Status, resp.Header.Get(txRowsHeader), body.Len(), want, size)
	}
	return nil
}

// checkNoKeptPages makes sure the manager kept nothing of the pages it has read: every read
// measured is cold.
func (b *bench) checkNoKeptPages(ctx context.Context) error {
	samples, err := probe.Fetch(ctx, probeClient, b.mgr.metricsURL, "flexsite_rewards_kept_page_bytes")
	if err != nil {
		return err
	}
	if kept := probe.SumOf(samples, "flexsite_rewards_kept_page_bytes"); kept != 0 {
		return fmt.Errorf("the manager run with %s=1 keeps %.0f bytes of pages: the reads would not be cold", noKeptPagesEnv, kept)
	}
	return nil
}

// reportTxCold reports the manager's cold page against the raw server: the ratio,
// and each side's throughput, latency and CPU time per request (the serving process's and
// PostgreSQL's).
func reportTxCold(rep *report, sites int, sizes []int, results map[string]*readResult) {
	page, raw := results[txColdPage], results[txColdRaw]
	total := 0
	for _, s := range sizes {
		total += s
	}
	rep.add(txColdKey, "sites", float64(sites), unitCount)
	rep.add(txColdKey, "answer_bytes_mean", ratio(float64(total), float64(len(sizes))), unitCount)
	pageRatio := ratio(page.t.rate(), raw.t.rate())
	rep.addTarget(txColdKey, "page_over_same_sql_ratio", pageRatio, unitRatio, target{">=", 0.8})
	for _, side := range []struct {
		name, role string
		r          *readResult
	}{{txColdPage, roleManager, page}, {txColdRaw, roleTrivial, raw}} {
		rep.add(txColdKey, side.name+"_rps", side.r.t.rate(), unitPerSec)
		rep.add(txColdKey, side.name+"_p50_ms", side.r.t.percentileMS(50), unitMS)
		rep.add(txColdKey, side.name+"_p99_ms", side.r.t.percentileMS(99), unitMS)
		rep.add(txColdKey, side.name+"_server_cpu_us_per_request", side.r.cpuPerCallUS(side.role), unitCount)
		rep.add(txColdKey, side.name+"_postgres_cpu_us_per_request", side.r.cpuPerCallUS(rolePostgres), unitCount)
	}
	rep.add(txColdKey, "page_p99_over_raw_p99_ratio", ratio(page.t.percentileMS(99), raw.t.percentileMS(99)), unitRatio)
	// The same comparison in CPU time a read (the serving process's and PostgreSQL's), which
	// on a machine shared with others' loads moves less than throughput does.
	rep.add(txColdKey, "page_over_same_sql_cpu_ratio", ratio(raw.cpuPerCallUS(roleTrivial)+raw.cpuPerCallUS(rolePostgres),
		page.cpuPerCallUS(roleManager)+page.cpuPerCallUS(rolePostgres)), unitRatio)
	logf("transactions cold over %d sites: the manager %.0f/s (p50 %.2f ms, p99 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs) "+
		"against the same SQL raw %.0f/s (p50 %.2f ms, p99 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs): ratio %.2f",
		sites, page.t.rate(), page.t.percentileMS(50), page.t.percentileMS(99), page.cpuPerCallUS(roleManager),
		page.cpuPerCallUS(rolePostgres), raw.t.rate(), raw.t.percentileMS(50), raw.t.percentileMS(99),
		raw.cpuPerCallUS(roleTrivial), raw.cpuPerCallUS(rolePostgres), pageRatio)
}

// startTransactionsRaw runs this same binary as the raw transactions server (startSelf).
func (b *bench) startTransactionsRaw(ctx context.Context) (string, error) {
	return b.startSelf(ctx, "raw transactions server", "transactions-raw.log", "healthz", func(addr string) []string {
		return []string{txColdRawServerArg, addr}
	})
}

// serveTransactionsRaw is the cold page's baseline: net/http, configured as the REST API's
// server, with a pool made as the manager makes its own (db.OpenBounded) on the same database. GET
// /raw/transactions/{namespace}/{site_id}?limit=&bytes= runs rewardstore's PageWithBalance
// (the page's SQL, the manager's statement) for the newest limit (+1) transactions, scans every
// row, and answers bytes bytes (the manager's answer's size for the site, which the bench
// tells it) with the page's transaction count in X-Transactions. No authentication, no site
// lookup, no encoding. It stops on SIGTERM.
func serveTransactionsRaw(addr string) error {
	return serveWithPool(addr, func(pool *pgxpool.Pool, mux *http.ServeMux) {
		transactionRoutes(&rewardstore.Store{Pool: pool}, mux)
	})
}

// transactionRoutes are serveTransactionsRaw's page.
func transactionRoutes(store *rewardstore.Store, mux *http.ServeMux) {
	body := sizedBody()
	mux.HandleFunc("GET /raw/transactions/{namespace}/{site_id}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 {
			http.Error(w, "bad limit", http.StatusBadRequest)
			return
		}
		n, err := strconv.Atoi(q.Get("bytes"))
		if err != nil || n < 2 || n > maxTrivialBytes {
			http.Error(w, "bad bytes", http.StatusBadRequest)
			return
		}
		site := rewardstore.Site{Namespace: r.PathValue("namespace"), ID: r.PathValue("site_id")}
		var rows int64
		// One more than the page, as the manager's read asks (to say whether a next page follows).
		_, err = store.PageWithBalance(r.Context(), site, rewardstore.Page{Limit: limit + 1}, func(*rewardstore.PageRow) { rows++ })
		rows = min(rows, int64(limit))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Header().Set(txRowsHeader, strconv.FormatInt(rows, 10))
		_, _ = w.Write(body[:n]) // one slice, as the REST API writes its answers
	})
}
