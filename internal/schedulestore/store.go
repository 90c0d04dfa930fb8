// Package schedulestore keeps the EV schedules Flexsite answered (migration 00020): every answer
// of POST /entities/asset/{asset_id}/event/plug-in-schedule, appended once with the schedule the
// device sent, so the household's pages show the next charging window the car was given. Each
// asset's latest answer per site is named in ev_schedules_latest (migration 00024), upserted
// with the answer, so reading a site's latest answers costs its assets, not its history. An
// answer is kept Retention past the end of its window (DeleteExpired, the leader's sweep).
package schedulestore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
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

// Append records an answer, and makes it its asset's latest at the site in the same statement
// (of two answers appended at once, the later id stands, as the answers' order is their ids').
func (s *Store) Append(ctx context.Context, organisation string, e EVSchedule) error {
	req, err := json.Marshal(nonNil(e.Requested))
	if err != nil {
		return err
	}
	blocks, err := json.Marshal(nonNil(e.Blocks))
	if err != nil {
		return err
	}
	_, err = s.Pool.Exec(ctx, `WITH answer AS (
			INSERT INTO ev_schedules (organisation, site_id, asset_id, requested, blocks,
				changed, window_end, answered_at, answered_by) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
			RETURNING id)
		INSERT INTO ev_schedules_latest (organisation, site_id, asset_id, id) SELECT $1, $2, $3, id FROM answer
		ON CONFLICT (organisation, site_id, asset_id) DO UPDATE SET id = GREATEST(ev_schedules_latest.id, excluded.id)`,
		organisation, e.SiteID, e.AssetID, req, blocks, e.Changed, e.WindowEnd, e.AnsweredAt, e.AnsweredBy)
	return s.classify(err)
}

func nonNil(b []Block) []Block {
	if b == nil {
		return []Block{}
	}
	return b
}

// latestOfSiteSQL reads a site's latest answers whose window has not ended: the site's rows of
// ev_schedules_latest (its primary key's range), each answer by its id. No ORDER BY: the
// answers are put in asset order in Go, so the plan never sorts.
const latestOfSiteSQL = `SELECT l.asset_id, e.requested, e.blocks, e.changed, e.window_end, e.answered_at, e.answered_by
	FROM ev_schedules_latest l JOIN ev_schedules e ON e.id = l.id
	WHERE l.organisation = $1 AND l.site_id = $2 AND e.window_end > $3`

// LatestOfSite is the latest answer for each of the site's assets, when its window has not
// ended by now, one per asset in asset order: what the household's pages show. An answer
// replaced by a newer one is never shown, even when the newer one's window ends sooner.
func (s *Store) LatestOfSite(ctx context.Context, organisation, siteID string, now time.Time) ([]EVSchedule, error) {
	out, err := s.latest(ctx, siteID, latestOfSiteSQL, organisation, siteID, now)
	slices.SortFunc(out, func(a, b EVSchedule) int { return strings.Compare(a.AssetID, b.AssetID) })
	return out, err
}

// LatestOfAsset is LatestOfSite's answer for one asset of the site; ok is false when it has
// none whose window is still open.
func (s *Store) LatestOfAsset(ctx context.Context, organisation, siteID, assetID string, now time.Time) (EVSchedule, bool, error) {
	out, err := s.latest(ctx, siteID, latestOfSiteSQL+` AND l.asset_id = $4`, organisation, siteID, now, assetID)
	if err != nil || len(out) == 0 {
		return EVSchedule{}, false, err
	}
	return out[0], true, nil
}

func (s *Store) latest(ctx context.Context, siteID, query string, args ...any) ([]EVSchedule, error) {
	rows, err := s.Pool.Query(ctx, query, args...)
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

// Retention is how long an answer is kept past the end of its window: the household's pages
// and the OCPP profile show only answers whose window has not ended, so an answer past it is
// kept only for questions about it ("why did my car charge then?").
const Retention = 90 * 24 * time.Hour

// DeleteExpired deletes the answers whose window ended more than Retention before now (the
// leader's retention sweep, db.ReadingPartitions), answering how many. An asset's latest
// answer goes with its row of ev_schedules_latest: no older answer takes its place.
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int64, error) {
	n, err := db.DeleteInBatches(ctx, s.Pool, `DELETE FROM ev_schedules WHERE id IN (
		SELECT id FROM ev_schedules WHERE window_end < $2 ORDER BY window_end LIMIT $1)`, now.Add(-Retention))
	return n, s.classify(err)
}
