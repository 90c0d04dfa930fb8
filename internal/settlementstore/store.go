// Package settlementstore is flex event settlement's part of the database: a site's readings
// read back as half-hourly energy (internal/settlement's rules), the days of its other
// events, each event's target sites, and each site's settlement written exactly once with its
// credit (a `flex event` reward transaction and its rewards.transaction_credited outbox
// event) in one SQL transaction.
//
// Exactly once holds whatever happens: the settlement row's primary key (organisation,
// event, site) is inserted ON CONFLICT DO NOTHING in the same SQL transaction as the
// transaction and its outbox event, and the transaction's id is derived from the
// organisation, the event and the site (TransactionID). Two settlers racing insert once (the
// loser waits for the winner's commit, then inserts nothing); a crash before the commit writes
// nothing. The transaction is inserted ON CONFLICT DO NOTHING too: an id an API client took
// first skips that site (settlement.TransactionIDTaken) and never fails the batch.
package settlementstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/settlement"
)

// Store reads and writes settlements.
type Store struct {
	Pool *pgxpool.Pool
	// BatchSize is how many sites SettleSites records in one SQL transaction (0: BatchSize).
	BatchSize int
}

// namespace is the UUIDv5 namespace of flex event transaction ids.
var namespace = uuid.MustParse("6f1d3a56-2b1e-4d0c-9a1f-7c1e5f1e0a26")

// TransactionID is the id of the reward transaction that credits an event at a site: the
// same (organisation, event, site) always gives the same id (UUIDv5), so a second credit of
// the same settlement is the same transaction, refused by its primary key. It is derived
// under the organisation, as ids are unique within one: another organisation cannot take it.
// The organisation's own API clients can (a rewards_write client may post a credit under any
// id): SettleAll skips such a site (settlement.TransactionIDTaken) rather than fail.
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

// SettleAll records several sites' settlements of an event in one SQL statement (settleSQL),
// each exactly once as Settle does: it answers how many were recorded now (the others were
// settled before, by this replica or another). Sites are written in the order given (the
// controller's is by site id, so that two replicas lock rows in the same order).
func (s *Store) SettleAll(ctx context.Context, organisation string, ev Event, outcomes []Due) (recorded int, err error) {
	if len(outcomes) == 0 {
		return 0, nil
	}
	n := len(outcomes)
	var (
		sites, statuses   = make([]string, n), make([]string, n)
		reasons           = make([]*string, n)
		flexWh, pence, mw = make([]int64, n), make([]int64, n), make([]int64, n)
		txIDs             = make([]*uuid.UUID, n)
		halfHours         = make([][]byte, n)
		digests, payloads = make([][]byte, n), make([][]byte, n)
		eventIDs          = make([]string, n)
		credited          []string
	)
	for i, o := range outcomes {
		res := o.Result
		sites[i], statuses[i] = o.SiteID, string(res.Status)
		flexWh[i], pence[i], mw[i] = res.FlexWh, res.CreditPence, res.DeliveredMilliWh
		if res.Status == settlement.Skipped {
			r := string(res.Reason)
			reasons[i] = &r
		}
		if halfHours[i], err = json.Marshal(HalfHoursOf(res)); err != nil {
			return 0, err
		}
		if res.Status == settlement.Settled && res.CreditPence > 0 {
			id := TransactionID(organisation, ev.ID, o.SiteID)
			txIDs[i] = &id
			if digests[i], eventIDs[i], payloads[i], err = creditRecord(organisation, o.SiteID, id, ev, res.FlexWh,
				res.CreditPence); err != nil {
				return 0, err
			}
			credited = append(credited, o.SiteID)
		}
	}
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// settleSQL's estimates are far off (a join of its CTEs planned at 25 times the
		// batch), so its planned cost passes the JIT thresholds: compiling it took 0.6–2 s
		// a batch of 5,000 sites, ten times the statement's own work (docs/performance.md,
		// "Settlement"). Interpreted, it costs what it does.
		if _, err := tx.Exec(ctx, "SET LOCAL jit = off"); err != nil {
			return err
		}
		var taken []int32
		if err := tx.QueryRow(ctx, settleSQL, organisation, ev.ID, ev.Start.UTC(), ev.End.UTC(), ev.RateCentipence,
			string(flexv1.EventRewardsTransactionCredited), sites, statuses, reasons, flexWh, pence, txIDs, mw,
			halfHours, digests, payloads, eventIDs).Scan(&recorded, &taken); err != nil {
			return err
		}
		if len(taken) > 0 {
			takenSites, takenDigests := make([]string, len(taken)), make([][]byte, len(taken))
			for i, n := range taken {
				takenSites[i], takenDigests[i] = sites[n-1], digests[n-1]
			}
			if _, err := tx.Exec(ctx, takenSQL, organisation, ev.ID, takenSites, takenDigests,
				string(settlement.TransactionIDTaken)); err != nil {
				return err
			}
		}
		// The ledgers' summaries and the kept pages follow (rewardstore's
		// listeners); a site settled before is told again, harmlessly.
		return rewardstore.NotifyChanged(ctx, tx, organisation, credited)
	})
	return recorded, db.Classify(err)
}

// settleSQL inserts the settlement rows once each and, for the rows it inserted that carry a
// transaction id, the site's reward_sites row, the transaction and its outbox event: one
// statement, so that a credit follows its row or nothing does. It answers how many rows it
// inserted, and the positions (from 1) of the sites whose transaction id was taken already (an
// API client of the organisation posted a transaction under it): their transaction is not
// inserted, nor its event (takenSQL judges them), and the rest of the batch goes on. $1
// organisation, $2 event, $3 and $4 its window, $5 its rate, $6 the event type; the rest are
// per site, in order.
const settleSQL = `WITH input AS (
	SELECT * FROM unnest($7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::uuid[], $13::bigint[],
		$14::jsonb[], $15::bytea[], $16::jsonb[], $17::text[]) WITH ORDINALITY
		AS i(site_id, status, reason, flex_wh, credit_pence, transaction_id, delivered_mwh, half_hours, digest, payload,
			event_id, n)),
s AS (
	INSERT INTO flex_event_settlements (organisation, event_id, site_id, status, reason, flex_wh, credit_pence,
		transaction_id, start_at, end_at, rate_centipence, delivered_mwh, half_hours)
	SELECT $1, $2, site_id, status, reason, flex_wh, credit_pence, transaction_id, $3, $4, $5, delivered_mwh, half_hours
	FROM input ORDER BY n
	ON CONFLICT (organisation, event_id, site_id) DO NOTHING
	RETURNING site_id, transaction_id),
credited AS (SELECT i.* FROM s JOIN input i USING (site_id) WHERE s.transaction_id IS NOT NULL),
rs AS (
	INSERT INTO reward_sites (organisation, site_id) SELECT $1, site_id FROM credited ON CONFLICT DO NOTHING),
t AS (
	INSERT INTO reward_transactions (organisation, site_id, transaction_id, transaction_type, credit_pence, flex_wh,
		start_at, end_at, occurred_at, source, request_digest)
	SELECT $1, site_id, transaction_id, 'flex event', credit_pence, flex_wh, $3, $4, $3, 'settlement', digest FROM credited
	ON CONFLICT DO NOTHING
	RETURNING site_id),
o AS (
	INSERT INTO outbox (organisation, site_id, event_type, event_id, payload)
	SELECT $1, site_id, $6, event_id, payload FROM credited JOIN t USING (site_id) ORDER BY n)
SELECT (SELECT count(*) FROM s),
	ARRAY(SELECT n::int FROM credited c WHERE NOT EXISTS (SELECT 1 FROM t WHERE t.site_id = c.site_id) ORDER BY n)`

// takenSQL settles the sites whose transaction id was taken (settleSQL's answer): a site whose
// id holds the very same credit (same site, same record: a client posted exactly this
// settlement's credit, and its event with it) stays settled with it; any other is skipped
// (reason $5) with no credit, so that it is never paid twice nor blocks the event's other
// sites. $1 organisation, $2 event, $3 the sites, $4 their credits' digests.
const takenSQL = `UPDATE flex_event_settlements f SET status = 'skipped', reason = $5, credit_pence = 0, transaction_id = NULL
	FROM unnest($3::text[], $4::bytea[]) AS d(site_id, digest)
	WHERE f.organisation = $1 AND f.event_id = $2 AND f.site_id = d.site_id
		AND NOT EXISTS (SELECT 1 FROM reward_transactions t WHERE t.organisation = $1 AND t.site_id = d.site_id
			AND t.transaction_id = f.transaction_id AND t.request_digest = d.digest)`

// creditRecord is a `flex event` reward transaction's request digest, and its
// rewards.transaction_credited outbox event's id and payload, built by the ledger's store
// (rewardstore.Digest, rewardstore.CreditEvent) as for any other credit. settleSQL writes them
// with the settlement row, so that a credit follows its row or nothing does.
func creditRecord(organisation, siteID string, txID uuid.UUID, ev Event, flexWh, creditPence int64) (
	digest []byte, eventID string, payload []byte, err error) {
	start, end := metav1.NewTime(ev.Start.UTC()), metav1.NewTime(ev.End.UTC())
	tx := flexv1.RewardTransaction{ID: txID.String(), Type: "flex event", CreditPence: creditPence,
		StartTime: &start, EndTime: &end, FlexWh: &flexWh}
	eventID, payload, err = rewardstore.CreditEvent(rewardstore.Site{Namespace: organisation, ID: siteID}, tx)
	return rewardstore.Digest(tx), eventID, payload, err
}

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
	// The sums are numeric, held within a bigint (each credit is bounded; so is a settled
	// site's flex): an event's totals stay readable.
	rows, err := s.Pool.Query(ctx, `SELECT status, coalesce(reason, ''), count(*),
			least(greatest(coalesce(sum(flex_wh), 0), -9223372036854775808), 9223372036854775807)::bigint,
			least(coalesce(sum(credit_pence), 0), 9223372036854775807)::bigint
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
