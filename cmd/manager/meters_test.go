package main

import (
	"context"
	"testing"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meterstore"
)

// make run's demo register: an empty register gets the synthetic meter points, with meters
// at the samples' postcodes; a register that holds anything is left as it is.
func TestSeedDemoRegister(t *testing.T) {
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			t.Fatal(msg)
		} else {
			t.Skip(msg)
		}
	}
	ctx := context.Background()
	d, err := dbtest.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close(ctx)
	count := func() int {
		var n int
		if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM meter_points`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	if err := seedDemoRegister(ctx, d.Pool, 0, logr.Discard()); err != nil || count() != 0 {
		t.Fatalf("--embedded-meter-points=0 loaded %d (%v); want none", count(), err)
	}
	if err := seedDemoRegister(ctx, d.Pool, 3000, logr.Discard()); err != nil || count() != 3000 {
		t.Fatalf("loaded %d (%v); want 3000", count(), err)
	}
	store := &meterstore.Store{Pool: d.Pool}
	for _, postcode := range demoMeterPostcodes {
		if points, err := store.AtPostcode(ctx, postcode, meters.MaxSearchResults); err != nil || len(points) < 4 {
			t.Errorf("%d meter points at %s (%v); want the walk-through to find some", len(points), postcode, err)
		}
	}
	if _, err := d.Pool.Exec(ctx, `DELETE FROM meter_points WHERE mpan IN (SELECT mpan FROM meter_points LIMIT 2990)`); err != nil {
		t.Fatal(err)
	}
	if err := seedDemoRegister(ctx, d.Pool, 3000, logr.Discard()); err != nil || count() != 10 {
		t.Errorf("a register with 10 meter points holds %d after a restart (%v); want it left alone", count(), err)
	}
}
