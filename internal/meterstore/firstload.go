package meterstore

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// firstLoadMaintenanceMemory is what the index builds of a first load may sort in memory:
// the primary key of 1,000,000 MPANs sorts in ~60 MB; beyond it the sort spills to disk,
// still far faster than keeping the indexes row by row.
const firstLoadMaintenanceMemory = "256MB"

// loadIntoEmpty merges the staging table into the register when the register is empty (the
// platform team's first load), the fast way: its indexes are dropped, the rows inserted, and
// the indexes built again from their own definitions (read from the catalogue, so the
// migration stays their one home). Keeping the two indexes row by row was three quarters of
// a million-row import's time (make bench, scenario 14); building them after is a sort each.
// An MPAN twice in the file fails the primary key's build: the work is rolled back to its
// savepoint and the duplicates listed (a *RejectedError), as the merge lists them.
//
// Dropping an index locks the table against reads until the import commits: readers of an
// empty register wait for its first load instead of finding nothing. loaded is false, and
// nothing is done, when the register holds rows: the caller merges.
func loadIntoEmpty(ctx context.Context, tx pgx.Tx) (rows int64, loaded bool, err error) {
	var empty bool
	if err := tx.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM meter_points)`).Scan(&empty); err != nil || !empty {
		return 0, false, err
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return 0, false, err
	}
	// Rolled back, the savepoint also releases the lock: a register found loaded meanwhile
	// is merged without keeping its readers waiting.
	defer func() { _ = sp.Rollback(ctx) }()
	if _, err := sp.Exec(ctx, `LOCK TABLE meter_points IN ACCESS EXCLUSIVE MODE`); err != nil {
		return 0, false, err
	}
	if err := sp.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM meter_points)`).Scan(&empty); err != nil || !empty {
		return 0, false, err
	}
	rebuild, err := dropIndexes(ctx, sp)
	if err != nil {
		return 0, false, err
	}
	tag, err := sp.Exec(ctx, `INSERT INTO meter_points (`+storedColumns+`) SELECT `+storedColumns+` FROM meter_points_staging`)
	if err != nil {
		return 0, false, err
	}
	if _, err := sp.Exec(ctx, `SET LOCAL maintenance_work_mem = '`+firstLoadMaintenanceMemory+`'`); err != nil {
		return 0, false, err
	}
	for _, stmt := range rebuild {
		if _, err := sp.Exec(ctx, stmt); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code == "23505" { // an MPAN twice in the file
				if err := sp.Rollback(ctx); err != nil {
					return 0, false, err
				}
				return 0, true, duplicates(ctx, tx)
			}
			return 0, false, err
		}
	}
	return tag.RowsAffected(), true, sp.Commit(ctx)
}

// dropIndexes drops the register's indexes and returns the statements that build them again:
// constraints (the primary key) as constraints, the other indexes by their definitions.
func dropIndexes(ctx context.Context, tx pgx.Tx) ([]string, error) {
	rows, err := tx.Query(ctx, `
		SELECT format('ALTER TABLE meter_points DROP CONSTRAINT %I', c.conname),
			format('ALTER TABLE meter_points ADD CONSTRAINT %I %s', c.conname, pg_get_constraintdef(c.oid))
		FROM pg_constraint c WHERE c.conrelid = 'meter_points'::regclass AND c.contype IN ('p', 'u', 'x')
		UNION ALL
		SELECT format('DROP INDEX %s', i.indexrelid::regclass), pg_get_indexdef(i.indexrelid)
		FROM pg_index i WHERE i.indrelid = 'meter_points'::regclass
			AND NOT EXISTS (SELECT FROM pg_constraint c WHERE c.conindid = i.indexrelid)
		ORDER BY 2`)
	if err != nil {
		return nil, err
	}
	var drops, builds []string
	var drop, build string
	if _, err := pgx.ForEachRow(rows, []any{&drop, &build}, func() error {
		drops, builds = append(drops, drop), append(builds, build)
		return nil
	}); err != nil {
		return nil, err
	}
	for _, stmt := range drops {
		if _, err := tx.Exec(ctx, stmt); err != nil {
			return nil, err
		}
	}
	return builds, nil
}
