package db

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Expiry deletes what has outlived its retention: a store's DeleteExpired, run by the
// leader's hourly round (ReadingPartitions.Expire). Name is what the log calls it.
type Expiry struct {
	Name   string
	Delete func(ctx context.Context, now time.Time) (int64, error)
}

// RetentionBatch is how many rows one statement of a retention sweep deletes: short
// statements, so that a sweep never holds many row locks or a long snapshot at once.
const RetentionBatch = 5000

// DeleteInBatches runs query, a DELETE of at most $1 rows (its other arguments from $2), until
// a run deletes fewer than RetentionBatch, and answers how many it deleted in all. Each run is
// its own statement: what one deleted stays deleted if a later one fails.
func DeleteInBatches(ctx context.Context, pool *pgxpool.Pool, query string, args ...any) (int64, error) {
	var total int64
	for {
		tag, err := pool.Exec(ctx, query, append([]any{RetentionBatch}, args...)...)
		if err != nil {
			return total, Classify(err)
		}
		total += tag.RowsAffected()
		if tag.RowsAffected() < RetentionBatch {
			return total, nil
		}
	}
}
