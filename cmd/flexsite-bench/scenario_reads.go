package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/probe"
	"github.com/flexsite/flexsite/internal/server"
)

// readWarmup precedes each measured read window: connections open, caches warm.
const readWarmup = time.Second

// readTarget is one endpoint of scenario 3.
type readTarget struct {
	name string
	url  func(i int) string
	// server is the process role that serves it (see cpuTimes).
	server string
}

// readResult is a target's timings and the CPU time every process used meanwhile, and the
// bytes the manager allocated meanwhile (managerAlloc: its go_memstats_alloc_bytes_total
// delta, less what reading it costs).
type readResult struct {
	t            timings
	cpu          cpuTimes
	managerAlloc float64
}

// allocPerCall is the bytes the manager allocated per call of the target (warm-up calls
// included, as in the CPU time): for a target the manager serves, what a read allocates.
func (r *readResult) allocPerCall() float64 { return ratio(r.managerAlloc, float64(r.t.calls)) }

// cpuPerCallUS is the CPU time (µs) the process of role used per call of the target,
// warm-up calls included as in the CPU time measured around them.
func (r *readResult) cpuPerCallUS(role string) float64 {
	return ratio(float64(r.cpu[role].Microseconds()), float64(r.t.calls))
}

// readPasses is how many mirrored passes the read targets run in: A B C, C B A, A B C, C B A.
// Each target's time is split evenly between them, so whatever the machine does meanwhile (a
// neighbour's build, the collector of another process) falls on every side of each ratio.
const readPasses = 4

// The two read targets: eligibility and the transactions page.
const (
	eligibilityTarget  = "eligibility"
	transactionsTarget = "transactions"
)

// readEndpoints are the two reads of the manager at api, walking the sites ids in turn.
func readEndpoints(api string, ids []string) []readTarget {
	return []readTarget{
		{eligibilityTarget, func(i int) string { return api + "/entities/site/" + ids[i%len(ids)] + "/eligibility" }, roleManager},
		{transactionsTarget, func(i int) string {
			return fmt.Sprintf("%s/rewards/%s/transactions?limit=%d", api, ids[i%len(ids)], txColdLimit)
		}, roleManager},
	}
}

// runReads loads the two read endpoints and a trivial net/http handler (a subprocess like the
// manager, on the same machine) with C keep-alive clients each. Targets run in readPasses
// mirrored passes (the A B B A rounds of the onboard comparison), so load drift weighs on all
// alike.
func runReads(ctx context.Context, b *bench, rep *report) (err error) {
	if b.fleet == nil { // the step alone: the fleet of the mode's largest size
		if b.fleet, err = b.organisation(ctx, "bench-fleet", 10); err != nil {
			return err
		}
		if err := b.growFleetTo(ctx, b.p.ScaleLevels[len(b.p.ScaleLevels)-1]); err != nil {
			return err
		}
	}
	ids := b.fleet.siteIDs
	trivialURL, err := b.startTrivial(ctx)
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	if err := b.checkLedger(ctx, ids[0]); err != nil {
		return err
	}
	endpoints := readEndpoints(b.mgr.apiURL, ids)
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return err
	}
	// Each endpoint also gets a trivial baseline of its own answer's size: what moving those
	// bytes over loopback costs the same clients, with no work behind it. The ratio is
	// against the small trivial answer; this one says how much of the gap is the answer's
	// size and how much is the manager's work.
	sized, sizes, err := b.withSameSizeBaselines(ctx, trivialURL, token, endpoints)
	if err != nil {
		return err
	}
	targets := append([]readTarget{{"trivial", func(int) string { return trivialURL }, roleTrivial}}, sized...)
	stack := b.stackBaseline(eligibilityTarget, sizes[eligibilityTarget])
	targets = append(targets, stack)
	if err := b.warmReads(ctx, endpoints, len(ids), token); err != nil {
		return err
	}
	results, err := b.measureMirrored(ctx, targets, token)
	if err != nil {
		return err
	}
	reportReads(rep, endpoints, sizes, results)
	// The stack's own profile too: what every route pays.
	return b.profileEach(ctx, append(endpoints, stack), token)
}

// warmReads reads each endpoint once for each of the n sites the targets walk, at C
// concurrent clients, so that the measured reads are hot (the targets): what this
// replica keeps of a site (its transactions page) is kept. Without it, the first read of every
// site, a miss that costs a database round trip, falls in the measured window, and weighs
// more the larger the fleet (a fifth of the reads at 5,000 sites in the quick mode).
func (b *bench) warmReads(ctx context.Context, endpoints []readTarget, n int, token string) error {
	for _, e := range endpoints {
		t, err := runConcurrent(ctx, n, b.p.Concurrency, func(ctx context.Context, i int) error {
			return getOK(ctx, b.http, e.url(i), token)
		})
		if err != nil {
			return fmt.Errorf("warming %s reads: %w", e.name, err)
		}
		logf("reads %s: every one of %d sites read once in %s (p50 %.1f ms)", e.name, n, t.wall.Round(time.Millisecond), t.percentileMS(50))
	}
	return nil
}

// stackTrivialName names the trivial read behind the manager's whole stack that answers as
// many bytes as endpoint does.
func stackTrivialName(endpoint string) string { return "stack_trivial_" + endpoint + "_size" }

// stackBaseline is the second baseline of an endpoint (issue 49): the manager's own trivial
// read (server.StackBaselinePath, mounted because the bench sets server.StackBaselineEnv),
// behind the same mux, request id, access log, metrics and token check as the endpoint,
// answering as many bytes. The endpoint ÷ it is the read's own work; it ÷ the bare trivial
// handler of the same bytes is what the stack costs every request.
func (b *bench) stackBaseline(endpoint string, size int) readTarget {
	url := fmt.Sprintf("%s%s%d", b.mgr.apiURL, server.StackBaselinePath, size)
	return readTarget{stackTrivialName(endpoint), func(int) string { return url }, roleManager}
}

// withSameSizeBaselines are the endpoints, each after a trivial baseline answering as many
// bytes as the endpoint's first answer (sameSizeName), and each endpoint's answer size.
func (b *bench) withSameSizeBaselines(ctx context.Context, trivialURL, token string,
	endpoints []readTarget) ([]readTarget, map[string]int, error) {
	targets := make([]readTarget, 0, 2*len(endpoints))
	sizes := map[string]int{}
	for _, e := range endpoints {
		n, err := getCounting(ctx, b.http, e.url(0), token)
		if err != nil {
			return nil, nil, err
		}
		sizes[e.name] = int(n)
		sized := fmt.Sprintf("%sbytes/%d", trivialURL, n)
		targets = append(targets, readTarget{sameSizeName(e.name), func(int) string { return sized }, roleTrivial}, e)
	}
	return targets, sizes, nil
}

// profileEach takes a CPU profile of the manager under each endpoint's read load, outside the
// measured windows (profiling costs the process some CPU): what a change to the read path
// starts from.
func (b *bench) profileEach(ctx context.Context, endpoints []readTarget, token string) error {
	for _, t := range endpoints {
		if err := b.profileReads(ctx, t, token); err != nil {
			return err
		}
	}
	return nil
}

// measureMirrored loads each target in turn for ReadSeconds in all, split over readPasses
// mirrored passes, and returns each target's timings and the CPU time every process used
// meanwhile (PostgreSQL's server processes too, as rolePostgres).
func (b *bench) measureMirrored(ctx context.Context, targets []readTarget, token string) (map[string]*readResult, error) {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	return b.mirrored(ctx, names, func(ctx context.Context, j int, slot time.Duration) (timings, error) {
		return b.loadReads(ctx, targets[j], token, slot)
	})
}

// mirrored runs load for each of the named targets in turn, slot by slot (A B C, C B A, …,
// readPasses passes of ReadSeconds in all), and returns each target's timings and the CPU
// time every process used meanwhile (PostgreSQL's server processes too, as rolePostgres).
func (b *bench) mirrored(ctx context.Context, names []string,
	load func(ctx context.Context, j int, slot time.Duration) (timings, error)) (map[string]*readResult, error) {
	return b.mirroredPasses(ctx, names, readPasses, load)
}

// mirroredPasses is mirrored in passes passes (ReadSeconds in all for each target).
func (b *bench) mirroredPasses(ctx context.Context, names []string, passes int,
	load func(ctx context.Context, j int, slot time.Duration) (timings, error)) (map[string]*readResult, error) {
	results := map[string]*readResult{}
	slot := time.Duration(b.p.ReadSeconds / float64(passes) * float64(time.Second))
	scrape, err := b.scrapeAllocBytes(ctx)
	if err != nil {
		return nil, err
	}
	for pass := range passes {
		for i := range names {
			j := i
			if pass%2 == 1 {
				j = len(names) - 1 - i
			}
			alloc0, err := b.managerAllocBytes(ctx)
			if err != nil {
				return nil, err
			}
			cpu0, pg0 := b.readCPU(), postgresCPU()
			got, err := load(ctx, j, slot)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", names[j], err)
			}
			if results[names[j]] == nil {
				results[names[j]] = &readResult{cpu: cpuTimes{}}
			}
			results[names[j]].t.merge(got)
			used := b.readCPU().since(cpu0)
			used[rolePostgres] = postgresCPU() - pg0
			results[names[j]].cpu.add(used)
			alloc1, err := b.managerAllocBytes(ctx)
			if err != nil {
				return nil, err
			}
			results[names[j]].managerAlloc += max(0, alloc1-alloc0-scrape)
		}
	}
	return results, nil
}

// managerAllocBytes is the bytes the manager has allocated since it started
// (go_memstats_alloc_bytes_total of its metrics).
func (b *bench) managerAllocBytes(ctx context.Context) (float64, error) {
	samples, err := probe.Fetch(ctx, probeClient, b.mgr.metricsURL, "go_memstats_alloc_bytes_total")
	if err != nil {
		return 0, fmt.Errorf("the manager's allocations: %w", err)
	}
	return probe.SumOf(samples, "go_memstats_alloc_bytes_total"), nil
}

// scrapeAllocBytes is what one read of the manager's metrics allocates in it, which every
// slot's two reads count once (the value is taken before the answer is written): the least of
// three deltas between reads in a row, with no load between.
func (b *bench) scrapeAllocBytes(ctx context.Context) (float64, error) {
	prev, err := b.managerAllocBytes(ctx)
	if err != nil {
		return 0, err
	}
	least := -1.0
	for range 3 {
		v, err := b.managerAllocBytes(ctx)
		if err != nil {
			return 0, err
		}
		if d := v - prev; least < 0 || d < least {
			least = d
		}
		prev = v
	}
	return least, nil
}

// profileSeconds is how long each read target's CPU profile runs.
const profileSeconds = 3

// profileReads keeps C clients reading the target while the manager's CPU profile and the
// allocations of the same seconds are taken (a read's allocations are most of its garbage
// collection), and saves them as cpu-reads-<target>.pb.gz and allocs-reads-<target>.pb.gz
// next to the manager's log.
func (b *bench) profileReads(ctx context.Context, t readTarget, token string) error {
	dir := filepath.Dir(b.mgrCfg.logPath)
	profiles := map[string]string{
		filepath.Join(dir, "cpu-reads-"+t.name+".pb.gz"):    "profile",
		filepath.Join(dir, "allocs-reads-"+t.name+".pb.gz"): "allocs",
	}
	errc := make(chan error, len(profiles))
	for path, kind := range profiles {
		go func() {
			errc <- saveURL(ctx, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", b.mgr.pprofURL, kind, profileSeconds), path)
		}()
	}
	if _, err := b.loadReads(ctx, t, token, profileSeconds*time.Second); err != nil {
		return err
	}
	for range profiles {
		if err := <-errc; err != nil {
			return fmt.Errorf("profiles of %s reads: %w", t.name, err)
		}
	}
	logf("CPU and allocation profiles of the manager under %s reads: %s", t.name, dir)
	return nil
}

// loadReads keeps C clients GETting the target for d, each client walking its own sites.
func (b *bench) loadReads(ctx context.Context, t readTarget, token string, d time.Duration) (timings, error) {
	c := b.p.Concurrency
	return runFor(ctx, c, d, func(ctx context.Context, worker, i int) error {
		return getOK(ctx, b.http, t.url(worker+i*c), token)
	})
}

// getOK sends an authenticated GET and requires a 200.
func getOK(ctx context.Context, hc *http.Client, url, token string) error {
	_, err := getCounting(ctx, hc, url, token)
	return err
}

// getCounting sends an authenticated GET, requires a 200 and counts the answer's body bytes
// (reading it to the end, so the connection goes back to the pool).
func getCounting(ctx context.Context, hc *http.Client, url, token string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %s", req.URL.Path, resp.Status)
	}
	return n, err
}

// checkLedger makes sure the transactions endpoint answers with a whole ledger, so the read
// figures are of real work.
func (b *bench) checkLedger(ctx context.Context, siteID string) error {
	var out struct {
		Transactions []any `json:"transactions"`
	}
	if err := b.fleet.api.call(ctx, "GET", "/rewards/"+siteID+"/transactions", nil, &out); err != nil {
		return err
	}
	if len(out.Transactions) != b.p.Transactions {
		return fmt.Errorf("site %s has %d reward transactions, want %d", siteID, len(out.Transactions), b.p.Transactions)
	}
	return nil
}

// sameSizeName names the trivial baseline that answers as many bytes as endpoint does.
func sameSizeName(endpoint string) string { return "trivial_" + endpoint + "_size" }

// reportReads reports each endpoint next to the trivial handler: throughput and p99 (the
// issue's figures), and the serving process's CPU time per request, which on a machine
// shared with others says more about cost than throughput does. Next to them, the trivial
// handler answering as many bytes as the endpoint: the floor its answer's size alone puts on
// the ratio, and the endpoint against that floor.
func reportReads(rep *report, endpoints []readTarget, sizes map[string]int, results map[string]*readResult) {
	trivial := results["trivial"]
	serverCPU := func(name, role string) float64 {
		return results[name].cpuPerCallUS(role)
	}
	trivialCPU := serverCPU("trivial", roleTrivial)
	// The manager runs with --rate-limit-per-client=0 (managerConfig): no 429 at any rate.
	rep.add("reads", "rate_limits_on", 0, unitCount)
	rep.add("reads", "trivial_rps", trivial.t.rate(), unitPerSec)
	rep.add("reads", "trivial_p99_ms", trivial.t.percentileMS(99), unitMS)
	rep.add("reads", "trivial_server_cpu_us_per_request", trivialCPU, unitCount)
	for _, tg := range endpoints {
		name, t := tg.name, results[tg.name].t
		same := results[sameSizeName(name)].t
		rep.add("reads", name+"_rps", t.rate(), unitPerSec)
		rep.add("reads", name+"_p50_ms", t.percentileMS(50), unitMS)
		rep.add("reads", name+"_p99_ms", t.percentileMS(99), unitMS)
		// The targets: eligibility (a small answer) against the trivial handler, the
		// transactions page (~12 KB) against the trivial handler answering as many bytes.
		if name == transactionsTarget {
			rep.add("reads", name+"_vs_trivial_ratio", ratio(t.rate(), trivial.t.rate()), unitRatio)
		} else {
			rep.addTarget("reads", name+"_vs_trivial_ratio", ratio(t.rate(), trivial.t.rate()), unitRatio, target{">=", 0.7})
		}
		rep.add("reads", name+"_p99_vs_trivial_ratio", ratio(t.percentileMS(99), trivial.t.percentileMS(99)), unitRatio)
		rep.add("reads", name+"_server_cpu_us_per_request", serverCPU(name, tg.server), unitCount)
		// A read that asks the database also costs PostgreSQL's CPU, on the same cores.
		rep.add("reads", name+"_postgres_cpu_us_per_request", serverCPU(name, rolePostgres), unitCount)
		rep.add("reads", name+"_vs_trivial_server_cpu_ratio", ratio(serverCPU(name, tg.server), trivialCPU), unitRatio)
		rep.add("reads", name+"_alloc_bytes_per_request", results[name].allocPerCall(), unitCount)
		rep.add("reads", name+"_answer_bytes", float64(sizes[name]), unitCount)
		rep.add("reads", sameSizeName(name)+"_rps", same.rate(), unitPerSec)
		rep.add("reads", sameSizeName(name)+"_vs_trivial_ratio", ratio(same.rate(), trivial.t.rate()), unitRatio)
		sameRatio := ratio(t.rate(), same.rate())
		if name == transactionsTarget {
			rep.addTarget("reads", name+"_vs_same_size_trivial_ratio", sameRatio, unitRatio, target{">=", 0.7})
		} else {
			rep.add("reads", name+"_vs_same_size_trivial_ratio", sameRatio, unitRatio)
		}
		rep.add("reads", name+"_vs_same_size_trivial_server_cpu_ratio",
			ratio(serverCPU(name, tg.server), serverCPU(sameSizeName(name), roleTrivial)), unitRatio)
		if stack, ok := results[stackTrivialName(name)]; ok {
			reportStackSplit(rep, "reads", name, t, same, stack.t,
				serverCPU(name, tg.server), serverCPU(sameSizeName(name), roleTrivial), stack.cpuPerCallUS(roleManager))
			rep.add("reads", stackTrivialName(name)+"_alloc_bytes_per_request", stack.allocPerCall(), unitCount)
		}
		logf("reads %s: %.0f/s (p99 %.2f ms, %.0f µs server CPU each) against trivial %.0f/s (p99 %.2f ms, %.0f µs); "+
			"trivial answering its %d bytes: %.0f/s", name, t.rate(), t.percentileMS(99), serverCPU(name, tg.server),
			trivial.t.rate(), trivial.t.percentileMS(99), trivialCPU, sizes[name], same.rate())
	}
}

// stackOwnWorkTarget bounds a read ÷ the trivial read behind the same stack: the read's own
// work (issue 49).
const stackOwnWorkTarget = 0.85

// reportStackSplit reports a read's gap to the bare trivial handler of its answer's size in
// two parts: the stack every request pays (the trivial read behind the manager's whole stack ÷
// the bare handler) and the read's own work (the read ÷ the trivial read behind the stack,
// target ≥ stackOwnWorkTarget); the two multiply to the read ÷ the bare handler. The same in
// CPU time a request: the stack's µs (behind the stack less bare) and the read's own µs (the
// read less behind the stack).
func reportStackSplit(rep *report, scenario, name string, read, bare, stack timings, readCPU, bareCPU, stackCPU float64) {
	sn := stackTrivialName(name)
	rep.add(scenario, sn+"_rps", stack.rate(), unitPerSec)
	rep.add(scenario, sn+"_p99_ms", stack.percentileMS(99), unitMS)
	rep.add(scenario, sn+"_server_cpu_us_per_request", stackCPU, unitCount)
	rep.add(scenario, "stack_vs_bare_trivial_ratio", ratio(stack.rate(), bare.rate()), unitRatio)
	rep.add(scenario, "stack_server_cpu_us_per_request", stackCPU-bareCPU, unitCount)
	rep.addTarget(scenario, name+"_own_work_vs_stack_trivial_ratio", ratio(read.rate(), stack.rate()), unitRatio,
		target{">=", stackOwnWorkTarget})
	rep.add(scenario, name+"_own_server_cpu_us_per_request", readCPU-stackCPU, unitCount)
	// The same two parts in the serving process's CPU time a request, which moves less with
	// the machine's load than throughput does: stack ÷ read, bare ÷ stack.
	rep.add(scenario, name+"_own_work_vs_stack_trivial_cpu_ratio", ratio(stackCPU, readCPU), unitRatio)
	rep.add(scenario, "stack_vs_bare_trivial_cpu_ratio", ratio(bareCPU, stackCPU), unitRatio)
	logf("%s %s: %.0f/s behind the stack's trivial read %.0f/s (own work %.2f; %.0f µs of its own a read), "+
		"which is %.2f of the bare trivial handler's %.0f/s (the stack %.0f µs a request)", scenario, name, read.rate(),
		stack.rate(), ratio(read.rate(), stack.rate()), readCPU-stackCPU, ratio(stack.rate(), bare.rate()), bare.rate(),
		stackCPU-bareCPU)
}

// startTrivial runs this same binary as the trivial server and waits until it answers.
func (b *bench) startTrivial(ctx context.Context) (string, error) {
	return b.startSelf(ctx, "trivial server", "trivial.log", "", func(addr string) []string {
		return []string{"--trivial-server=" + addr}
	})
}

// startSelf runs this same binary as a server on a free loopback port, in the trivial
// server's place (b.trivial: its CPU time counts as roleTrivial), and waits until probePath (a
// path) answers. args are the binary's arguments for the address it is to listen on.
func (b *bench) startSelf(ctx context.Context, name, logName, probePath string, args func(addr string) []string) (string, error) {
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	ports, err := freePorts(1)
	if err != nil {
		return "", err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
	logPath := filepath.Join(filepath.Dir(b.mgrCfg.logPath), logName)
	if b.trivial, err = startChild(name, self, logPath, args(addr)...); err != nil {
		return "", err
	}
	url := "http://" + addr + "/"
	_, err = b.trivial.waitHTTP(ctx, probeClient, url+probePath, 30*time.Second)
	return url, err
}

// serveWithPool serves routes on addr as the raw baselines do: net/http, configured as the
// REST API's server, with a pool made as the manager makes its own (db.OpenBounded: its
// statement and idle-in-transaction bounds too) on the same database ($FLEXSITE_DATABASE_URL),
// until SIGTERM.
func serveWithPool(addr string, routes func(pool *pgxpool.Pool, mux *http.ServeMux)) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	pool, err := db.OpenBounded(ctx, os.Getenv("FLEXSITE_DATABASE_URL"))
	if err != nil {
		return err
	}
	defer pool.Close()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	routes(pool, mux)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 120 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// trivialBody is what the trivial handler answers: a small constant JSON document.
var trivialBody = []byte(`{"ok":true}`)

// maxTrivialBytes bounds what /bytes/{n} answers.
const maxTrivialBytes = 1 << 20

// sizedBody is "{}" and then spaces, maxTrivialBytes long: any prefix of two bytes or more is
// a JSON document, which the baselines answer as their "same bytes".
func sizedBody() []byte {
	return append([]byte("{}"), bytes.Repeat([]byte(" "), maxTrivialBytes-2)...)
}

// serveTrivial is the read-path baseline: net/http with a handler that does nothing but
// write a constant, configured like the REST API's server. At /bytes/{n} it answers a
// constant JSON string of n bytes instead (the same-size baselines). It stops on SIGTERM.
func serveTrivial(addr string) error {
	sized := sizedBody()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(trivialBody)
	})
	mux.HandleFunc("/bytes/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.Atoi(r.PathValue("n"))
		if err != nil || n < 2 || n > maxTrivialBytes {
			http.Error(w, "bad size", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		_, _ = w.Write(sized[:n]) // one slice, as the REST API writes its answers
	})
	srv := &http.Server{
		Addr:              addr,
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       120 * time.Second,
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
