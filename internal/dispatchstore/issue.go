package dispatchstore

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// Issuer is who Flexsite's own changes of a dispatch (issued, cancelled) are recorded as.
const Issuer = "flexsite"

// Dispatch is one dispatch to issue: a flex event asking an asset of a target site for a level.
type Dispatch struct {
	FlexEvent, SiteID, AssetID string
	// MarketID is the FlexEvent's market (its proposition by default).
	MarketID string
	// Proposition is the FlexEvent's proposition (the OpenADR event's programID).
	Proposition string
	LevelKW     float64
	// From and To are the event's window; EventTimestamp when the flex event was created.
	From, To, EventTimestamp time.Time
}

// Skip is an asset of a target site not asked, and why.
type Skip struct {
	FlexEvent, SiteID, AssetID string
	Reason                     dispatch.SkipReason
}

// batch bounds one SQL transaction's dispatches: a flex event over 10,000 sites is issued in
// a dozen transactions, each complete (dispatches, their first status, their outbox events).
const batch = 1000

// firstBatch is the first transaction's dispatches; each next one is twice the last, up to
// batch: the first dispatches are committed, and their delivery begins, while the rest are
// being issued, instead of after the whole first thousand.
const firstBatch = 125

// Issue issues dispatches of an organisation, each exactly once: a dispatch already issued
// (by this replica before a crash, or by another racing it) is left as it is and notified no
// more. Each new dispatch is written with its first status change and its dispatch.requested
// outbox event (with Subscribers, already fanned out with its delivery rows) in one SQL
// transaction, so a manager that dies after the commit delivers it after its restart, and one
// that dies before it issues it again then. callbackBase is
// Flexsite's public address (scheme and host): the status callback's URL starts with it. It
// records the skipped assets too (once each; an asset dispatched since is no longer skipped)
// and answers how many dispatches this call issued.
func (s *Store) Issue(ctx context.Context, organisation, callbackBase string, ds []Dispatch, skips []Skip, now time.Time) (int, error) {
	// Every replica writes in one order, (flex event, asset)'s: replicas racing over the same
	// assets in their own orders would otherwise each hold rows the other waits for (a
	// deadlock, which PostgreSQL breaks by failing one of them).
	ds = slices.Clone(ds)
	slices.SortFunc(ds, func(a, b Dispatch) int {
		return cmp.Or(strings.Compare(a.FlexEvent, b.FlexEvent), strings.Compare(a.AssetID, b.AssetID))
	})
	skips = slices.Clone(skips)
	slices.SortFunc(skips, func(a, b Skip) int {
		return cmp.Or(strings.Compare(a.FlexEvent, b.FlexEvent), strings.Compare(a.AssetID, b.AssetID))
	})
	issued := 0
	for size := firstBatch; len(ds) > 0 || len(skips) > 0; size = min(2*size, batch) {
		d, k := ds[:min(size, len(ds))], skips[:min(size, len(skips))]
		ds, skips = ds[len(d):], skips[len(k):]
		n, err := s.issueBatch(ctx, organisation, callbackBase, d, k, now)
		if err != nil {
			return issued, err
		}
		issued += n
	}
	return issued, nil
}

func (s *Store) issueBatch(ctx context.Context, organisation, callbackBase string, ds []Dispatch, skips []Skip,
	now time.Time) (int, error) {
	n := len(ds)
	ids := make([]uuid.UUID, n)
	flexEvents, sites, assets, markets := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	propositions := make([]*string, n)
	levels := make([]float64, n)
	froms, tos, created := make([]time.Time, n), make([]time.Time, n), make([]time.Time, n)
	evs := make(map[uuid.UUID]events.Event, n)
	for i, d := range ds {
		id := dispatch.EventID(organisation, d.FlexEvent, d.AssetID)
		ids[i], flexEvents[i], sites[i], assets[i], markets[i] = id, d.FlexEvent, d.SiteID, d.AssetID, d.MarketID
		if d.Proposition != "" {
			propositions[i] = &d.Proposition
		}
		levels[i], froms[i], tos[i], created[i] = d.LevelKW, d.From.UTC(), d.To.UTC(), d.EventTimestamp.UTC()
		data, err := json.Marshal(dispatch.Event{EventID: id.String(), AssetID: d.AssetID,
			IssuedTimestamp: dispatch.Stamp(now), EventTimestamp: dispatch.Stamp(d.EventTimestamp),
			MarketID: d.MarketID, LevelKW: d.LevelKW, FromTime: dispatch.Stamp(d.From), ToTime: dispatch.Stamp(d.To),
			UpdateStatusCallback: callbackBase + dispatch.CallbackPath(d.AssetID, id)})
		if err != nil {
			return 0, err
		}
		evs[id] = events.Event{ID: RequestedEventID(id), Type: flexv1.EventDispatchRequested, Time: now.UTC(),
			SiteID: d.SiteID, Data: string(data)}
	}
	kEvents, kSites, kAssets, kReasons := make([]string, len(skips)), make([]string, len(skips)),
		make([]string, len(skips)), make([]string, len(skips))
	for i, k := range skips {
		kEvents[i], kSites[i], kAssets[i], kReasons[i] = k.FlexEvent, k.SiteID, k.AssetID, string(k.Reason)
	}
	var to outboxstore.Subscribers
	if n > 0 {
		to = s.subscribersOf(ctx, organisation, flexv1.EventDispatchRequested)
	}
	// The transaction holds back every organisation's notifications from its first write to
	// its commit (the delivery horizon, docs/notifications.md), so the manager is waited for
	// once in it: it is sent in two round trips, its BEGIN with the dispatches, the skips and
	// the NOTIFY, then their outbox events with its COMMIT, which PostgreSQL runs without
	// waiting for the manager.
	conn, err := s.Pool.Acquire(ctx)
	if err != nil {
		return 0, s.classify(err)
	}
	defer conn.Release()
	issued, err := func() (int, error) {
		// One statement: the dispatches new to the table and their first status; it answers
		// which are new, in the input's order. ON CONFLICT DO NOTHING makes the racer that
		// commits second insert nothing (it waits for the first's commit on the primary key),
		// so nothing is notified twice. The rows go in in event_id order: racers that wait on
		// each other's keys in one order never deadlock.
		b := &pgx.Batch{}
		b.Queue(`begin`)
		b.Queue(`
WITH input AS (
	SELECT * FROM unnest($2::uuid[], $3::text[], $4::text[], $5::text[], $6::text[], $7::float8[],
		$8::timestamptz[], $9::timestamptz[], $10::timestamptz[], $13::text[]) WITH ORDINALITY
		AS i(event_id, flex_event, site_id, asset_id, market_id, level_kw, from_time, to_time, event_timestamp,
			proposition, n)),
d AS (
	INSERT INTO dispatches (organisation, event_id, flex_event, site_id, asset_id, market_id, level_kw, from_time,
		to_time, event_timestamp, issued_at, updated_at, proposition)
	SELECT $1, event_id, flex_event, site_id, asset_id, market_id, level_kw, from_time, to_time, event_timestamp,
		$11, $11, proposition FROM input ORDER BY event_id
	ON CONFLICT DO NOTHING
	RETURNING event_id),
c AS (
	INSERT INTO dispatch_status_changes (organisation, event_id, status, recorded_at, recorded_by)
	SELECT $1, event_id, 'requested', $11, $12 FROM d),
k AS (
	DELETE FROM dispatch_skips s USING d JOIN input i USING (event_id)
	WHERE s.organisation = $1 AND s.flex_event = i.flex_event AND s.asset_id = i.asset_id)
SELECT i.event_id FROM input i JOIN d USING (event_id) ORDER BY i.n`,
			organisation, ids, flexEvents, sites, assets, markets, levels, froms, tos, created,
			now.UTC(), Issuer, propositions)
		if len(skips) > 0 {
			// An asset dispatched already (by the statement before, or earlier) stays
			// dispatched: its skip is not recorded.
			b.Queue(`INSERT INTO dispatch_skips (organisation, flex_event, site_id, asset_id, reason, recorded_at)
				SELECT $1, flex_event, site_id, asset_id, reason, $6
				FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) AS k(flex_event, site_id, asset_id, reason)
				WHERE NOT EXISTS (SELECT 1 FROM dispatches x WHERE x.organisation = $1 AND x.flex_event = k.flex_event
					AND x.asset_id = k.asset_id)
				ON CONFLICT DO NOTHING`, organisation, kEvents, kSites, kAssets, kReasons, now.UTC())
		}
		queueNotify(b, organisation, append(flexEvents, kEvents...))
		br := conn.SendBatch(ctx, b)
		if _, err := br.Exec(); err != nil {
			_ = br.Close()
			return 0, err
		}
		rows, err := br.Query()
		if err != nil {
			_ = br.Close()
			return 0, err
		}
		var fresh []events.Event
		var id uuid.UUID
		if _, err := pgx.ForEachRow(rows, []any{&id}, func() error {
			fresh = append(fresh, evs[id])
			return nil
		}); err != nil {
			_ = br.Close()
			return 0, err
		}
		if err := br.Close(); err != nil {
			return 0, err
		}
		// Their dispatch.requested events, in the same transaction, and its commit.
		b = &pgx.Batch{}
		outboxstore.QueueIn(b, organisation, fresh, to)
		b.Queue(`commit`)
		return len(fresh), conn.SendBatch(ctx, b).Close()
	}()
	if err != nil {
		if conn.Conn().PgConn().TxStatus() != 'I' {
			// Ended here, or with the connection (Release closes one left in a transaction).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			_, _ = conn.Exec(rctx, `rollback`)
			cancel()
		}
		return 0, s.classify(err)
	}
	s.committed(to, issued > 0)
	return issued, nil
}

// notifySQL tells every replica's FlexEvent controller that these events' dispatches changed.
const notifySQL = `SELECT pg_notify($1, $2 || '/' || e) FROM (SELECT DISTINCT unnest($3::text[]) AS e) x`

// notify runs notifySQL in q.
func notify(ctx context.Context, q pgx.Tx, organisation string, flexEvents []string) error {
	_, err := q.Exec(ctx, notifySQL, Channel, organisation, flexEvents)
	return err
}

// queueNotify queues notifySQL in b.
func queueNotify(b *pgx.Batch, organisation string, flexEvents []string) {
	b.Queue(notifySQL, Channel, organisation, flexEvents)
}

// RequestedEventID is the outbox id (the webhook-id) of a dispatch's dispatch.requested
// event, and CancelledEventID of its dispatch.cancelled: derived from the dispatch, so that
// each is written and delivered once.
func RequestedEventID(id uuid.UUID) string { return "evt_" + id.String() }

// CancelledEventID: see RequestedEventID.
func CancelledEventID(id uuid.UUID) string {
	return "evt_" + uuid.NewSHA1(id, []byte("cancelled")).String()
}

// Cancel cancels a flex event's open dispatches (requested, received or accepted), each with
// its status change and its dispatch.cancelled outbox event, in one SQL transaction. A
// callback racing it waits for the dispatch's row lock and then finds it cancelled (409).
// Cancelling again cancels nothing. It answers how many it cancelled.
func (s *Store) Cancel(ctx context.Context, organisation, flexEvent string, now time.Time) (int, error) {
	cancelled := 0
	var to outboxstore.Subscribers
	err := pgx.BeginFunc(ctx, s.Pool, func(q pgx.Tx) error {
		rows, err := q.Query(ctx, `UPDATE dispatches SET status = 'cancelled', updated_at = $3
			WHERE organisation = $1 AND flex_event = $2 AND status IN ('requested', 'received', 'accepted')
			RETURNING event_id, site_id, asset_id`, organisation, flexEvent, now.UTC())
		if err != nil {
			return err
		}
		var ids []uuid.UUID
		var evs []events.Event
		for rows.Next() {
			var id uuid.UUID
			var site, asset string
			if err := rows.Scan(&id, &site, &asset); err != nil {
				return err
			}
			data, err := json.Marshal(dispatch.CancelledEvent{EventID: id.String(), AssetID: asset})
			if err != nil {
				return err
			}
			ids = append(ids, id)
			evs = append(evs, events.Event{ID: CancelledEventID(id), Type: flexv1.EventDispatchCancelled, Time: now.UTC(),
				SiteID: site, Data: string(data)})
		}
		if err := rows.Err(); err != nil {
			return err
		}
		cancelled = len(ids)
		if cancelled == 0 {
			return nil
		}
		if _, err := q.Exec(ctx, `INSERT INTO dispatch_status_changes (organisation, event_id, status, recorded_at, recorded_by)
			SELECT $1, id, 'cancelled', $3, $4 FROM unnest($2::uuid[]) AS id`,
			organisation, ids, now.UTC(), Issuer); err != nil {
			return err
		}
		to = s.subscribersOf(ctx, organisation, flexv1.EventDispatchCancelled)
		if err := outboxstore.WriteIn(ctx, q, organisation, evs, to); err != nil {
			return err
		}
		return notify(ctx, q, organisation, []string{flexEvent})
	})
	if err != nil {
		return 0, s.classify(err)
	}
	s.committed(to, cancelled > 0)
	return cancelled, nil
}

// ErrNotFound: the organisation has no such dispatch of that asset.
var ErrNotFound = errors.New("no such dispatch")

// Report is what an asset controller reported of a dispatch.
type Report struct {
	AssetID string
	EventID uuid.UUID
	Status  dispatch.Status
	// Windowed: Status is what the report says of a dispatch whose window starts after now,
	// and Started (empty: nothing, the dispatch is left as it is) what it says of one whose
	// window has started by now: a report whose sender cannot know which (an OpenADR operating
	// state) judged on the dispatch it reads. Only RecordJoined reads them.
	Windowed bool
	Started  dispatch.Status
	// At is the report's own timestamp; By the API client that sent it.
	At time.Time
	By string
}

// Record records a reported status of an organisation's dispatch of an asset, judged by
// dispatch.Judge: changed is false when it is the same status again (nothing written); a
// refusal is dispatch.ErrStepBack or dispatch.ErrFinal (a cancellation that came first
// included), or dispatch.ErrNotStarted (EXECUTED of a window not started);
// ErrNotFound when the organisation has no such dispatch of that asset.
//
// One statement reads the status and writes the new one, with its history row, only if the
// status it read is one dispatch.Step lets the report follow (and, for EXECUTED, the window
// starts by dispatch.ExecutedWindowStartBy) and is still the row's when the
// write takes its lock (a compare and set): one round trip, no explicit transaction. A report
// that loses a race (another report, or Cancel, which holds the row until it commits) is
// judged again on the status it lost to. The NOTIFY follows the commit, coalesced per flex
// event (notifySoon).
func (s *Store) Record(ctx context.Context, organisation string, r Report, now time.Time) (changed bool, err error) {
	changed, flexEvent, err := s.RecordOn(ctx, s.Pool, organisation, r, now)
	if changed {
		s.Changed(organisation, flexEvent)
	}
	return changed, err
}

// Querier runs one statement: the pool, or a transaction another store has begun, so that a
// status change commits with what that store writes (an OpenADR report stored with the change
// it says).
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// RecordOn is Record's statement run on q, answering the dispatch's flex event too. It tells
// no one: once q has committed a change, the caller calls Changed with the flex event.
func (s *Store) RecordOn(ctx context.Context, q Querier, organisation string, r Report, now time.Time) (changed bool,
	flexEvent string, err error) {
	changed, flexEvent, _, err = s.record(ctx, q, organisation, r, now, nil)
	return changed, flexEvent, err
}

// Joined is another store's write joined to a status's statement (RecordJoined): its
// Statement (NewJoinedStatement, made once of the caller's constants) and the parameters of
// its fragments, $13 onwards: Args. Program, when set, is a condition of the dispatch's too:
// its proposition (the OpenADR event's programID) must be it, or nothing is written (ErrClosed).
type Joined struct {
	Statement *JoinedStatement
	Args      []any
	Program   string
}

// JoinedStatement is joinedSQL made of a caller's gate, room, count and write (the caller's
// constants: made once, the statement is the same text at every report).
type JoinedStatement struct{ sql string }

// NewJoinedStatement makes the statement a Joined runs. gate, a boolean SQL expression over
// the dispatch's row (d) as read, must hold for anything to be written (ErrClosed when it does
// not); room, one over the dispatch's row (d), must hold both on the row as read (ErrClosed)
// and on the row as locked by the write (judged again when it does not: the next read finds
// the room gone); count (empty: none) is an assignment of the dispatch's row written with the
// report whether its status changes or not (what room counts). write, a data-modifying
// statement that selects from the CTE "takes", runs in the same statement: takes has one row
// when the report takes effect (its status written, or the dispatch's already, or a windowed
// report that says nothing of a started window), none otherwise.
func NewJoinedStatement(gate, room, count, write string) *JoinedStatement {
	if count != "" {
		count = ", " + count
	}
	return &JoinedStatement{sql: fmt.Sprintf(joinedSQL, gate, room, count, write)}
}

// ErrClosed: a Joined's gate or room did not hold, or its Program is not the dispatch's;
// nothing was written.
var ErrClosed = errors.New("the joined write's gate is closed")

// RecordJoined is RecordOn with j written in the same statement, only when the report takes
// effect: the status change and j's write commit together or not at all, in one round trip. It
// judges as RecordOn does (a refusal writes nothing, j's write included), and reads a
// Windowed report's status by the dispatch's window. It answers the dispatch's status too, as
// the report left it.
func (s *Store) RecordJoined(ctx context.Context, q Querier, organisation string, r Report, now time.Time, j Joined) (
	changed bool, flexEvent string, status dispatch.Status, err error) {
	return s.record(ctx, q, organisation, r, now, &j)
}

// recordSQL reads the dispatch by its key alone (k, materialized: the asset's condition is not
// pushed into its scan) and compares its asset after: the primary key's index finds it, with
// or without statistics. Read with the asset in one condition, a table without statistics yet
// (a burst of dispatches before autovacuum's first ANALYZE of it) was read through an index
// of the asset's dispatches, every dispatch of the asset visited (and every dead version an
// earlier status left), at every report.
const recordSQL = `
WITH k AS MATERIALIZED (
	SELECT status, flex_event, from_time, asset_id FROM dispatches WHERE organisation = $1 AND event_id = $2),
cur AS (
	SELECT status, flex_event, from_time FROM k WHERE asset_id = $3),
u AS (
	UPDATE dispatches d SET status = $4, updated_at = $6 FROM cur
	WHERE d.organisation = $1 AND d.event_id = $2 AND d.status = cur.status AND cur.status = ANY($8)
		AND ($9::timestamptz IS NULL OR cur.from_time <= $9)
	RETURNING d.event_id),
c AS (
	INSERT INTO dispatch_status_changes (organisation, event_id, status, reported_at, recorded_at, recorded_by)
	SELECT $1, $2, $4, $5, $6, $7 FROM u)
SELECT cur.status, cur.flex_event, cur.from_time, (SELECT count(*) FROM u) FROM cur`

// joinedSQL is recordSQL (its dispatch read by its key, k) with a Joined's gate, room, count
// and write (%[1]s … %[4]s) and its Program ($12, NULL: any), and a Windowed report's two
// statuses: $4 (following one of $8) of a dispatch whose window starts after now, $10
// (following one of $11; NULL: none) of one whose window has started. A status RecordJoined is
// not windowed is both. The dispatch's row is written whenever the report takes effect: its
// status when the report moves it (compared and set, as recordSQL does), and count always,
// room checked again under the row's lock.
const joinedSQL = `
WITH k AS MATERIALIZED (
	SELECT organisation, asset_id, status, flex_event, from_time, proposition, report_counts FROM dispatches
	WHERE organisation = $1 AND event_id = $2),
cur AS (
	SELECT status, flex_event, from_time,
		COALESCE((%[1]s) AND (%[2]s) AND ($12::text IS NULL OR d.proposition = $12), false) AS open,
		CASE WHEN from_time > $6 THEN $4::text ELSE $10::text END AS to_status,
		CASE WHEN from_time > $6 THEN $8::text[] ELSE $11::text[] END AS follows
	FROM k d WHERE asset_id = $3),
m AS (
	SELECT status, to_status, COALESCE(status = ANY(follows) AND (to_status <> 'executed' OR from_time <= $9::timestamptz),
		false) AS moves
	FROM cur WHERE open),
u AS (
	UPDATE dispatches d SET status = CASE WHEN m.moves THEN m.to_status ELSE d.status END,
		updated_at = CASE WHEN m.moves THEN $6 ELSE d.updated_at END%[3]s
	FROM m
	WHERE d.organisation = $1 AND d.event_id = $2 AND d.status = m.status AND (%[2]s)
		AND (m.moves OR m.to_status IS NULL OR m.status = m.to_status)
	RETURNING m.moves, m.to_status),
c AS (
	INSERT INTO dispatch_status_changes (organisation, event_id, status, reported_at, recorded_at, recorded_by)
	SELECT $1, $2, u.to_status, $5, $6, $7 FROM u WHERE u.moves),
takes AS (
	SELECT 1 FROM u),
w AS (%[4]s)
SELECT cur.status, cur.flex_event, cur.from_time, (SELECT count(*) FROM u WHERE u.moves), cur.open,
	EXISTS (SELECT 1 FROM u) FROM cur`

// follows are the statuses a report of to may follow (dispatch.Step): none for no status.
func follows(to dispatch.Status) []string {
	out := []string{}
	if to == "" {
		return out
	}
	for _, from := range dispatch.Statuses {
		if ok, err := dispatch.Step(from, to); ok && err == nil {
			out = append(out, string(from))
		}
	}
	return out
}

func (s *Store) record(ctx context.Context, q Querier, organisation string, r Report, now time.Time, j *Joined) (
	changed bool, flexEvent string, status dispatch.Status, err error) {
	started := r.Status // what the report says of a dispatch whose window has started
	if r.Windowed {
		if j == nil {
			return false, "", "", errors.New("recording a dispatch's status: a windowed report is recorded joined only")
		}
		started = r.Started
	}
	// EXECUTED only of a window that has started (dispatch.Judge): the statement writes only
	// when the window starts by startBy, and a report it did not write is judged below.
	var startBy *time.Time
	if r.Status == dispatch.Executed || started == dispatch.Executed {
		by := dispatch.ExecutedWindowStartBy(r.At, now).UTC()
		startBy = &by
	}
	sql := recordSQL
	args := []any{organisation, r.EventID, r.AssetID, string(r.Status), r.At.UTC(), now.UTC(), r.By, follows(r.Status), startBy}
	if j != nil {
		var startedArg, program *string
		if started != "" {
			v := string(started)
			startedArg = &v
		}
		if j.Program != "" {
			program = &j.Program
		}
		sql = j.Statement.sql
		args = append(append(args, startedArg, follows(started), program), j.Args...)
	}
	for range recordAttempts {
		var from string
		var windowStart time.Time
		var written int
		open, taken := true, false
		dests := []any{&from, &flexEvent, &windowStart, &written}
		if j != nil {
			dests = append(dests, &open, &taken)
		}
		err := q.QueryRow(ctx, sql, args...).Scan(dests...)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, "", "", ErrNotFound
		}
		if err != nil {
			return false, "", "", fmt.Errorf("recording a dispatch's status: %w", s.classify(err))
		}
		if !open {
			return false, flexEvent, "", ErrClosed
		}
		// The status the report says of the dispatch as read: the statement's choice (its now
		// is this one cut to the microsecond, and a window starts on a whole microsecond, so
		// the two comparisons agree).
		to := r.Status
		if !now.Before(windowStart) {
			to = started
		}
		if written == 1 {
			return true, flexEvent, to, nil
		}
		if j != nil {
			switch {
			case taken && to == "": // it says nothing of the dispatch: only the joined write was written
				return false, flexEvent, dispatch.Status(from), nil
			case taken: // the same status again: the joined write was written
				return false, flexEvent, to, nil
			case to != "":
				if _, err := dispatch.Judge(dispatch.Status(from), to, r.At, now, windowStart); err != nil {
					return false, flexEvent, to, err
				}
			}
			// Not taken, and not refused: the row changed between the read and the write (its
			// status, or the joined write's room): judge the report again.
			continue
		}
		if changed, err := dispatch.Judge(dispatch.Status(from), to, r.At, now, windowStart); err != nil || !changed {
			return false, flexEvent, to, err
		}
		// The status changed between the read and the write: judge the report again.
	}
	return false, "", "", fmt.Errorf("recording a dispatch's status: it kept changing under %d attempts", recordAttempts)
}

// Changed tells every replica's FlexEvent controller, soon, that a dispatch of the
// organisation's flex event changed (a change RecordOn's caller committed).
func (s *Store) Changed(organisation, flexEvent string) { s.notifySoon(organisation, flexEvent) }

// recordAttempts bounds the reads and writes of one report: each lost race means another
// change was recorded, and a dispatch has at most four changes (or, joined, that the room
// was filled: the next read finds it closed).
const recordAttempts = 6

// notifyDelay is how long the reports of one flex event are gathered into one NOTIFY.
const notifyDelay = 50 * time.Millisecond

// notifySoon tells every replica's FlexEvent controller, once within notifyDelay, that a flex
// event's dispatches changed. A NOTIFY inside the reporting transaction would serialise every
// report's commit: PostgreSQL holds one lock per database across the commit of every
// notifying transaction, WAL flush included, which capped the callbacks at one per fsync. The
// change itself is committed already, and the REST answers read the counts from the tables;
// a NOTIFY lost with its replica (or with the database away) only delays the FlexEvent
// status's copy until the controller's next reconcile of the event.
func (s *Store) notifySoon(organisation, flexEvent string) {
	key := organisation + "/" + flexEvent
	if _, pending := s.pending.LoadOrStore(key, struct{}{}); pending {
		return
	}
	time.AfterFunc(notifyDelay, func() {
		s.pending.Delete(key)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = s.Pool.Exec(ctx, `SELECT pg_notify($1, $2)`, Channel, key)
	})
}
