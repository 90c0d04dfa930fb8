package meters_test

import (
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/meters"
)

func TestBudgetCounters(t *testing.T) {
	now := time.Date(2026, 11, 29, 14, 25, 30, 0, time.FixedZone("BST", 3600))
	hour := time.Date(2026, 11, 29, 13, 0, 0, 0, time.UTC) // 14:25 BST is 13:25 UTC
	day := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	b := meters.Budgets{OrganisationPerHour: 10, OrganisationPerDay: 100, HouseholdPerHour: 2}

	got := b.Counters("site-1", now)
	want := []meters.Counter{
		{Name: meters.BudgetOrganisationDay, Span: 24 * time.Hour, Start: day, Limit: 100},
		{Name: meters.BudgetOrganisationHour, Span: time.Hour, Start: hour, Limit: 10},
		{Name: meters.BudgetHouseholdHour, Household: "site-1", Span: time.Hour, Start: hour, Limit: 2},
	}
	if len(got) != len(want) {
		t.Fatalf("Counters = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("counter %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if got := b.Counters("", now); len(got) != 2 {
		t.Errorf("an API client's lookup counts in the organisation's two windows, not %d", len(got))
	}
	if got := (meters.Budgets{HouseholdPerHour: 2}).Counters("", now); len(got) != 0 {
		t.Errorf("no organisation budget: an API client's lookup is not counted (%+v)", got)
	}
	if got := (meters.Budgets{}).Counters("site-1", now); len(got) != 0 {
		t.Errorf("no budget at all: nothing is counted (%+v)", got)
	}
}

func TestBudgetJudge(t *testing.T) {
	now := time.Date(2026, 11, 29, 13, 59, 0, 500_000_000, time.UTC)
	b := meters.Budgets{OrganisationPerHour: 10, OrganisationPerDay: 100, HouseholdPerHour: 2}
	counters := b.Counters("site-1", now)
	toHour := time.Minute // 13:59:00.5 → 14:00, rounded up to whole seconds
	toDay := 10*time.Hour + time.Minute
	for _, c := range []struct {
		name       string
		counts     []int64
		allowed    bool
		refused    meters.BudgetName
		retryAfter time.Duration
	}{
		{"the first lookup", []int64{1, 1, 1}, true, "", 0},
		{"every window at its limit", []int64{100, 10, 2}, true, "", 0},
		{"the household's hour spent", []int64{50, 5, 3}, false, meters.BudgetHouseholdHour, toHour},
		{"the organisation's hour spent", []int64{50, 11, 1}, false, meters.BudgetOrganisationHour, toHour},
		{"the organisation's day spent: it frees at midnight", []int64{101, 5, 1}, false, meters.BudgetOrganisationDay, toDay},
		{"day and hour spent: the later end", []int64{101, 11, 3}, false, meters.BudgetOrganisationDay, toDay},
		{"far over (a lookup counted none reports one more)", []int64{100, 1_000_000, 1}, false, meters.BudgetOrganisationHour, toHour},
	} {
		v := meters.Judge(now, counters, c.counts)
		if v.Allowed != c.allowed {
			t.Errorf("%s: allowed %v, want %v", c.name, v.Allowed, c.allowed)
			continue
		}
		if c.allowed {
			if v.Refused != nil || v.Sentence() != "" {
				t.Errorf("%s: allowed, but refused by %+v", c.name, v.Refused)
			}
			continue
		}
		if v.Refused == nil || v.Refused.Name != c.refused {
			t.Errorf("%s: refused by %+v, want %s", c.name, v.Refused, c.refused)
		}
		if v.RetryAfter != c.retryAfter {
			t.Errorf("%s: retry after %v, want %v", c.name, v.RetryAfter, c.retryAfter)
		}
	}

	v := meters.Judge(now, counters, []int64{50, 11, 1})
	if want := "The organisation has made its 10 meter lookups of this hour (UTC); the budget frees at 2026-11-29T14:00:00Z"; v.Sentence() != want {
		t.Errorf("Sentence() = %q, want %q", v.Sentence(), want)
	}
	v = meters.Judge(now, counters, []int64{50, 5, 3})
	if want := "This household has made its 2 meter lookups of this hour (UTC); the budget frees at 2026-11-29T14:00:00Z"; v.Sentence() != want {
		t.Errorf("Sentence() = %q, want %q", v.Sentence(), want)
	}

	// A second before the hour ends, Retry-After is still at least a second.
	late := time.Date(2026, 11, 29, 13, 59, 59, 999_000_000, time.UTC)
	if v := meters.Judge(late, counters, []int64{50, 11, 1}); v.RetryAfter != time.Second {
		t.Errorf("retry after %v at the hour's last millisecond, want 1s", v.RetryAfter)
	}
}
