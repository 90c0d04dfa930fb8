package meters

import (
	"fmt"
	"time"
)

// The register's lookup budget (docs/api.md, "Meters"): each organisation may look meter
// points up (search, by reference, by MPAN, by address) at most so many times an hour and a
// day, and each household of the hosted flow at most so many times an hour, besides its
// organisation's. The windows are UTC hours and days; a window frees at its end. The counts are
// kept in PostgreSQL (internal/meterstore's LookupCounts), so the budget holds across replicas.

// Budgets are the limits; a zero limit is no limit.
type Budgets struct {
	// OrganisationPerHour and OrganisationPerDay bound one organisation's lookups in a UTC
	// hour and a UTC day, every door and API client together.
	OrganisationPerHour, OrganisationPerDay int64
	// HouseholdPerHour bounds the searches of one household (its site) in the hosted flow in
	// a UTC hour; they count against its organisation's budget as well.
	HouseholdPerHour int64
}

// DefaultBudgets are the manager's defaults: about 3,000 households found a day (a search and
// a reference read each, and a few retries), while the 30 million meter points of Great
// Britain would take one organisation over 8 years to read; a household searches a handful of
// times.
var DefaultBudgets = Budgets{OrganisationPerHour: 1000, OrganisationPerDay: 10000, HouseholdPerHour: 20}

// BudgetName names a counter's budget (the refusals' metric label).
type BudgetName string

// The budgets a lookup counts against.
const (
	BudgetOrganisationHour BudgetName = "organisation_hour"
	BudgetOrganisationDay  BudgetName = "organisation_day"
	BudgetHouseholdHour    BudgetName = "household_hour"
)

// AllBudgetNames lists every BudgetName.
var AllBudgetNames = []BudgetName{BudgetOrganisationHour, BudgetOrganisationDay, BudgetHouseholdHour}

// Counter is one window a lookup is counted in: the organisation's (Household "") or a
// household's, of Span from Start, holding at most Limit lookups.
type Counter struct {
	Name      BudgetName
	Household string
	Span      time.Duration
	Start     time.Time
	Limit     int64
}

// End is when the counter's window frees.
func (c Counter) End() time.Time { return c.Start.Add(c.Span) }

// Counters are the windows a lookup at now counts in: the organisation's hour and day, and,
// for a household (household non-empty: its site), the household's hour. A zero limit's
// counter is left out; none at all means the lookup is not counted. Always in this order (the
// store locks its rows in it).
func (b Budgets) Counters(household string, now time.Time) []Counter {
	now = now.UTC()
	var out []Counter
	add := func(name BudgetName, who string, span time.Duration, limit int64) {
		if limit > 0 {
			out = append(out, Counter{Name: name, Household: who, Span: span, Start: now.Truncate(span), Limit: limit})
		}
	}
	add(BudgetOrganisationDay, "", 24*time.Hour, b.OrganisationPerDay)
	add(BudgetOrganisationHour, "", time.Hour, b.OrganisationPerHour)
	if household != "" {
		add(BudgetHouseholdHour, household, time.Hour, b.HouseholdPerHour)
	}
	return out
}

// Verdict is whether a lookup is within its budgets.
type Verdict struct {
	Allowed bool
	// Refused is the first budget spent (when not Allowed), and RetryAfter how long until
	// every spent one frees (whole seconds, at least one).
	Refused    *Counter
	RetryAfter time.Duration
}

// Judge decides a lookup at now on its counters' counts, each the lookups of its window with
// this one counted (counts[i] for counters[i]; the store reports the count this lookup would
// have made when it counted none). The lookup is within budget when every window then holds at
// most its limit; otherwise it waits until the last spent window ends.
func Judge(now time.Time, counters []Counter, counts []int64) Verdict {
	v := Verdict{Allowed: true}
	for i := range counters {
		c := &counters[i]
		if i >= len(counts) || counts[i] <= c.Limit {
			continue
		}
		if v.Allowed {
			v.Allowed, v.Refused = false, c
		}
		v.RetryAfter = max(v.RetryAfter, c.End().Sub(now))
	}
	if !v.Allowed {
		// Whole seconds, rounded up: Retry-After never names a moment before the window frees.
		v.RetryAfter = max(time.Second, (v.RetryAfter+time.Second-1)/time.Second*time.Second)
	}
	return v
}

// Sentence says which budget a refusal spent and when it frees, for the REST API's detail.
func (v Verdict) Sentence() string {
	if v.Allowed || v.Refused == nil {
		return ""
	}
	c := v.Refused
	per := "hour"
	if c.Span >= 24*time.Hour {
		per = "day"
	}
	who := "The organisation has"
	if c.Household != "" {
		who = "This household has"
	}
	return fmt.Sprintf("%s made its %d meter lookups of this %s (UTC); the budget frees at %s",
		who, c.Limit, per, c.End().UTC().Format(time.RFC3339))
}
