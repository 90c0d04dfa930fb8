package dispatchstore

import (
	"context"
	"time"
)

// Window is a dispatch of one asset that stands: its window and the level it asks (negative:
// turned up; otherwise turned down, internal/dispatch.LevelKW).
type Window struct {
	From, To time.Time
	LevelKW  float64
	// Changed is when the dispatch's row last changed (issued, or its status reported).
	Changed time.Time
}

// TurnUp tells whether the dispatch turns the asset up (draws power).
func (w Window) TurnUp() bool { return w.LevelKW < 0 }

// WindowsOfAsset are the asset's dispatches that stand and overlap [from, to), in window order:
// requested, received, accepted or executed. A rejected, failed or cancelled dispatch asks
// nothing of the device, so the schedules plan around the others only.
func (s *Store) WindowsOfAsset(ctx context.Context, organisation, assetID string, from, to time.Time) ([]Window, error) {
	rows, err := s.Pool.Query(ctx, `SELECT from_time, to_time, level_kw, updated_at FROM dispatches
		WHERE organisation = $1 AND asset_id = $2 AND from_time < $4 AND to_time > $3
		AND status IN ('requested', 'received', 'accepted', 'executed')
		ORDER BY from_time, to_time LIMIT 1000`, organisation, assetID, from, to)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	var out []Window
	for rows.Next() {
		var w Window
		if err := rows.Scan(&w.From, &w.To, &w.LevelKW, &w.Changed); err != nil {
			return nil, s.classify(err)
		}
		out = append(out, w)
	}
	return out, s.classify(rows.Err())
}
