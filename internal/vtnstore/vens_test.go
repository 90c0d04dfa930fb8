package vtnstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/vtnstore"
)

func newVEN(client, name string, targets ...vtnstore.Values) vtnstore.VEN {
	now := time.Now().UTC().Truncate(time.Microsecond)
	return vtnstore.VEN{ID: uuid.Must(uuid.NewV7()), ClientName: client, Name: name, Targets: targets, Created: now, Modified: now}
}

func TestVENsNamedOnceAndBounded(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	org := "org-" + uuid.NewString()
	if err := s.CreateVEN(ctx, org, newVEN("c1", "ven-a"), 3); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateVEN(ctx, org, newVEN("c2", "ven-a"), 3); !errors.Is(err, vtnstore.ErrNameTaken) {
		t.Fatalf("a second ven-a: %v, want ErrNameTaken", err)
	}
	if err := s.CreateVEN(ctx, "other-"+org, newVEN("c2", "ven-a"), 3); err != nil {
		t.Fatalf("another organisation's ven-a is its own: %v", err)
	}
	// Racing creations never pass the bound.
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Go(func() { errs[i] = s.CreateVEN(ctx, org, newVEN("c1", uuid.NewString()), 3) })
	}
	wg.Wait()
	created, full := 0, 0
	for _, err := range errs {
		switch {
		case err == nil:
			created++
		case errors.Is(err, vtnstore.ErrFull):
			full++
		default:
			t.Fatal(err)
		}
	}
	if created != 2 || full != 4 {
		t.Fatalf("created %d, refused full %d: want 2 and 4", created, full)
	}
	all, err := s.VENs(ctx, vtnstore.Query{Organisation: org, Limit: 50})
	if err != nil || len(all) != 3 {
		t.Fatalf("VENs: %d %v", len(all), err)
	}
}

func TestVENSearchByTargetsAndName(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	org := "org-" + uuid.NewString()
	a := newVEN("c1", "ven-a", vtnstore.Values{Type: "GROUP", Values: []any{"north", "east"}})
	b := newVEN("c2", "ven-b", vtnstore.Values{Type: "GROUP", Values: []any{"south"}})
	// Pages are in creation order: b strictly after a (made in one microsecond, the random ids
	// would decide).
	b.Created = a.Created.Add(time.Millisecond)
	for _, v := range []vtnstore.VEN{a, b} {
		if err := s.CreateVEN(ctx, org, v, 10); err != nil {
			t.Fatal(err)
		}
	}
	names := func(q vtnstore.Query) []string {
		t.Helper()
		q.Organisation, q.Limit = org, 50
		vs, err := s.VENs(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(vs))
		for _, v := range vs {
			out = append(out, v.Name)
		}
		return out
	}
	for _, tc := range []struct {
		q    vtnstore.Query
		want string
	}{
		{vtnstore.Query{TargetType: "GROUP", TargetValues: []string{"east"}}, `["ven-a"]`},
		{vtnstore.Query{TargetType: "GROUP", TargetValues: []string{"south", "north"}}, `["ven-a","ven-b"]`},
		{vtnstore.Query{TargetType: "GROUP"}, `["ven-a","ven-b"]`},
		{vtnstore.Query{TargetType: "ZONE", TargetValues: []string{"east"}}, `[]`},
		{vtnstore.Query{TargetType: "VEN_NAME", TargetValues: []string{"ven-b"}, NameTarget: "VEN_NAME"}, `["ven-b"]`},
		{vtnstore.Query{Name: "ven-a"}, `["ven-a"]`},
		{vtnstore.Query{ClientName: "c2"}, `["ven-b"]`},
		{vtnstore.Query{Skip: 1}, `["ven-b"]`},
	} {
		got, _ := json.Marshal(names(tc.q))
		if string(got) != tc.want {
			t.Errorf("%+v: %s, want %s", tc.q, got, tc.want)
		}
	}
}

func TestResourcesHeldOnceAndBoundedPerClient(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	org := "org-" + uuid.NewString()
	v1, v2, other := newVEN("c1", "ven-1"), newVEN("c1", "ven-2"), newVEN("c2", "ven-3")
	for _, v := range []vtnstore.VEN{v1, v2, other} {
		if err := s.CreateVEN(ctx, org, v, 10); err != nil {
			t.Fatal(err)
		}
	}
	res := func(ven uuid.UUID, name string) vtnstore.Resource {
		now := time.Now().UTC()
		return vtnstore.Resource{ID: uuid.New(), VENID: ven, Name: name, Created: now, Modified: now}
	}
	r1 := res(v1.ID, "asset-1")
	if err := s.CreateResource(ctx, org, r1, 2); err != nil {
		t.Fatal(err)
	}
	if holder, held, err := s.HolderOf(ctx, org, "asset-1"); err != nil || !held || holder != "c1" {
		t.Fatalf("asset-1's holder: %q %v %v", holder, held, err)
	}
	if _, held, err := s.HolderOf(ctx, "other-"+org, "asset-1"); err != nil || held {
		t.Fatalf("asset-1 in another organisation: %v %v", held, err)
	}
	if err := s.CreateResource(ctx, org, res(other.ID, "asset-1"), 2); !errors.Is(err, vtnstore.ErrHeld) {
		t.Fatalf("asset-1 again: %v, want ErrHeld", err)
	}
	if err := s.CreateResource(ctx, org, res(v2.ID, "asset-2"), 2); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateResource(ctx, org, res(v2.ID, "asset-3"), 2); !errors.Is(err, vtnstore.ErrFull) {
		t.Fatalf("a third resource of c1's VENs: %v, want ErrFull", err)
	}
	if err := s.CreateResource(ctx, org, res(other.ID, "asset-3"), 2); err != nil {
		t.Fatalf("c2's bound is its own: %v", err)
	}
	if err := s.CreateResource(ctx, org, res(uuid.New(), "asset-9"), 2); !errors.Is(err, vtnstore.ErrNotFound) {
		t.Fatalf("no such VEN: %v", err)
	}
	r1.Name = "asset-3"
	if _, err := s.UpdateResource(ctx, org, r1); !errors.Is(err, vtnstore.ErrHeld) {
		t.Fatalf("renamed onto a held asset: %v", err)
	}
	if _, err := s.DeleteVEN(ctx, org, other.ID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.UpdateResource(ctx, org, r1); err != nil || got.Name != "asset-3" {
		t.Fatalf("renamed onto a released asset: %v %v", got, err)
	}
	rs, err := s.Resources(ctx, v1.ID, vtnstore.Query{Organisation: org, Name: "asset-3", Limit: 50})
	if err != nil || len(rs) != 1 {
		t.Fatalf("resources named asset-3: %v %v", rs, err)
	}
}

// event issues a dispatch of the organisation's (straight into its table) for a report to
// name: a report's bound is counted on its event's dispatch row. It answers the event's id.
func event(t *testing.T, org, name string) string {
	t.Helper()
	id := uuid.NewSHA1(uuid.NameSpaceOID, []byte(org+"/"+name))
	if _, err := testDB.Pool.Exec(context.Background(), `INSERT INTO dispatches (organisation, event_id, flex_event,
		site_id, asset_id, market_id, level_kw, from_time, to_time, event_timestamp)
		VALUES ($1, $2, $3, 'site', 'asset-' || $3, 'limited_pause', 1, now(), now() + interval '1 hour', now())`,
		org, id, name); err != nil {
		t.Fatal(err)
	}
	return id.String()
}

func TestReportsKeptAndBoundedPerEvent(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	org := "org-" + uuid.NewString()
	e1, e2 := event(t, org, "e1"), event(t, org, "e2")
	rep := func(client, event string) vtnstore.Report {
		now := time.Now().UTC()
		return vtnstore.Report{ID: uuid.New(), ClientName: client, ProgramID: "limited_pause", EventID: event,
			ReportClientName: "VEN-1", Body: json.RawMessage(`{"resources":[]}`), Created: now, Modified: now}
	}
	first := rep("c1", e1)
	for _, r := range []vtnstore.Report{first, rep("c1", e1), rep("c2", e1), rep("c1", e2)} {
		if err := s.CreateReport(ctx, org, r, 2, nil); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateReport(ctx, org, rep("c1", e1), 2, nil); !errors.Is(err, vtnstore.ErrFull) {
		t.Fatalf("a third report of c1 on e1: %v", err)
	}
	got, err := s.Reports(ctx, vtnstore.ReportQuery{Organisation: org, Sender: "c1", EventID: e1, Limit: 50})
	if err != nil || len(got) != 2 || (got[0].ID != first.ID && got[1].ID != first.ID) {
		t.Fatalf("c1's reports on e1: %v %v", got, err)
	}
	if _, err := s.DeleteReport(ctx, org, first.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Report(ctx, org, first.ID); !errors.Is(err, vtnstore.ErrNotFound) {
		t.Fatalf("a deleted report: %v", err)
	}
	if _, err := s.Report(ctx, "other-"+org, got[0].ID); !errors.Is(err, vtnstore.ErrNotFound) {
		t.Fatalf("another organisation's report: %v", err)
	}
}

// A report is stored with what its transaction writes besides (the status change it says), or
// not at all: also runs after the counted insert, in the same transaction, and its error
// leaves no report; a full event runs no also.
func TestReportCommitsWithItsChange(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	org := "org-" + uuid.NewString()
	e1 := event(t, org, "e1")
	rep := func() vtnstore.Report {
		now := time.Now().UTC()
		return vtnstore.Report{ID: uuid.New(), ClientName: "c1", ProgramID: "limited_pause", EventID: e1,
			ReportClientName: "VEN-1", Body: json.RawMessage(`{"resources":[]}`), Created: now, Modified: now}
	}
	refused := errors.New("refused")
	failing := rep()
	err := s.CreateReport(ctx, org, failing, 1, func(q vtnstore.Querier) error {
		var n int
		if err := q.QueryRow(ctx, `SELECT count(*) FROM openadr_reports WHERE organisation = $1`, org).Scan(&n); err != nil || n != 1 {
			t.Errorf("also sees %d reports (%v), want the one stored before it", n, err)
		}
		return refused
	})
	if !errors.Is(err, refused) {
		t.Fatalf("also's refusal: %v", err)
	}
	if _, err := s.Report(ctx, org, failing.ID); !errors.Is(err, vtnstore.ErrNotFound) {
		t.Fatalf("a report whose change was refused is stored: %v", err)
	}
	ran := 0
	count := func(vtnstore.Querier) error { ran++; return nil }
	if err := s.CreateReport(ctx, org, rep(), 1, count); err != nil || ran != 1 {
		t.Fatalf("a report within the bound: %v, also ran %d times", err, ran)
	}
	if err := s.CreateReport(ctx, org, rep(), 1, count); !errors.Is(err, vtnstore.ErrFull) || ran != 1 {
		t.Fatalf("a report past the bound: %v, also ran %d times", err, ran)
	}
}

// Reports racing into one client's last places of an event are counted one after the other:
// the statement that counts and inserts updates the count on the event's dispatch row, under
// that row's lock, and checks it there.
func TestReportsBoundHoldsUnderRacingReports(t *testing.T) {
	ctx := context.Background()
	s := &vtnstore.Store{Pool: testDB.Pool}
	org := "org-" + uuid.NewString()
	e1 := event(t, org, "e1")
	const racers, bound = 12, 3
	errs := make(chan error, racers)
	for range racers {
		go func() {
			now := time.Now().UTC()
			errs <- s.CreateReport(ctx, org, vtnstore.Report{ID: uuid.New(), ClientName: "c1", ProgramID: "limited_pause",
				EventID: e1, ReportClientName: "VEN-1", Body: json.RawMessage(`{"resources":[]}`), Created: now,
				Modified: now}, bound, nil)
		}()
	}
	stored, full := 0, 0
	for range racers {
		switch err := <-errs; {
		case err == nil:
			stored++
		case errors.Is(err, vtnstore.ErrFull):
			full++
		default:
			t.Errorf("a racing report: %v", err)
		}
	}
	got, err := s.Reports(ctx, vtnstore.ReportQuery{Organisation: org, Limit: 50})
	if err != nil || stored != bound || full != racers-bound || len(got) != bound {
		t.Fatalf("%d stored, %d refused, %d kept (%v); want %d, %d, %d", stored, full, len(got), err, bound, racers-bound, bound)
	}
}
