package vtn_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// The bound of a client's reports of an event counts the event's dispatch, however the report
// spells its eventID: a spelling uuid.Parse takes (upper case, without hyphens, in braces, as a
// URN) names the same dispatch and is counted with it, so it is no way past the bound.
func TestReportBoundCountsTheDispatchHoweverItIsSpelt(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, _, c := reporting(t, g)
	event := c.issue(t, g, "fe-spelt")
	for range vtn.MaxReportsPerEvent {
		_, err := s.CreateReport(ctx, c.p, c.report(event, "NORMAL"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, spelt := range []string{strings.ToUpper(event.String()), strings.ReplaceAll(event.String(), "-", ""),
		"{" + event.String() + "}", "urn:uuid:" + event.String()} {
		in := c.report(event, "NORMAL")
		in.EventID = spelt
		_, err := s.CreateReport(ctx, c.p, in)
		g.Expect(kindOf(err)).To(Equal(app.Conflict), "%s: %v", spelt, err)
		g.Expect(err.Error()).To(ContainSubstring("reports of the event, the most it may"))
	}
	var kept int
	g.Expect(database.Pool.QueryRow(ctx, `SELECT count(*) FROM openadr_reports WHERE organisation = $1 AND client_name = $2`,
		c.ns, c.p.ClientName).Scan(&kept)).To(Succeed())
	g.Expect(kept).To(Equal(vtn.MaxReportsPerEvent))
}

// oldReportSQL is the previous version's counted insert of a report (migration 00031's
// function in its condition, no counted column), as its replicas still send it during a
// rolling update.
const oldReportSQL = `INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id,
		report_client_name, report_name, body, created_at, modified_at)
		SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $9 WHERE openadr_report_room($1, $3, $5, $10) RETURNING 1`

// oldJoinedSQL is the previous version's statement that joins a report to the status it says
// (the dispatch's status compared and set, the report inserted when the gate, its function,
// lets it), as its replicas still send it during a rolling update.
const oldJoinedSQL = `
WITH k AS MATERIALIZED (
	SELECT organisation, asset_id, status, flex_event, from_time, proposition FROM dispatches
	WHERE organisation = $1 AND event_id = $2),
cur AS (
	SELECT status, flex_event, from_time, COALESCE((openadr_report_room($13, $15, $17, $22)) AND ($12::text IS NULL OR d.proposition = $12), false) AS open,
		CASE WHEN from_time > $6 THEN $4::text ELSE $10::text END AS to_status,
		CASE WHEN from_time > $6 THEN $8::text[] ELSE $11::text[] END AS follows
	FROM k d WHERE asset_id = $3),
u AS (
	UPDATE dispatches d SET status = cur.to_status, updated_at = $6 FROM cur
	WHERE d.organisation = $1 AND d.event_id = $2 AND d.status = cur.status AND cur.status = ANY(cur.follows)
		AND (cur.to_status <> 'executed' OR cur.from_time <= $9::timestamptz) AND cur.open
	RETURNING d.event_id),
c AS (
	INSERT INTO dispatch_status_changes (organisation, event_id, status, reported_at, recorded_at, recorded_by)
	SELECT $1, $2, cur.to_status, $5, $6, $7 FROM u, cur),
takes AS (
	SELECT 1 FROM cur WHERE cur.open AND (cur.to_status IS NULL OR cur.status = cur.to_status OR EXISTS (SELECT 1 FROM u))),
w AS (INSERT INTO openadr_reports (organisation, id, client_name, program_id, event_id, report_client_name,
		report_name, body, created_at, modified_at)
		SELECT $13, $14, $15, $16, $17, $18, $19, $20, $21, $21 FROM takes)
SELECT cur.status, (SELECT count(*) FROM u), cur.open FROM cur`

// During a rolling update the previous version's replicas check the bound with their function
// and insert reports without counting them: the function checks the count this version keeps
// on the dispatch's row (under its lock), and what they insert, delete or move is counted, so
// the bound is the same exact one whichever version takes a report. A deleted report frees its
// place; a moved one takes its place with it.
func TestReportBoundAcrossARollingUpdate(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, _, c := reporting(t, g)
	event, other := c.issue(t, g, "fe-rolling"), c.issue(t, g, "fe-rolling-other")
	const bound = 3
	report := func(e uuid.UUID) vtnstore.Report {
		now := time.Now()
		return vtnstore.Report{ID: uuid.New(), ClientName: c.p.ClientName, ProgramID: "limited_pause", EventID: e.String(),
			ReportClientName: "v", Body: json.RawMessage(`{}`), Created: now, Modified: now}
	}
	// old inserts a report as the previous version did: answers whether its function let it.
	old := func(e uuid.UUID) (uuid.UUID, bool) {
		r := report(e)
		var one int
		err := database.Pool.QueryRow(ctx, oldReportSQL, c.ns, r.ID, r.ClientName, r.ProgramID, r.EventID,
			r.ReportClientName, nil, r.Body, r.Created, bound).Scan(&one)
		if err == pgx.ErrNoRows {
			return r.ID, false
		}
		g.Expect(err).NotTo(HaveOccurred())
		return r.ID, true
	}
	// oldJoined reports ACCEPTED of e as the previous version's joined statement does: answers
	// whether its gate let the report in, and whether the status changed.
	oldJoined := func(e uuid.UUID) []any {
		r := report(e)
		now := time.Now().UTC()
		follows := []string{"requested", "received"}
		var from string
		var open bool
		var changed int
		g.Expect(database.Pool.QueryRow(ctx, oldJoinedSQL, c.ns, e, c.asset, "accepted", now, now, c.p.Username, follows,
			nil, "accepted", follows, nil, c.ns, r.ID, r.ClientName, r.ProgramID, r.EventID, r.ReportClientName, nil, r.Body,
			now, bound).Scan(&from, &changed, &open)).To(Succeed())
		return []any{open, changed}
	}
	count := func(e uuid.UUID) int {
		n, err := s.Store.CountReports(ctx, c.ns, c.p.ClientName, e.String(), 100)
		g.Expect(err).NotTo(HaveOccurred())
		return n
	}

	g.Expect(s.Store.CreateReport(ctx, c.ns, report(event), bound, nil)).To(Succeed())
	first, took := old(event)
	g.Expect(took).To(BeTrue())
	g.Expect(count(event)).To(Equal(2))
	g.Expect(s.Store.CreateReport(ctx, c.ns, report(event), bound, nil)).To(Succeed())
	_, took = old(event)
	g.Expect(took).To(BeFalse(), "the previous version's function let a report past the bound")
	g.Expect(s.Store.CreateReport(ctx, c.ns, report(event), bound, nil)).To(MatchError(vtnstore.ErrFull))

	// Deleted as the previous version deletes: a place is free, for either version.
	_, err := database.Pool.Exec(ctx, `DELETE FROM openadr_reports WHERE organisation = $1 AND id = $2`, c.ns, first)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(count(event)).To(Equal(2))
	_, took = old(event)
	g.Expect(took).To(BeTrue())
	g.Expect(count(event)).To(Equal(3))

	// Moved to another event (as an update of the report does): counted there, not here.
	moved, took := old(other)
	g.Expect(took).To(BeTrue())
	_, err = database.Pool.Exec(ctx, `UPDATE openadr_reports SET event_id = $3 WHERE organisation = $1 AND id = $2`,
		c.ns, moved, strings.ToUpper(event.String()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{count(event), count(other)}).To(Equal([]int{4, 0}))
	_, err = database.Pool.Exec(ctx, `UPDATE openadr_reports SET event_id = $3 WHERE organisation = $1 AND id = $2`,
		c.ns, moved, other.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect([]int{count(event), count(other)}).To(Equal([]int{3, 1}))

	var rows int
	g.Expect(database.Pool.QueryRow(ctx, `SELECT count(*) FROM openadr_reports WHERE organisation = $1 AND event_id = $2`,
		c.ns, event.String()).Scan(&rows)).To(Succeed())
	g.Expect(rows).To(Equal(count(event)))

	// The previous version's joined statement: its function locks the dispatch's row its own
	// update then writes; what it inserts is counted, and it is refused at the bound.
	joined := c.issue(t, g, "fe-rolling-joined")
	g.Expect(oldJoined(joined)).To(Equal([]any{true, 1}))
	g.Expect(s.Store.CreateReport(ctx, c.ns, report(joined), bound, nil)).To(Succeed())
	g.Expect(oldJoined(joined)).To(Equal([]any{true, 0}))
	g.Expect(count(joined)).To(Equal(3))
	g.Expect(oldJoined(joined)).To(Equal([]any{false, 0}))
	g.Expect(c.written(t, g, joined)).To(Equal([]any{3, 2, "accepted"}))
}

// A report moved to another event by its replacement takes a place of its client's there: to
// an event whose dispatch the client keeps the most reports of, it is refused as a new report
// there would be (409), before it takes effect, and stays where it was; with a place free, it
// moves and its place with it.
func TestReportMovedToAFullEventIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, _, c := reporting(t, g)
	full, from := c.issue(t, g, "fe-move-full"), c.issue(t, g, "fe-move-from")
	var last vtn.Report
	for range vtn.MaxReportsPerEvent {
		var err error
		last, err = s.CreateReport(ctx, c.p, c.report(full, "NORMAL"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	moving, err := s.CreateReport(ctx, c.p, c.report(from, "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	before := []any{c.written(t, g, full), c.written(t, g, from)}
	_, err = s.UpdateReport(ctx, c.p, moving.ID.String(), c.report(full, "ERROR"))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("reports of the event, the most it may"))
	g.Expect([]any{c.written(t, g, full), c.written(t, g, from)}).To(Equal(before))
	kept, err := s.Report(ctx, c.p, moving.ID.String())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept.EventID).To(Equal(from.String()))

	_, err = s.DeleteReport(ctx, c.p, last.ID.String())
	g.Expect(err).NotTo(HaveOccurred())
	moved, err := s.UpdateReport(ctx, c.p, moving.ID.String(), c.report(full, "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.EventID).To(Equal(full.String()))
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, full.String(), 1000)).To(Equal(vtn.MaxReportsPerEvent))
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, from.String(), 1000)).To(Equal(0))
	_, err = s.CreateReport(ctx, c.p, c.report(full, "NORMAL"))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
}

// Reports of one event by one client at once are counted one after the other under the
// dispatch row's lock: exactly the bound of them are taken, the others refused as full,
// whichever statement takes them (the status joined, or the report alone), none lost to a race.
func TestReportBoundHoldsUnderConcurrentReports(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, _, c := reporting(t, g)
	s := vtn.New(svc.Households, &vtnstore.Store{Pool: database.Pool})
	s.Dispatches = dispatches.New(svc.Households, &dispatchstore.Store{Pool: database.Pool})
	event := c.issue(t, g, "fe-concurrent")
	const bound, senders = 4, 24
	statement := dispatchstore.NewJoinedStatement(vtnstore.ReportJoinSQL(true))
	var wg sync.WaitGroup
	errs := make([]error, senders)
	for i := range senders {
		wg.Go(func() {
			now := time.Now()
			r := vtnstore.Report{ID: uuid.New(), ClientName: c.p.ClientName, ProgramID: "limited_pause",
				EventID: event.String(), ReportClientName: "v", Body: json.RawMessage(`{}`), Created: now, Modified: now}
			if i%2 == 0 {
				errs[i] = s.Store.CreateReport(ctx, c.ns, r, bound, nil)
				return
			}
			_, _, errs[i] = s.Dispatches.CallbackJoined(ctx, database.Pool, c.p, dispatches.CallbackInput{Asset: c.asset,
				EventID: event.String(), Status: dispatch.Accepted, At: now},
				dispatchstore.Joined{Statement: statement, Args: vtnstore.ReportJoin(c.ns, r, bound)})
		})
	}
	wg.Wait()
	taken := 0
	for _, err := range errs {
		switch {
		case err == nil:
			taken++
		case errors.Is(err, vtnstore.ErrFull), errors.Is(err, dispatchstore.ErrClosed):
		default:
			t.Errorf("a report neither taken nor refused as full: %v", err)
		}
	}
	g.Expect(taken).To(Equal(bound))
	g.Expect(c.written(t, g, event)).To(Equal([]any{bound, 2, "accepted"}))
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, event.String(), 100)).To(Equal(bound))
}
