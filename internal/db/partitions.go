package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// EnsureReadingPartitions creates the monthly partitions of readings (readings_YYYY_MM, by
// start time in UTC) from the month of from for months months, those missing only. Readings
// outside them land in readings_default.
func EnsureReadingPartitions(ctx context.Context, pool *pgxpool.Pool, from time.Time, months int) error {
	first := time.Date(from.UTC().Year(), from.UTC().Month(), 1, 0, 0, 0, 0, time.UTC)
	for i := range months {
		start, end := first.AddDate(0, i, 0), first.AddDate(0, i+1, 0)
		name := fmt.Sprintf("readings_%04d_%02d", start.Year(), int(start.Month()))
		// Names and bounds are made here, not taken from input.
		_, err := pool.Exec(ctx, fmt.Sprintf(`CREATE TABLE IF NOT EXISTS %s PARTITION OF readings
			FOR VALUES FROM ('%s') TO ('%s')`, name, start.Format(time.RFC3339), end.Format(time.RFC3339)))
		if err != nil {
			return fmt.Errorf("creating the readings partition %s: %w", name, Classify(err))
		}
	}
	return nil
}
