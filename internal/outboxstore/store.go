// Package outboxstore is the one notification outbox, in PostgreSQL (migration 00014): every
// event is a row of `outbox`; each subscription that wants an event gets a row of
// `notification_deliveries`, claimed, attempted and settled by the deliverers of any replica
// (internal/delivery). Controllers write their events here (Report, Add) before the status
// write that shows the change; writers of credits write theirs in the SQL transaction of the
// credit (internal/rewardstore, internal/settlementstore).
//
// A writer that knows the subscriptions an event is owed writes its delivery rows with it, in
// its own transaction (WriteIn: the dispatches' events), and the fan-out has nothing to do for it.
//
// Order: events are taken in commit-horizon order (each row carries its writer's transaction
// id; the fan-out takes only those below the oldest transaction still running, by (xid, id),
// and the claims only delivery rows below it: migration 00027, docs/notifications.md "Order"). A site's next event is claimed for a
// subscription only once its previous one is delivered or given up, and never while an
// earlier event of the site waits to be fanned out.
// At least once: a claim is a lease (claimed_until); a worker that dies between its POST and
// its outcome lets the lease expire and the event is claimed again, with the same id.
package outboxstore

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/events"
)

// Channel is the PostgreSQL NOTIFY channel an insert into the outbox or into the deliveries
// signals (a trigger: every writer alike), so that deliverers wake at once.
const Channel = "flexsite_outbox"

// keptAttempts is how many attempts a subscription's log keeps (GET .../deliveries shows at
// most 100).
const keptAttempts = 100

// Store is the outbox on a pool.
type Store struct {
	Pool *pgxpool.Pool
}

// insertEvents writes events (in order: their sequence follows it) once each per
// organisation; subscriptionUID addresses them to one subscription alone ("" for all).
const insertEvents = `INSERT INTO outbox (organisation, site_id, event_type, event_id, payload, created_at, subscription_uid)
	SELECT $1, site_id, event_type, event_id, payload::jsonb, at, nullif($7, '')
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) WITH ORDINALITY
		AS e(site_id, event_type, event_id, payload, at, n)
	ORDER BY n
	ON CONFLICT (organisation, event_id) DO NOTHING`

// insertFannedOut is insertEvents for events whose subscriptions their writer knows
// (Subscribers): each new event is written fanned out, with a delivery row for each of the
// subscriptions $8, as FanOut would give it (in commit-horizon order: its writer's
// transaction id, then its sequence). An event written already gets nothing again.
const insertFannedOut = `WITH e AS (
	INSERT INTO outbox (organisation, site_id, event_type, event_id, payload, created_at, subscription_uid, fanned_out_at)
	SELECT $1, site_id, event_type, event_id, payload::jsonb, at, nullif($7, ''), clock_timestamp()
	FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::timestamptz[]) WITH ORDINALITY
		AS e(site_id, event_type, event_id, payload, at, n)
	ORDER BY n
	ON CONFLICT (organisation, event_id) DO NOTHING
	RETURNING id, site_id, created_at, xid)
INSERT INTO notification_deliveries (subscription_uid, event_seq, organisation, site_id, event_at, event_xid)
SELECT s.uid, e.id, $1, e.site_id, e.created_at, e.xid FROM e CROSS JOIN unnest($8::text[]) AS s(uid)`

func insert(ctx context.Context, q pgx.Tx, organisation, subscriptionUID string, evs []events.Event) error {
	return insertTo(ctx, q, organisation, subscriptionUID, evs, Subscribers{})
}

func insertTo(ctx context.Context, q pgx.Tx, organisation, subscriptionUID string, evs []events.Event, to Subscribers) error {
	sql, args := insertStatement(organisation, subscriptionUID, evs, to)
	_, err := q.Exec(ctx, sql, args...)
	return err
}

// insertStatement is the statement writing evs (insertFannedOut when to is Known, else
// insertEvents) and its arguments.
func insertStatement(organisation, subscriptionUID string, evs []events.Event, to Subscribers) (string, []any) {
	n := len(evs)
	sites, types, ids, payloads, times := make([]string, n), make([]string, n), make([]string, n), make([]string, n),
		make([]time.Time, n)
	for i, ev := range evs {
		sites[i], types[i], ids[i], payloads[i], times[i] = ev.SiteID, string(ev.Type), ev.ID, ev.Data, ev.Time.UTC()
	}
	if to.Known {
		uids := to.UIDs
		if uids == nil {
			uids = []string{}
		}
		return insertFannedOut, []any{organisation, sites, types, ids, payloads, times, subscriptionUID, uids}
	}
	return insertEvents, []any{organisation, sites, types, ids, payloads, times, subscriptionUID}
}

// Subscribers are the subscriptions an event is owed, as its writer knows them.
type Subscribers struct {
	// Known: UIDs are every subscription the event is owed (none when empty); otherwise the
	// fan-out decides, after the writer's commit.
	Known bool
	UIDs  []string
}

// WriteIn writes events of an organisation in the writer's own transaction q, each once
// (however often it is written). When to is Known, each new event is written with its
// delivery rows, one for each of to.UIDs, and marked fanned out: the deliverers can claim it
// as soon as q commits and the horizon passes it, with no fan-out pass between. A site's
// order and the commit-horizon order are kept as FanOut keeps them (docs/notifications.md,
// "Order"): a delivery row carries its event's place, and the claims take only rows below
// the horizon.
func WriteIn(ctx context.Context, q pgx.Tx, organisation string, evs []events.Event, to Subscribers) error {
	if len(evs) == 0 {
		return nil
	}
	return insertTo(ctx, q, organisation, "", evs, to)
}

// QueueIn is WriteIn queued in b, a batch its caller sends inside its own transaction (with
// the transaction's COMMIT queued after it, the transaction ends without waiting for its
// writer between the two). Nothing is queued for no events.
func QueueIn(b *pgx.Batch, organisation string, evs []events.Event, to Subscribers) {
	if len(evs) == 0 {
		return
	}
	sql, args := insertStatement(organisation, "", evs, to)
	b.Queue(sql, args...)
}

// Report writes a controller's events about subject (an object's uid and what it reports)
// unless the last events it reported of subject had this digest (events.Digest): a reconcile
// redone after a conflict or a crash computes the same changes and writes nothing. It
// answers whether it wrote. One SQL transaction: the events and the digest, or neither.
func (s *Store) Report(ctx context.Context, organisation, subject, digest string, evs []events.Event) (bool, error) {
	if len(evs) == 0 {
		return false, nil
	}
	wrote := false
	err := pgx.BeginFunc(ctx, s.Pool, func(q pgx.Tx) error {
		// The row's lock serialises two replicas reporting one subject: the second finds the
		// first's digest.
		tag, err := q.Exec(ctx, `INSERT INTO notification_reported (organisation, subject, digest) VALUES ($1, $2, $3)
			ON CONFLICT (organisation, subject) DO UPDATE SET digest = excluded.digest, reported_at = now()
			WHERE notification_reported.digest <> excluded.digest`, organisation, subject, digest)
		if err != nil || tag.RowsAffected() == 0 {
			return err
		}
		wrote = true
		return insert(ctx, q, organisation, "", evs)
	})
	return wrote, s.classify(err)
}

// Add writes events whose ids say what they are (a deletion's, derived from the object's
// uid): each once, however often it is added.
func (s *Store) Add(ctx context.Context, organisation string, evs []events.Event) error {
	if len(evs) == 0 {
		return nil
	}
	return s.classify(pgx.BeginFunc(ctx, s.Pool, func(q pgx.Tx) error { return insert(ctx, q, organisation, "", evs) }))
}

// Ping writes an event addressed to one subscription alone (the test endpoint's).
func (s *Store) Ping(ctx context.Context, organisation, subscriptionUID string, ev events.Event) error {
	return s.classify(pgx.BeginFunc(ctx, s.Pool, func(q pgx.Tx) error {
		return insert(ctx, q, organisation, subscriptionUID, []events.Event{ev})
	}))
}

// Unfanned is an event not yet given its delivery rows.
type Unfanned struct {
	Seq          int64
	Organisation string
	SiteID       string
	Type         flexv1.EventType
	// SubscriptionUID, when set, is the one subscription the event is for (ping).
	SubscriptionUID string
	Time            time.Time
}

// fanOutPlan makes the fan-out's scan (fanOutScan) a plain index scan in id order (migration
// 00023): a bitmap scan visits every dead entry earlier fan-outs left (each mark is a new row
// version) until VACUUM, and never marks them dead in the index; its cost grew with every
// event fanned out since: 0.3 to 0.9 s a pass once a fleet's credits (52 a site) were fanned
// out, on every pass of the deliverer.
const fanOutPlan = `SET LOCAL enable_bitmapscan = off`

// horizon is the oldest transaction still running (docs/notifications.md, "Order"): every
// transaction with a lower id has finished, so no event below it can appear any more.
const horizon = `pg_snapshot_xmin(pg_current_snapshot())`

// fanOutScan takes the first events not fanned out yet, in commit-horizon order: those whose
// writer's transaction is below the horizon, by (xid, id), from outbox_fan_out_order
// (migration 00027). Events committed by one transaction become due together.
const fanOutScan = `SELECT id, organisation, site_id, event_type, coalesce(subscription_uid, ''), created_at
	FROM outbox WHERE fanned_out_at IS NULL AND xid < ` + horizon + `
	ORDER BY xid, id LIMIT $1 FOR UPDATE SKIP LOCKED`

// heldScan finds the first event committed but not yet below the horizon (a transaction that
// began before its writer is still running): the first to fan out, from the same index, and
// for each of the subscriptions $1 the first delivery written with its event (WriteIn), from
// the claim order's index. It answers the oldest one's age (NULL when none waits).
const heldScan = `SELECT max(age) FROM (
	(SELECT extract(epoch FROM now() - created_at) AS age FROM outbox
		WHERE fanned_out_at IS NULL AND xid >= ` + horizon + ` ORDER BY xid, id LIMIT 1)
	UNION ALL
	SELECT (SELECT extract(epoch FROM now() - d.event_at) FROM notification_deliveries d
		WHERE d.subscription_uid = u.uid AND d.state = 'pending' AND d.next_attempt_at IS NOT NULL
			AND d.event_xid >= ` + horizon + ` ORDER BY d.event_xid, d.event_seq LIMIT 1)
	FROM unnest($1::text[]) AS u(uid)) held`

// Held answers whether a committed event waits for the horizon (a transaction older than its
// writer's still running), to be fanned out or, written with its deliveries, to be claimed for
// one of the subscriptions uids; and how old the oldest such event is (0 when none): it is
// taken once that transaction ends, which nothing notifies.
func (s *Store) Held(ctx context.Context, uids []string) (bool, time.Duration, error) {
	if uids == nil {
		uids = []string{}
	}
	var age *float64
	if err := s.Pool.QueryRow(ctx, heldScan, uids).Scan(&age); err != nil {
		return false, 0, s.classify(err)
	}
	if age == nil {
		return false, 0, nil
	}
	return true, time.Duration(max(*age, 0) * float64(time.Second)), nil
}

// FanOut gives up to limit events, oldest first, a delivery row for each subscription
// targets names (by uid), and marks them fanned out; an event targets answers not ready for
// is left for a later fan-out. Events another replica is fanning out are skipped. It answers
// how many events it fanned out.
func (s *Store) FanOut(ctx context.Context, limit int, targets func(Unfanned) (uids []string, ready bool)) (int, error) {
	fanned := 0
	err := pgx.BeginFunc(ctx, s.Pool, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, fanOutPlan); err != nil {
			return err
		}
		rows, err := q.Query(ctx, fanOutScan, limit)
		if err != nil {
			return err
		}
		var u Unfanned
		var typ string
		var pending []Unfanned
		if _, err := pgx.ForEachRow(rows, []any{&u.Seq, &u.Organisation, &u.SiteID, &typ, &u.SubscriptionUID, &u.Time}, func() error {
			u.Type = flexv1.EventType(typ)
			pending = append(pending, u)
			return nil
		}); err != nil {
			return err
		}
		var done, seqs []int64
		var subs, orgs, sites []string
		var times []time.Time
		for _, p := range pending {
			uids, ready := targets(p)
			if !ready {
				continue
			}
			done = append(done, p.Seq)
			for _, uid := range uids {
				seqs, subs, orgs, sites = append(seqs, p.Seq), append(subs, uid), append(orgs, p.Organisation), append(sites, p.SiteID)
				times = append(times, p.Time)
			}
		}
		if len(done) == 0 {
			return nil
		}
		if len(seqs) > 0 {
			// Each delivery keeps its event's place in commit-horizon order (event_xid, event_seq).
			if _, err := q.Exec(ctx, `INSERT INTO notification_deliveries (subscription_uid, event_seq, organisation, site_id,
					event_at, event_xid)
				SELECT u.sub, u.seq, u.org, u.site, u.at, o.xid
				FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::timestamptz[]) AS u(sub, seq, org, site, at)
				JOIN outbox o ON o.id = u.seq
				ON CONFLICT DO NOTHING`,
				subs, seqs, orgs, sites, times); err != nil {
				return err
			}
		}
		fanned = len(done)
		_, err = q.Exec(ctx, `UPDATE outbox SET fanned_out_at = now() WHERE id = ANY($1)`, done)
		return err
	})
	return fanned, s.classify(err)
}

// head is the condition that a pending delivery d is its site's next for its subscription:
// no event of the site earlier in commit-horizon order (its writer's transaction id, then its
// sequence) is pending for the subscription, nor waiting to be fanned out. Pings (no site) are
// in no order. Every delivery row is of an event below the horizon when it was fanned out, so
// every earlier event of its site is committed and visible here.
const head = `(d.site_id = '' OR (
	NOT EXISTS (SELECT 1 FROM notification_deliveries e WHERE e.subscription_uid = d.subscription_uid
		AND e.site_id = d.site_id AND e.state = 'pending' AND (e.event_xid, e.event_seq) < (d.event_xid, d.event_seq))
	AND NOT EXISTS (SELECT 1 FROM outbox o WHERE o.organisation = d.organisation AND o.site_id = d.site_id
		AND o.fanned_out_at IS NULL AND (o.xid, o.id) < (d.event_xid, d.event_seq))))`

// belowHorizon is the condition that a delivery d's event was written by a transaction below
// the horizon: every event before it in commit-horizon order is committed and visible. A
// fanned-out delivery always is (FanOut takes only such events); one written with its event
// (WriteIn) waits for it, as the fan-out would have.
const belowHorizon = `d.event_xid < ` + horizon

// dueScan answers, for each subscription, whether a delivery can be claimed now (the first in
// claim order that is due, unleased and its site's head: an index scan that stops at it; a
// scalar subquery, as EXISTS would drop the order and may scan the table) and
// how long until the soonest retry falls due (one probe of the next-attempt index). Neither
// groups or sorts a subscription's pending rows.
const dueScan = `SELECT u.uid,
		coalesce((SELECT true FROM notification_deliveries d
			WHERE d.subscription_uid = u.uid AND d.state = 'pending' AND d.next_attempt_at <= now()
				AND (d.claimed_until IS NULL OR d.claimed_until <= now()) AND ` + belowHorizon + ` AND ` + head + `
			ORDER BY d.event_xid, d.event_seq LIMIT 1), false),
		coalesce((SELECT extract(epoch FROM d.next_attempt_at - now()) FROM notification_deliveries d
			WHERE d.subscription_uid = u.uid AND d.state = 'pending' AND d.next_attempt_at > now()
			ORDER BY d.next_attempt_at LIMIT 1), -1)
	FROM unnest($1::text[]) AS u(uid)`

// Due answers which of the subscriptions uids have a delivery to claim now, and when the
// soonest retry of the others falls due (zero when none waits; a lease that expires is
// found by the deliverer's interval).
func (s *Store) Due(ctx context.Context, uids []string) (due []string, next time.Time, err error) {
	if len(uids) == 0 {
		return nil, time.Time{}, nil
	}
	rows, err := s.Pool.Query(ctx, dueScan, uids)
	if err != nil {
		return nil, time.Time{}, s.classify(err)
	}
	var uid string
	var now bool
	var in float64
	start := time.Now()
	_, err = pgx.ForEachRow(rows, []any{&uid, &now, &in}, func() error {
		if now {
			due = append(due, uid)
		} else if in >= 0 {
			if wait := start.Add(time.Duration(in * float64(time.Second))); next.IsZero() || wait.Before(next) {
				next = wait
			}
		}
		return nil
	})
	return due, next, s.classify(err)
}

// Holder is the session holding the horizon back, as pg_stat_activity shows it (other roles'
// sessions only to a member of pg_read_all_stats: their fields may be empty).
type Holder struct {
	PID             int
	User            string
	ApplicationName string
	State           string
	// Age is how long its transaction has run (0 when not shown).
	Age time.Duration
}

// HorizonHolder finds the oldest transaction with a transaction id still running (the one
// holding the horizon), or a prepared transaction (PID 0, ApplicationName its gid), for the
// deliverer's log; ok is false when none is seen.
func (s *Store) HorizonHolder(ctx context.Context) (h Holder, ok bool, err error) {
	var age float64
	err = s.Pool.QueryRow(ctx, `SELECT pid, coalesce(usename, ''), coalesce(application_name, ''), coalesce(state, ''),
			coalesce(extract(epoch FROM now() - xact_start), 0)
		FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
		UNION ALL
		SELECT 0, owner::text, gid, 'prepared', extract(epoch FROM now() - prepared) FROM pg_prepared_xacts
		ORDER BY 5 DESC LIMIT 1`).Scan(&h.PID, &h.User, &h.ApplicationName, &h.State, &age)
	if errors.Is(err, pgx.ErrNoRows) {
		return Holder{}, false, nil
	}
	h.Age = time.Duration(age * float64(time.Second))
	return h, err == nil, s.classify(err)
}

// Delivery is a claimed delivery: one event for one subscription.
type Delivery struct {
	SubscriptionUID string
	Organisation    string
	Seq             int64
	// Attempts made before this one.
	Attempts int
	Event    events.Event
	// ClaimedAt is when this replica claimed it (set by the deliverer, for its stage timings).
	ClaimedAt time.Time
	// LeasedAt is when the claim was sent (set by the deliverer): the lease runs for at least
	// the lease's length from then.
	LeasedAt time.Time
	// Lease is the lease's end as the claim wrote it (claimed_until): the outcome settles the
	// row only while it is still under this lease (RecordAll).
	Lease time.Time
}

// claimLock makes a subscription's claims, on every replica, take turns (an advisory lock of
// the claim's implicit transaction, keyed by the subscription), and claimScan, the claim
// itself, runs after it in the same transaction, on a snapshot taken once the lock is held: it
// sees every earlier claim of the subscription committed.
//
// Two claims running at once on snapshots taken before each other's commit would lock each
// other's rows: a row claimed (committed) after a claim's snapshot is, at READ COMMITTED, found
// by the claim in its claimed version, locked and only then rechecked and skipped, and the lock
// is held until the claim's statement ends. The outcome of that row, recorded meanwhile, waited
// for the other claim to end (seen in a burst's rounds: a record's UPDATE waiting 0.35 to
// 0.8 s on a claim that returned none of its rows), and with it every worker whose outcome
// queued behind (docs/notifications.md, "How it works").
const claimLock = `SELECT pg_advisory_xact_lock(hashtextextended($1, 50))`

const claimScan = `WITH due AS (
		SELECT d.subscription_uid, d.event_seq FROM notification_deliveries d
		WHERE d.subscription_uid = $1 AND d.state = 'pending' AND d.next_attempt_at <= now()
			AND (d.claimed_until IS NULL OR d.claimed_until <= now()) AND ` + belowHorizon + ` AND ` + head + `
		ORDER BY d.event_xid, d.event_seq LIMIT $2 FOR UPDATE OF d SKIP LOCKED)
	UPDATE notification_deliveries d SET claimed_until = now() + $3::bigint * interval '1 millisecond'
	FROM due, outbox o
	WHERE d.subscription_uid = due.subscription_uid AND d.event_seq = due.event_seq AND o.id = d.event_seq
	RETURNING d.event_seq, d.attempts, d.organisation, o.event_id, o.event_type, o.site_id, o.payload::text, o.created_at,
		d.claimed_until`

// Claim leases up to n of a subscription's due deliveries (each the head of its site), in
// commit-horizon order, for lease: until it ends no other worker claims them. The
// subscription's claims take turns (claimLock), in one round trip each: the lock and the
// claim are sent together.
func (s *Store) Claim(ctx context.Context, uid string, n int, lease time.Duration) ([]Delivery, error) {
	b := &pgx.Batch{}
	b.Queue(claimLock, uid)
	b.Queue(claimScan, uid, n, lease.Milliseconds())
	br := s.Pool.SendBatch(ctx, b)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return nil, s.classify(err)
	}
	rows, err := br.Query()
	if err != nil {
		_ = br.Close()
		return nil, s.classify(err)
	}
	var out []Delivery
	var d Delivery
	var typ string
	_, err = pgx.ForEachRow(rows, []any{&d.Seq, &d.Attempts, &d.Organisation, &d.Event.ID, &typ, &d.Event.SiteID,
		&d.Event.Data, &d.Event.Time, &d.Lease}, func() error {
		d.SubscriptionUID, d.Event.Type, d.Event.Time = uid, flexv1.EventType(typ), d.Event.Time.UTC()
		out = append(out, d)
		return nil
	})
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, s.classify(err)
	}
	// Within a site, in order: each claim takes only a site's head.
	return out, nil
}

// Result is what became of an attempt.
type Result string

// The results of an attempt.
const (
	// Delivered: the receiver answered 2xx.
	Delivered Result = "delivered"
	// Failed: tried again after Retry.
	Failed Result = "failed"
	// GivenUp: failed past the retry horizon; kept, marked, counted.
	GivenUp Result = "given_up"
	// Gone: the receiver answered 410 Gone (the subscription is paused); the event is settled.
	Gone Result = "gone"
	// SecretMissing: the signing secret could not be read; tried again after Retry.
	SecretMissing Result = "secret_missing"
	// NotAttempted: nothing was sent (a new subscription's Secret is waited for); the claim is
	// released until Retry.
	NotAttempted Result = "not_attempted"
)

// Outcome is an attempt's outcome.
type Outcome struct {
	Result     Result
	At         time.Time
	StatusCode int
	Error      string
	Latency    time.Duration
	// Retry is the wait before the next attempt (Failed, SecretMissing, NotAttempted).
	Retry time.Duration
}

// Record settles a claimed delivery with its outcome, logs the attempt and counts it, in one
// SQL transaction (RecordAll of one).
func (s *Store) Record(ctx context.Context, d Delivery, o Outcome) error {
	return s.RecordAll(ctx, []Settled{{Delivery: d, Outcome: o}})
}

// Settled is a claimed delivery and its outcome.
type Settled struct {
	Delivery Delivery
	Outcome  Outcome
}

// RecordAll settles claimed deliveries with their outcomes (in the order they were attempted),
// logs the attempts and counts them, in one SQL transaction sent in one round trip: a burst to one subscription costs
// one commit, one write of the subscription's counts and one trim of its log per batch, not
// per delivery (each commit waits for the previous one's flush, and every worker's commit
// would queue on the subscription's one counts row). A delivery settled already (its lease
// expired and another worker delivered it), or claimed again since (its lease expired before
// this outcome came: the new claim's holder posts it again and records that), is left as it
// is; the attempt is logged all the same. Settling a row another claim holds would let its
// site's next event be claimed and posted before that claim's post of it, out of order.
func (s *Store) RecordAll(ctx context.Context, batch []Settled) error {
	if len(batch) == 0 {
		return nil
	}
	n := len(batch)
	subs, seqs, states, leases := make([]string, 0, n), make([]int64, 0, n), make([]string, 0, n), make([]time.Time, 0, n)
	attempted, retries := make([]int32, 0, n), make([]int64, 0, n)
	var logged []Settled
	stats := map[string]*statsDelta{}
	var uids []string
	for _, r := range batch {
		d, o := r.Delivery, r.Outcome
		state, tried := "pending", int32(1)
		switch o.Result {
		case NotAttempted:
			tried = 0
		case Failed, SecretMissing:
		case Delivered:
			state = "delivered"
		default:
			state = "given_up"
		}
		subs, seqs, states, leases = append(subs, d.SubscriptionUID), append(seqs, d.Seq), append(states, state),
			append(leases, d.Lease)
		attempted, retries = append(attempted, tried), append(retries, o.Retry.Milliseconds())
		if o.Result == NotAttempted {
			continue // nothing was sent: no attempt to log or count
		}
		logged = append(logged, r)
		st := stats[d.SubscriptionUID]
		if st == nil {
			st = &statsDelta{organisation: d.Organisation}
			stats[d.SubscriptionUID] = st
			uids = append(uids, d.SubscriptionUID)
		}
		st.add(o)
	}
	// The counts rows in one order, so that two replicas' batches never wait on each other
	// crosswise.
	slices.Sort(uids)
	// Every statement in one round trip, run as one implicit transaction (a batch): all of
	// them or none.
	b := &pgx.Batch{}
	b.Queue(`UPDATE notification_deliveries d SET claimed_until = NULL,
			attempts = d.attempts + u.attempted, state = u.state,
			next_attempt_at = CASE WHEN u.state = 'pending' THEN now() + u.retry_ms * interval '1 millisecond'
				ELSE d.next_attempt_at END,
			done_at = CASE WHEN u.state = 'pending' THEN NULL ELSE now() END
		FROM unnest($1::text[], $2::bigint[], $3::text[], $4::integer[], $5::bigint[], $6::timestamptz[])
			AS u(subscription_uid, event_seq, state, attempted, retry_ms, lease)
		WHERE d.subscription_uid = u.subscription_uid AND d.event_seq = u.event_seq AND d.state = 'pending'
			AND d.claimed_until = u.lease`,
		subs, seqs, states, attempted, retries, leases)
	if len(logged) > 0 {
		queueAttempts(b, logged)
	}
	for _, uid := range uids { // the subscriptions of the attempts logged
		b.Queue(`DELETE FROM notification_attempts WHERE subscription_uid = $1 AND id <= (
			SELECT id FROM notification_attempts WHERE subscription_uid = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`,
			uid, keptAttempts)
		st := stats[uid]
		last := st.last
		var code *int
		if last.StatusCode != 0 {
			code = &last.StatusCode
		}
		var msg *string
		if last.Error != "" {
			msg = &last.Error
		}
		b.Queue(`INSERT INTO notification_subscriptions AS s (subscription_uid, organisation, delivered,
				failed_attempts, given_up, consecutive_failures, last_outcome, last_at, last_status, last_latency_ms, last_error)
			VALUES ($1, $2, $3, $4, $5, $6, $8, $9, $10, $11, $12)
			ON CONFLICT (subscription_uid) DO UPDATE SET delivered = s.delivered + $3,
				failed_attempts = s.failed_attempts + $4, given_up = s.given_up + $5,
				consecutive_failures = CASE WHEN $7 THEN 0 ELSE s.consecutive_failures END + $6,
				last_outcome = $8, last_at = $9, last_status = $10, last_latency_ms = $11, last_error = $12`,
			uid, st.organisation, st.delivered, st.failed, st.givenUp, st.failuresSinceDelivered, st.delivered > 0,
			string(last.Result), last.At.UTC(), code, last.Latency.Milliseconds(), msg)
	}
	return s.classify(s.Pool.SendBatch(ctx, b).Close())
}

// statsDelta is what a batch adds to one subscription's counts.
type statsDelta struct {
	organisation               string
	delivered, failed, givenUp int64
	// failuresSinceDelivered are the failures after the batch's last delivery (all of them
	// when none was delivered): the consecutive failures start again from them.
	failuresSinceDelivered int32
	last                   Outcome
}

// add counts an attempt: every attempt not delivered is a failed one (given up and 410 Gone
// too); given up is counted besides.
func (st *statsDelta) add(o Outcome) {
	st.last = o
	if o.Result == Delivered {
		st.delivered++
		st.failuresSinceDelivered = 0
		return
	}
	st.failed++
	st.failuresSinceDelivered++
	if o.Result == GivenUp {
		st.givenUp++
	}
}

// queueAttempts queues the insert of the attempts, one statement, in the batch's order (their
// ids follow it).
func queueAttempts(b *pgx.Batch, logged []Settled) {
	n := len(logged)
	subs, orgs, ids, types := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	attempts, latencies, ats := make([]int32, n), make([]int64, n), make([]time.Time, n)
	codes, msgs := make([]*int32, n), make([]*string, n)
	for i, r := range logged {
		d, o := r.Delivery, r.Outcome
		subs[i], orgs[i], ids[i], types[i] = d.SubscriptionUID, d.Organisation, d.Event.ID, string(d.Event.Type)
		attempts[i], latencies[i], ats[i] = int32(min(d.Attempts+1, 1<<30)), o.Latency.Milliseconds(), o.At.UTC() //nolint:gosec // bounded
		if o.StatusCode != 0 {
			code := int32(o.StatusCode) //nolint:gosec // an HTTP status
			codes[i] = &code
		}
		if o.Error != "" {
			msgs[i] = &o.Error
		}
	}
	b.Queue(`INSERT INTO notification_attempts (subscription_uid, organisation, event_id, event_type, attempt,
			status_code, error, at, latency_ms)
		SELECT subscription_uid, organisation, event_id, event_type, attempt, status_code, error, at, latency_ms
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::integer[], $6::integer[], $7::text[],
			$8::timestamptz[], $9::bigint[]) WITH ORDINALITY
			AS a(subscription_uid, organisation, event_id, event_type, attempt, status_code, error, at, latency_ms, n)
		ORDER BY n`, subs, orgs, ids, types, attempts, codes, msgs, ats, latencies)
}

// Attempt is one logged attempt.
type Attempt struct {
	EventID    string
	Type       flexv1.EventType
	Attempt    int
	StatusCode int
	Error      string
	At         time.Time
	Latency    time.Duration
}

// Attempts are a subscription's most recent attempts (at most limit), newest first.
func (s *Store) Attempts(ctx context.Context, uid string, limit int) ([]Attempt, error) {
	rows, err := s.Pool.Query(ctx, `SELECT event_id, event_type, attempt, coalesce(status_code, 0), coalesce(error, ''), at,
		latency_ms FROM notification_attempts WHERE subscription_uid = $1 ORDER BY id DESC LIMIT $2`, uid, limit)
	if err != nil {
		return nil, s.classify(err)
	}
	var out []Attempt
	var a Attempt
	var typ string
	var ms int64
	_, err = pgx.ForEachRow(rows, []any{&a.EventID, &typ, &a.Attempt, &a.StatusCode, &a.Error, &a.At, &ms}, func() error {
		a.Type, a.Latency, a.At = flexv1.EventType(typ), time.Duration(ms)*time.Millisecond, a.At.UTC()
		out = append(out, a)
		return nil
	})
	return out, s.classify(err)
}

// Stats are a subscription's counts and last outcome.
type Stats struct {
	Delivered, FailedAttempts, GivenUp int64
	ConsecutiveFailures                int32
	// Last is the last attempt's outcome ("" when none was made).
	Last        Result
	LastAt      time.Time
	LastStatus  int
	LastLatency time.Duration
	LastError   string
}

// StatsOf reads a subscription's counts (zero before its first attempt).
func (s *Store) StatsOf(ctx context.Context, uid string) (Stats, error) {
	var st Stats
	var last string
	var ms int64
	err := s.Pool.QueryRow(ctx, `SELECT delivered, failed_attempts, given_up, consecutive_failures, coalesce(last_outcome, ''),
		coalesce(last_at, 'epoch'), coalesce(last_status, 0), coalesce(last_latency_ms, 0), coalesce(last_error, '')
		FROM notification_subscriptions WHERE subscription_uid = $1`, uid).Scan(&st.Delivered, &st.FailedAttempts,
		&st.GivenUp, &st.ConsecutiveFailures, &last, &st.LastAt, &st.LastStatus, &ms, &st.LastError)
	if errors.Is(err, pgx.ErrNoRows) {
		return Stats{}, nil
	}
	st.Last, st.LastLatency, st.LastAt = Result(last), time.Duration(ms)*time.Millisecond, st.LastAt.UTC()
	return st, s.classify(err)
}

// Forget removes what the outbox keeps for a deleted subscription: its deliveries, attempts
// and counts.
func (s *Store) Forget(ctx context.Context, uid string) error {
	return s.classify(pgx.BeginFunc(ctx, s.Pool, func(q pgx.Tx) error {
		for _, stmt := range []string{`DELETE FROM notification_deliveries WHERE subscription_uid = $1`,
			`DELETE FROM notification_attempts WHERE subscription_uid = $1`,
			`DELETE FROM notification_subscriptions WHERE subscription_uid = $1`} {
			if _, err := q.Exec(ctx, stmt, uid); err != nil {
				return err
			}
		}
		return nil
	}))
}

// ForgetUnknown deletes the pending deliveries of subscriptions not in known whose events are
// older than age (those of a subscription deleted while no deliverer saw it go).
func (s *Store) ForgetUnknown(ctx context.Context, known []string, age time.Duration) error {
	_, err := s.Pool.Exec(ctx, `DELETE FROM notification_deliveries WHERE state = 'pending'
		AND event_at < now() - $2::bigint * interval '1 millisecond' AND NOT (subscription_uid = ANY($1))`,
		known, age.Milliseconds())
	return s.classify(err)
}

// Backlog is how many deliveries are pending and how old the oldest one's event is.
func (s *Store) Backlog(ctx context.Context) (pending int64, oldest time.Duration, err error) {
	var age float64
	err = s.Pool.QueryRow(ctx, `SELECT count(*), coalesce(extract(epoch FROM now() - min(o.created_at)), 0)
		FROM notification_deliveries d JOIN outbox o ON o.id = d.event_seq WHERE d.state = 'pending'`).Scan(&pending, &age)
	return pending, time.Duration(age * float64(time.Second)), s.classify(err)
}

// Cleanup deletes what nobody needs any more: events fanned out longer than retention ago
// with no delivery pending (their delivery rows go with them), and reported digests older
// than retention (a redone reconcile comes within moments, not days).
func (s *Store) Cleanup(ctx context.Context, retention time.Duration) error {
	ms := retention.Milliseconds()
	_, err := s.Pool.Exec(ctx, `DELETE FROM outbox o WHERE o.fanned_out_at < now() - $1::bigint * interval '1 millisecond'
		AND NOT EXISTS (SELECT 1 FROM notification_deliveries d WHERE d.event_seq = o.id AND d.state = 'pending')`, ms)
	if err == nil {
		_, err = s.Pool.Exec(ctx, `DELETE FROM notification_reported WHERE reported_at < now() - $1::bigint * interval '1 millisecond'`, ms)
	}
	return s.classify(err)
}

// classify is db.ClassifyOn the store's pool.
func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// Listen calls wake on every insert into the outbox or its deliveries (Channel), and once
// each time it starts listening (on its first connection and after a lost one, for what was
// missed), until ctx ends. It holds one connection of the pool.
func (s *Store) Listen(ctx context.Context, wake func()) {
	db.Watch(ctx, s.Pool, Channel, func(bool) { wake() }, func(string) { wake() }, nil)
}
