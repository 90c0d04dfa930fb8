package meterstore_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
)

// fileWithoutAnchors is a generated register of n meter points at generated postcodes: none
// at SW1A 1AA, whose meter points TestImportThenFind ranks.
func fileWithoutAnchors(t *testing.T, seed uint64, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := synth.WriteCSV(&buf, seed, n, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// registerState is what a refused import must leave as it was: every row of the register,
// loaded_at included, as a count and a digest.
type registerState struct {
	rows   int64
	digest string
}

func stateOf(t *testing.T) registerState {
	t.Helper()
	var s registerState
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*),
		coalesce(md5(string_agg(m::text, '|' ORDER BY mpan)), '') FROM meter_points m`).Scan(&s.rows, &s.digest); err != nil {
		t.Fatal(err)
	}
	return s
}

// unchanged fails the test when the register is not as before.
func unchanged(t *testing.T, before registerState) {
	t.Helper()
	if after := stateOf(t); after != before {
		t.Errorf("a refused import changed the register: %d rows (digest %s) before, %d (%s) after",
			before.rows, before.digest, after.rows, after.digest)
	}
}

// withLine is file with its line n (1-based: the header is line 1) changed by edit.
func withLine(file []byte, n int, edit func(fields []string) []string) []byte {
	lines := strings.Split(string(file), "\n")
	lines[n-1] = strings.Join(edit(strings.Split(lines[n-1], ",")), ",")
	return []byte(strings.Join(lines, "\n"))
}

// badCheckDigit changes an MPAN's last digit, so that its check digit is wrong.
func badCheckDigit(fields []string) []string {
	mpan := []byte(fields[0])
	mpan[12] = '0' + (mpan[12]-'0'+1)%10
	fields[0] = string(mpan)
	return fields
}

// loadBase gives the register some rows of its own before a refused import, so that
// "unchanged" is about rows that exist.
func loadBase(t *testing.T, s *meterstore.Store, seed uint64) registerState {
	t.Helper()
	if _, err := s.Import(context.Background(), bytes.NewReader(fileWithoutAnchors(t, seed, 300)), nil); err != nil {
		t.Fatal(err)
	}
	return stateOf(t)
}

func rejectedLines(t *testing.T, err error) *meterstore.RejectedError {
	t.Helper()
	var rejected *meterstore.RejectedError
	if !errors.As(err, &rejected) {
		t.Fatalf("err = %v; want a *RejectedError", err)
	}
	return rejected
}

// Importing the same file twice leaves the same register: the second import replaces every
// row with itself.
func TestImportIsIdempotent(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	file := fileWithoutAnchors(t, 21, 3000)
	first, err := s.Import(ctx, bytes.NewReader(file), nil)
	if err != nil || first.Rows != 3000 || first.Inserted != 3000 || first.Replaced != 0 {
		t.Fatalf("first import: %+v, %v; want 3000 rows, all new", first, err)
	}
	digest := func() string {
		var d string
		// loaded_at aside: the second import is a later load of the same rows.
		if err := testDB.Pool.QueryRow(ctx, `SELECT md5(string_agg(row(mpan, address_line_1, address_line_2,
			address_line_3, address_line_4, town, postcode, supplier_mpid, supplier_name, half_hourly_settled,
			sort_key)::text, '|' ORDER BY mpan)) FROM meter_points`).Scan(&d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before, rowsBefore := digest(), stateOf(t).rows
	second, err := s.Import(ctx, bytes.NewReader(file), nil)
	if err != nil || second.Rows != 3000 || second.Replaced != 3000 || second.Inserted != 0 {
		t.Fatalf("second import: %+v, %v; want 3000 rows, all replaced", second, err)
	}
	if after := digest(); after != before || stateOf(t).rows != rowsBefore {
		t.Errorf("importing the same file again changed the register")
	}
}

// A bad check digit on line 500,000 fails the whole file, names that line, and changes
// nothing: the 499,998 good rows before it are not loaded either.
func TestImportBadCheckDigitOnLine500000(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 22)
	start := time.Now()
	file := withLine(fileWithoutAnchors(t, 23, 500_001), 500_000, badCheckDigit)
	generated := time.Since(start)
	_, err := s.Import(ctx, bytes.NewReader(file), nil)
	t.Logf("500,001 rows: generated in %s, import refused after %s", generated, time.Since(start)-generated)
	rejected := rejectedLines(t, err)
	if rejected.Count != 1 || rejected.Rejections[0].Line != 500_000 ||
		!strings.Contains(rejected.Rejections[0].Reason, "check digit") {
		t.Errorf("rejected %+v; want line 500000 alone, for its check digit", rejected)
	}
	unchanged(t, before)
}

// A file cut off in the middle of its last row is refused, naming that row, wherever the cut
// falls: even where what is left still parses ("true" cut to "t", a town cut short).
func TestImportFileCutOffMidRow(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 24)
	file := fileWithoutAnchors(t, 25, 40) // lines 1 to 41, each ending "\n"
	lastStart := bytes.LastIndexByte(file[:len(file)-1], '\n') + 1
	for cut := lastStart + 1; cut < len(file)-1; cut++ {
		_, err := s.Import(ctx, bytes.NewReader(file[:cut]), nil)
		var rejected *meterstore.RejectedError
		if !errors.As(err, &rejected) || rejected.Count != 1 || rejected.Rejections[0].Line != 41 {
			t.Errorf("cut after %q: err = %v; want line 41 rejected", file[lastStart:cut], err)
		}
	}
	unchanged(t, before)
	// With its line end, the file is whole: 40 rows.
	if report, err := s.Import(ctx, bytes.NewReader(file), nil); err != nil || report.Rows != 40 {
		t.Errorf("the whole file: %+v, %v", report, err)
	}
}

// A file cut off inside a quoted field (a line end inside quotes is part of the field, so the
// rest of the file would be one field) is refused, naming the row where the field starts.
func TestImportFileCutOffInsideAQuotedField(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 26)
	file := fileWithoutAnchors(t, 27, 20)
	file = withLine(file, 21, func(f []string) []string {
		f[2] = `"Rose Court, Mill Lane"` // a comma in a field: the export quotes it
		return f
	})
	cut := bytes.Index(file, []byte(`"Rose Court, Mi`)) + len(`"Rose Court, Mi`)
	_, err := s.Import(ctx, bytes.NewReader(file[:cut]), nil)
	rejected := rejectedLines(t, err)
	if rejected.Rejections[0].Line != 21 || !strings.Contains(rejected.Rejections[0].Reason, "quoted field") {
		t.Errorf("rejected %+v; want line 21, a quoted field not closed", rejected)
	}
	unchanged(t, before)
	// The whole row is fine: the quotes are the CSV's, the comma the address's.
	if report, err := s.Import(ctx, bytes.NewReader(file), nil); err != nil || report.Rows != 20 {
		t.Errorf("the whole file: %+v, %v", report, err)
	}
}

// A gzip file cut off is refused (the stream ends early), saying after which line, and
// changes nothing.
func TestImportGzipCutOff(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 28)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(fileWithoutAnchors(t, 29, 5000))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Import(ctx, bytes.NewReader(gz.Bytes()[:gz.Len()/2]), nil)
	if err == nil || !strings.Contains(err.Error(), "after line") || !strings.Contains(err.Error(), "cut off") {
		t.Errorf("err = %v; want one saying after which line the file is cut off", err)
	}
	unchanged(t, before)
}

// A gzip-compressed file is read as its CSV.
func TestImportGzip(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, _ = zw.Write(fileWithoutAnchors(t, 30, 1234))
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	var last meterstore.Progress
	report, err := s.Import(ctx, &gz, func(p meterstore.Progress) { last = p })
	if err != nil || report.Rows != 1234 || report.Inserted != 1234 {
		t.Fatalf("report %+v, %v; want 1234 new rows", report, err)
	}
	if !last.Read || last.Rows != 1234 {
		t.Errorf("last progress %+v; want all 1234 rows read", last)
	}
}

// An MPAN twice in the file: the later line is rejected, naming the earlier, and nothing is
// loaded.
func TestImportDuplicateMPAN(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 31)
	file := fileWithoutAnchors(t, 32, 60)
	mpan := strings.SplitN(strings.Split(string(file), "\n")[4], ",", 2)[0] // line 5's
	file = withLine(file, 30, func(f []string) []string { f[0] = mpan; return f })
	_, err := s.Import(ctx, bytes.NewReader(file), nil)
	rejected := rejectedLines(t, err)
	if rejected.Count != 1 || rejected.Rejections[0].Line != 30 ||
		!strings.Contains(rejected.Rejections[0].Reason, "also on line 5") ||
		!strings.Contains(rejected.Rejections[0].Reason, mpan) {
		t.Errorf("rejected %+v; want line 30, its MPAN also on line 5", rejected)
	}
	unchanged(t, before)
}

// Rows that cannot be meter points are each listed with their line and reason; nothing is
// loaded.
func TestImportRejectsBadRows(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 33)
	file := fileWithoutAnchors(t, 34, 80)
	file = withLine(file, 7, func(f []string) []string { f[6] = ""; return f })          // no postcode
	file = withLine(file, 12, func(f []string) []string { f[6] = "NOT A PC"; return f }) // not a UK postcode
	file = withLine(file, 20, func(f []string) []string { return f[:5] })                // too few fields
	file = withLine(file, 33, func(f []string) []string { f[9] = "maybe"; return f })    // not a yes or a no
	file = withLine(file, 50, badCheckDigit)
	_, err := s.Import(ctx, bytes.NewReader(file), nil)
	rejected := rejectedLines(t, err)
	want := []struct {
		line   int64
		reason string
	}{{7, "no postcode"}, {12, "not a UK postcode"}, {20, "5 fields, but the header has 10"},
		{33, "half_hourly_settled"}, {50, "check digit"}}
	if rejected.Count != int64(len(want)) || len(rejected.Rejections) != len(want) {
		t.Fatalf("rejected %+v; want %d rows", rejected, len(want))
	}
	for i, w := range want {
		if got := rejected.Rejections[i]; got.Line != w.line || !strings.Contains(got.Reason, w.reason) {
			t.Errorf("rejection %d: %s; want line %d: …%s…", i, got, w.line, w.reason)
		}
	}
	unchanged(t, before)
}

// A header without a required column, and an empty file, are refused before any row.
func TestImportBadHeader(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := stateOf(t)
	for _, c := range []struct {
		name, file, want string
	}{
		{"no postcode column", "mpan,address_line_1,half_hourly_settled\n1012345678903,1 Test Street,false\n",
			`line 1: the header has no "postcode" column`},
		{"an unknown column", "mpan,postcode,half_hourly_settled,colour\n", `unknown column "colour"`},
		{"an empty file", "", "line 1: the file is empty"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := s.Import(ctx, strings.NewReader(c.file), nil); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("err = %v; want one saying %q", err, c.want)
			}
		})
	}
	unchanged(t, before)
}

// An import cancelled midway (the command interrupted, the Job's deadline) leaves nothing.
func TestImportCancelledMidwayLeavesNothing(t *testing.T) {
	s := &meterstore.Store{Pool: testDB.Pool}
	before := loadBase(t, s, 35)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	progressed := false
	_, err := s.Import(ctx, bytes.NewReader(fileWithoutAnchors(t, 36, 60_000)), func(p meterstore.Progress) {
		progressed = true
		cancel()
	})
	if !progressed || !errors.Is(err, context.Canceled) {
		t.Errorf("progress called: %v; err = %v; want context.Canceled", progressed, err)
	}
	unchanged(t, before)
}

// A line far longer than any row (a binary file, a file of another kind) is refused as soon
// as it passes MaxLineBytes, never read whole into memory.
func TestImportRefusesALineLongerThanAnyRow(t *testing.T) {
	s := &meterstore.Store{Pool: testDB.Pool}
	before := stateOf(t)
	file := append(fileWithoutAnchors(t, 37, 3), bytes.Repeat([]byte("x"), 10*meterstore.MaxLineBytes)...)
	_, err := s.Import(context.Background(), bytes.NewReader(file), nil)
	if err == nil || !strings.Contains(err.Error(), "after line 4: a line longer than 65536 bytes: this is not a register file") {
		t.Errorf("err = %v; want the line too long, after line 4", err)
	}
	unchanged(t, before)
}

// endlessRows is a register's rows, over and over, up to size bytes: a large file that is
// never held in the test's memory. It samples the heap every MiB it gives, keeping the most
// in use it saw.
type endlessRows struct {
	row        []byte
	size, read int64
	sampled    int64
	peakHeap   uint64
}

func (e *endlessRows) Read(p []byte) (int, error) {
	if e.read >= e.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && e.read < e.size {
		c := copy(p[n:], e.row[e.read%int64(len(e.row)):])
		n += c
		e.read += int64(c)
	}
	if e.read-e.sampled >= 1<<20 {
		e.sampled = e.read
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		e.peakHeap = max(e.peakHeap, m.HeapInuse)
	}
	return n, nil
}

// A quote opened and never closed (line 5) makes the rest of the file one field: the import
// stops once the row passes MaxLineBytes, naming the line the row starts on, without reading
// the 50 MB after it or holding them in memory.
func TestImportUnclosedQuoteStopsWithoutReadingTheRest(t *testing.T) {
	s := &meterstore.Store{Pool: testDB.Pool}
	before := stateOf(t)
	head := withLine(fileWithoutAnchors(t, 38, 6), 5, func(f []string) []string {
		f[1] = `"Flat 2` // the closing quote missing
		return f
	})
	rows := bytes.SplitAfter(fileWithoutAnchors(t, 39, 2), []byte("\n"))[1]
	rest := &endlessRows{row: rows, size: 50 << 20}
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	start := m.HeapInuse

	_, err := s.Import(context.Background(), io.MultiReader(bytes.NewReader(head), rest), nil)
	runtime.ReadMemStats(&m)
	rest.peakHeap = max(rest.peakHeap, m.HeapInuse)
	if err == nil || !strings.Contains(err.Error(), "line 5: a row longer than 65536 bytes, over several lines: a quoted field is not closed") {
		t.Errorf("err = %v; want the row of line 5 too long, its quote not closed", err)
	}
	if rest.read > 1<<20 {
		t.Errorf("read %d bytes past the unclosed quote; want the import stopped within the first MiB", rest.read)
	}
	if grown := int64(rest.peakHeap) - int64(start); grown > 16<<20 {
		t.Errorf("the heap grew by %d MiB while reading the file; want under 16 MiB", grown>>20)
	}
	unchanged(t, before)
}

// Two imports at once: the second is told another is running, and changes nothing.
func TestImportOneAtATime(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.Store{Pool: testDB.Pool}
	before := stateOf(t)
	tx, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(meterstore.ImportLock)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(ctx, bytes.NewReader(fileWithoutAnchors(t, 38, 10)), nil); !errors.Is(err, meterstore.ErrImportRunning) {
		t.Errorf("err = %v; want ErrImportRunning", err)
	}
	unchanged(t, before)
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if report, err := s.Import(ctx, bytes.NewReader(fileWithoutAnchors(t, 38, 10)), nil); err != nil || report.Rows != 10 {
		t.Errorf("once the other has finished: %+v, %v", report, err)
	}
}

// A spreadsheet's CSV export: a byte order mark before the header, CRLF line ends, the
// columns in another order.
func TestImportSpreadsheetExport(t *testing.T) {
	file := "\ufeffPostcode,MPAN,half_hourly_settled,address_line_1,town\r\n" +
		"e1 6an,1012345678903,Y,1 Test Street,London\r\n" +
		"M1 1AE,2301234567894,n,\"Flat 2, Rose Court\",Manchester\r\n"
	s := &meterstore.Store{Pool: testDB.Pool}
	report, err := s.Import(context.Background(), strings.NewReader(file), nil)
	if err != nil || report.Rows != 2 {
		t.Fatalf("report %+v, %v; want 2 rows", report, err)
	}
	p, ok, err := s.ByMPAN(context.Background(), "2301234567894")
	if err != nil || !ok || p.Address() != "Flat 2, Rose Court, Manchester, M1 1AE" || p.HalfHourlySettled {
		t.Errorf("ByMPAN = %+v, %v, %v", p, ok, err)
	}
	if p, _, _ := s.ByMPAN(context.Background(), "1012345678903"); p.Postcode != "E1 6AN" || !p.HalfHourlySettled {
		t.Errorf("ByMPAN = %+v; want the postcode normalised, half-hourly", p)
	}
}
