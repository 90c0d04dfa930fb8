package dispatchstore

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/dispatch"
)

// Stored is one dispatch as it stands: its flex event, asset, window and status.
type Stored struct {
	EventID            uuid.UUID
	FlexEvent, AssetID string
	SiteID             string
	From, To           time.Time
	Status             dispatch.Status
}

// Of is the organisation's dispatch with event id id, or ErrNotFound.
func (s *Store) Of(ctx context.Context, organisation string, id uuid.UUID) (Stored, error) {
	return s.OfAnd(ctx, organisation, id, "", nil)
}

// OfAnd is Of reading in the same statement one more column, the SQL expression column (over
// the dispatch's row, d), into dest: another store's fact of the dispatch (who holds its
// asset), read in the one round trip. column empty: none.
func (s *Store) OfAnd(ctx context.Context, organisation string, id uuid.UUID, column string, dest any) (Stored, error) {
	d := Stored{EventID: id}
	var status string
	dests := []any{&d.FlexEvent, &d.AssetID, &d.SiteID, &d.From, &d.To, &status}
	sql := `SELECT flex_event, asset_id, site_id, from_time, to_time, status`
	if column != "" {
		sql += `, ` + column
		dests = append(dests, dest)
	}
	err := s.Pool.QueryRow(ctx, sql+` FROM dispatches d WHERE organisation = $1 AND event_id = $2`, organisation, id).
		Scan(dests...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, ErrNotFound
	}
	if err != nil {
		return Stored{}, s.classify(err)
	}
	d.Status = dispatch.Status(status)
	return d, nil
}
