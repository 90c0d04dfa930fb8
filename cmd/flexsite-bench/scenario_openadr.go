package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/probe"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// The OpenADR door (docs/openadr.md) judged against what it stands beside, in one run:
//
//   - a VEN's report against the REST callback of the same change: a VEN client's
//     OPERATING_STATE report (POST /openadr3/3.0.1/reports) on a dispatch before its window,
//     which makes it ACCEPTED through the dispatch callback's use case, against the same
//     client's REST callback (POST /entities/asset/{asset_id}/callback/{event_id} with
//     ACCEPTED) of another such dispatch: every request a real change of a fresh dispatch
//     (seeded straight into the database, as the callbacks step seeds its own), the same
//     concurrency, in parts that alternate A B B A round after round;
//   - an event search of 1,000 events against the same SQL: the VEN client's events are 1,000
//     dispatches of the assets its VEN holds, and a search of them is the document's pages of
//     at most 50 (limit=50, skip 0, 50, … 950: 20 pages); the door's pages, walked in turn,
//     against a raw server (this binary again, in the trivial server's place) whose pool is
//     made by db.OpenBounded from the same URL, as the manager's is, and whose handler asks
//     PostgreSQL what the door asks for the same page (vtnstore's AssetsHeldBy, the client's
//     view, then dispatchstore's SearchIssued: the functions the door runs, so the same SQL),
//     scans every row, and writes as many bytes as the door's answer for that page (without
//     authentication, the event's shape or its encoding), in the read path's mirrored passes.
//
// Both ratios are the door's throughput over its baseline's (targets ≥ 0.8).

const (
	// openADRScenario names the step, its figures' group and its table section.
	openADRScenario  = "openadr"
	openADRNamespace = "bench-openadr"
	labelOpenADR     = "17 openadr"
	// openADRBase is the door's base path.
	openADRBase = "/openadr3/3.0.1"
	// openADRVENClient is the VEN client: an API client without flex_events_write.
	openADRVENClient = openADRNamespace + "-ven"
	// openADRSearchEvents is how many events the search pages through, openADRPage a page.
	openADRSearchEvents = 1000
	openADRPage         = 50
	// openADRRawServerArg starts this binary as the raw event search server (its only
	// argument the address): read before main's flags, as the other raw servers' are.
	openADRRawServerArg = "-openadr-events-raw-server"
	// openADRRawName is the raw side's name among the search's targets; openADRSearchName the door's.
	openADRRawName    = "event_search_same_sql"
	openADRSearchName = "event_search"
	// eventsHeader is how many events the raw server's page held.
	eventsHeader = "X-Events"
	// openADRTarget bounds both of the step's ratios.
	openADRTarget = 0.8
)

func init() {
	scenarioLabels[openADRScenario] = labelOpenADR
	if len(os.Args) == 3 && os.Args[1] == openADRRawServerArg {
		if err := serveWithPool(os.Args[2], func(pool *pgxpool.Pool, mux *http.ServeMux) {
			openADRRoutes(&vtnstore.Store{Pool: pool}, &dispatchstore.Store{Pool: pool}, mux)
		}); err != nil {
			fmt.Fprintln(os.Stderr, "raw event search server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// openADRRoutes are the raw event search: GET
// /raw/openadr-events/{namespace}/{client}?skip=&limit=&bytes=.
func openADRRoutes(vens *vtnstore.Store, ds *dispatchstore.Store, mux *http.ServeMux) {
	body := sizedBody()
	mux.HandleFunc("GET /raw/openadr-events/{namespace}/{client}", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		skip, err1 := strconv.Atoi(q.Get("skip"))
		limit, err2 := strconv.Atoi(q.Get("limit"))
		n, err3 := strconv.Atoi(q.Get("bytes"))
		if err1 != nil || err2 != nil || err3 != nil || n < 2 || n > maxTrivialBytes {
			http.Error(w, "bad skip, limit or bytes", http.StatusBadRequest)
			return
		}
		ns := r.PathValue("namespace")
		held, err := vens.AssetsHeldBy(r.Context(), ns, r.PathValue("client"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if held == nil {
			held = []string{}
		}
		events, err := ds.SearchIssued(r.Context(), ns, dispatchstore.IssuedQuery{Assets: held, Skip: skip, Limit: limit})
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Header().Set(eventsHeader, strconv.Itoa(len(events)))
		_, _ = w.Write(body[:n]) // one slice, as the door writes its answers
	})
}

// The report a VEN sends, in the document's shape: one resource, one interval, one payload.
type (
	openADRReport struct {
		ObjectType string            `json:"objectType"`
		ProgramID  string            `json:"programID"`
		EventID    string            `json:"eventID"`
		ClientName string            `json:"clientName"`
		Resources  []openADRReported `json:"resources"`
	}
	openADRReported struct {
		ResourceName string            `json:"resourceName"`
		Intervals    []openADRInterval `json:"intervals"`
	}
	openADRInterval struct {
		ID       int              `json:"id"`
		Payloads []openADRPayload `json:"payloads"`
	}
	openADRPayload struct {
		Type   string `json:"type"`
		Values []any  `json:"values"`
	}
)

// openADRProgram is the program (proposition) of the step's events.
const openADRProgram = string(flexv1.PropositionLimitedPause)

// The keys of the step's details that other steps' details share.
const (
	detailConcurrency = "concurrency"
	detailRounds      = "rounds"
)

// openADRParams size the report part of the step.
type openADRParams struct {
	households, perPart, rounds int
}

func (b *bench) openADRParams() openADRParams {
	if b.p.Mode == modeQuick {
		return openADRParams{households: 10, perPart: 300, rounds: 2}
	}
	return openADRParams{households: 50, perPart: 1500, rounds: 4}
}

// venSetup is the VEN client of the step: its REST client and its OpenADR client (the same
// API client, each with the token its door issues), and the assets its VEN holds.
type venSetup struct {
	rest, oadr *apiClient
	assets     []siteAsset
}

func runOpenADR(ctx context.Context, b *bench, rep *report) error {
	cp := b.openADRParams()
	o, err := b.organisation(ctx, openADRNamespace, 19)
	if err != nil {
		return err
	}
	if _, _, err := b.onboardREST(ctx, o, cp.households); err != nil {
		return err
	}
	v, err := b.venClient(ctx, o)
	if err != nil {
		return err
	}
	// The search first, over exactly its 1,000 events; the reports' dispatches follow.
	if err := b.measureEventSearch(ctx, rep, v); err != nil {
		return err
	}
	return b.measureReports(ctx, rep, v, cp)
}

// venClient makes the step's VEN client (entity_read, entity_write: a VEN, not the business
// logic), logs it in at both doors, registers its VEN and every asset of the organisation
// as a resource of it.
func (b *bench) venClient(ctx context.Context, o *org) (*venSetup, error) {
	password := "bench-" + openADRVENClient
	if err := bootstrap.EnsureOrganisation(ctx, b.c, bootstrap.Organisation{Namespace: o.ns, Username: openADRVENClient,
		Password: password, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}}); err != nil {
		return nil, err
	}
	v := &venSetup{rest: &apiClient{base: b.mgr.apiURL, http: b.http, username: openADRVENClient, password: password}}
	if err := probe.Retry(ctx, 30*time.Second, 200*time.Millisecond, func() error { return v.rest.login(ctx) }); err != nil {
		return nil, err
	}
	token, err := b.openADRToken(ctx, openADRVENClient, password)
	if err != nil {
		return nil, err
	}
	v.oadr = &apiClient{base: b.mgr.apiURL + openADRBase, http: b.http, username: openADRVENClient, password: password,
		token: token, tokenAt: time.Now()}
	assets, err := o.onboardedAssets(ctx)
	if err != nil {
		return nil, err
	}
	var ven struct {
		ID string `json:"id"`
	}
	if err := v.oadr.call(ctx, "POST", "/vens", map[string]any{"venName": "bench-ven"}, &ven); err != nil {
		return nil, err
	}
	for _, a := range assets {
		if err := v.oadr.call(ctx, "POST", "/vens/"+ven.ID+"/resources", map[string]any{"resourceName": a.assetID,
			"venID": ven.ID}, nil); err != nil {
			return nil, err
		}
	}
	v.assets = assets
	logf("openadr: VEN client %s holds %d assets", openADRVENClient, len(assets))
	return v, nil
}

// openADRToken is a token from the door's client-credentials grant.
func (b *bench) openADRToken(ctx context.Context, clientID, secret string) (string, error) {
	form := url.Values{"grant_type": {"client_credentials"}, "client_id": {clientID}, "client_secret": {secret}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.mgr.apiURL+openADRBase+"/auth/token",
		strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	var out struct {
		AccessToken string `json:"access_token"`
	}
	a := &apiClient{http: b.http}
	if err := a.roundTrip(req, &out); err != nil {
		return "", err
	}
	return out.AccessToken, nil
}

// seedDispatches issues n fresh dispatches of the assets, the k-th of asset k mod assets in
// flex event prefix-(k div assets) (every (flex event, asset) issued once), each over the hour
// from start, and answers their event ids in order.
func (b *bench) seedDispatches(ctx context.Context, assets []siteAsset, prefix string, n int, start time.Time) ([]string, error) {
	ds := make([]dispatchstore.Dispatch, n)
	ids := make([]string, n)
	for k := range ds {
		a := assets[k%len(assets)]
		ev := fmt.Sprintf("%s-%d", prefix, k/len(assets))
		ds[k] = dispatchstore.Dispatch{FlexEvent: ev, SiteID: a.siteID, AssetID: a.assetID, MarketID: openADRProgram,
			Proposition: openADRProgram, LevelKW: 0, From: start, To: start.Add(time.Hour), EventTimestamp: time.Now()}
		ids[k] = dispatch.EventID(openADRNamespace, ev, a.assetID).String()
	}
	_, err := (&dispatchstore.Store{Pool: b.db}).Issue(ctx, openADRNamespace, "https://flexsite.bench", ds, nil, time.Now())
	return ids, err
}

// measureEventSearch pages the VEN client's 1,000 events through the door against the raw
// server running the same SQL, in mirrored passes.
func (b *bench) measureEventSearch(ctx context.Context, rep *report, v *venSetup) error {
	// Windows a day ahead, each event's a minute after the last's (whole flex events apart),
	// so that the pages' order (latest window end first) is the same at every read.
	start := time.Now().UTC().Truncate(time.Hour).Add(24 * time.Hour)
	per := len(v.assets)
	for k := 0; k < openADRSearchEvents; k += per {
		count := min(per, openADRSearchEvents-k)
		if _, err := b.seedDispatches(ctx, v.assets[:count], fmt.Sprintf("bench-oadr-search-%d", k/per), count,
			start.Add(time.Duration(k/per)*time.Minute)); err != nil {
			return err
		}
	}
	rawURL, err := b.startSelf(ctx, "raw event search server", "openadr-raw.log", "healthz", func(addr string) []string {
		return []string{openADRRawServerArg, addr}
	})
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	token, err := v.oadr.bearer(ctx)
	if err != nil {
		return err
	}
	pages := openADRSearchEvents / openADRPage
	search := func(i int) string {
		return fmt.Sprintf("%s%s/events?skip=%d&limit=%d", b.mgr.apiURL, openADRBase, (i%pages)*openADRPage, openADRPage)
	}
	sizes, err := b.answerSizes(ctx, "event search pages", search, pages, token)
	if err != nil {
		return err
	}
	raw := func(i int) string {
		k := i % pages
		return fmt.Sprintf("%sraw/openadr-events/%s/%s?skip=%d&limit=%d&bytes=%d", rawURL, openADRNamespace,
			openADRVENClient, k*openADRPage, openADRPage, sizes[k])
	}
	if err := b.checkEventsRaw(ctx, raw(pages-1), sizes[pages-1]); err != nil {
		return err
	}
	var events []map[string]any
	if err := v.oadr.call(ctx, "GET", fmt.Sprintf("/events?skip=%d&limit=%d", (pages-1)*openADRPage, openADRPage), nil, &events); err != nil {
		return err
	}
	if len(events) != openADRPage {
		return fmt.Errorf("the door's last page holds %d events, want %d", len(events), openADRPage)
	}
	targets := []readTarget{{openADRSearchName, search, roleManager}, {openADRRawName, raw, roleTrivial}}
	var next [2]atomic.Int64
	c := b.p.Concurrency
	names := []string{targets[0].name, targets[1].name}
	results, err := b.mirrored(ctx, names, func(ctx context.Context, j int, slot time.Duration) (timings, error) {
		return runFor(ctx, c, slot, func(ctx context.Context, _, _ int) error {
			return getOK(ctx, b.http, targets[j].url(int(next[j].Add(1)-1)), token)
		})
	})
	if err != nil {
		return err
	}
	door, same := results[openADRSearchName], results[openADRRawName]
	total := 0
	for _, s := range sizes {
		total += s
	}
	searchRatio := ratio(door.t.rate(), same.t.rate())
	rep.add(openADRScenario, "event_search_events", openADRSearchEvents, unitCount)
	rep.add(openADRScenario, "event_search_page_bytes_mean", ratio(float64(total), float64(pages)), unitCount)
	rep.addTarget(openADRScenario, "event_search_vs_sql_ratio", searchRatio, unitRatio, target{">=", openADRTarget})
	for _, side := range []struct {
		name, role string
		r          *readResult
	}{{openADRSearchName, roleManager, door}, {openADRRawName, roleTrivial, same}} {
		rep.add(openADRScenario, side.name+"_pages_per_sec", side.r.t.rate(), unitPerSec)
		rep.add(openADRScenario, side.name+"_p99_ms", side.r.t.percentileMS(99), unitMS)
		rep.add(openADRScenario, side.name+"_server_cpu_us_per_page", side.r.cpuPerCallUS(side.role), unitCount)
		rep.add(openADRScenario, side.name+"_postgres_cpu_us_per_page", side.r.cpuPerCallUS(rolePostgres), unitCount)
	}
	rep.add(openADRScenario, "event_search_vs_sql_cpu_ratio",
		ratio(same.cpuPerCallUS(roleTrivial)+same.cpuPerCallUS(rolePostgres),
			door.cpuPerCallUS(roleManager)+door.cpuPerCallUS(rolePostgres)), unitRatio)
	logf("openadr event search of %d events (%d pages of %d, %.0f bytes a page): the door %.0f pages/s (p99 %.2f ms, "+
		"%.0f µs CPU, PostgreSQL %.0f µs) against the same SQL raw %.0f/s (p99 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs): ratio %.2f",
		openADRSearchEvents, pages, openADRPage, ratio(float64(total), float64(pages)), door.t.rate(), door.t.percentileMS(99),
		door.cpuPerCallUS(roleManager), door.cpuPerCallUS(rolePostgres), same.t.rate(), same.t.percentileMS(99),
		same.cpuPerCallUS(roleTrivial), same.cpuPerCallUS(rolePostgres), searchRatio)
	return b.profileReads(ctx, readTarget{"openadr-event-search", search, roleManager}, token)
}

// checkEventsRaw makes sure the raw server answers a whole page in as many bytes as the door.
func (b *bench) checkEventsRaw(ctx context.Context, u string, size int) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := b.http.Do(req)
	if err != nil {
		return err
	}
	n, err := countBody(resp)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get(eventsHeader) != strconv.Itoa(openADRPage) || n != size {
		return fmt.Errorf("raw event search: %s, %s events in %d bytes, want 200, %d in %d bytes",
			resp.Status, resp.Header.Get(eventsHeader), n, openADRPage, size)
	}
	return nil
}

// measureReports compares the VEN's OPERATING_STATE report with the REST callback of the
// same change (ACCEPTED, before the window), each on fresh dispatches, A B B A.
func (b *bench) measureReports(ctx context.Context, rep *report, v *venSetup, cp openADRParams) error {
	parts := 4 * cp.rounds
	warmUp := 2 * callbacksConcurrency
	n := parts/2*cp.perPart + warmUp // requests a side
	// Two days ahead: before the window, every report and callback says ACCEPTED.
	start := time.Now().UTC().Truncate(time.Hour).Add(48 * time.Hour)
	// The reports' dispatches, and as many again for the profile taken after the parts.
	reportIDs, err := b.seedDispatches(ctx, v.assets, "bench-oadr-report", n+openADRProfileReports, start)
	if err != nil {
		return err
	}
	callbackIDs, err := b.seedDispatches(ctx, v.assets, "bench-oadr-callback", n, start)
	if err != nil {
		return err
	}
	reports := make([]openADRReport, len(reportIDs))
	for k := range reports {
		reports[k] = openADRReport{ObjectType: "REPORT", ProgramID: openADRProgram, EventID: reportIDs[k],
			ClientName: "bench-ven", Resources: []openADRReported{{ResourceName: v.assets[k%len(v.assets)].assetID,
				Intervals: []openADRInterval{{ID: 0, Payloads: []openADRPayload{{Type: "OPERATING_STATE",
					Values: []any{"RUNNING_CURTAILED"}}}}}}}}
	}
	paths := make([]string, n)
	for k := range paths {
		paths[k] = fmt.Sprintf("/entities/asset/%s/callback/%s", v.assets[k%len(v.assets)].assetID, callbackIDs[k])
	}
	callback := struct {
		Timestamp string `json:"timestamp"`
		Status    string `json:"status"`
	}{time.Now().UTC().Format(time.RFC3339), "ACCEPTED"}

	nextReport, nextCallback := 0, 0
	take := func(next *int, count int) []int {
		ks := make([]int, count)
		for i := range ks {
			ks[i] = *next
			*next++
		}
		return ks
	}
	reportPart := func(ks []int) (timings, error) {
		return runConcurrent(ctx, len(ks), callbacksConcurrency, func(ctx context.Context, i int) error {
			var out struct {
				ID string `json:"id"`
			}
			if err := v.oadr.call(ctx, "POST", "/reports", reports[ks[i]], &out); err != nil {
				return err
			}
			if out.ID == "" {
				return fmt.Errorf("the report on dispatch %d has no id", ks[i])
			}
			return nil
		})
	}
	callbackPart := func(ks []int) (timings, error) {
		return runConcurrent(ctx, len(ks), callbacksConcurrency, func(ctx context.Context, i int) error {
			var out struct {
				Changed bool `json:"changed"`
			}
			if err := v.rest.call(ctx, "POST", paths[ks[i]], callback, &out); err != nil {
				return err
			}
			if !out.Changed {
				return fmt.Errorf("the callback of dispatch %d changed nothing", ks[i])
			}
			return nil
		})
	}
	if _, err := reportPart(take(&nextReport, warmUp)); err != nil {
		return err
	}
	if _, err := callbackPart(take(&nextCallback, warmUp)); err != nil {
		return err
	}
	// Each part's CPU time, the manager's and PostgreSQL's, is counted to its side.
	sides := [2]readResult{{cpu: cpuTimes{}}, {cpu: cpuTimes{}}}
	for i := range parts {
		// A B B A: parts 0 and 3 of every four are reports, 1 and 2 callbacks.
		j, part, next := 0, reportPart, &nextReport
		if i%4 == 1 || i%4 == 2 {
			j, part, next = 1, callbackPart, &nextCallback
		}
		cpu0, pg0 := b.readCPU(), postgresCPU()
		t, err := part(take(next, cp.perPart))
		if err != nil {
			return err
		}
		used := b.readCPU().since(cpu0)
		used[rolePostgres] = postgresCPU() - pg0
		t.calls = cp.perPart
		sides[j].t.merge(t)
		sides[j].cpu.add(used)
	}
	reported, called := sides[0].t, sides[1].t
	var accepted, stored int
	if err := b.db.QueryRow(ctx, `SELECT count(*) FROM dispatches WHERE organisation = $1 AND status = 'accepted'`,
		openADRNamespace).Scan(&accepted); err != nil {
		return err
	}
	if err := b.db.QueryRow(ctx, `SELECT count(*) FROM openadr_reports WHERE organisation = $1`,
		openADRNamespace).Scan(&stored); err != nil {
		return err
	}
	if accepted != 2*n || stored != n {
		return fmt.Errorf("%d dispatches accepted and %d reports stored, want %d and %d", accepted, stored, 2*n, n)
	}
	for j, side := range []string{"report", "callback"} {
		rep.add(openADRScenario, side+"_server_cpu_us_per_request", sides[j].cpuPerCallUS(roleManager), unitCount)
		rep.add(openADRScenario, side+"_postgres_cpu_us_per_request", sides[j].cpuPerCallUS(rolePostgres), unitCount)
	}
	// The same comparison in CPU time a request (the manager's and PostgreSQL's), which on a
	// machine shared with others' loads moves less than throughput does: callback ÷ report.
	rep.add(openADRScenario, "report_vs_callback_cpu_ratio",
		ratio(sides[1].cpuPerCallUS(roleManager)+sides[1].cpuPerCallUS(rolePostgres),
			sides[0].cpuPerCallUS(roleManager)+sides[0].cpuPerCallUS(rolePostgres)), unitRatio)
	reportRate, callbackRate := reported.rate(), called.rate()
	rep.add(openADRScenario, "reports_per_sec", reportRate, unitPerSec)
	rep.add(openADRScenario, "callbacks_per_sec", callbackRate, unitPerSec)
	rep.add(openADRScenario, "report_p50", reported.percentileMS(50), unitMS)
	rep.add(openADRScenario, "report_p99", reported.percentileMS(99), unitMS)
	rep.add(openADRScenario, "callback_p50", called.percentileMS(50), unitMS)
	rep.addTarget(openADRScenario, "report_vs_callback_throughput_ratio", ratio(reportRate, callbackRate), unitRatio,
		target{">=", openADRTarget})
	rep.detail(openADRScenario, map[string]any{"requests_per_side": len(reported.durations), detailConcurrency: callbacksConcurrency,
		"assets": len(v.assets), detailRounds: cp.rounds, "search_events": openADRSearchEvents, "search_page": openADRPage})
	logf("openadr reports: %.0f/s (p50 %.2f ms, p99 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs) against REST callbacks of the "+
		"same change %.0f/s (p50 %.2f ms, %.0f µs CPU, PostgreSQL %.0f µs): ratio %.2f",
		reportRate, reported.percentileMS(50), reported.percentileMS(99), sides[0].cpuPerCallUS(roleManager),
		sides[0].cpuPerCallUS(rolePostgres), callbackRate, called.percentileMS(50), sides[1].cpuPerCallUS(roleManager),
		sides[1].cpuPerCallUS(rolePostgres), ratio(reportRate, callbackRate))
	return b.profileWrites(ctx, "openadr-reports", func() error {
		_, err := reportPart(take(&nextReport, openADRProfileReports))
		return err
	})
}

// openADRProfileReports is how many reports the profile after the parts may send: more than
// profileSeconds of them on any machine this runs on.
const openADRProfileReports = 6000

// profileWrites takes the manager's CPU and allocation profiles (cpu-writes-<name>.pb.gz,
// allocs-writes-<name>.pb.gz, next to its log) while load runs, outside the measured parts.
func (b *bench) profileWrites(ctx context.Context, name string, load func() error) error {
	dir := filepath.Dir(b.mgrCfg.logPath)
	profiles := map[string]string{
		filepath.Join(dir, "cpu-writes-"+name+".pb.gz"):    "profile",
		filepath.Join(dir, "allocs-writes-"+name+".pb.gz"): "allocs",
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(profiles))
	for path, kind := range profiles {
		go func() {
			errc <- saveURL(pctx, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", b.mgr.pprofURL, kind, profileSeconds), path)
		}()
	}
	loadErr := load()
	for range profiles {
		if err := <-errc; err != nil {
			return fmt.Errorf("profiles of %s: %w", name, err)
		}
	}
	if loadErr != nil {
		return loadErr
	}
	logf("CPU and allocation profiles of the manager under %s: %s", name, dir)
	return nil
}

// countBody reads an answer's body to the end, closes it and answers its length.
func countBody(resp *http.Response) (int, error) {
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return int(n), err
}
