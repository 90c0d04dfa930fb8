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
	d := Stored{EventID: id}
	var status string
	err := s.Pool.QueryRow(ctx, `SELECT flex_event, asset_id, site_id, from_time, to_time, status FROM dispatches
		WHERE organisation = $1 AND event_id = $2`, organisation, id).
		Scan(&d.FlexEvent, &d.AssetID, &d.SiteID, &d.From, &d.To, &status)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stored{}, ErrNotFound
	}
	if err != nil {
		return Stored{}, s.classify(err)
	}
	d.Status = dispatch.Status(status)
	return d, nil
}
