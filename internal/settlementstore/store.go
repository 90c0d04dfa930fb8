// Package settlementstore is flex event settlement's part of the database: a site's readings
// read back as half-hourly energy (internal/settlement's rules), the days of its other
// events, each event's target sites, and each site's settlement written exactly once with its
// credit (a `flex event` reward transaction and its rewards.transaction_credited outbox
// event) in one SQL transaction.
//
// Exactly once holds whatever happens: the settlement row's primary key (organisation,
// event, site) is inserted ON CONFLICT DO NOTHING in the same SQL transaction as the
// transaction and its outbox event, and the transaction's id is derived from the event and
// the site (TransactionID). Two settlers racing insert once (the loser waits for the
// winner's commit, then inserts nothing); a crash before the commit writes nothing.
package settlementstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/units"
)

// Store reads and writes settlements.
type Store struct {
	Pool *pgxpool.Pool
}

// namespace is the UUIDv5 namespace of flex event transaction ids.
var namespace = uuid.MustParse("6f1d3a56-2b1e-4d0c-9a1f-7c1e5f1e0a26")

// TransactionID is the id of the reward transaction that credits an event at a site: the
// same (organisation, event, site) always gives the same id (UUIDv5), so a second credit of
// the same settlement is the same transaction, refused by its primary key.
func TransactionID(organisation, eventID, siteID string) uuid.UUID {
	return uuid.NewSHA1(namespace, []byte(organisation+"\x00"+eventID+"\x00"+siteID))
}

// Source says whose readings make a site's energy.
type Source struct {
	// SiteID is the site's API id (readings.site_id).
	SiteID string
	// BoundaryAssetIDs are the site's boundary meters' API ids: when there is one, its
	// readings alone are the site's energy; else the sum of every asset's.
	BoundaryAssetIDs []string
}

// energyLabels are, in order of preference, the labels an asset's energy is read from (the
// first one the asset has readings of). The boundary's registers are read as a pair.
var energyLabels = []settlement.Label{
	settlement.BoundaryImportKW, settlement.BoundaryLifetimeImportEnergyKWh,
	settlement.BatteryInverterImportKW, settlement.ChargerConsumptionEnergyKWh,
	settlement.ChargerLifetimeConsumptionEnergyKWh, settlement.ProvisionalConsumptionKWh, settlement.SolarPowerKW,
}

// reading is one row of readings.
type reading struct {
	asset string
	label settlement.Label
	settlement.Reading
}

// Series is a site's half-hourly energy over [from, to): its boundary meter's where it has
// one, else the sum of its assets'. Readings up to 30 minutes either side are read too (a
// register's difference, a reading across the boundary).
func (s *Store) Series(ctx context.Context, organisation string, src Source, from, to time.Time) (settlement.Series, error) {
	q := `SELECT asset_id, label, start_at, end_at, value FROM readings
		WHERE organisation = $1 AND site_id = $2 AND start_at >= $3 AND start_at < $4`
	args := []any{organisation, src.SiteID, from.Add(-settlement.MaxInterval), to.Add(settlement.MaxInterval)}
	if len(src.BoundaryAssetIDs) > 0 {
		q += ` AND asset_id = ANY($5)`
		args = append(args, src.BoundaryAssetIDs)
	}
	rows, err := s.Pool.Query(ctx, q, args...)
	if err != nil {
		return nil, db.Classify(err)
	}
	byAsset := map[string]map[settlement.Label][]settlement.Reading{}
	var r reading
	_, err = pgx.ForEachRow(rows, []any{&r.asset, &r.label, &r.Start, &r.End, &r.Value}, func() error {
		if byAsset[r.asset] == nil {
			byAsset[r.asset] = map[settlement.Label][]settlement.Reading{}
		}
		byAsset[r.asset][r.label] = append(byAsset[r.asset][r.label], r.Reading)
		return nil
	})
	if err != nil {
		return nil, db.Classify(err)
	}
	return SeriesOf(byAsset)
}

// SeriesOf is the site's energy from its readings by asset and label: each asset's from the
// first of energyLabels it has readings of (the boundary's import and export registers
// together), summed over the assets. Readings the rules refuse (CheckReading) are passed over.
func SeriesOf(byAsset map[string]map[settlement.Label][]settlement.Reading) (settlement.Series, error) {
	assets := make([]string, 0, len(byAsset))
	for a := range byAsset {
		assets = append(assets, a)
	}
	slices.Sort(assets)
	var all []settlement.Series
	for _, a := range assets {
		labels := byAsset[a]
		for _, l := range energyLabels {
			rs, ok := labels[l]
			if !ok {
				continue
			}
			series, err := halfHourly(l, rs)
			if err != nil {
				return nil, err
			}
			if l == settlement.BoundaryLifetimeImportEnergyKWh {
				if exp, ok := labels[settlement.BoundaryLifetimeExportEnergyKWh]; ok {
					es, err := halfHourly(settlement.BoundaryLifetimeExportEnergyKWh, exp)
					if err != nil {
						return nil, err
					}
					series = settlement.Sum(series, es)
				}
			}
			all = append(all, series)
			break
		}
	}
	if len(all) == 1 {
		return all[0], nil
	}
	return settlement.Sum(all...), nil
}

func halfHourly(l settlement.Label, rs []settlement.Reading) (settlement.Series, error) {
	ok := rs[:0:0]
	for _, r := range rs {
		if settlement.CheckReading(l, r) == nil {
			ok = append(ok, r)
		}
	}
	return settlement.HalfHourly(l, ok)
}

// Window is an event's window.
type Window struct{ Start, End time.Time }

// SettledWindows are the windows of the site's settled or skipped events other than eventID:
// their days are not baseline days.
func (s *Store) SettledWindows(ctx context.Context, organisation, siteID, eventID string) ([]Window, error) {
	rows, err := s.Pool.Query(ctx, `SELECT start_at, end_at FROM flex_event_settlements
		WHERE organisation = $1 AND site_id = $2 AND event_id <> $3 AND start_at IS NOT NULL`,
		organisation, siteID, eventID)
	if err != nil {
		return nil, db.Classify(err)
	}
	var out []Window
	var w Window
	_, err = pgx.ForEachRow(rows, []any{&w.Start, &w.End}, func() error { out = append(out, w); return nil })
	return out, db.Classify(err)
}

// EventDays are the UK local days the windows touch (any part of one).
func EventDays(windows []Window) map[settlement.Date]bool {
	out := map[settlement.Date]bool{}
	for _, w := range windows {
		last := settlement.DateOf(w.End.Add(-time.Nanosecond))
		for d := settlement.DateOf(w.Start); ; d = d.AddDays(1) {
			out[d] = true
			if d == last {
				break
			}
		}
	}
	return out
}

// AddTargets records sites as the event's targets (once each), and answers every target
// recorded so far: a site once a target stays one.
func (s *Store) AddTargets(ctx context.Context, organisation, eventID string, siteIDs []string) ([]string, error) {
	if len(siteIDs) > 0 {
		if _, err := s.Pool.Exec(ctx, `INSERT INTO flex_event_targets (organisation, event_id, site_id)
			SELECT $1, $2, unnest($3::text[]) ON CONFLICT DO NOTHING`, organisation, eventID, siteIDs); err != nil {
			return nil, db.Classify(err)
		}
	}
	rows, err := s.Pool.Query(ctx, `SELECT site_id FROM flex_event_targets
		WHERE organisation = $1 AND event_id = $2 ORDER BY site_id`, organisation, eventID)
	if err != nil {
		return nil, db.Classify(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, db.Classify(err)
}

// HalfHour is one half-hour of a settlement, as stored (the rewards page draws it).
type HalfHour struct {
	Start time.Time `json:"start"`
	// BaselineMilliWh is nil without enough history for a baseline.
	BaselineMilliWh *int64 `json:"baseline_mwh"`
	ActualMilliWh   int64  `json:"actual_mwh"`
	CoveredSeconds  int32  `json:"covered_s"`
}

// Settlement is one site's settlement of one event.
type Settlement struct {
	EventID, SiteID  string
	Status           settlement.Status
	Reason           settlement.Reason
	FlexWh           int64
	CreditPence      int64
	DeliveredMilliWh int64
	// TransactionID is the credit's transaction; nil without a credit.
	TransactionID  *uuid.UUID
	Start, End     time.Time
	RateCentipence int64
	HalfHours      []HalfHour
	SettledAt      time.Time
}

// Event is what a settlement records of its event.
type Event struct {
	ID             string
	Start, End     time.Time
	RateCentipence int64
}

// HalfHoursOf are a result's half-hours as stored.
func HalfHoursOf(res settlement.Result) []HalfHour {
	out := make([]HalfHour, len(res.HalfHours))
	for i, h := range res.HalfHours {
		out[i] = HalfHour{Start: h.Start.UTC(), ActualMilliWh: h.ActualMilliWh, CoveredSeconds: h.ActualCoveredSeconds}
		if len(res.DaysUsed) > 0 && res.Reason != settlement.InsufficientHistory {
			b := h.BaselineMilliWh
			out[i].BaselineMilliWh = &b
		}
	}
	return out
}

// Settle records a site's settlement of an event, once: the settlement row and, when settled
// with a credit, the `flex event` reward transaction and its rewards.transaction_credited
// outbox event, in one SQL transaction. done is false when the site was settled already (by
// this or another replica): nothing is written then.
func (s *Store) Settle(ctx context.Context, organisation string, ev Event, siteID string, res settlement.Result) (done bool, err error) {
	n, err := s.SettleAll(ctx, organisation, ev, []Due{{SiteID: siteID, Result: res}})
	return n == 1, err
}

// Due is one site's result, to record.
type Due struct {
	SiteID string
	Result settlement.Result
}

// SettleAll records several sites' settlements of an event in one SQL transaction (one round
// trip: a batch), each exactly once as Settle does; it answers how many were recorded now
// (the others were settled before).
func (s *Store) SettleAll(ctx context.Context, organisation string, ev Event, outcomes []Due) (recorded int, err error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	batch := &pgx.Batch{}
	var counted []bool
	for _, o := range outcomes {
		credit, err := queueSettle(batch, organisation, ev, o.SiteID, o.Result)
		if err != nil {
			return 0, err
		}
		if credit {
			counted = append(counted, false) // the reward_sites row
		}
		counted = append(counted, true)
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		recorded = 0
		results := tx.SendBatch(ctx, batch)
		for _, c := range counted {
			if !c {
				if _, err := results.Exec(); err != nil {
					return err
				}
				continue
			}
			var n int
			if err := results.QueryRow().Scan(&n); err != nil {
				return err
			}
			recorded += n
		}
		return results.Close()
	})
	return recorded, db.Classify(err)
}

// settleSQL inserts a settlement row once and, only when it was inserted and carries a
// transaction id, that transaction and its outbox event: one statement, so that the credit
// follows the row or nothing does. It answers 1 when the row was inserted, else 0.
const settleSQL = `WITH s AS (
	INSERT INTO flex_event_settlements (organisation, event_id, site_id, status, reason, flex_wh, credit_pence,
		transaction_id, start_at, end_at, rate_centipence, delivered_mwh, half_hours)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
	ON CONFLICT (organisation, event_id, site_id) DO NOTHING
	RETURNING transaction_id),
t AS (
	INSERT INTO reward_transactions (organisation, site_id, transaction_id, transaction_type, credit_pence, flex_wh,
		start_at, end_at, occurred_at, source, request_digest)
	SELECT $1, $3, s.transaction_id, 'flex event', $7, $6, $9, $10, $9, 'settlement', $14 FROM s
	WHERE s.transaction_id IS NOT NULL),
o AS (
	INSERT INTO outbox (organisation, site_id, event_type, event_id, payload)
	SELECT $1, $3, $15, 'settlement-' || s.transaction_id::text, $16 FROM s WHERE s.transaction_id IS NOT NULL)
SELECT count(*) FROM s`

// queueSettle queues a site's settlement (settleSQL), preceded, when it credits, by its
// reward_sites row (the row a withdrawal locks; harmless when the site has one). It reports
// whether it credits.
func queueSettle(b *pgx.Batch, organisation string, ev Event, siteID string, res settlement.Result) (bool, error) {
	halfHours, err := json.Marshal(HalfHoursOf(res))
	if err != nil {
		return false, err
	}
	var reason *string
	if res.Status == settlement.Skipped {
		r := string(res.Reason)
		reason = &r
	}
	var (
		txID            *uuid.UUID
		digest, payload []byte
	)
	credit := res.Status == settlement.Settled && res.CreditPence > 0
	if credit {
		id := TransactionID(organisation, ev.ID, siteID)
		txID = &id
		if digest, payload, err = creditRecord(siteID, id, ev, res.FlexWh, res.CreditPence); err != nil {
			return false, err
		}
		b.Queue(`INSERT INTO reward_sites (organisation, site_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			organisation, siteID)
	}
	b.Queue(settleSQL, organisation, ev.ID, siteID, string(res.Status), reason, res.FlexWh, res.CreditPence, txID,
		ev.Start.UTC(), ev.End.UTC(), ev.RateCentipence, res.DeliveredMilliWh, halfHours, digest,
		string(flexv1.EventRewardsTransactionCredited), payload)
	return credit, nil
}

// creditRecord is a `flex event` reward transaction's request digest (SHA-256 of its record)
// and its rewards.transaction_credited outbox payload. With settleSQL, the one place
// settlement writes the reward ledger: the ledger's own store (branch pg) is to take it over.
func creditRecord(siteID string, txID uuid.UUID, ev Event, flexWh, creditPence int64) (digest, payload []byte, err error) {
	start, end := ev.Start.UTC(), ev.End.UTC()
	rec := record.Transaction{TransactionID: txID.String(), CreditPence: creditPence,
		TransactionType: flexv1.TransactionType("flex event"),
		StartTime:       ptr(start.Format(time.RFC3339)), EndTime: ptr(end.Format(time.RFC3339)),
		FlexKWh: units.ToKilo(&flexWh)}
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, nil, err
	}
	sum := sha256.Sum256(body)
	payload, err = json.Marshal(events.TransactionData{SiteID: siteID, Transaction: rec})
	return sum[:], payload, err
}

func ptr[T any](v T) *T { return &v }

const settlementColumns = `event_id, site_id, status, coalesce(reason, ''), coalesce(flex_wh, 0),
	coalesce(credit_pence, 0), coalesce(delivered_mwh, 0), transaction_id, coalesce(start_at, 'epoch'),
	coalesce(end_at, 'epoch'), coalesce(rate_centipence, 0), coalesce(half_hours, '[]'), settled_at`

func scanSettlements(rows pgx.Rows) ([]Settlement, error) {
	var out []Settlement
	var st Settlement
	var status, reason string
	var hh []byte
	_, err := pgx.ForEachRow(rows, []any{&st.EventID, &st.SiteID, &status, &reason, &st.FlexWh, &st.CreditPence,
		&st.DeliveredMilliWh, &st.TransactionID, &st.Start, &st.End, &st.RateCentipence, &hh, &st.SettledAt}, func() error {
		s := st
		s.Status, s.Reason = settlement.Status(status), settlement.Reason(reason)
		s.HalfHours = nil
		if err := json.Unmarshal(hh, &s.HalfHours); err != nil {
			return fmt.Errorf("settlement %s/%s: half_hours: %w", s.EventID, s.SiteID, err)
		}
		out = append(out, s)
		return nil
	})
	return out, db.Classify(err)
}

// OfEvent are the event's settlements so far, by site.
func (s *Store) OfEvent(ctx context.Context, organisation, eventID string) (map[string]Settlement, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+settlementColumns+` FROM flex_event_settlements
		WHERE organisation = $1 AND event_id = $2`, organisation, eventID)
	if err != nil {
		return nil, db.Classify(err)
	}
	list, err := scanSettlements(rows)
	if err != nil {
		return nil, err
	}
	out := make(map[string]Settlement, len(list))
	for _, st := range list {
		out[st.SiteID] = st
	}
	return out, nil
}

// OfSite are the site's settlements, newest event first.
func (s *Store) OfSite(ctx context.Context, organisation, siteID string) ([]Settlement, error) {
	rows, err := s.Pool.Query(ctx, `SELECT `+settlementColumns+` FROM flex_event_settlements
		WHERE organisation = $1 AND site_id = $2 ORDER BY start_at DESC NULLS LAST, event_id`, organisation, siteID)
	if err != nil {
		return nil, db.Classify(err)
	}
	return scanSettlements(rows)
}

// Totals sums an event's settlements: what its status reports.
type Totals struct {
	Settled     int32
	Skipped     map[settlement.Reason]int32
	FlexWh      int64
	CreditPence int64
	// LateReadings are readings of a settled site's window received after its settlement.
	LateReadings int64
}

// EventTotals are the event's totals, late readings included.
func (s *Store) EventTotals(ctx context.Context, organisation, eventID string) (Totals, error) {
	t := Totals{Skipped: map[settlement.Reason]int32{}}
	rows, err := s.Pool.Query(ctx, `SELECT status, coalesce(reason, ''), count(*), coalesce(sum(flex_wh), 0),
			coalesce(sum(credit_pence), 0)
		FROM flex_event_settlements WHERE organisation = $1 AND event_id = $2 GROUP BY 1, 2`, organisation, eventID)
	if err != nil {
		return t, db.Classify(err)
	}
	var status, reason string
	var n int32
	var wh, pence int64
	_, err = pgx.ForEachRow(rows, []any{&status, &reason, &n, &wh, &pence}, func() error {
		if settlement.Status(status) == settlement.Settled {
			t.Settled += n
			t.FlexWh += wh
			t.CreditPence += pence
		} else {
			t.Skipped[settlement.Reason(reason)] += n
		}
		return nil
	})
	if err != nil {
		return t, db.Classify(err)
	}
	err = s.Pool.QueryRow(ctx, `SELECT count(*) FROM flex_event_settlements f
		JOIN readings r ON r.organisation = f.organisation AND r.site_id = f.site_id
			AND r.start_at < f.end_at AND r.end_at > f.start_at AND r.start_at >= f.start_at - interval '30 minutes'
			AND r.received_at > f.settled_at
		WHERE f.organisation = $1 AND f.event_id = $2`, organisation, eventID).Scan(&t.LateReadings)
	return t, db.Classify(err)
}
