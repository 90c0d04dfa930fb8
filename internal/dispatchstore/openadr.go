package dispatchstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/dispatch"
)

// Issued is a dispatch as issued, with its current status: what the OpenADR door answers as
// one event (docs/openadr.md).
type Issued struct {
	EventID                    uuid.UUID
	FlexEvent, SiteID, AssetID string
	MarketID                   string
	// Proposition is the flex event's proposition (its market for dispatches issued before it
	// was kept).
	Proposition string
	Status      dispatch.Status
	LevelKW     float64
	From, To    time.Time
	// IssuedAt is when it was issued; UpdatedAt when its row last changed.
	IssuedAt, UpdatedAt time.Time
}

// IssuedQuery selects an organisation's dispatches not cancelled, latest window end first.
type IssuedQuery struct {
	// Proposition: only those of this proposition ("": any).
	Proposition string
	// Assets: only those of these assets (nil: any asset; empty: none).
	Assets      []string
	Skip, Limit int
}

const issuedColumns = `event_id, flex_event, site_id, asset_id, market_id, COALESCE(proposition, market_id), status,
	level_kw, from_time, to_time, issued_at, updated_at`

// SearchIssued answers a page of the organisation's dispatches not cancelled, latest window
// end first (then by id), from the indexes of migration 00030: the rows read are the page's
// and those it skips, never the history beyond. Assets named are read a page's worth each (by
// dispatches_openadr_asset), then merged: at most (skip + limit) rows per asset.
func (s *Store) SearchIssued(ctx context.Context, organisation string, q IssuedQuery) ([]Issued, error) {
	if q.Assets != nil && len(q.Assets) == 0 || q.Limit <= 0 {
		return []Issued{}, nil
	}
	where := []string{"organisation = $1", "status <> 'cancelled'"}
	args := []any{organisation, q.Limit, q.Skip}
	if q.Proposition != "" {
		args = append(args, q.Proposition)
		where = append(where, fmt.Sprintf("COALESCE(proposition, market_id) = $%d", len(args)))
	}
	query := `SELECT ` + issuedColumns + ` FROM dispatches WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY to_time DESC, event_id LIMIT $2 OFFSET $3`
	if q.Assets != nil {
		args = append(args, q.Assets)
		query = `SELECT ` + issuedColumns + ` FROM unnest($` + strconv.Itoa(len(args)) + `::text[]) AS a(asset)
			CROSS JOIN LATERAL (SELECT * FROM dispatches WHERE ` + strings.Join(where, " AND ") + ` AND asset_id = a.asset
				ORDER BY to_time DESC, event_id LIMIT $2::bigint + $3::bigint) d
			ORDER BY to_time DESC, event_id LIMIT $2 OFFSET $3`
	}
	rows, err := s.Pool.Query(ctx, query, args...)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	out := []Issued{}
	for rows.Next() {
		d, err := scanIssued(rows)
		if err != nil {
			return nil, s.classify(err)
		}
		out = append(out, d)
	}
	return out, s.classify(rows.Err())
}

// IssuedByID answers the organisation's dispatch id, whatever its status; ErrNotFound when it
// has none.
func (s *Store) IssuedByID(ctx context.Context, organisation string, id uuid.UUID) (Issued, error) {
	d, err := scanIssued(s.Pool.QueryRow(ctx, `SELECT `+issuedColumns+` FROM dispatches
		WHERE organisation = $1 AND event_id = $2`, organisation, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return Issued{}, ErrNotFound
	}
	return d, s.classify(err)
}

func scanIssued(row pgx.Row) (Issued, error) {
	var d Issued
	var status string
	err := row.Scan(&d.EventID, &d.FlexEvent, &d.SiteID, &d.AssetID, &d.MarketID, &d.Proposition, &status,
		&d.LevelKW, &d.From, &d.To, &d.IssuedAt, &d.UpdatedAt)
	d.Status = dispatch.Status(status)
	return d, err
}
