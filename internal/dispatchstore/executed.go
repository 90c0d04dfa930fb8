package dispatchstore

import (
	"context"
	"time"
)

// Executed is a dispatch an asset controller reported executed: what a household's rewards
// page says its device did ("Your charger was paused from 17:30 to 18:30").
type Executed struct {
	FlexEvent, AssetID string
	LevelKW            float64
	From, To           time.Time
}

// ExecutedOfSite are the site's executed dispatches, at most limit, newest window first (then
// by flex event and asset). Only executed ones: a dispatch requested, accepted, rejected,
// failed or cancelled says nothing about what the device did.
func (s *Store) ExecutedOfSite(ctx context.Context, organisation, siteID string, limit int) ([]Executed, error) {
	rows, err := s.Pool.Query(ctx, `SELECT flex_event, asset_id, level_kw, from_time, to_time FROM dispatches
		WHERE organisation = $1 AND site_id = $2 AND status = 'executed'
		ORDER BY from_time DESC, flex_event, asset_id LIMIT $3`, organisation, siteID, max(limit, 0))
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	var out []Executed
	for rows.Next() {
		var e Executed
		if err := rows.Scan(&e.FlexEvent, &e.AssetID, &e.LevelKW, &e.From, &e.To); err != nil {
			return nil, s.classify(err)
		}
		out = append(out, e)
	}
	return out, s.classify(rows.Err())
}
