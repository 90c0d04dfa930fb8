package db

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// partitionLockTimeout bounds how long making a partition waits for its locks (the default
// partition's ACCESS EXCLUSIVE, the parent's SHARE UPDATE EXCLUSIVE): past it the month is
// tried again on the next round, rather than queueing every reader of readings behind it.
const partitionLockTimeout = 5 * time.Second

// partitionsLock is the advisory lock key that makes one writer at a time make partitions
// (a leader and a replica that still believes it leads, a bench run beside a manager).
const partitionsLock = 7_446_275_104_311_921_313

// EnsureReadingPartitions makes the monthly partitions of readings (readings_YYYY_MM, by start
// time in UTC) from the month of from for months months, those missing only
// (EnsureReadingPartition).
func EnsureReadingPartitions(ctx context.Context, pool *pgxpool.Pool, from time.Time, months int) error {
	_, err := ensureReadingPartitions(ctx, pool, from, months)
	return err
}

func ensureReadingPartitions(ctx context.Context, pool *pgxpool.Pool, from time.Time, months int) (int, error) {
	first := monthStart(from)
	made := 0
	for i := range months {
		ok, err := EnsureReadingPartition(ctx, pool, first.AddDate(0, i, 0))
		if err != nil {
			return made, err
		}
		if ok {
			made++
		}
	}
	return made, nil
}

// EnsureReadingPartition makes the partition of readings of month (its first day, UTC) when
// it is missing, and answers whether it made it. Readings of that month already in the
// default partition (stored before the partition existed) move into it: a plain CREATE TABLE
// ... PARTITION OF would fail on them, or scan the default partition under an exclusive lock
// of the whole table. Instead, in one transaction: the table is made detached, with a CHECK
// constraint of its bound (ATTACH then skips the scan that validates the new partition), the
// month's rows are moved into it from the default partition, and it is attached, which locks
// the parent with SHARE UPDATE EXCLUSIVE only (readings are read and written meanwhile) and
// the default partition, kept empty by this, with ACCESS EXCLUSIVE for a scan of nothing.
func EnsureReadingPartition(ctx context.Context, pool *pgxpool.Pool, month time.Time) (bool, error) {
	start := monthStart(month)
	end := start.AddDate(0, 1, 0)
	name := partitionName(start)
	made := false
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = '%dms'`, partitionLockTimeout.Milliseconds())); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(partitionsLock)); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
			WHERE i.inhparent = 'readings'::regclass AND c.relname = $1)`, name).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil
		}
		// Names and bounds are made here, not taken from input.
		lo, hi := start.Format(time.RFC3339), end.Format(time.RFC3339)
		for _, stmt := range []string{
			fmt.Sprintf(`CREATE TABLE %s (LIKE readings INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES)`, name),
			fmt.Sprintf(`ALTER TABLE %s ADD CONSTRAINT %s_bound CHECK (start_at IS NOT NULL AND start_at >= '%s' AND start_at < '%s')`,
				name, name, lo, hi),
			fmt.Sprintf(`WITH moved AS (DELETE FROM readings_default WHERE start_at >= '%s' AND start_at < '%s' RETURNING *)
				INSERT INTO %s SELECT * FROM moved`, lo, hi, name),
			fmt.Sprintf(`ALTER TABLE readings ATTACH PARTITION %s FOR VALUES FROM ('%s') TO ('%s')`, name, lo, hi),
			// The bound says it now; the constraint would only be checked again on every write.
			fmt.Sprintf(`ALTER TABLE %s DROP CONSTRAINT %s_bound`, name, name),
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		made = true
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("making the readings partition %s: %w", name, Classify(err))
	}
	return made, nil
}

// ReadingMonthsInDefault are the months (first days, UTC) of the readings the default
// partition holds: stored before their month had a partition. A plain read: no lock but
// ACCESS SHARE.
func ReadingMonthsInDefault(ctx context.Context, pool *pgxpool.Pool) ([]time.Time, error) {
	rows, err := pool.Query(ctx, `SELECT DISTINCT date_trunc('month', start_at AT TIME ZONE 'UTC') FROM readings_default`)
	if err != nil {
		return nil, Classify(err)
	}
	months, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (time.Time, error) {
		var t time.Time
		err := r.Scan(&t)
		return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC), err
	})
	return months, Classify(err)
}

func monthStart(t time.Time) time.Time {
	t = t.UTC()
	return time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
}

func partitionName(month time.Time) string {
	return fmt.Sprintf("readings_%04d_%02d", month.Year(), int(month.Month()))
}

// ReadingPartitions makes the readings partitions ahead, in the leader only (a manager
// Runnable: NeedLeaderElection), on start and every Every: the months from Back months ago to
// Ahead months ahead, and every month the default partition holds readings of (moving them
// out, so that it stays empty). Requests never make a partition: a reading outside the
// partitions is stored in the default partition and moved on the next round. Each round then
// runs the retention sweeps (Expire): the rows past their retention are deleted.
type ReadingPartitions struct {
	Pool *pgxpool.Pool
	// Back and Ahead are the months kept partitioned around the current one.
	Back, Ahead int
	// Expire are the retention sweeps each round runs after the partitions.
	Expire []Expiry
	// Every is how often it looks again (default one hour).
	Every time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	Log logr.Logger
}

// NeedLeaderElection makes it run in the leader only.
func (p *ReadingPartitions) NeedLeaderElection() bool { return true }

// Start makes the partitions now and every Every until ctx ends. A round that fails (the
// database away, a lock not had in time) is logged and tried again sooner.
func (p *ReadingPartitions) Start(ctx context.Context) error {
	every := p.Every
	if every <= 0 {
		every = time.Hour
	}
	for {
		wait := every
		if err := p.Round(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			p.Log.Error(err, "making the readings partitions ahead, or deleting rows past their retention; trying again in a minute")
			wait = min(every, time.Minute)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// Round makes what partitions are missing once, then runs each retention sweep (one failing
// does not keep the others from running).
func (p *ReadingPartitions) Round(ctx context.Context) error {
	now := time.Now
	if p.Now != nil {
		now = p.Now
	}
	errs := []error{p.partitions(ctx, now())}
	for _, e := range p.Expire {
		n, err := e.Delete(ctx, now())
		if n > 0 {
			p.Log.Info("deleted rows past their retention", "table", e.Name, "rows", n)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("deleting %s past their retention: %w", e.Name, err))
		}
	}
	return errors.Join(errs...)
}

func (p *ReadingPartitions) partitions(ctx context.Context, now time.Time) error {
	strays, err := ReadingMonthsInDefault(ctx, p.Pool)
	if err != nil {
		return err
	}
	for _, m := range strays {
		if _, err := EnsureReadingPartition(ctx, p.Pool, m); err != nil {
			return err
		}
		p.Log.Info("moved readings out of the default partition into their month's", "month", m.Format("2006-01"))
	}
	made, err := ensureReadingPartitions(ctx, p.Pool, monthStart(now).AddDate(0, -p.Back, 0), p.Back+1+p.Ahead)
	if made > 0 {
		p.Log.Info("made readings partitions ahead", "made", made)
	}
	return err
}
