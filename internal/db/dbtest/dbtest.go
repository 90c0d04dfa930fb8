// Package dbtest gives tests a real PostgreSQL: one server per test process, started from the
// binaries hack/ensure-postgres.sh finds ($FLEXSITE_POSTGRES_BIN, else Debian's
// /usr/lib/postgresql/*/bin), or the server $FLEXSITE_TEST_DATABASE_URL names; and a fresh,
// migrated database per suite. Never a fake or an in-memory substitute. A suite may take the
// database away (Stop) and bring it back (Start), to see what the code does meanwhile.
//
// Without PostgreSQL a suite skips (Find's error says what is missing), except in CI
// (CI=true), where it fails: MissingVerdict says which.
package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/pgserver"
)

// Find is the directory of PostgreSQL's server binaries: $FLEXSITE_POSTGRES_BIN, else the
// newest /usr/lib/postgresql/*/bin. The error says what is missing and how to get it.
func Find() (string, error) {
	if dir := os.Getenv("FLEXSITE_POSTGRES_BIN"); dir != "" {
		if complete(dir) {
			return dir, nil
		}
		return "", fmt.Errorf("FLEXSITE_POSTGRES_BIN=%s does not hold initdb and postgres", dir)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Sort(sort.Reverse(sort.StringSlice(dirs)))
	for _, d := range dirs {
		if complete(d) {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries ($FLEXSITE_POSTGRES_BIN or /usr/lib/postgresql/*/bin): " +
		"run hack/ensure-postgres.sh (apt-get install postgresql), or set FLEXSITE_TEST_DATABASE_URL")
}

func complete(dir string) bool {
	for _, b := range []string{"initdb", "postgres"} {
		if st, err := os.Stat(filepath.Join(dir, b)); err != nil || st.IsDir() {
			return false
		}
	}
	return true
}

// Available is nil when a suite can have a database: a server URL in
// $FLEXSITE_TEST_DATABASE_URL, or the binaries to start one.
func Available() error {
	if os.Getenv("FLEXSITE_TEST_DATABASE_URL") != "" {
		return nil
	}
	_, err := Find()
	return err
}

// MissingVerdict says what a suite does without PostgreSQL: fail in CI (CI=true), skip
// elsewhere; message says why.
func MissingVerdict(err error) (fail bool, message string) {
	if os.Getenv("CI") == "true" {
		return true, "CI=true and the database tests cannot run: " + err.Error()
	}
	return false, "skipping the database tests: " + err.Error()
}

// The process's server, shared by its suites, stopped when the last database is closed.
var shared struct {
	sync.Mutex
	server *pgserver.Server
	dir    string
	users  int
}

// Database is one suite's database, fresh and migrated.
type Database struct {
	// URL connects to it (with the password: never log it).
	URL string
	// Pool is a pool on URL for the test's own queries.
	Pool   *pgxpool.Pool
	name   string
	admin  string // the server's maintenance database URL
	server *pgserver.Server
}

// New creates a fresh database on the process's server (started on first use), migrates it,
// and opens a pool on it.
func New(ctx context.Context) (*Database, error) {
	admin, server, err := acquire(ctx)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	d := &Database{name: "flexsite_test_" + hex.EncodeToString(b), admin: admin, server: server}
	conn, err := pgx.Connect(ctx, admin)
	if err != nil {
		release()
		return nil, fmt.Errorf("connecting to the test server: %w", err)
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{d.name}.Sanitize())
	_ = conn.Close(ctx)
	if err != nil {
		release()
		return nil, fmt.Errorf("creating the test database: %w", err)
	}
	u, _ := url.Parse(admin)
	u.Path = "/" + d.name
	d.URL = u.String()
	if d.Pool, err = db.Open(ctx, d.URL); err == nil {
		err = db.Migrate(ctx, d.Pool)
	}
	if err != nil {
		d.Close(ctx)
		return nil, err
	}
	return d, nil
}

func acquire(ctx context.Context) (string, *pgserver.Server, error) {
	shared.Lock()
	defer shared.Unlock()
	if u := os.Getenv("FLEXSITE_TEST_DATABASE_URL"); u != "" {
		shared.users++
		return u, nil, nil
	}
	if shared.server == nil {
		bin, err := Find()
		if err != nil {
			return "", nil, err
		}
		// Under /tmp, not a test's TempDir: when the tests run as root the server runs as
		// another user, who must reach the directory.
		dir, err := os.MkdirTemp("", "flexsite-pg-")
		if err != nil {
			return "", nil, err
		}
		s, err := pgserver.Start(ctx, pgserver.Options{BinDir: bin, Dir: dir, Throwaway: true})
		if err != nil {
			_ = os.RemoveAll(dir)
			return "", nil, err
		}
		shared.server, shared.dir = s, dir
	}
	shared.users++
	return shared.server.URL("postgres"), shared.server, nil
}

func release() {
	shared.Lock()
	defer shared.Unlock()
	if shared.users--; shared.users > 0 || shared.server == nil {
		return
	}
	_ = shared.server.Stop()
	_ = os.RemoveAll(shared.dir)
	shared.server, shared.dir = nil, ""
}

// CanStop reports whether Stop can take the database away (not on a server named by
// $FLEXSITE_TEST_DATABASE_URL, which this process does not run).
func (d *Database) CanStop() bool { return d.server != nil }

// Stop takes the database away: the server shuts down (its connections are closed).
func (d *Database) Stop() error {
	if d.server == nil {
		return errors.New("the test database's server is not this process's ($FLEXSITE_TEST_DATABASE_URL)")
	}
	return d.server.Stop()
}

// Start brings the database back after Stop. The pool's connections from before died with the
// server: they are dropped, so that the next query of a test (or of a server under test on this
// pool) opens a live one instead of failing once with "terminating connection".
func (d *Database) Start(ctx context.Context) error {
	if d.server == nil {
		return nil
	}
	if err := d.server.Start(ctx); err != nil {
		return err
	}
	if d.Pool != nil {
		d.Pool.Reset()
	}
	return nil
}

// Close drops the database and, with the last one, stops the process's server.
func (d *Database) Close(ctx context.Context) {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.server != nil {
		_ = d.server.Start(ctx) // a suite that ended with it stopped
	}
	if conn, err := pgx.Connect(ctx, d.admin); err == nil {
		_, _ = conn.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{d.name}.Sanitize()+" WITH (FORCE)")
		_ = conn.Close(ctx)
	}
	release()
}

// Main is a database test package's TestMain: it sets *into to a fresh database of the package's
// own, runs then (if any) and the tests, and exits. With no PostgreSQL here it skips them all,
// or fails in CI (MissingVerdict).
func Main(m *testing.M, into **Database, then ...func(*Database)) {
	if err := Available(); err != nil {
		fail, msg := MissingVerdict(err)
		fmt.Println(msg)
		if fail {
			os.Exit(1)
		}
		os.Exit(0)
	}
	ctx := context.Background()
	d, err := New(ctx)
	if err != nil {
		fmt.Println("starting the test database:", err)
		os.Exit(1)
	}
	*into = d
	for _, f := range then {
		f(d)
	}
	code := m.Run()
	d.Close(ctx)
	os.Exit(code)
}

// ForSuite is New for a Ginkgo suite's BeforeSuite, given Ginkgo's Fail and Skip: with no
// PostgreSQL here it skips the suite, or fails it in CI (MissingVerdict). Every suite that runs
// Flexsite's controllers or doors needs one: there is no mode without a database.
func ForSuite(ctx context.Context, fail, skip func(message string, callerSkip ...int)) (*Database, error) {
	if err := Available(); err != nil {
		if failIt, msg := MissingVerdict(err); failIt {
			fail(msg, 1)
		} else {
			skip(msg, 1)
		}
		return nil, err
	}
	return New(ctx)
}

// ForMain is New for a TestMain that starts more than the database (testenv.MainCached):
// with no PostgreSQL here it answers skip's error (skip the package's tests), or fails in CI
// (MissingVerdict).
func ForMain(ctx context.Context, skip func(message string) error) (*Database, error) {
	if err := Available(); err != nil {
		failIt, msg := MissingVerdict(err)
		if failIt {
			return nil, errors.New(msg)
		}
		return nil, skip(msg)
	}
	return New(ctx)
}
