package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/pgserver"
)

// databaseOptions say where Flexsite's PostgreSQL is.
type databaseOptions struct {
	url string
	// With --embedded: PostgreSQL's binaries and the directory the embedded server keeps.
	postgresBin, postgresDir string
	// migrateWait is how long start waits for the database to answer before giving up.
	migrateWait time.Duration
}

func (o *databaseOptions) bind(fs *flag.FlagSet) {
	fs.StringVar(&o.url, "database-url", "",
		"PostgreSQL URL (postgres://user:password@host:5432/database?sslmode=verify-full) of the reward history, "+
			"readings and notification outbox ($FLEXSITE_DATABASE_URL; preferred, so that the password is not in the "+
			"process list). Required unless --embedded, which starts its own.")
	fs.StringVar(&o.postgresBin, "embedded-postgres-bin", "",
		"With --embedded: directory of PostgreSQL's initdb and postgres (hack/ensure-postgres.sh; default: $FLEXSITE_POSTGRES_BIN).")
	fs.StringVar(&o.postgresDir, "embedded-postgres-dir", "bin/embedded/postgres",
		"With --embedded: the embedded PostgreSQL's directory (data, socket, password), kept between runs.")
	fs.DurationVar(&o.migrateWait, "database-wait", 2*time.Minute,
		"How long the manager waits on start for the database to answer (then it exits, to be restarted).")
}

// errNoDatabase is the manager started with no database outside embedded mode: it refuses to
// start rather than run without its reward history.
var errNoDatabase = errors.New("no database: Flexsite keeps reward history, withdrawals, readings and its notification " +
	"outbox in PostgreSQL; set $FLEXSITE_DATABASE_URL (or --database-url) to a postgres:// URL " +
	"(the Helm chart takes it from a Secret: database.existingSecret), or run with --embedded for a local one")

// openDatabase connects to the database (starting the embedded one with --embedded), migrates
// its schema under the advisory lock (with --embedded, loads the demo meter register into an
// empty one), and answers the pool and what stops it all.
func openDatabase(ctx context.Context, o options) (*pgxpool.Pool, func(), error) {
	log := ctrl.Log.WithName("database")
	url := o.database.url
	if url == "" {
		url = os.Getenv("FLEXSITE_DATABASE_URL")
	}
	stop := func() {}
	if o.embedded && url == "" {
		bin := o.database.postgresBin
		if bin == "" {
			bin = os.Getenv("FLEXSITE_POSTGRES_BIN")
		}
		if bin == "" {
			return nil, nil, errors.New("--embedded needs PostgreSQL: pass --embedded-postgres-bin (make run does, " +
				"from hack/ensure-postgres.sh) or set $FLEXSITE_POSTGRES_BIN")
		}
		log.Info("starting the embedded PostgreSQL", "binaries", bin, "data", o.database.postgresDir)
		server, err := pgserver.Start(ctx, pgserver.Options{BinDir: bin, Dir: o.database.postgresDir,
			Log: prefixWriter{"postgres: "}})
		if err != nil {
			return nil, nil, fmt.Errorf("starting the embedded PostgreSQL: %w", err)
		}
		stop = func() {
			log.Info("stopping the embedded PostgreSQL")
			_ = server.Stop()
		}
		if err := ensureDatabase(ctx, server.URL("postgres"), "flexsite"); err != nil {
			stop()
			return nil, nil, err
		}
		url = server.URL("flexsite")
		pwFile, _ := filepath.Abs(filepath.Join(o.database.postgresDir, "password"))
		fmt.Printf("\nEmbedded PostgreSQL is up: %s (password in %s). In another shell:\n"+
			"    PGPASSWORD=\"$(cat %s)\" psql -h 127.0.0.1 -p %d -U %s flexsite\n\n",
			server.Redacted("flexsite"), pwFile, pwFile, server.Port(), pgserver.Superuser)
	}
	if url == "" {
		return nil, nil, errNoDatabase
	}
	pool, err := db.OpenBounded(ctx, url)
	if err != nil {
		stop()
		return nil, nil, err
	}
	closeAll := func() { pool.Close(); stop() }
	wait, cancel := context.WithTimeout(ctx, o.database.migrateWait)
	defer cancel()
	for {
		err = db.Migrate(wait, pool)
		if err == nil || !db.Unavailable(err) {
			break
		}
		log.Info("the database does not answer yet; trying again", "error", err.Error())
		select {
		case <-wait.Done():
			closeAll()
			return nil, nil, fmt.Errorf("the database did not answer within --database-wait=%s: %w", o.database.migrateWait, err)
		case <-time.After(2 * time.Second):
		}
	}
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	version, _ := db.Version(ctx, pool)
	log.Info("database schema ready", "version", version)
	if o.embedded {
		if err := seedDemoRegister(ctx, pool, o.embeddedMeterPoints, log); err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return pool, closeAll, nil
}

// ensureDatabase creates database name on the server at adminURL when it does not exist.
func ensureDatabase(ctx context.Context, adminURL, name string) error {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("connecting to the embedded PostgreSQL: %w", err)
	}
	defer func() { _ = conn.Close(ctx) }()
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, name).Scan(&exists); err != nil {
		return err
	}
	if exists {
		return nil
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	return err
}

// prefixWriter writes the embedded server's log to stderr, each write prefixed.
type prefixWriter struct{ prefix string }

func (w prefixWriter) Write(p []byte) (int, error) {
	_, err := os.Stderr.Write(append([]byte(w.prefix), p...))
	return len(p), err
}
