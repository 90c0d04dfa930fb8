package main

import (
	"bytes"
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
)

// demoMeterPostcodes are where make run's demo register puts its first meter points, a dozen
// or so each: the samples' households (config/samples) and the README's walk-through, so
// that a search there finds meters.
var demoMeterPostcodes = []string{"SW1A 1AA", "M1 1AE"}

// demoMeterSeed makes make run's demo register the same on every machine.
const demoMeterSeed = 1

// seedDemoRegister loads n synthetic meter points (internal/meters/synth) into an empty
// register, through the import a platform team uses. Embedded mode only: a real deployment's
// register is its platform team's licensed export, never generated data. A register that
// holds anything is left alone, so that a developer's own import survives a restart.
func seedDemoRegister(ctx context.Context, pool *pgxpool.Pool, n int, log logr.Logger) error {
	if n <= 0 {
		return nil
	}
	var loaded bool
	if err := pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM meter_points)`).Scan(&loaded); err != nil {
		return fmt.Errorf("reading the meter register: %w", err)
	}
	if loaded {
		return nil
	}
	var file bytes.Buffer
	if err := synth.WriteCSV(&file, demoMeterSeed, n, demoMeterPostcodes); err != nil {
		return err
	}
	report, err := (&meterstore.Store{Pool: pool}).Import(ctx, &file, nil)
	if err != nil {
		return fmt.Errorf("loading make run's demo meter register: %w", err)
	}
	log.Info(fmt.Sprintf("loaded %d synthetic meter points (make run's demo register)", report.Rows),
		"postcodes", demoMeterPostcodes)
	return nil
}
