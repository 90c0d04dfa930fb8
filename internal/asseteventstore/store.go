// Package asseteventstore keeps what the devices tell Flexsite (migration 00018): prod's asset
// events (plug in, plug out, intent, charge now and its deletion, tariff), appended once and
// never changed, and each asset's latest plug, intent, tariff and charge-now state read in one
// query. Dispatch reads it to skip an unplugged asset or one charging now
// (internal/dispatch.Skip); the schedules read the intent and the tariff.
package asseteventstore

import (
	"context"
	"encoding/json"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
)

// Type is an asset event's type: prod's AssetEventType, and tariff_update for the tariff route.
type Type string

// The asset event types.
const (
	PlugIn           Type = "plug_in"
	PlugOut          Type = "plug_out"
	IntentUpdate     Type = "intent_update"
	ChargeNow        Type = "charge_now"
	ChargeNowDeleted Type = "charge_now_deleted"
	TariffUpdate     Type = "tariff_update"
)

// Event is one asset event as received. Intent, Vehicle and Tariff are the request's objects as
// validated (JSON, prod's shapes); EndAt is a charge-now's end.
type Event struct {
	AssetID    string
	Type       Type
	ReceivedAt time.Time
	RecordedBy string
	Intent     json.RawMessage
	Vehicle    json.RawMessage
	Tariff     json.RawMessage
	EndAt      *time.Time
}

// Latest is an asset's latest state as its events told it. A part never told is empty.
type Latest struct {
	// Plug is the type of its latest plug event (plug_in or plug_out; "" when none).
	Plug Type
	// ChargeNow is its latest charge_now or charge_now_deleted event ("" when none), and
	// ChargeNowEnd the charge-now's end_at.
	ChargeNow    Type
	ChargeNowEnd time.Time
	// Intent is its latest intent (JSON) and IntentAt when it was received.
	Intent   json.RawMessage
	IntentAt time.Time
	// Tariff is its latest tariff (JSON) and TariffAt when it was received.
	Tariff   json.RawMessage
	TariffAt time.Time
}

// DeviceState is what dispatch reads of the latest state.
func (l Latest) DeviceState() dispatch.DeviceState {
	st := dispatch.DeviceState{PluggedOut: l.Plug == PlugOut}
	if l.ChargeNow == ChargeNow {
		st.ChargeNowUntil = l.ChargeNowEnd
	}
	return st
}

// Store reads and writes asset events.
type Store struct {
	Pool *pgxpool.Pool
}

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

func nullJSON(m json.RawMessage) any {
	if len(m) == 0 {
		return nil
	}
	return []byte(m)
}

// Append records an event of an organisation's asset. One statement: the event is kept whole,
// or not at all.
func (s *Store) Append(ctx context.Context, organisation string, ev Event) error {
	at := ev.ReceivedAt
	if at.IsZero() {
		at = time.Now()
	}
	_, err := s.Pool.Exec(ctx, `INSERT INTO asset_events
		(organisation, asset_id, event_type, received_at, recorded_by, intent, vehicle, tariff, end_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
		organisation, ev.AssetID, string(ev.Type), at.UTC(), ev.RecordedBy,
		nullJSON(ev.Intent), nullJSON(ev.Vehicle), nullJSON(ev.Tariff), ev.EndAt)
	return s.classify(err)
}

// Latest reads the latest plug, charge-now, intent and tariff state of each of an
// organisation's assets, in one query; an asset with no events has no entry.
func (s *Store) Latest(ctx context.Context, organisation string, assetIDs []string) (map[string]Latest, error) {
	out := make(map[string]Latest, len(assetIDs))
	if len(assetIDs) == 0 {
		return out, nil
	}
	rows, err := s.Pool.Query(ctx, `
		SELECT a.asset_id, p.event_type, c.event_type, c.end_at, i.intent, i.received_at, t.tariff, t.received_at
		FROM unnest($2::text[]) AS a(asset_id)
		LEFT JOIN LATERAL (SELECT event_type FROM asset_events
			WHERE organisation = $1 AND asset_id = a.asset_id AND event_type IN ('plug_in', 'plug_out')
			ORDER BY id DESC LIMIT 1) p ON true
		LEFT JOIN LATERAL (SELECT event_type, end_at FROM asset_events
			WHERE organisation = $1 AND asset_id = a.asset_id AND event_type IN ('charge_now', 'charge_now_deleted')
			ORDER BY id DESC LIMIT 1) c ON true
		LEFT JOIN LATERAL (SELECT intent, received_at FROM asset_events
			WHERE organisation = $1 AND asset_id = a.asset_id AND intent IS NOT NULL
			ORDER BY id DESC LIMIT 1) i ON true
		LEFT JOIN LATERAL (SELECT tariff, received_at FROM asset_events
			WHERE organisation = $1 AND asset_id = a.asset_id AND tariff IS NOT NULL
			ORDER BY id DESC LIMIT 1) t ON true
		WHERE p.event_type IS NOT NULL OR c.event_type IS NOT NULL OR i.intent IS NOT NULL OR t.tariff IS NOT NULL`,
		organisation, assetIDs)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var plug, charge *string
		var end, intentAt, tariffAt *time.Time
		var intent, tariff []byte
		if err := rows.Scan(&id, &plug, &charge, &end, &intent, &intentAt, &tariff, &tariffAt); err != nil {
			return nil, s.classify(err)
		}
		l := Latest{Intent: intent, Tariff: tariff}
		if plug != nil {
			l.Plug = Type(*plug)
		}
		if charge != nil {
			l.ChargeNow = Type(*charge)
		}
		if end != nil {
			l.ChargeNowEnd = *end
		}
		if intentAt != nil {
			l.IntentAt = *intentAt
		}
		if tariffAt != nil {
			l.TariffAt = *tariffAt
		}
		out[id] = l
	}
	return out, s.classify(rows.Err())
}

// RetentionMonths is how long an asset event is kept after it was received, unless it still
// says its asset's state (DeleteExpired): thirteen months, a year of an asset's habits (the
// seasons of its plug-ins) and a month to look back on it.
const RetentionMonths = 13

// DeleteExpired deletes the events received more than RetentionMonths before now that no
// longer say their asset's state: an event is kept while it is its asset's latest plug event,
// charge-now event, intent or tariff (Latest reads them), however old, so that an asset that
// last said plug_out long ago is still taken as unplugged. It answers how many it deleted
// (the leader's retention sweep, db.ReadingPartitions).
func (s *Store) DeleteExpired(ctx context.Context, now time.Time) (int64, error) {
	n, err := db.DeleteInBatches(ctx, s.Pool, `DELETE FROM asset_events WHERE id IN (
		SELECT e.id FROM asset_events e WHERE e.received_at < $2
		AND (e.event_type NOT IN ('plug_in', 'plug_out') OR EXISTS (SELECT 1 FROM asset_events n
			WHERE n.organisation = e.organisation AND n.asset_id = e.asset_id AND n.event_type IN ('plug_in', 'plug_out') AND n.id > e.id))
		AND (e.event_type NOT IN ('charge_now', 'charge_now_deleted') OR EXISTS (SELECT 1 FROM asset_events n
			WHERE n.organisation = e.organisation AND n.asset_id = e.asset_id
			AND n.event_type IN ('charge_now', 'charge_now_deleted') AND n.id > e.id))
		AND (e.intent IS NULL OR EXISTS (SELECT 1 FROM asset_events n
			WHERE n.organisation = e.organisation AND n.asset_id = e.asset_id AND n.intent IS NOT NULL AND n.id > e.id))
		AND (e.tariff IS NULL OR EXISTS (SELECT 1 FROM asset_events n
			WHERE n.organisation = e.organisation AND n.asset_id = e.asset_id AND n.tariff IS NOT NULL AND n.id > e.id))
		ORDER BY e.received_at LIMIT $1)`, now.UTC().AddDate(0, -RetentionMonths, 0))
	return n, s.classify(err)
}
