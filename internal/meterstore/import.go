package meterstore

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flexsite/flexsite/internal/meters"
)

// importLock is the advisory lock key an import holds for its transaction.
const importLock = 0x6d657465_72696d70 // "meterimp"

// ErrImportRunning is an import refused because another is loading the register.
var ErrImportRunning = errors.New("another import of the meter register is running: try again once it has finished")

// MaxListedRejections bounds the rejected rows an import lists (it counts them all).
const MaxListedRejections = 100

// Rejection is a row of the file that cannot be a meter point: its line (1-based, the header
// is line 1) and why.
type Rejection struct {
	Line   int64
	Reason string
}

func (r Rejection) String() string { return fmt.Sprintf("line %d: %s", r.Line, r.Reason) }

// RejectedError is an import refused because of its rows: nothing was loaded.
type RejectedError struct {
	// Rejections lists the first MaxListedRejections rejected rows, in line order.
	Rejections []Rejection
	// Count is how many rows were rejected in all.
	Count int64
}

func (e *RejectedError) Error() string {
	lines := make([]string, len(e.Rejections))
	for i, r := range e.Rejections {
		lines[i] = r.String()
	}
	more := ""
	if int64(len(e.Rejections)) < e.Count {
		more = fmt.Sprintf("\n(and %d more)", e.Count-int64(len(e.Rejections)))
	}
	return fmt.Sprintf("%d rows rejected; nothing was imported:\n%s%s", e.Count, strings.Join(lines, "\n"), more)
}

// Progress is how far an import has read: rows and bytes of the (uncompressed) file.
type Progress struct {
	Rows  int64
	Bytes int64
	// Read is true once the whole file is read and every row is good: what remains is merging
	// it into the register (seconds for a million rows), so that a progress display can say
	// so rather than seem to stall.
	Read bool
}

// Report is an import done: rows loaded, of which new to the register and replacing a row of
// the same MPAN.
type Report struct {
	Rows, Inserted, Replaced int64
}

// MaxLineBytes bounds a row of a register file, whether on one line or, with line ends inside
// quoted fields, on several. A row is at most ten fields of meters.MaxFieldBytes (a field past
// that is a rejected row, named by its line); a longer row is not a register (a binary file, a
// file of another kind, a quote that is never closed), and the CSV reader would hold all of it
// in memory before judging it: the import stops there, naming the line the row starts on.
const MaxLineBytes = 64 << 10

// readAhead is the buffer between the file and the CSV reader: what is read beyond the row
// being parsed.
const readAhead = 64 << 10

// errLineTooLong is a file with a line longer than MaxLineBytes.
var errLineTooLong = fmt.Errorf("a line longer than %d bytes: this is not a register file (a row is at most a few hundred bytes)",
	MaxLineBytes)

// errRowTooLong is a row, over several lines, longer than MaxLineBytes.
var errRowTooLong = fmt.Errorf("a row longer than %d bytes, over several lines: a quoted field is not closed "+
	"(a \" missing?), and the rest of the file would be one field; nothing was read past it", MaxLineBytes)

// countingReader counts the bytes read through it, keeps the last one (a file whose last byte
// is not a line end stops in the middle of its last row) and refuses a line, or a row, longer
// than MaxLineBytes.
type countingReader struct {
	r    io.Reader
	n    int64
	last byte
	// line is the bytes read since the last line end.
	line int64
	// rowStart is where the row being read starts (the CSV reader's offset before it).
	rowStart int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if n > 0 {
		c.last = p[n-1]
		if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
			c.line = int64(n - 1 - i)
		} else {
			c.line += int64(n)
		}
		if c.line > MaxLineBytes {
			return n, errLineTooLong
		}
		if c.n-c.rowStart > MaxLineBytes+readAhead {
			return n, errRowTooLong
		}
	}
	return n, err
}

// Import loads a register file (CSV with a header row, optionally gzip-compressed) in one
// transaction: every row is checked (meters.Header.Point), the good ones streamed with COPY
// into a temporary table, then merged into the register (a row whose MPAN is there already
// replaces it). Any rejected row (a bad MPAN, no postcode, an MPAN twice in the file, a row
// cut off) fails the whole import with a *RejectedError, and the register is left as it was.
// progress, when not nil, is called now and then from the importing goroutine.
func (s *Store) Import(ctx context.Context, r io.Reader, progress func(Progress)) (Report, error) {
	in, err := decompressed(r)
	if err != nil {
		return Report{}, err
	}
	counted := &countingReader{r: in}
	cr := csv.NewReader(bufio.NewReaderSize(counted, readAhead))
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err == io.EOF {
		return Report{}, errors.New("line 1: the file is empty: a register file starts with a header row (" +
			strings.Join(meters.Columns, ",") + ")")
	}
	if err != nil {
		return Report{}, fmt.Errorf("line 1: reading the header: %w", err)
	}
	h, err := meters.ReadHeader(header)
	if err != nil {
		return Report{}, fmt.Errorf("line 1: %w", err)
	}
	src := &rowSource{csv: cr, header: h, fields: len(header), counted: counted, progress: progress, now: time.Now(),
		nextLine: endLine(cr, header) + 1}
	var report Report
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// One import at a time: two would wait on each other's rows (or deadlock), and the
		// loaded_at a refresh is judged by would interleave. The second is told, not queued.
		var alone bool
		if err := tx.QueryRow(ctx, `SELECT pg_try_advisory_xact_lock($1)`, int64(importLock)).Scan(&alone); err != nil {
			return err
		}
		if !alone {
			return ErrImportRunning
		}
		if _, err := tx.Exec(ctx, `CREATE TEMPORARY TABLE meter_points_staging
			(LIKE meter_points, line bigint NOT NULL) ON COMMIT DROP`); err != nil {
			return err
		}
		if _, err := tx.CopyFrom(ctx, pgx.Identifier{"meter_points_staging"}, stagingColumns, src); err != nil {
			return err
		}
		if src.rejected.Count > 0 {
			return &src.rejected
		}
		if rows, loaded, err := loadIntoEmpty(ctx, tx); loaded || err != nil {
			report.Rows, report.Inserted = rows, rows
			return err
		}
		// The merge runs under a savepoint: when the file holds an MPAN twice it fails, and the
		// transaction must still answer which lines hold it.
		merge, err := tx.Begin(ctx)
		if err != nil {
			return err
		}
		err = merge.QueryRow(ctx, `WITH merged AS (
				INSERT INTO meter_points (`+storedColumns+`)
				SELECT `+storedColumns+` FROM meter_points_staging
				ON CONFLICT (mpan) DO UPDATE SET
					address_line_1 = EXCLUDED.address_line_1, address_line_2 = EXCLUDED.address_line_2,
					address_line_3 = EXCLUDED.address_line_3, address_line_4 = EXCLUDED.address_line_4,
					town = EXCLUDED.town, postcode = EXCLUDED.postcode, supplier_mpid = EXCLUDED.supplier_mpid,
					supplier_name = EXCLUDED.supplier_name, half_hourly_settled = EXCLUDED.half_hourly_settled,
					sort_key = EXCLUDED.sort_key, loaded_at = EXCLUDED.loaded_at
				RETURNING xmax = 0 AS inserted)
			SELECT count(*), count(*) FILTER (WHERE inserted) FROM merged`).Scan(&report.Rows, &report.Inserted)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "21000" { // an MPAN twice in the file
			if err := merge.Rollback(ctx); err != nil {
				return err
			}
			return duplicates(ctx, tx)
		}
		if err != nil {
			return err
		}
		return merge.Commit(ctx)
	})
	report.Replaced = report.Rows - report.Inserted
	var rejected *RejectedError
	if errors.As(err, &rejected) || src.err != nil {
		if src.err != nil {
			return Report{}, src.err
		}
		return Report{}, rejected
	}
	if err != nil {
		return Report{}, s.classify(err)
	}
	return report, nil
}

// duplicates lists the MPANs the file holds more than once, with their lines.
func duplicates(ctx context.Context, tx pgx.Tx) error {
	rows, err := tx.Query(ctx, `SELECT mpan, array_agg(line ORDER BY line) FROM meter_points_staging
		GROUP BY mpan HAVING count(*) > 1 ORDER BY min(line)`)
	if err != nil {
		return err
	}
	rejected := &RejectedError{}
	var mpan string
	var lines []int64
	_, err = pgx.ForEachRow(rows, []any{&mpan, &lines}, func() error {
		for _, l := range lines[1:] {
			rejected.Count++
			if len(rejected.Rejections) < MaxListedRejections {
				rejected.Rejections = append(rejected.Rejections, Rejection{Line: l,
					Reason: fmt.Sprintf("mpan %s is also on line %d", mpan, lines[0])})
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	return rejected
}

// storedColumns are the register's columns an import writes.
const storedColumns = `mpan, address_line_1, address_line_2, address_line_3, address_line_4, town, postcode,
	supplier_mpid, supplier_name, half_hourly_settled, sort_key, loaded_at`

var stagingColumns = []string{"mpan", "address_line_1", "address_line_2", "address_line_3", "address_line_4",
	"town", "postcode", "supplier_mpid", "supplier_name", "half_hourly_settled", "sort_key", "loaded_at", "line"}

// decompressed is r, or r ungzipped when it starts with gzip's magic bytes.
func decompressed(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	magic, err := br.Peek(2)
	if err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading the gzip header: %w", err)
		}
		return zr, nil
	}
	return br, nil
}

// progressEvery is how many rows pass between two progress calls.
const progressEvery = 10_000

// rowSource streams the file's good rows to COPY (pgx.CopyFromSource), collecting the bad.
type rowSource struct {
	csv      *csv.Reader
	header   meters.Header
	counted  *countingReader
	progress func(Progress)
	now      time.Time

	rows     int64
	fields   int // the header's: every row has as many
	lastLine int64
	// nextLine is the line after the last row read: where the next row starts (blank lines
	// aside).
	nextLine int64
	values   []any
	rejected RejectedError
	// err is a failure to read the file at all (not a row's fault): the import stops.
	err error
}

func (s *rowSource) reject(line int64, reason string) {
	s.rejected.Count++
	if len(s.rejected.Rejections) < MaxListedRejections {
		s.rejected.Rejections = append(s.rejected.Rejections, Rejection{Line: line, Reason: reason})
	}
}

func (s *rowSource) Next() bool {
	for {
		s.counted.rowStart = s.csv.InputOffset()
		record, err := s.csv.Read()
		if len(record) > 0 && (err == nil || errors.Is(err, csv.ErrFieldCount)) {
			s.nextLine = endLine(s.csv, record) + 1
		}
		if err == io.EOF {
			s.endOfFile()
			return false
		}
		var parseErr *csv.ParseError
		if errors.As(err, &parseErr) {
			s.lastLine = int64(parseErr.StartLine)
			s.reject(s.lastLine, parseReason(parseErr, len(record), s.fields))
			if errors.Is(parseErr.Err, csv.ErrQuote) || errors.Is(parseErr.Err, csv.ErrBareQuote) {
				return false // past an unbalanced quote nothing can be read as rows
			}
			// A row with too few or too many fields: the reader goes on to the next line, so
			// every such row is listed.
			continue
		}
		switch {
		case errors.Is(err, errRowTooLong):
			s.err = fmt.Errorf("line %d: %w", s.nextLine, err)
			return false
		case errors.Is(err, errLineTooLong):
			s.err = fmt.Errorf("after line %d: %w", s.lastLine, err)
			return false
		case errors.Is(err, io.ErrUnexpectedEOF):
			// A gzip stream cut off: say where.
			s.err = fmt.Errorf("after line %d: reading the file: %w (is it cut off?)", s.lastLine, err)
			return false
		case err != nil:
			s.err = fmt.Errorf("after line %d: reading the file: %w", s.lastLine, err)
			return false
		}
		s.rows++
		if s.rows%progressEvery == 0 {
			s.report(false)
		}
		line, _ := s.csv.FieldPos(0)
		s.lastLine = int64(line)
		p, err := s.header.Point(record)
		if err != nil {
			s.reject(s.lastLine, err.Error())
			continue
		}
		if s.rejected.Count > 0 {
			continue // nothing more will be loaded: only check the rest
		}
		s.values = append(s.values[:0], p.MPAN, p.AddressLines[0], p.AddressLines[1], p.AddressLines[2],
			p.AddressLines[3], p.Town, p.Postcode, p.SupplierMPID, p.SupplierName, p.HalfHourlySettled,
			meters.SortKey(p.Address()), s.now, s.lastLine)
		return true
	}
}

// endLine is the line a row just read ends on: its last field's, plus the line ends inside it
// (a quoted field may hold some).
func endLine(r *csv.Reader, record []string) int64 {
	last := len(record) - 1
	line, _ := r.FieldPos(last)
	return int64(line + strings.Count(record[last], "\n"))
}

// endOfFile checks how the file ended: a file cut off in the middle of its last row may still
// parse (a town cut short, "true" cut to "t"), so a last row without its line end is refused.
// Exports end every row with one (RFC 4180's writers, spreadsheets, Go's and Python's csv).
func (s *rowSource) endOfFile() {
	if s.rows > 0 && s.counted.last != '\n' && s.counted.last != '\r' &&
		(len(s.rejected.Rejections) == 0 || s.rejected.Rejections[len(s.rejected.Rejections)-1].Line != s.lastLine) {
		s.reject(s.lastLine, "the file ends in the middle of this row (no line end after it): is the file cut off?")
	}
	s.report(s.rejected.Count == 0)
}

// parseReason says what is wrong with a row the CSV reader could not read, in the words of
// someone checking an export.
func parseReason(e *csv.ParseError, got, want int) string {
	switch {
	case errors.Is(e.Err, csv.ErrFieldCount):
		return fmt.Sprintf("%d fields, but the header has %d (a row cut off, or a comma in a field that is not quoted?)",
			got, want)
	case errors.Is(e.Err, csv.ErrQuote):
		return fmt.Sprintf("a quoted field is not closed by line %d (a \" missing, or the file cut off)", e.Line)
	case errors.Is(e.Err, csv.ErrBareQuote):
		return fmt.Sprintf("a \" inside a field that is not quoted (column %d)", e.Column)
	}
	return e.Err.Error()
}

func (s *rowSource) report(read bool) {
	if s.progress != nil {
		s.progress(Progress{Rows: s.rows, Bytes: s.counted.n, Read: read})
	}
}

func (s *rowSource) Values() ([]any, error) { return s.values, nil }

func (s *rowSource) Err() error { return s.err }
