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

// insertReading stores one reading through the parent table (routed to its month's partition,
// else the default one) and answers the table it landed in.
func insertReading(ctx context.Context, t *testing.T, site, start string) string {
	t.Helper()
	var part string
	if err := testDB.Pool.QueryRow(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
		VALUES ('org-p', $1, 'asset-1', 'import', $2::timestamptz, $2::timestamptz + interval '30 minutes', 1)
		RETURNING tableoid::regclass::text`, site, start).Scan(&part); err != nil {
		t.Fatal(err)
	}
	return part
}

func partitionOf(ctx context.Context, t *testing.T, site string) string {
	t.Helper()
	var part string
	if err := testDB.Pool.QueryRow(ctx, `SELECT tableoid::regclass::text FROM readings WHERE organisation = 'org-p' AND site_id = $1`,
		site).Scan(&part); err != nil {
		t.Fatal(err)
	}
	return part
}

// Readings stored before their month had a partition (in the default partition) no longer make
// the month's partition fail: they move into it when it is made. The leader's round moves every
// month the default partition holds and makes the months around now, leaving it empty.
func TestReadingPartitionsTakeTheDefaultPartitionsRows(t *testing.T) {
	ctx := context.Background()
	if got := insertReading(ctx, t, "site-march", "2031-03-10T10:00Z"); got != "readings_default" {
		t.Fatalf("a reading of a month without a partition landed in %s, want readings_default", got)
	}
	if got := insertReading(ctx, t, "site-april", "2031-04-30T23:30Z"); got != "readings_default" {
		t.Fatalf("landed in %s, want readings_default", got)
	}
	if err := db.EnsureReadingPartitions(ctx, testDB.Pool, mustTime(t, "2031-03-01T00:00:00Z"), 1); err != nil {
		t.Fatalf("making March's partition over a default partition holding March: %v", err)
	}
	if got := partitionOf(ctx, t, "site-march"); got != "readings_2031_03" {
		t.Errorf("March's reading is in %s, want readings_2031_03", got)
	}
	if got := partitionOf(ctx, t, "site-april"); got != "readings_default" {
		t.Errorf("April's reading is in %s, want it left in readings_default", got)
	}
	if made, err := db.EnsureReadingPartition(ctx, testDB.Pool, mustTime(t, "2031-03-01T00:00:00Z")); err != nil || made {
		t.Errorf("March again: made %v, %v; want nothing to do", made, err)
	}

	round := &db.ReadingPartitions{Pool: testDB.Pool, Back: 1, Ahead: 1,
		Now: func() time.Time { return mustTime(t, "2031-07-15T12:00:00Z") }}
	if err := round.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if got := partitionOf(ctx, t, "site-april"); got != "readings_2031_04" {
		t.Errorf("after a round April's reading is in %s, want readings_2031_04", got)
	}
	var inDefault int
	if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM readings_default`).Scan(&inDefault); err != nil {
		t.Fatal(err)
	}
	if inDefault != 0 {
		t.Errorf("%d readings left in the default partition after a round", inDefault)
	}
	for _, name := range []string{"readings_2031_06", "readings_2031_07", "readings_2031_08"} {
		var attached bool
		if err := testDB.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'readings'::regclass AND c.relname = $1)`, name).Scan(&attached); err != nil {
			t.Fatal(err)
		}
		if !attached {
			t.Errorf("%s is not a partition of readings after the round", name)
		}
	}
	var constraints int
	if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM pg_constraint WHERE conname LIKE 'readings_2031_%_bound'`).
		Scan(&constraints); err != nil {
		t.Fatal(err)
	}
	if constraints != 0 {
		t.Errorf("%d bound CHECK constraints left behind", constraints)
	}
	// The primary key still makes a reading sent again replace the stored one in a moved month.
	if _, err := testDB.Pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
		VALUES ('org-p', 'site-march', 'asset-1', 'import', '2031-03-10T10:00Z', '2031-03-10T10:30Z', 2)
		ON CONFLICT (organisation, site_id, asset_id, label, start_at, end_at) DO UPDATE SET value = EXCLUDED.value`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM readings WHERE site_id = 'site-march'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("site-march has %d readings (%v), want the one replaced", n, err)
	}
}

// Making a partition does not wait for the readers of readings (it locks the parent with SHARE
// UPDATE EXCLUSIVE, not ACCESS EXCLUSIVE as CREATE TABLE ... PARTITION OF does), so it never
// queues the requests behind it.
func TestMakingAPartitionLetsReadersBe(t *testing.T) {
	ctx := context.Background()
	if err := db.EnsureReadingPartitions(ctx, testDB.Pool, mustTime(t, "2032-01-01T00:00:00Z"), 1); err != nil {
		t.Fatal(err)
	}
	insertReading(ctx, t, "site-reader", "2032-01-05T10:00Z")
	reader, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = reader.Rollback(ctx) }()
	var n int
	if err := reader.QueryRow(ctx, `SELECT count(*) FROM readings WHERE start_at >= '2032-01-01T00:00Z' AND start_at < '2032-02-01T00:00Z'`).
		Scan(&n); err != nil || n != 1 {
		t.Fatalf("the reader saw %d readings (%v)", n, err)
	}
	// The reader's transaction still holds its lock on readings. A lock that conflicts with it
	// would fail after partitionLockTimeout: the partition is made while it reads. (The
	// deadline only keeps a lock that waits forever from hanging the test.)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := db.EnsureReadingPartitions(ctx, testDB.Pool, mustTime(t, "2032-02-01T00:00:00Z"), 1); err != nil {
		t.Fatalf("making February's partition while readings are read: %v", err)
	}
}

// The leader's hourly round runs every retention sweep at the round's time, each whatever the
// others answered, and answers their failures.
func TestRoundRunsTheRetentionSweeps(t *testing.T) {
	ctx := context.Background()
	now := mustTime(t, "2031-09-15T12:00:00Z")
	var ran []time.Time
	broken := errors.New("broken")
	round := &db.ReadingPartitions{Pool: testDB.Pool, Now: func() time.Time { return now }, Expire: []db.Expiry{
		{Name: "first", Delete: func(_ context.Context, at time.Time) (int64, error) { ran = append(ran, at); return 0, broken }},
		{Name: "second", Delete: func(_ context.Context, at time.Time) (int64, error) { ran = append(ran, at); return 3, nil }},
	}}
	if err := round.Round(ctx); !errors.Is(err, broken) {
		t.Errorf("the round answered %v, want the first sweep's failure", err)
	}
	if len(ran) != 2 || !ran[0].Equal(now) || !ran[1].Equal(now) {
		t.Errorf("sweeps ran at %v, want both at the round's time", ran)
	}
}
