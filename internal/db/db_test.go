package db_test

import (
	"context"
	"errors"
	"io/fs"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

// Managers that start at once migrate once: every one waits on the advisory lock, the first
// migrates, the others find the schema at its newest version.
func TestMigrateConcurrently(t *testing.T) {
	ctx := context.Background()
	fresh, err := dbtest.New(ctx) // created and migrated: take its schema away to start from nothing
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close(ctx)
	if _, err := fresh.Pool.Exec(ctx, `DROP SCHEMA public CASCADE; CREATE SCHEMA public`); err != nil {
		t.Fatal(err)
	}
	const managers = 4
	var wg sync.WaitGroup
	errs := make([]error, managers)
	for i := range managers {
		wg.Go(func() {
			pool, err := db.Open(ctx, fresh.URL)
			if err != nil {
				errs[i] = err
				return
			}
			defer pool.Close()
			errs[i] = db.Migrate(ctx, pool)
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("manager %d: %v", i, err)
		}
	}
	v, err := db.Version(ctx, fresh.Pool)
	if want := newestMigration(t); err != nil || v != want {
		t.Fatalf("schema version %d, %v; want %d", v, err, want)
	}
	var applied int
	if err := fresh.Pool.QueryRow(ctx, `SELECT count(*) FROM goose_db_version WHERE version_id = 1 AND is_applied`).
		Scan(&applied); err != nil || applied != 1 {
		t.Errorf("migration 1 recorded %d times (%v), want once", applied, err)
	}
}

func insertTransaction(ctx context.Context, pool *pgxpool.Pool, id string) error {
	_, err := pool.Exec(ctx, `INSERT INTO reward_sites (organisation, site_id) VALUES ('org-a', 'site-1')
		ON CONFLICT DO NOTHING`)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `INSERT INTO reward_transactions (organisation, site_id, transaction_id, transaction_type,
		credit_pence, source, request_digest) VALUES ('org-a', 'site-1', $1, 'signup bonus', 500, 'api', '\x00')`, id)
	return err
}

func TestRewardTransactionsAreAppendOnly(t *testing.T) {
	ctx := context.Background()
	id := "3f0e9b4e-1f55-4c1c-9a55-0f6f1c0a0001"
	if err := insertTransaction(ctx, testDB.Pool, id); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE reward_transactions SET credit_pence = 1 WHERE transaction_id = '` + id + `'`,
		`DELETE FROM reward_transactions WHERE transaction_id = '` + id + `'`,
		`TRUNCATE reward_transactions CASCADE`,
	} {
		_, err := testDB.Pool.Exec(ctx, stmt)
		var ce *db.ConstraintError
		if !errors.As(db.Classify(err), &ce) || ce.Kind != "integrity" {
			t.Errorf("%s: %v, want the append-only refusal", stmt, err)
		}
	}
	err := insertTransaction(ctx, testDB.Pool, id)
	var ce *db.ConstraintError
	if !errors.As(db.Classify(err), &ce) || ce.Kind != "unique" {
		t.Errorf("the same id again: %v, want a unique violation", err)
	}
}

func TestReadingsAreUpsertedIntoPartitions(t *testing.T) {
	ctx := context.Background()
	if err := db.EnsureReadingPartitions(ctx, testDB.Pool, mustTime(t, "2026-11-15T00:00:00Z"), 2); err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{1.5, 2.5} {
		if _, err := testDB.Pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
			VALUES ('org-a', 'site-1', 'asset-1', 'import', '2026-11-20T10:00Z', '2026-11-20T10:30Z', $1)
			ON CONFLICT (organisation, site_id, asset_id, label, start_at, end_at) DO UPDATE SET value = EXCLUDED.value`, v); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	var value float64
	var part string
	if err := testDB.Pool.QueryRow(ctx, `SELECT count(*), max(value), max(tableoid::regclass::text) FROM readings
		WHERE organisation = 'org-a' AND site_id = 'site-1'`).Scan(&n, &value, &part); err != nil {
		t.Fatal(err)
	}
	if n != 1 || value != 2.5 || part != "readings_2026_11" {
		t.Errorf("%d readings, value %v, in %s; want one, 2.5, in readings_2026_11", n, value, part)
	}
}

// The database taken away: errors say Unavailable; back, the same pool works again.
func TestUnavailableAndBack(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	if err := testDB.Pool.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := testDB.Pool.Exec(ctx, `SELECT 1`)
	if !db.Unavailable(err) {
		t.Errorf("with the server stopped: %v, want unavailable", err)
	}
	if err := testDB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Pool.Exec(ctx, `SELECT 1`); err != nil {
		// A connection that died with the server may fail once; the pool replaces it.
		if _, err := testDB.Pool.Exec(ctx, `SELECT 1`); err != nil {
			t.Errorf("back: %v", err)
		}
	}
}

func mustTime(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// newestMigration is the highest version among the migration files (NNNNN_name.sql).
func newestMigration(t *testing.T) int64 {
	t.Helper()
	entries, err := fs.ReadDir(db.Migrations(), ".")
	if err != nil {
		t.Fatal(err)
	}
	var newest int64
	for _, e := range entries {
		prefix, _, _ := strings.Cut(e.Name(), "_")
		if v, err := strconv.ParseInt(prefix, 10, 64); err == nil && v > newest {
			newest = v
		}
	}
	return newest
}
