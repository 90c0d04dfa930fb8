package dispatchstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// TestSearchIssued: the OpenADR door's searches answer the dispatches not cancelled, latest
// window end first then by id, a page at a time, filtered by proposition and by assets (none
// named: none answered), another organisation's never; IssuedByID answers any status.
func TestSearchIssued(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-openadr-search"
	issue := func(flexEvent, proposition string, hoursLater int, assets ...string) {
		t.Helper()
		ds := make([]dispatchstore.Dispatch, 0, len(assets))
		for _, a := range assets {
			from := start.Add(time.Duration(hoursLater) * time.Hour)
			ds = append(ds, dispatchstore.Dispatch{FlexEvent: flexEvent, SiteID: "site-" + a, AssetID: a, MarketID: proposition,
				Proposition: proposition, From: from, To: from.Add(time.Hour), EventTimestamp: start})
		}
		if _, err := s.Issue(ctx, org, "https://flexsite.test", ds, nil, start); err != nil {
			t.Fatal(err)
		}
	}
	issue("fe-old", "limited_pause", 0, "a1", "a2")
	issue("fe-new", "price_curve", 5, "a1", "a3")
	issue("fe-cancelled", "limited_pause", 9, "a1")
	if _, err := s.Issue(ctx, "org-other", "https://flexsite.test", dispatches("fe-x", 2), nil, start); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, org, "fe-cancelled", start); err != nil {
		t.Fatal(err)
	}
	key := func(d dispatchstore.Issued) string { return d.FlexEvent + "/" + d.AssetID }
	search := func(q dispatchstore.IssuedQuery) []string {
		t.Helper()
		got, err := s.SearchIssued(ctx, org, q)
		if err != nil {
			t.Fatal(err)
		}
		out := make([]string, 0, len(got))
		for _, d := range got {
			out = append(out, key(d))
		}
		return out
	}
	byID := func(flexEvent, asset string) string {
		return dispatch.EventID(org, flexEvent, asset).String()
	}
	// fe-new's two (later window) first, in id order; then fe-old's.
	newer := []string{"fe-new/a1", "fe-new/a3"}
	if byID("fe-new", "a3") < byID("fe-new", "a1") {
		newer = []string{"fe-new/a3", "fe-new/a1"}
	}
	older := []string{"fe-old/a1", "fe-old/a2"}
	if byID("fe-old", "a2") < byID("fe-old", "a1") {
		older = []string{"fe-old/a2", "fe-old/a1"}
	}
	all := append(slices.Clone(newer), older...)
	for _, tc := range []struct {
		name string
		q    dispatchstore.IssuedQuery
		want []string
	}{
		{"all", dispatchstore.IssuedQuery{Limit: 50}, all},
		{"a page", dispatchstore.IssuedQuery{Skip: 1, Limit: 2}, all[1:3]},
		{"past the end", dispatchstore.IssuedQuery{Skip: 4, Limit: 2}, []string{}},
		{"no limit", dispatchstore.IssuedQuery{Limit: 0}, []string{}},
		{"a program", dispatchstore.IssuedQuery{Proposition: "limited_pause", Limit: 50}, older},
		{"assets", dispatchstore.IssuedQuery{Assets: []string{"a1", "a3"}, Limit: 50},
			slices.DeleteFunc(slices.Clone(all), func(k string) bool { return k == "fe-old/a2" })},
		{"assets, a page", dispatchstore.IssuedQuery{Assets: []string{"a1", "a2", "a3"}, Skip: 2, Limit: 1}, all[2:3]},
		{"assets and a program", dispatchstore.IssuedQuery{Assets: []string{"a1"}, Proposition: "price_curve", Limit: 50},
			[]string{"fe-new/a1"}},
		{"no assets", dispatchstore.IssuedQuery{Assets: []string{}, Limit: 50}, []string{}},
		{"another organisation's asset", dispatchstore.IssuedQuery{Assets: []string{"asset-0"}, Limit: 50}, []string{}},
	} {
		if got := search(tc.q); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	cancelled, err := s.IssuedByID(ctx, org, dispatch.EventID(org, "fe-cancelled", "a1"))
	if err != nil || cancelled.Status != dispatch.Cancelled || cancelled.Proposition != "limited_pause" {
		t.Fatalf("a cancelled dispatch by id: %+v %v", cancelled, err)
	}
	if _, err := s.IssuedByID(ctx, "org-other", dispatch.EventID(org, "fe-old", "a1")); err != dispatchstore.ErrNotFound { //nolint:errorlint // the sentinel as returned
		t.Fatalf("another organisation's: %v", err)
	}
}
