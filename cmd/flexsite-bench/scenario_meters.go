package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
)

// The meter-point register (docs/api.md, "Meters: finding a household's meter"), with a generated
// register of 1,000,000 meter points (100,000 in quick mode):
//
//   - the import (meterstore.Store.Import, what `flexsite-admin meters import` runs: every row
//     checked in Go, COPYed into a staging table, merged in one transaction) against a raw
//     COPY of the same file into a table of the file's ten columns with the register's keys
//     (primary key on mpan, an index on postcode), in rounds that alternate A B, B A, …;
//   - the register's size on disk per meter point, projected to Great Britain's ~30 million;
//   - GET /meter/search?postcode= and POST /meter/by-address through the manager against a
//     bare net/http handler (this binary again, as the trivial server is) that runs the same
//     lookups (meterstore's, so the same SQL) through a pool of the same size on the same
//     database and answers a body of the same size: the ratio is the manager's own work
//     (authentication, sealing a reference per meter point, encoding) over the same query.

const (
	scenarioMeters  = "meters"
	labelMeters     = "14 meters"
	metersNamespace = "bench-meters"
	// metersRawTable is the raw COPY's table: the file's ten columns, the register's keys.
	metersRawTable = "bench_meter_points_raw"
	// metersRawServerArg starts this binary as the raw lookup server (its only argument the
	// address): read before main's flags, so that the role needs no flag of main's.
	metersRawServerArg = "-meters-raw-server"
	// metersSamples is how many postcodes and addresses the lookups walk, the same for both
	// sides, taken from the loaded register.
	metersSamples = 2000
	// metersImportRounds is how many times each side loads the file. Odd, so that the last
	// load of the rounds is the import: the register is then whole and fresh (no dead rows)
	// when its size is read.
	metersImportRounds = 3
	// gbMeterPoints is about how many electricity meter points Great Britain has.
	gbMeterPoints = 30_000_000
	metersSeed    = 37
)

// metersAnchors are the README walk-through's sample postcodes, as `make run` loads them.
var metersAnchors = []string{"SW1A 1AA", "M1 1AE"}

func init() {
	scenarioLabels[scenarioMeters] = labelMeters
	if len(os.Args) == 3 && os.Args[1] == metersRawServerArg {
		if err := serveMetersRaw(os.Args[2]); err != nil {
			fmt.Fprintln(os.Stderr, "raw meter lookups:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// meterPointsFor is the register's size: the 1,000,000, or 100,000 in quick mode.
func meterPointsFor(p params) int {
	if p.Mode == modeQuick {
		return 100_000
	}
	return 1_000_000
}

func runMeters(ctx context.Context, b *bench, rep *report) error {
	n := meterPointsFor(b.p)
	path := filepath.Join(b.tmp, "meter-register.csv")
	start := time.Now()
	size, err := writeRegisterFile(path, n)
	if err != nil {
		return err
	}
	logf("meters: a register of %d meter points generated in %s (%.1f MiB of CSV, not compressed)",
		n, time.Since(start).Round(100*time.Millisecond), float64(size)/(1<<20))
	rep.add(scenarioMeters, "meter_points", float64(n), unitCount)
	rep.add(scenarioMeters, "file_mib", float64(size)/(1<<20), unitMiB)
	if err := b.measureMeterImport(ctx, rep, path, n); err != nil {
		return err
	}
	return b.measureMeterLookups(ctx, rep)
}

// writeRegisterFile writes the generated register as the plain CSV an import reads.
func writeRegisterFile(path string, n int) (int64, error) {
	f, err := os.Create(path)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	err = synth.WriteCSV(w, metersSeed, n, metersAnchors)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return 0, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// measureMeterImport loads the file metersImportRounds times each way, into an empty register
// and an empty raw table, alternating which goes first; then measures the register's size and
// an import of the same file again (every row replaced).
func (b *bench) measureMeterImport(ctx context.Context, rep *report, path string, n int) error {
	if _, err := b.db.Exec(ctx, `DROP TABLE IF EXISTS `+metersRawTable+`;
		CREATE TABLE `+metersRawTable+` (
			mpan text PRIMARY KEY, address_line_1 text NOT NULL, address_line_2 text NOT NULL,
			address_line_3 text NOT NULL, address_line_4 text NOT NULL, town text NOT NULL,
			postcode text NOT NULL, supplier_mpid text NOT NULL, supplier_name text NOT NULL,
			half_hourly_settled boolean NOT NULL);
		CREATE INDEX `+metersRawTable+`_postcode ON `+metersRawTable+` (postcode)`); err != nil {
		return err
	}
	var imports, raws, bulks []time.Duration
	sides := []struct {
		name  string
		times *[]time.Duration
		load  func() (time.Duration, error)
	}{
		{"import", &imports, func() (time.Duration, error) {
			d, r, err := b.importMeters(ctx, path, true)
			if err == nil && r.Inserted != int64(n) {
				err = fmt.Errorf("%+v, want %d rows inserted", r, n)
			}
			return d, err
		}},
		{"raw COPY", &raws, func() (time.Duration, error) { return b.copyMetersRaw(ctx, path, n, true) }},
		{"raw COPY, indexes built after", &bulks, func() (time.Duration, error) { return b.copyMetersRaw(ctx, path, n, false) }},
	}
	for r := range metersImportRounds {
		for j := range sides {
			side := sides[j]
			if r%2 == 0 { // A B C, C B A, …: the last load of an odd number of rounds is the import
				side = sides[len(sides)-1-j]
			}
			d, err := side.load()
			if err != nil {
				return fmt.Errorf("%s: %w", side.name, err)
			}
			*side.times = append(*side.times, d)
		}
		logf("meters: round %d: import %s, raw COPY %s, raw COPY with the indexes built after %s", r+1,
			imports[r].Round(10*time.Millisecond), raws[r].Round(10*time.Millisecond), bulks[r].Round(10*time.Millisecond))
	}
	imp, raw := medianDuration(imports), medianDuration(raws)
	rate := func(d time.Duration) float64 { return ratio(float64(n), d.Seconds()) }
	rep.add(scenarioMeters, "import_seconds", imp.Seconds(), unitSeconds)
	rep.add(scenarioMeters, "raw_copy_seconds", raw.Seconds(), unitSeconds)
	rep.add(scenarioMeters, "import_rows_per_sec", rate(imp), unitPerSec)
	rep.add(scenarioMeters, "raw_copy_rows_per_sec", rate(raw), unitPerSec)
	importRatio := ratio(raw.Seconds(), imp.Seconds())
	rep.addTarget(scenarioMeters, "import_vs_raw_copy_ratio", importRatio, unitRatio, target{">=", 0.5})
	// The floor of a load that builds its indexes after, as a first load does.
	bulk := medianDuration(bulks)
	rep.add(scenarioMeters, "raw_copy_indexes_after_seconds", bulk.Seconds(), unitSeconds)
	rep.add(scenarioMeters, "import_vs_raw_copy_indexes_after_ratio", ratio(bulk.Seconds(), imp.Seconds()), unitRatio)

	if err := b.meterRegisterSize(ctx, rep, n); err != nil {
		return err
	}
	rep.add(scenarioMeters, "gb_import_minutes_projected", float64(gbMeterPoints)/rate(imp)/60, unitCount)

	again, r, err := b.importMeters(ctx, path, false)
	if err != nil {
		return fmt.Errorf("import again: %w", err)
	}
	if r.Replaced != int64(n) {
		return fmt.Errorf("import again: %+v, want every one of %d rows replaced", r, n)
	}
	rep.add(scenarioMeters, "reimport_seconds", again.Seconds(), unitSeconds)
	rep.add(scenarioMeters, "reimport_vs_raw_copy_ratio", ratio(raw.Seconds(), again.Seconds()), unitRatio)
	rep.detail("meters_import", map[string]any{"rows": n, "import_seconds": seconds(imports),
		"raw_copy_seconds": seconds(raws), "raw_copy_indexes_after_seconds": seconds(bulks),
		"reimport_seconds": again.Seconds(), "file": "plain CSV (not gzip)",
		"raw_copy": "COPY " + metersRawTable + " FROM STDIN (FORMAT csv, HEADER true, FORCE_NOT_NULL (the text columns)) " +
			"of the same file through the " +
			"bench's pool: the file's ten columns, primary key on mpan, an index on postcode; one statement, " +
			"autocommit; the table truncated before each round as the register is; " +
			"indexes after: the same COPY into the table without its two indexes, then both built (one transaction)"})
	logf("meters: import %s (%.0f rows/s) against raw COPY %s (%.0f rows/s): ratio %.2f; import again (every row replaced) %s",
		imp.Round(10*time.Millisecond), rate(imp), raw.Round(10*time.Millisecond), rate(raw), importRatio,
		again.Round(10*time.Millisecond))
	if importRatio < 0.5 {
		if err := b.profileMeterImport(ctx, path); err != nil {
			return err
		}
	}
	// The re-import left a dead row for each: vacuumed away, as autovacuum would, before the
	// lookups are measured.
	if _, err := b.db.Exec(ctx, `DROP TABLE `+metersRawTable); err != nil {
		return err
	}
	_, err = b.db.Exec(ctx, `VACUUM ANALYZE meter_points`)
	return err
}

// importMeters imports the file through meterstore (the bench process is the importer, as
// flexsite-admin's is), into an emptied register when fresh.
func (b *bench) importMeters(ctx context.Context, path string, fresh bool) (time.Duration, meterstore.Report, error) {
	if fresh {
		if err := b.emptyForLoad(ctx, "meter_points"); err != nil {
			return 0, meterstore.Report{}, err
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, meterstore.Report{}, err
	}
	defer func() { _ = f.Close() }()
	s := &meterstore.Store{Pool: b.db}
	start := time.Now()
	r, err := s.Import(ctx, f, nil)
	return time.Since(start), r, err
}

// copyMetersRaw COPYs the file as it is into the emptied raw table: with its indexes kept row
// by row, or (indexed false) dropped first and built after the COPY, in one transaction.
func (b *bench) copyMetersRaw(ctx context.Context, path string, n int, indexed bool) (time.Duration, error) {
	if err := b.emptyForLoad(ctx, metersRawTable); err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	conn, err := b.db.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	exec := func(sql string) error { return pg.Exec(ctx, sql).Close() }
	start := time.Now()
	if !indexed {
		if err := exec(`BEGIN; ALTER TABLE ` + metersRawTable + ` DROP CONSTRAINT ` + metersRawTable + `_pkey; ` +
			`DROP INDEX ` + metersRawTable + `_postcode`); err != nil {
			return 0, err
		}
	}
	tag, err := pg.CopyFrom(ctx, f, `COPY `+metersRawTable+` FROM STDIN (FORMAT csv, HEADER true, `+
		`FORCE_NOT_NULL (address_line_1, address_line_2, address_line_3, address_line_4, town, supplier_mpid, supplier_name))`)
	if err == nil && !indexed {
		err = exec(`ALTER TABLE ` + metersRawTable + ` ADD PRIMARY KEY (mpan); ` +
			`CREATE INDEX ` + metersRawTable + `_postcode ON ` + metersRawTable + ` (postcode); COMMIT`)
	}
	d := time.Since(start)
	if err == nil && tag.RowsAffected() != int64(n) {
		err = fmt.Errorf("%d rows copied, want %d", tag.RowsAffected(), n)
	}
	return d, err
}

// emptyForLoad truncates a table and checkpoints, so that neither side's load pays for
// writing out the other's pages.
func (b *bench) emptyForLoad(ctx context.Context, table string) error {
	if _, err := b.db.Exec(ctx, `TRUNCATE `+table); err != nil {
		return err
	}
	_, err := b.db.Exec(ctx, `CHECKPOINT`)
	return err
}

// meterRegisterSize reports the loaded register's size on disk per meter point (the table
// with its TOAST, each index) and projects it to Great Britain's meter points.
func (b *bench) meterRegisterSize(ctx context.Context, rep *report, n int) error {
	if _, err := b.db.Exec(ctx, `ANALYZE meter_points`); err != nil {
		return err
	}
	var rows, table, indexes, total, pkey, postcode int64
	if err := b.db.QueryRow(ctx, `SELECT count(*), pg_table_size('meter_points'), pg_indexes_size('meter_points'),
		pg_total_relation_size('meter_points'), pg_relation_size('meter_points_pkey'),
		pg_relation_size('meter_points_postcode') FROM meter_points`).
		Scan(&rows, &table, &indexes, &total, &pkey, &postcode); err != nil {
		return err
	}
	if rows != int64(n) {
		return fmt.Errorf("the register holds %d meter points, want %d", rows, n)
	}
	per := func(v int64) float64 { return float64(v) / float64(rows) }
	gib := func(v int64) float64 { return per(v) * gbMeterPoints / (1 << 30) }
	rep.add(scenarioMeters, "table_bytes_per_point", per(table), unitCount)
	rep.add(scenarioMeters, "indexes_bytes_per_point", per(indexes), unitCount)
	rep.add(scenarioMeters, "pkey_bytes_per_point", per(pkey), unitCount)
	rep.add(scenarioMeters, "postcode_index_bytes_per_point", per(postcode), unitCount)
	rep.add(scenarioMeters, "total_bytes_per_point", per(total), unitCount)
	rep.add(scenarioMeters, "gb_table_gib_projected", gib(table), unitCount)
	rep.add(scenarioMeters, "gb_indexes_gib_projected", gib(indexes), unitCount)
	rep.add(scenarioMeters, "gb_total_gib_projected", gib(total), unitCount)
	logf("meters: %d meter points take %.0f bytes each on disk (table %.0f, primary key %.0f, postcode index %.0f): "+
		"%.1f GiB at Great Britain's %d", rows, per(total), per(table), per(pkey), per(postcode), gib(total), gbMeterPoints)
	return nil
}

// profileMeterImport imports the file once more into an empty register under a CPU profile
// of this process (the importer), saved as cpu-meters-import.pb.gz next to the manager's log:
// where a change to the import starts from.
func (b *bench) profileMeterImport(ctx context.Context, path string) error {
	out := filepath.Join(filepath.Dir(b.mgrCfg.logPath), "cpu-meters-import.pb.gz")
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	if err := b.emptyForLoad(ctx, "meter_points"); err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	_, _, err = b.importMeters(ctx, path, false)
	pprof.StopCPUProfile()
	if err != nil {
		return err
	}
	logf("meters: CPU profile of an import: %s", out)
	return nil
}

// meterLookup is one side of a lookup's comparison: request i of a run.
type meterLookup struct {
	name, server string
	do           func(ctx context.Context, i int) error
}

// measureMeterLookups compares the manager's two lookups with the raw handler's.
func (b *bench) measureMeterLookups(ctx context.Context, rep *report) error {
	postcodes, addresses, err := b.meterSamples(ctx)
	if err != nil {
		return err
	}
	o, err := b.organisation(ctx, metersNamespace, 37)
	if err != nil {
		return err
	}
	token, err := o.api.bearer(ctx)
	if err != nil {
		return err
	}
	rawURL, err := b.startMetersRaw(ctx)
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	api := b.mgr.apiURL

	// The search's answer, to size the raw side's: its references' length.
	var found []struct {
		Ref     string `json:"ref"`
		Address string `json:"address"`
	}
	if err := o.api.call(ctx, http.MethodGet, "/meter/search?postcode="+url.QueryEscape(postcodes[0]), nil, &found); err != nil {
		return err
	}
	if len(found) == 0 {
		return fmt.Errorf("GET /meter/search?postcode=%s found nothing", postcodes[0])
	}
	refBytes := len(found[0].Ref)
	addressBodies := make([][]byte, len(addresses))
	for i, a := range addresses {
		if addressBodies[i], err = json.Marshal(map[string]string{"address": a.address}); err != nil {
			return err
		}
	}
	oursSearch := func(ctx context.Context, i int) (int64, error) {
		return getCounting(ctx, b.http, api+"/meter/search?postcode="+url.QueryEscape(postcodes[i%len(postcodes)]), token)
	}
	rawSearch := func(ctx context.Context, i int) (int64, error) {
		return getCounting(ctx, b.http, fmt.Sprintf("%smeter/search?postcode=%s&ref_bytes=%d", rawURL,
			url.QueryEscape(postcodes[i%len(postcodes)]), refBytes), token)
	}
	oursByAddress := func(ctx context.Context, i int) (int64, error) {
		return postCounting(ctx, b.http, api+"/meter/by-address", token, addressBodies[i%len(addresses)])
	}
	rawByAddress := func(ctx context.Context, i int) (int64, error) {
		a := i % len(addresses)
		return postCounting(ctx, b.http, rawURL+"meter/by-address?postcode="+url.QueryEscape(addresses[a].postcode),
			token, addressBodies[a])
	}
	// Every sampled address must name one meter point (200) on both sides: those that do not
	// (a flat whose neighbour's address is as close) are left out, the same for both.
	kept, err := keepAnswered(ctx, len(addresses), oursByAddress, rawByAddress, b.p.Concurrency)
	if err != nil {
		return err
	}
	logf("meters: %d postcodes, %d of %d sampled addresses name one meter point", len(postcodes), len(kept), len(addresses))
	if len(kept) == 0 {
		return errors.New("no sampled address names one meter point through POST /meter/by-address")
	}
	byAddress := func(f func(context.Context, int) (int64, error)) func(context.Context, int) (int64, error) {
		return func(ctx context.Context, i int) (int64, error) { return f(ctx, kept[i%len(kept)]) }
	}
	oursByAddress, rawByAddress = byAddress(oursByAddress), byAddress(rawByAddress)

	sizes := map[string]int64{}
	lookups := []struct {
		name string
		do   func(context.Context, int) (int64, error)
		role string
	}{
		{"search_postcode", oursSearch, roleManager}, {"raw_search_postcode", rawSearch, roleTrivial},
		{"by_address", oursByAddress, roleManager}, {"raw_by_address", rawByAddress, roleTrivial},
	}
	targets := make([]meterLookup, len(lookups))
	for j, l := range lookups {
		if sizes[l.name], err = l.do(ctx, 0); err != nil {
			return fmt.Errorf("%s: %w", l.name, err)
		}
		targets[j] = meterLookup{name: l.name, server: l.role, do: func(ctx context.Context, i int) error {
			_, err := l.do(ctx, i)
			return err
		}}
	}
	results, err := b.measureLookupsMirrored(ctx, targets)
	if err != nil {
		return err
	}
	reportMeterLookups(rep, targets, sizes, results)
	return nil
}

// meterSample is an address of the register, and its postcode for the raw side.
type meterSample struct{ address, postcode string }

// meterSamples are postcodes and addresses of the loaded register, the same every run of a
// seed (ordered by a hash, not at random).
func (b *bench) meterSamples(ctx context.Context) ([]string, []meterSample, error) {
	rows, err := b.db.Query(ctx, `SELECT postcode FROM (SELECT DISTINCT postcode FROM meter_points) p
		ORDER BY md5(postcode) LIMIT $1`, metersSamples)
	if err != nil {
		return nil, nil, err
	}
	var postcodes []string
	var pc string
	if _, err := pgx.ForEachRow(rows, []any{&pc}, func() error { postcodes = append(postcodes, pc); return nil }); err != nil {
		return nil, nil, err
	}
	rows, err = b.db.Query(ctx, `SELECT mpan FROM meter_points ORDER BY md5(mpan) LIMIT $1`, metersSamples)
	if err != nil {
		return nil, nil, err
	}
	mpans, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, nil, err
	}
	// The one-line address is meters.Point.Address's, as the register answers it.
	store := &meterstore.Store{Pool: b.db}
	addresses := make([]meterSample, 0, len(mpans))
	for _, mpan := range mpans {
		p, ok, err := store.ByMPAN(ctx, mpan)
		if err != nil || !ok {
			return nil, nil, fmt.Errorf("sampling meter point %s: %v (found %v)", mpan, err, ok)
		}
		addresses = append(addresses, meterSample{address: p.Address(), postcode: p.Postcode})
	}
	if len(postcodes) == 0 || len(addresses) == 0 {
		return nil, nil, errors.New("the register is empty")
	}
	return postcodes, addresses, nil
}

// keepAnswered is the indexes (of n addresses) that both sides answer with a meter point.
func keepAnswered(ctx context.Context, n int, ours, raw func(context.Context, int) (int64, error), c int) ([]int, error) {
	ok := make([]bool, n)
	_, err := runConcurrent(ctx, n, c, func(ctx context.Context, i int) error {
		if _, err := ours(ctx, i); err != nil {
			var status *statusError
			if errors.As(err, &status) && status.code == http.StatusNotFound {
				return nil
			}
			return err
		}
		if _, err := raw(ctx, i); err != nil {
			return err
		}
		ok[i] = true
		return nil
	})
	var kept []int
	for i, k := range ok {
		if k {
			kept = append(kept, i)
		}
	}
	return kept, err
}

// statusError is an answer other than 200.
type statusError struct {
	code int
	msg  string
}

func (e *statusError) Error() string { return e.msg }

// postCounting POSTs a JSON body with the token, requires a 200 and counts the answer's bytes.
func postCounting(ctx context.Context, hc *http.Client, target, token string, body []byte) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		drain(resp)
		return 0, &statusError{code: resp.StatusCode,
			msg: fmt.Sprintf("POST %s: %s: %s", req.URL.Path, resp.Status, firstLine(string(data)))}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return n, err
}

// measureLookupsMirrored loads each target in turn with C clients, in the read path's
// mirrored passes (b.mirrored), for requests that are not all GETs.
func (b *bench) measureLookupsMirrored(ctx context.Context, targets []meterLookup) (map[string]*readResult, error) {
	names := make([]string, len(targets))
	for i, t := range targets {
		names[i] = t.name
	}
	c := b.p.Concurrency
	return b.mirrored(ctx, names, func(ctx context.Context, j int, slot time.Duration) (timings, error) {
		return runFor(ctx, c, slot, func(ctx context.Context, worker, i int) error {
			return targets[j].do(ctx, worker+i*c)
		})
	})
}

// reportMeterLookups reports each lookup next to its raw side: the ratio (raw p99 ÷
// ours, target ≥ 0.7), throughput, and CPU time per request by process.
func reportMeterLookups(rep *report, targets []meterLookup, sizes map[string]int64, results map[string]*readResult) {
	perRequest := func(name, role string) float64 {
		return results[name].cpuPerCallUS(role)
	}
	for _, ours := range []string{"search_postcode", "by_address"} {
		raw := "raw_" + ours
		var oursRole string
		for _, t := range targets {
			if t.name == ours {
				oursRole = t.server
			}
		}
		o, r := results[ours].t, results[raw].t
		for _, side := range []struct {
			name, role string
			t          timings
		}{{ours, oursRole, o}, {raw, roleTrivial, r}} {
			rep.add(scenarioMeters, side.name+"_answer_bytes", float64(sizes[side.name]), unitCount)
			rep.add(scenarioMeters, side.name+"_rps", side.t.rate(), unitPerSec)
			rep.add(scenarioMeters, side.name+"_p50_ms", side.t.percentileMS(50), unitMS)
			rep.add(scenarioMeters, side.name+"_p99_ms", side.t.percentileMS(99), unitMS)
			rep.add(scenarioMeters, side.name+"_server_cpu_us_per_request", perRequest(side.name, side.role), unitCount)
			rep.add(scenarioMeters, side.name+"_postgres_cpu_us_per_request", perRequest(side.name, rolePostgres), unitCount)
		}
		rep.addTarget(scenarioMeters, ours+"_p99_vs_raw_ratio", ratio(r.percentileMS(99), o.percentileMS(99)), unitRatio,
			target{">=", 0.7})
		rep.add(scenarioMeters, ours+"_vs_raw_ratio", ratio(o.rate(), r.rate()), unitRatio)
		logf("meters %s: %.0f/s (p99 %.2f ms, %.0f µs server CPU, PostgreSQL %.0f µs, %d bytes) against the raw lookup "+
			"%.0f/s (p99 %.2f ms, %.0f µs, PostgreSQL %.0f µs, %d bytes)", ours, o.rate(), o.percentileMS(99),
			perRequest(ours, oursRole), perRequest(ours, rolePostgres), sizes[ours], r.rate(), r.percentileMS(99),
			perRequest(raw, roleTrivial), perRequest(raw, rolePostgres), sizes[raw])
	}
}

// startMetersRaw runs this same binary as the raw lookup server (startSelf).
func (b *bench) startMetersRaw(ctx context.Context) (string, error) {
	return b.startSelf(ctx, "raw meter lookups", "meters-raw.log", "healthz", func(addr string) []string {
		return []string{metersRawServerArg, addr}
	})
}

// serveMetersRaw is the lookups' baseline: net/http, configured as the REST API's server,
// with a pool made as the manager makes its own (db.OpenBounded) on the same database, running
// meterstore's lookups (the register's SQL) and answering bodies of the manager's sizes
// without its work: no authentication, no reference sealed (a run of x's as long as one),
// no encoder. It stops on SIGTERM.
func serveMetersRaw(addr string) error {
	return serveWithPool(addr, func(pool *pgxpool.Pool, mux *http.ServeMux) { meterRoutes(&meterstore.Store{Pool: pool}, mux) })
}

// meterRoutes are serveMetersRaw's lookups.
func meterRoutes(store *meterstore.Store, mux *http.ServeMux) {
	refFill := bytes.Repeat([]byte("x"), 1024)
	write := func(w http.ResponseWriter, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body)
	}
	mux.HandleFunc("GET /meter/search", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		refBytes, err := strconv.Atoi(q.Get("ref_bytes"))
		if err != nil || refBytes < 0 || refBytes > len(refFill) {
			http.Error(w, "bad ref_bytes", http.StatusBadRequest)
			return
		}
		points, err := store.AtPostcode(r.Context(), q.Get("postcode"), meters.MaxSearchResults)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		body := make([]byte, 0, 128*len(points)+2)
		body = append(body, '[')
		for i, p := range points {
			if i > 0 {
				body = append(body, ',')
			}
			body = append(body, `{"ref":"`...)
			body = append(body, refFill[:refBytes]...)
			body = append(body, `","address":`...)
			body = strconv.AppendQuote(body, p.Address())
			body = append(body, '}')
		}
		write(w, append(body, ']'))
	})
	mux.HandleFunc("POST /meter/by-address", func(w http.ResponseWriter, r *http.Request) {
		var in struct {
			Address string `json:"address"`
		}
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<16)).Decode(&in); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		ranked, err := store.Ranked(r.Context(), r.URL.Query().Get("postcode"), in.Address, meters.MaxAtPostcode)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if len(ranked) == 0 {
			http.Error(w, "none", http.StatusNotFound)
			return
		}
		p := ranked[0].Point
		body := append([]byte(`{"mpan":`), strconv.Quote(p.MPAN)...)
		body = append(body, `,"half_hourly_settled":`...)
		body = strconv.AppendBool(body, p.HalfHourlySettled)
		body = append(body, `,"supplier_mpid":`...)
		body = strconv.AppendQuote(body, p.SupplierMPID)
		body = append(body, `,"supplier_name":`...)
		body = strconv.AppendQuote(body, p.SupplierName)
		body = append(body, `,"eligible_markets":[`...)
		for i, m := range p.EligibleMarkets() {
			if i > 0 {
				body = append(body, ',')
			}
			body = strconv.AppendQuote(body, string(m))
		}
		write(w, append(body, "]}"...))
	})
}

func medianDuration(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func seconds(ds []time.Duration) []float64 {
	out := make([]float64, len(ds))
	for i, d := range ds {
		out[i] = round3(d.Seconds())
	}
	return out
}
