package meterstore_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/meterstore"
)

// registerIndexes are the register's index definitions, as the catalogue has them.
func registerIndexes(t *testing.T) []string {
	t.Helper()
	rows, err := testDB.Pool.Query(context.Background(),
		`SELECT indexdef FROM pg_indexes WHERE tablename = 'meter_points' ORDER BY indexname`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var defs []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			t.Fatal(err)
		}
		defs = append(defs, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return defs
}

// emptyRegister empties the register for a first load, and again when the test ends.
func emptyRegister(t *testing.T) {
	t.Helper()
	empty := func() {
		if _, err := testDB.Pool.Exec(context.Background(), `TRUNCATE meter_points`); err != nil {
			t.Fatal(err)
		}
	}
	empty()
	t.Cleanup(empty)
}

// A first load (into an empty register) drops the indexes and builds them again: they must
// come back exactly as the migration made them, and serve the lookups.
func TestFirstLoadBuildsTheIndexesAgain(t *testing.T) {
	ctx := context.Background()
	emptyRegister(t)
	before := registerIndexes(t)
	if len(before) < 2 {
		t.Fatalf("the register has indexes %v, want its primary key and postcode index", before)
	}
	s := &meterstore.Store{Pool: testDB.Pool}
	report, err := s.Import(ctx, bytes.NewReader(registerFile(t, 11, 500)), nil)
	if err != nil || report.Rows != 500 || report.Inserted != 500 || report.Replaced != 0 {
		t.Fatalf("first load: %+v, %v; want 500 rows inserted", report, err)
	}
	if after := registerIndexes(t); !slices.Equal(after, before) {
		t.Fatalf("indexes after a first load:\n%v\nwant\n%v", after, before)
	}
	points, err := s.AtPostcode(ctx, "SW1A 1AA", 50)
	if err != nil || len(points) == 0 {
		t.Fatalf("AtPostcode after a first load: %d points, %v", len(points), err)
	}
	// The same file again is a merge into a loaded register: every row replaced.
	again, err := s.Import(ctx, bytes.NewReader(registerFile(t, 11, 500)), nil)
	if err != nil || again.Replaced != 500 {
		t.Fatalf("second load: %+v, %v; want every row replaced", again, err)
	}
}

// An MPAN twice in a first load's file fails the primary key's build: the import is refused
// naming the line, and the register is left empty with its indexes.
func TestFirstLoadWithAnMPANTwiceChangesNothing(t *testing.T) {
	ctx := context.Background()
	emptyRegister(t)
	before := registerIndexes(t)
	lines := strings.Split(strings.TrimSuffix(string(registerFile(t, 12, 40)), "\n"), "\n")
	lines = append(lines, lines[20]) // line 21's row again, as line 42
	s := &meterstore.Store{Pool: testDB.Pool}
	_, err := s.Import(ctx, strings.NewReader(strings.Join(lines, "\n")+"\n"), nil)
	var rejected *meterstore.RejectedError
	if !errors.As(err, &rejected) || rejected.Count != 1 || rejected.Rejections[0].Line != 42 {
		t.Fatalf("err = %v; want line 42 rejected as a duplicate", err)
	}
	var n int
	if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM meter_points`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("the register holds %d meter points after a refused first load (%v)", n, err)
	}
	if after := registerIndexes(t); !slices.Equal(after, before) {
		t.Fatalf("indexes after a refused first load:\n%v\nwant\n%v", after, before)
	}
}
