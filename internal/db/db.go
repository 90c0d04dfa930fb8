// Package db is Flexsite's PostgreSQL: the connection pool (pgx), the schema migrations that
// ship in the binary (goose, run on start under an advisory lock so that replicas starting
// together migrate once), and what a database error means to a caller (Unavailable: try again
// shortly; a constraint violated: a typed error).
//
// What grows with time lives here (reward history, withdrawal status changes, readings, flex
// event settlements, the notification outbox); what is declared stays in Kubernetes.
package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Migrations are the schema's migrations, in order (goose's SQL files).
func Migrations() fs.FS {
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		panic(err)
	}
	return sub
}

// migrationLockID is the advisory lock key every manager takes while it migrates
// (goose's session locker: pg_advisory_lock with this id, released when done).
const migrationLockID = 0x666c6578_73697465 // "flexsite"

// The manager's bounds on its own sessions (OpenBounded): every transaction that writes holds
// the notification outbox's delivery horizon while it runs (docs/operations.md, "Delivery
// horizon"), so none of the manager's may run long. A statement past StatementTimeout is
// cancelled; a session idle inside a transaction past IdleInTransactionTimeout (a forgotten
// transaction) is ended.
const (
	StatementTimeout         = time.Minute
	IdleInTransactionTimeout = 10 * time.Second
)

// OpenBounded is Open with the manager's bounds on its sessions (StatementTimeout,
// IdleInTransactionTimeout), for the manager's pool. Migrate runs without them.
func OpenBounded(ctx context.Context, url string) (*pgxpool.Pool, error) {
	return open(ctx, url, map[string]string{
		"statement_timeout":                   strconv.FormatInt(StatementTimeout.Milliseconds(), 10),
		"idle_in_transaction_session_timeout": strconv.FormatInt(IdleInTransactionTimeout.Milliseconds(), 10),
	})
}

// Open connects a pool to url (a postgres:// URL or a key=value string). It does not wait
// for the database: a pool connects on first use, so a manager whose database is down starts
// and answers 503 until it is back.
func Open(ctx context.Context, url string) (*pgxpool.Pool, error) { return open(ctx, url, nil) }

func open(ctx context.Context, url string, params map[string]string) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// The URL may hold a password: never repeat it.
		return nil, errors.New("the database URL cannot be parsed (postgres://user:password@host:port/database?sslmode=...)")
	}
	if cfg.MaxConns < 8 {
		cfg.MaxConns = 8
	}
	// A connection that died with the server is found by its next use; health checks find the
	// idle ones sooner.
	cfg.HealthCheckPeriod = 5 * time.Second
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	for k, v := range params {
		cfg.ConnConfig.RuntimeParams[k] = v
	}
	return pgxpool.NewWithConfig(ctx, cfg)
}

// Migrate brings the schema to the newest version. Managers that start together are safe: each
// takes the same session-level advisory lock first, so one migrates and the others find it done.
// A migration may take longer than the manager's bounds allow its own statements: it runs on
// connections of its own, without them.
func Migrate(ctx context.Context, pool *pgxpool.Pool) error {
	cfg := pool.Config().ConnConfig.Copy()
	cfg.RuntimeParams["statement_timeout"] = "0"
	cfg.RuntimeParams["idle_in_transaction_session_timeout"] = "0"
	sqlDB := stdlib.OpenDB(*cfg)
	defer func() { _ = sqlDB.Close() }()
	return migrate(ctx, sqlDB)
}

func migrate(ctx context.Context, sqlDB *sql.DB) error {
	if err := requireExtensions(ctx, sqlDB); err != nil {
		return err
	}
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(migrationLockID),
		lock.WithLockTimeout(1, 600), lock.WithUnlockTimeout(1, 60))
	if err != nil {
		return err
	}
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations(),
		goose.WithSessionLocker(locker), goose.WithLogger(goose.NopLogger()))
	if err != nil {
		return fmt.Errorf("reading the schema migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrating the database schema: %w", Classify(err))
	}
	return nil
}

// RequiredExtensions are the PostgreSQL extensions the schema creates (CREATE EXTENSION in a
// migration): pg_trgm ranks the meter register's addresses (migration 00021).
var RequiredExtensions = []string{"pg_trgm"}

// requireExtensions tells exactly which extension the server lacks, before a migration fails
// on it with PostgreSQL's less helpful "could not open extension control file".
func requireExtensions(ctx context.Context, sqlDB *sql.DB) error {
	for _, name := range RequiredExtensions {
		var available bool
		err := sqlDB.QueryRowContext(ctx,
			`SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = $1)`, name).Scan(&available)
		if err != nil {
			return fmt.Errorf("checking the PostgreSQL extensions: %w", Classify(err))
		}
		if !available {
			return fmt.Errorf("the PostgreSQL server lacks the %s extension, which Flexsite's schema needs "+
				"(Debian and Ubuntu: install postgresql-contrib, or the postgresql-<version> package that "+
				"includes it; CloudNativePG images include it)", name)
		}
	}
	return nil
}

// Version is the schema version the database is at (0: none yet).
func Version(ctx context.Context, pool *pgxpool.Pool) (int64, error) {
	sqlDB := stdlib.OpenDBFromPool(pool)
	defer func() { _ = sqlDB.Close() }()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, Migrations())
	if err != nil {
		return 0, err
	}
	return provider.GetDBVersion(ctx)
}

// ClassifyOn is Classify for an error of a query on pool; when the database was away it also
// forgets the pool's connections: those that died with the server would each fail once more
// after it is back.
func ClassifyOn(pool *pgxpool.Pool, err error) error {
	err = Classify(err)
	if errors.Is(err, ErrUnavailable) {
		pool.Reset()
	}
	return err
}
