package vtn_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/vtnstore"
)

// statements counts what a pool sends PostgreSQL under a counted context, one a round trip:
// each statement sent on its own (BEGIN and COMMIT included), and each batch once, whatever it
// holds. (The NOTIFY that follows a change, sent later on its own context, is not counted.)
type statements struct {
	n       atomic.Int64
	inBatch atomic.Bool
}

type countedKey struct{}

func counted(ctx context.Context) context.Context { return context.WithValue(ctx, countedKey{}, true) }

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	if ctx.Value(countedKey{}) != nil && !s.inBatch.Load() {
		s.n.Add(1)
	}
	return ctx
}
func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (s *statements) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	if ctx.Value(countedKey{}) != nil {
		s.n.Add(1)
	}
	s.inBatch.Store(true)
	return ctx
}
func (s *statements) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (s *statements) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {
	s.inBatch.Store(false)
}

// reporting is a VTN service on a pool of one connection whose round trips are counted, a VEN
// client c of organisation ns holding asset id, and issue, which issues a dispatch of it whose
// window starts in an hour.
func reporting(t *testing.T, g *WithT) (s *vtn.Service, trips *statements, c *vtnstoreClient) {
	t.Helper()
	ctx := t.Context()
	cfg := database.Pool.Config()
	cfg.MaxConns, cfg.MinConns = 1, 0
	trips = &statements{}
	cfg.ConnConfig.Tracer = trips
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(pool.Close)
	s = vtn.New(svc.Households, &vtnstore.Store{Pool: pool})
	ds := &dispatchstore.Store{Pool: pool}
	s.Dispatches = dispatches.New(svc.Households, ds)

	ns := testenv.SharedNamespace(t, env)
	id := "charger-" + uuid.NewString()[:8]
	asset(t, g, ns, id)
	p := client(ns, "ven-"+id, false)
	v, err := s.CreateVEN(ctx, p, vtn.VENInput{Name: "v"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.CreateResource(ctx, p, v.ID.String(), vtn.ResourceInput{Name: id})
	g.Expect(err).NotTo(HaveOccurred())
	return s, trips, &vtnstoreClient{p: p, ns: ns, asset: id, store: ds}
}

type vtnstoreClient struct {
	p         *auth.Principal
	ns, asset string
	store     *dispatchstore.Store
}

// issue issues a dispatch of the client's asset for flex event fe of the limited_pause
// proposition, its window starting in an hour, and answers its event id.
func (c *vtnstoreClient) issue(t *testing.T, g *WithT, fe string) uuid.UUID {
	return c.issueAt(t, g, fe, "limited_pause", time.Now().Add(time.Hour))
}

// issueAt issues a dispatch of the client's asset for flex event fe of proposition (empty: a
// dispatch issued before dispatches kept theirs), its window starting at from.
func (c *vtnstoreClient) issueAt(t *testing.T, g *WithT, fe, proposition string, from time.Time) uuid.UUID {
	t.Helper()
	now := time.Now()
	_, err := c.store.Issue(t.Context(), c.ns, "https://flexsite.example", []dispatchstore.Dispatch{{FlexEvent: fe,
		SiteID: "site-" + c.asset, AssetID: c.asset, MarketID: "limited_pause", Proposition: proposition, LevelKW: 1,
		From: from, To: from.Add(time.Hour), EventTimestamp: now}}, nil, now)
	g.Expect(err).NotTo(HaveOccurred())
	return dispatch.EventID(c.ns, fe, c.asset)
}

// written is what the organisation's tables hold of the client's reports and an event: the
// reports, the dispatch's status and its history rows.
func (c *vtnstoreClient) written(t *testing.T, g *WithT, event uuid.UUID) []any {
	t.Helper()
	var reports, changes int
	var status string
	g.Expect(database.Pool.QueryRow(t.Context(), `SELECT (SELECT count(*) FROM openadr_reports WHERE organisation = $1
		AND event_id = $2), (SELECT count(*) FROM dispatch_status_changes WHERE organisation = $1 AND event_id = $3),
		(SELECT status FROM dispatches WHERE organisation = $1 AND event_id = $3)`, c.ns, event.String(), event).
		Scan(&reports, &changes, &status)).To(Succeed())
	return []any{reports, changes, status}
}

func (c *vtnstoreClient) report(event uuid.UUID, state string) vtn.ReportInput {
	return vtn.ReportInput{ProgramID: "limited_pause", EventID: event.String(), ClientName: "v",
		Body: json.RawMessage(`{}`), Resources: []vtn.ReportedResource{{Name: c.asset,
			States: []vtn.ReportedState{{State: state, Loc: []any{"body"}}}}}}
}

// A VEN's report that says ACCEPTED before the window takes one round trip to PostgreSQL: one
// statement reads the dispatch, who holds its asset and its program, takes the bound's lock,
// counts the client's reports, writes the status change and the report, in one implicit
// transaction (docs/openadr.md, "Reports").
func TestReportTakesEffectInOneRoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, trips, c := reporting(t, g)
	// The pool's statements are prepared on first use: a first report warms them.
	_, err := s.CreateReport(ctx, c.p, c.report(c.issue(t, g, "fe-warm"), "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())

	event := c.issue(t, g, "fe-1")
	_, err = s.CreateReport(counted(ctx), c.p, c.report(event, "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(trips.n.Load()).To(BeNumerically("==", 1))
	d, err := c.store.Of(ctx, c.ns, event)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Status).To(Equal(dispatch.Accepted))
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, event.String(), 10)).To(Equal(1))

	// The same again changes nothing and is kept.
	_, err = s.CreateReport(ctx, c.p, c.report(event, "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, event.String(), 10)).To(Equal(2))
}

// The status change and the report joined to it commit together or not at all: a status the
// state machine refuses writes no report, and a report past the bound no status.
func TestJoinedReportAndStatusAllOrNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, _, c := reporting(t, g)
	event := c.issue(t, g, "fe-1")
	_, err := s.Dispatches.Callback(ctx, c.p, dispatches.CallbackInput{Asset: c.asset, EventID: event.String(),
		Status: dispatch.Rejected, At: time.Now()})
	g.Expect(err).NotTo(HaveOccurred())

	now := time.Now()
	r := vtnstore.Report{ID: uuid.New(), ClientName: c.p.ClientName, ProgramID: "limited_pause", EventID: event.String(),
		ReportClientName: "v", Body: json.RawMessage(`{}`), Created: now, Modified: now}
	joined := func(max int) dispatchstore.Joined {
		return dispatchstore.Joined{Statement: dispatchstore.NewJoinedStatement(vtnstore.ReportJoinSQL(false)),
			Args: vtnstore.ReportJoin(c.ns, r, max)}
	}
	// ACCEPTED after REJECTED: refused, no report.
	_, _, err = s.Dispatches.CallbackJoined(ctx, s.Store.Pool, c.p, dispatches.CallbackInput{
		Asset: c.asset, EventID: event.String(), Status: dispatch.Accepted, At: now}, joined(10))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, event.String(), 10)).To(Equal(0))

	// A second dispatch, and no room for the report: the gate closes, ACCEPTED is not written.
	other := c.issue(t, g, "fe-2")
	r.EventID = other.String()
	_, _, err = s.Dispatches.CallbackJoined(ctx, s.Store.Pool, c.p, dispatches.CallbackInput{
		Asset: c.asset, EventID: other.String(), Status: dispatch.Accepted, At: now}, joined(0))
	g.Expect(err).To(MatchError(dispatchstore.ErrClosed))
	d, err := c.store.Of(ctx, c.ns, other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Status).To(Equal(dispatch.Requested))

	// With room: both.
	_, done, err := s.Dispatches.CallbackJoined(ctx, s.Store.Pool, c.p, dispatches.CallbackInput{
		Asset: c.asset, EventID: other.String(), Status: dispatch.Accepted, At: now}, joined(1))
	g.Expect(err).NotTo(HaveOccurred())
	done()
	d, err = c.store.Of(ctx, c.ns, other)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Status).To(Equal(dispatch.Accepted))
	g.Expect(s.Store.CountReports(ctx, c.ns, c.p.ClientName, other.String(), 10)).To(Equal(1))
}

// A report of a started window is judged by it in the same one statement: curtailed is
// EXECUTED; a normal state says nothing and is kept, the dispatch left as it is.
func TestReportOfAStartedWindowInOneRoundTrip(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, trips, c := reporting(t, g)
	_, err := s.CreateReport(ctx, c.p, c.report(c.issue(t, g, "fe-warm"), "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	started := time.Now().Add(-10 * time.Minute)

	running := c.issueAt(t, g, "fe-running", "limited_pause", started)
	_, err = s.CreateReport(counted(ctx), c.p, c.report(running, "RUNNING_CURTAILED"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.written(t, g, running)).To(Equal([]any{1, 2, "executed"}))
	normal := c.issueAt(t, g, "fe-normal", "limited_pause", started)
	_, err = s.CreateReport(counted(ctx), c.p, c.report(normal, "RUNNING_NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.written(t, g, normal)).To(Equal([]any{1, 1, "requested"}))
	g.Expect(trips.n.Load()).To(BeNumerically("==", 2))
}

// What the one statement does not take is judged and answered as before it, and nothing of
// it is written: another client's dispatch, another resource, a step the state machine
// refuses, a full event. A dispatch issued before dispatches kept their proposition, or a
// program its flex event (gone from the cache) cannot refuse, is judged and taken as before.
func TestReportNotTakenInOneStatementIsJudged(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	s, _, c := reporting(t, g)
	other := client(c.ns, "ven-other", false)
	_, err := s.CreateVEN(ctx, other, vtn.VENInput{Name: "other"})
	g.Expect(err).NotTo(HaveOccurred())

	event := c.issue(t, g, "fe-1")
	before := c.written(t, g, event)
	_, err = s.CreateReport(ctx, other, c.report(event, "NORMAL"))
	g.Expect(err).To(MatchError(vtn.ErrReportedEventNotFound))
	in := c.report(event, "NORMAL")
	in.Resources[0].Name = "another-asset"
	_, err = s.CreateReport(ctx, c.p, in)
	g.Expect(kindOf(err)).To(Equal(app.Invalid), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("resourceName must be the event's resource"))
	g.Expect(c.written(t, g, event)).To(Equal(before))

	_, err = s.CreateReport(ctx, c.p, c.report(event, "IDLE_OPTED_OUT"))
	g.Expect(err).NotTo(HaveOccurred())
	before = c.written(t, g, event)
	_, err = s.CreateReport(ctx, c.p, c.report(event, "NORMAL"))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("the report says ACCEPTED"))
	g.Expect(c.written(t, g, event)).To(Equal(before))

	full := c.issue(t, g, "fe-full")
	for range vtn.MaxReportsPerEvent {
		_, err = s.CreateReport(ctx, c.p, c.report(full, "NORMAL"))
		g.Expect(err).NotTo(HaveOccurred())
	}
	before = c.written(t, g, full)
	_, err = s.CreateReport(ctx, c.p, c.report(full, "NORMAL"))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("reports of the event, the most it may"))
	g.Expect(c.written(t, g, full)).To(Equal(before))

	old := c.issueAt(t, g, "fe-old", "", time.Now().Add(time.Hour))
	_, err = s.CreateReport(ctx, c.p, c.report(old, "NORMAL"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.written(t, g, old)).To(Equal([]any{1, 2, "accepted"}))
	renamed := c.issue(t, g, "fe-renamed")
	in = c.report(renamed, "NORMAL")
	in.ProgramID = "price_curve"
	_, err = s.CreateReport(ctx, c.p, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.written(t, g, renamed)).To(Equal([]any{1, 2, "accepted"}))
}
