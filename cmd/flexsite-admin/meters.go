package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/validation"
)

const metersUsage = "usage: flexsite-admin meters import [--database-url URL] FILE " +
	"(a register CSV file, gzip or not; - reads stdin; database: $FLEXSITE_DATABASE_URL or --database-url)\n" +
	"   or: flexsite-admin meters generate --count N [--seed S] [--postcode POSTCODE ...] " +
	"(a synthetic register, as CSV on stdout)"

// metersCommand is `flexsite-admin meters`: the meter-point register's import, and a
// synthetic register to try it with (docs/platform.md, "The meter register").
func metersCommand(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "import":
			return metersImport(ctx, args[1:], stdin, stdout, stderr)
		case "generate":
			return metersGenerate(args[1:], stdout, stderr)
		}
	}
	return errors.New(metersUsage)
}

// metersImport loads a register file into the database's register, all or nothing
// (meterstore.Import), showing its progress on stderr.
func metersImport(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("meters import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url := fs.String("database-url", "", "PostgreSQL URL (default $FLEXSITE_DATABASE_URL; prefer it: a flag is in the process list).")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *url == "" {
		*url = os.Getenv("FLEXSITE_DATABASE_URL")
	}
	if fs.NArg() != 1 || *url == "" {
		return errors.New(metersUsage)
	}
	name, in, size := fs.Arg(0), stdin, int64(-1)
	if name == "-" {
		name = "stdin"
	} else {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			size = st.Size()
		}
		in = f
	}
	// Interrupted (Ctrl-C, a Job's deadline), the import's transaction rolls back.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	pool, err := db.Open(ctx, *url)
	if err != nil {
		return err
	}
	defer pool.Close()
	if err := registerExists(ctx, pool); err != nil {
		return err
	}

	read := &byteCounter{r: in}
	progress := newImportProgress(stderr, size, read)
	start := time.Now()
	report, err := (&meterstore.Store{Pool: pool}).Import(ctx, read, progress.update)
	progress.finish(err == nil)
	var rejected *meterstore.RejectedError
	switch {
	case errors.As(err, &rejected):
		for _, r := range rejected.Rejections {
			fmt.Fprintln(stderr, r)
		}
		if more := rejected.Count - int64(len(rejected.Rejections)); more > 0 {
			fmt.Fprintf(stderr, "... and %s more\n", thousands(more))
		}
		return fmt.Errorf("%s: %s rejected; nothing was imported", name, count(rejected.Count, "row", "rows"))
	case err != nil && ctx.Err() != nil:
		return fmt.Errorf("%s: interrupted; nothing was imported", name)
	case err != nil:
		return fmt.Errorf("%s: %w; nothing was imported", name, err)
	}
	_, err = fmt.Fprintf(stdout, "imported %s (%s new, %s replaced) in %s\n", count(report.Rows, "meter point", "meter points"),
		thousands(report.Inserted), thousands(report.Replaced), time.Since(start).Round(10*time.Millisecond))
	return err
}

// registerExists checks the database has the register before reading the file. The import
// does not migrate the schema: the manager owns it (it migrates at start, under goose's lock),
// and a flexsite-admin of another version than the running manager must not move the
// schema under it; the platform team's import role needs no DDL rights either.
func registerExists(ctx context.Context, pool *pgxpool.Pool) error {
	var exists bool
	if err := pool.QueryRow(ctx, `SELECT to_regclass('meter_points') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("reaching the database: %w", db.Classify(err))
	}
	if !exists {
		return errors.New("the database has no meter register (table meter_points): start the Flexsite manager " +
			"against it once (it migrates the schema when it starts), then import again")
	}
	return nil
}

// byteCounter counts the bytes of the file as read (compressed, when it is), which is what
// its size on disk measures. Import reads it and reports progress from one goroutine.
type byteCounter struct {
	r io.Reader
	n int64
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// plainProgressEvery and plainProgressInterval space the plain progress lines (a Job's log,
// a pipe): one per so many rows, or per so long when rows come slowly.
const (
	plainProgressEvery    = 100_000
	plainProgressInterval = 5 * time.Second
)

// importProgress shows an import's progress on stderr: a bar on a terminal (by bytes of the
// file, or a count of rows when its size is unknown), plain lines otherwise.
type importProgress struct {
	out  io.Writer
	size int64 // -1: unknown (stdin, a pipe)
	read *byteCounter
	bar  *progressbar.ProgressBar

	lastRows int64
	lastAt   time.Time
}

func newImportProgress(out io.Writer, size int64, read *byteCounter) *importProgress {
	p := &importProgress{out: out, size: size, read: read, lastAt: time.Now()}
	if f, ok := out.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		return p
	}
	opts := []progressbar.Option{progressbar.OptionSetWriter(out), progressbar.OptionSetDescription("meters import"),
		progressbar.OptionSetWidth(30), progressbar.OptionThrottle(200 * time.Millisecond),
		progressbar.OptionShowCount(), progressbar.OptionSetPredictTime(true)}
	if size >= 0 {
		p.bar = progressbar.NewOptions64(size, append(opts, progressbar.OptionShowBytes(true))...)
	} else {
		p.bar = progressbar.NewOptions64(-1, append(opts, progressbar.OptionSetItsString("rows"),
			progressbar.OptionShowIts())...)
	}
	return p
}

func (p *importProgress) update(at meterstore.Progress) {
	if p.bar != nil {
		if p.size >= 0 {
			_ = p.bar.Set64(min(p.read.n, p.size))
			p.bar.Describe("meters import: " + count(at.Rows, "row", "rows"))
		} else {
			_ = p.bar.Set64(at.Rows)
		}
		if at.Read {
			p.bar.Describe("meters import: " + count(at.Rows, "row", "rows") + " read; merging into the register")
		}
		return
	}
	switch {
	case at.Read:
		fmt.Fprintf(p.out, "meters import: %s read; merging into the register\n", count(at.Rows, "row", "rows"))
	case at.Rows-p.lastRows >= plainProgressEvery || time.Since(p.lastAt) >= plainProgressInterval:
		share := ""
		if p.size > 0 {
			share = fmt.Sprintf(" (%d%%)", min(p.read.n, p.size)*100/p.size)
		}
		fmt.Fprintf(p.out, "meters import: %s%s\n", count(at.Rows, "row", "rows"), share)
	default:
		return
	}
	p.lastRows, p.lastAt = at.Rows, time.Now()
}

// finish ends the bar: full when the import succeeded, left where it stopped otherwise.
func (p *importProgress) finish(ok bool) {
	if p.bar == nil {
		return
	}
	if ok {
		_ = p.bar.Finish()
	} else {
		_ = p.bar.Exit()
	}
	fmt.Fprintln(p.out)
}

// metersGenerate writes a synthetic register (internal/meters/synth): the same file for the
// same seed and count, for trying an import and for the tests and the bench.
func metersGenerate(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("meters generate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	n := fs.Int("count", 0, "How many meter points.")
	seed := fs.Uint64("seed", 1, "The seed: the same seed and count make the same file.")
	var postcodes []string
	fs.Func("postcode", "A postcode the first meter points lie at (repeat it for more), so that a walk-through finds meters there.",
		func(s string) error {
			if _, err := validation.NormalisePostcode(s); err != nil {
				return fmt.Errorf("%q is not a UK postcode", s)
			}
			postcodes = append(postcodes, s)
			return nil
		})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return errors.New(metersUsage)
	}
	if *n <= 0 {
		return errors.New("--count must be a positive number of meter points")
	}
	w := bufio.NewWriterSize(stdout, 1<<16)
	if err := synth.WriteCSV(w, *seed, *n, postcodes); err != nil {
		return err
	}
	return w.Flush()
}

// thousands writes n with thousands separators: 1,000,000.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// count is n and the noun: "1 row", "2,000 rows".
func count(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}
