// Package schedulestore keeps the EV schedules Flexsite answered (migration 00020): every answer
// of POST /entities/asset/{asset_id}/event/plug-in-schedule, appended once with the schedule the
// device sent, so the household's pages show the next charging window the car was given.
package schedulestore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
)

// Store reads and writes EV schedules.
type Store struct {
	Pool *pgxpool.Pool
}

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// Block is a charging block, UTC.
type Block struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// EVSchedule is one answer: the blocks the device sent, the blocks answered, whether they
// differ, and the end of the window they were chosen in.
type EVSchedule struct {
	SiteID, AssetID string
	Requested       []Block
	Blocks          []Block
	Changed         bool
	WindowEnd       time.Time
	AnsweredAt      time.Time
	AnsweredBy      string
}

// Append records an answer.
func (s *Store) Append(ctx context.Context, organisation string, e EVSchedule) error {
	req, err := json.Marshal(nonNil(e.Requested))
	if err != nil {
		return err
	}
	blocks, err := json.Marshal(nonNil(e.Blocks))
	if err != nil {
		return err
	}
	_, err = s.Pool.Exec(ctx, `INSERT INTO ev_schedules (organisation, site_id, asset_id, requested, blocks,
		changed, window_end, answered_at, answered_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		organisation, e.SiteID, e.AssetID, req, blocks, e.Changed, e.WindowEnd, e.AnsweredAt, e.AnsweredBy)
	return s.classify(err)
}

func nonNil(b []Block) []Block {
	if b == nil {
		return []Block{}
	}
	return b
}

// LatestOfSite is the latest answer for each of the site's assets, when its window has not
// ended by now, one per asset in asset order: what the household's pages show. An answer
// replaced by a newer one is never shown, even when the newer one's window ends sooner.
func (s *Store) LatestOfSite(ctx context.Context, organisation, siteID string, now time.Time) ([]EVSchedule, error) {
	rows, err := s.Pool.Query(ctx, `SELECT asset_id, requested, blocks, changed, window_end, answered_at, answered_by
		FROM (SELECT DISTINCT ON (asset_id) asset_id, requested, blocks, changed, window_end, answered_at, answered_by
			FROM ev_schedules WHERE organisation = $1 AND site_id = $2
			ORDER BY asset_id, id DESC) AS latest
		WHERE window_end > $3 ORDER BY asset_id`, organisation, siteID, now)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	var out []EVSchedule
	for rows.Next() {
		e := EVSchedule{SiteID: siteID}
		var req, blocks []byte
		if err := rows.Scan(&e.AssetID, &req, &blocks, &e.Changed, &e.WindowEnd, &e.AnsweredAt, &e.AnsweredBy); err != nil {
			return nil, s.classify(err)
		}
		if err := json.Unmarshal(req, &e.Requested); err != nil {
			return nil, err
		}
		if err := json.Unmarshal(blocks, &e.Blocks); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, s.classify(rows.Err())
}
