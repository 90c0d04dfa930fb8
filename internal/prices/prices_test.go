package prices_test

import (
	"errors"
	"math/big"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/validation"
)

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func day(s string) prices.Day {
	d, err := prices.ParseDay(s)
	if err != nil {
		panic(err)
	}
	return d
}

// The UK local days' settlement periods, their first and last starts worked out by hand: the
// clocks go forward at 01:00 GMT on the last Sunday of March and back at 01:00 GMT on the last
// Sunday of October.
func TestPeriods(t *testing.T) {
	for _, tc := range []struct {
		day         string
		n           int
		first, last string
	}{
		// Clocks forward: midnight GMT to midnight BST is 23 hours.
		{"2026-03-29", 46, "2026-03-29T00:00:00Z", "2026-03-29T22:30:00Z"},
		// Clocks back: midnight BST (23:00Z the day before) to midnight GMT is 25 hours.
		{"2026-10-25", 50, "2026-10-24T23:00:00Z", "2026-10-25T23:30:00Z"},
		// A summer day: midnight BST to midnight BST.
		{"2026-07-01", 48, "2026-06-30T23:00:00Z", "2026-07-01T22:30:00Z"},
		{"2026-11-27", 48, "2026-11-27T00:00:00Z", "2026-11-27T23:30:00Z"},
	} {
		ps := day(tc.day).Periods()
		if len(ps) != tc.n {
			t.Errorf("%s: %d periods, want %d", tc.day, len(ps), tc.n)
			continue
		}
		if !ps[0].Equal(utc(tc.first)) || !ps[len(ps)-1].Equal(utc(tc.last)) {
			t.Errorf("%s: periods %s … %s, want %s … %s", tc.day, ps[0].UTC(), ps[len(ps)-1].UTC(), tc.first, tc.last)
		}
		for i := 1; i < len(ps); i++ {
			if ps[i].Sub(ps[i-1]) != 30*time.Minute {
				t.Errorf("%s: period %d starts %s after the one before", tc.day, i, ps[i].Sub(ps[i-1]))
			}
		}
	}
}

func TestDay(t *testing.T) {
	if got := prices.DayOf(utc("2026-10-24T23:30:00Z")); got.String() != "2026-10-25" {
		t.Errorf("23:30Z on the 24th is 00:30 BST on the 25th, got %s", got)
	}
	if got := day("2026-03-28").Next().String(); got != "2026-03-29" {
		t.Errorf("next of 2026-03-28: %s", got)
	}
	if got := day("2026-12-31").Next().String(); got != "2027-01-01" {
		t.Errorf("next of 2026-12-31: %s", got)
	}
	if !day("2026-10-25").End().Equal(utc("2026-10-26T00:00:00Z")) {
		t.Errorf("end of 2026-10-25: %s", day("2026-10-25").End())
	}
	for _, bad := range []string{"2026-13-01", "2026-02-30", "27-11-2026", "", "2026-11-27T00:00:00Z"} {
		var verr *validation.Error
		if _, err := prices.ParseDay(bad); !errors.As(err, &verr) {
			t.Errorf("ParseDay(%q) = %v, want a validation error", bad, err)
		}
	}
}

// pricesOf prices every period of the day at 10.00 + its index.
func pricesOf(d prices.Day) []prices.Price {
	periods := d.Periods()
	out := make([]prices.Price, 0, len(periods))
	for i, t := range periods {
		out = append(out, prices.Price{Start: t, Centi: prices.Centi(1000 + i)})
	}
	return out
}

func TestCheckDay(t *testing.T) {
	nov, spring, autumn := day("2026-11-27"), day("2026-03-29"), day("2026-10-25")
	reversed := pricesOf(nov)
	for i, j := 0, len(reversed)-1; i < j; i, j = i+1, j-1 {
		reversed[i], reversed[j] = reversed[j], reversed[i]
	}
	offPeriod := pricesOf(nov)
	offPeriod[5].Start = offPeriod[5].Start.Add(15 * time.Minute)
	dup := pricesOf(nov)
	dup[7].Start = dup[6].Start
	midnight := pricesOf(nov)
	midnight[47].Start = nov.End()
	// Local times in another zone name the same instants: accepted.
	inParis := pricesOf(autumn)
	paris, _ := time.LoadLocation("Europe/Paris")
	for i := range inParis {
		inParis[i].Start = inParis[i].Start.In(paris)
	}
	for _, tc := range []struct {
		name     string
		day      prices.Day
		in       []prices.Price
		problems []prices.Problem // Index and Err.Type only
	}{
		{"exact day", nov, pricesOf(nov), nil},
		{"any order, answered sorted", nov, reversed, nil},
		{"46 on the spring day", spring, pricesOf(spring), nil},
		{"50 on the autumn day, in another zone", autumn, inParis, nil},
		{"47 prices on a 48 day", nov, pricesOf(nov)[:47], []prices.Problem{{Index: -1, Err: &validation.Error{Type: "settlement_periods"}}}},
		{"48 prices on a 46 day", spring, pricesOf(nov), []prices.Problem{
			{Index: -1, Err: &validation.Error{Type: "settlement_periods"}},
			// Every start of the 27th of November is outside the 29th of March.
		}},
		{"a start not on a period", nov, offPeriod, []prices.Problem{{Index: 5, Field: "start_timestamp", Err: &validation.Error{Type: "settlement_period"}}}},
		{"a duplicate", nov, dup, []prices.Problem{{Index: 7, Field: "start_timestamp", Err: &validation.Error{Type: "duplicate"}}}},
		{"the next day's midnight", nov, midnight, []prices.Problem{{Index: 47, Field: "start_timestamp", Err: &validation.Error{Type: "settlement_period"}}}},
	} {
		got, problems := prices.CheckDay(tc.day, tc.in)
		if tc.name == "48 prices on a 46 day" {
			if len(problems) != 1+48 || problems[0].Index != -1 || problems[0].Err.Type != "settlement_periods" {
				t.Errorf("%s: %+v", tc.name, problems)
			}
			continue
		}
		if len(problems) != len(tc.problems) {
			t.Errorf("%s: problems %+v, want %+v", tc.name, problems, tc.problems)
			continue
		}
		for i, p := range problems {
			w := tc.problems[i]
			if p.Index != w.Index || p.Field != w.Field || p.Err.Type != w.Err.Type || p.Err.Msg == "" {
				t.Errorf("%s: problem %d %+v (%v), want %+v (%s)", tc.name, i, p, p.Err, w, w.Err.Type)
			}
		}
		if len(tc.problems) > 0 {
			if got != nil {
				t.Errorf("%s: prices answered with problems", tc.name)
			}
			continue
		}
		periods := tc.day.Periods()
		if len(got) != len(periods) {
			t.Fatalf("%s: %d prices answered", tc.name, len(got))
		}
		for i, p := range got {
			if !p.Start.Equal(periods[i]) || p.Start.Location() != time.UTC {
				t.Errorf("%s: price %d starts %s, want %s in UTC", tc.name, i, p.Start, periods[i])
			}
			if p.Centi != prices.Centi(1000+i) {
				t.Errorf("%s: price %d is %s, want the one declared for its period", tc.name, i, p.Centi)
			}
		}
	}
}

func TestParsePrice(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    prices.Centi
		errType string
	}{
		{"45.67", 4567, ""},
		{"-12.5", -1250, ""},
		{"0", 0, ""},
		{"-0", 0, ""},
		{"0.01", 1, ""},
		{"1000000", 100_000_000, ""},
		{"-1000000.00", -100_000_000, ""},
		// An exponent is refused, even where the value has no decimals: the API's prices are
		// written out (the package documentation).
		{"1e3", 0, "decimal_max_places"},
		{"45.678", 0, "decimal_max_places"},
		{"45.670", 0, "decimal_max_places"},
		{"1000000.01", 0, "less_than_equal"},
		{"-1000000.01", 0, "less_than_equal"},
		{"99999999999999999", 0, "decimal_max_places"},
		{"9999999999999999", 0, "less_than_equal"},
		{"abc", 0, "decimal_parsing"},
		{"", 0, "decimal_parsing"},
		{"01.5", 0, "decimal_max_places"},
		{"1.", 0, "decimal_max_places"},
	} {
		got, err := prices.ParsePrice(tc.in)
		if tc.errType == "" {
			if err != nil || got != tc.want {
				t.Errorf("ParsePrice(%q) = %v, %v, want %v", tc.in, got, err, tc.want)
			}
			continue
		}
		var verr *validation.Error
		if !errors.As(err, &verr) || verr.Type != tc.errType {
			t.Errorf("ParsePrice(%q) = %v, %v, want a %s error", tc.in, got, err, tc.errType)
		}
	}
}

func TestCentiString(t *testing.T) {
	for c, want := range map[prices.Centi]string{4567: "45.67", -1250: "-12.50", 0: "0.00", -5: "-0.05", 100_000_000: "1000000.00"} {
		if got := c.String(); got != want {
			t.Errorf("%d: %q, want %q", c, got, want)
		}
	}
	if got := prices.Centi(-1250).Float(); got != -12.5 {
		t.Errorf("Float: %v", got)
	}
}

// What ParsePrice accepts is the number it reads: exactly 100 × the literal, within the bound,
// and it round-trips through Centi.String. It never panics.
func FuzzParsePrice(f *testing.F) {
	for _, s := range []string{"45.67", "-12.5", "0", "1e3", "45.678", "1000000.01", "abc", "-0.01", "9999999999999999.99"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := prices.ParsePrice(s)
		if err != nil {
			var verr *validation.Error
			if !errors.As(err, &verr) || verr.Type == "" || verr.Msg == "" {
				t.Fatalf("%q: %v is not a validation error", s, err)
			}
			return
		}
		r, ok := new(big.Rat).SetString(s)
		if !ok {
			t.Fatalf("%q accepted but not a number", s)
		}
		if r.Mul(r, big.NewRat(100, 1)).Cmp(big.NewRat(int64(c), 1)) != 0 {
			t.Fatalf("%q read as %d hundredths", s, c)
		}
		if c > prices.MaxAbsCenti || c < -prices.MaxAbsCenti {
			t.Fatalf("%q beyond the bound: %d", s, c)
		}
		back, err := prices.ParsePrice(c.String())
		if err != nil || back != c {
			t.Fatalf("%q → %s → %v, %v", s, c, back, err)
		}
	})
}

func TestCheckMarket(t *testing.T) {
	for name, ok := range map[string]bool{
		"price_curve": true, "n2ex.day-ahead": true, "0": true, "a" + string(make([]byte, 0)): true,
		"": false, "_x": false, "-x": false, ".x": false, "Price": false, "a/b": false, "a b": false,
		"x" + repeat("y", 63): true, "x" + repeat("y", 64): false, "ümlaut": false,
	} {
		if err := prices.CheckMarket(name); (err == nil) != ok {
			t.Errorf("CheckMarket(%q) = %v, want ok %v", name, err, ok)
		}
	}
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}

// The curve's horizon, its length in periods worked out by hand.
func TestHorizon(t *testing.T) {
	for _, tc := range []struct {
		name     string
		now      string
		declared bool
		from, to string
		periods  int
	}{
		// 10:07 GMT: from 10:00 to 23:00 today, 13 hours.
		{"10:07 without tomorrow", "2026-11-27T10:07:00Z", false, "2026-11-27T10:00:00Z", "2026-11-27T23:00:00Z", 26},
		// … and with tomorrow's prices: a further 24 hours.
		{"10:07 with tomorrow", "2026-11-27T10:07:00Z", true, "2026-11-27T10:00:00Z", "2026-11-28T23:00:00Z", 74},
		// 23:10: today's 23:00 has passed, so the curve runs to 23:00 tomorrow, declared or not.
		{"23:10", "2026-11-27T23:10:00Z", false, "2026-11-27T23:00:00Z", "2026-11-28T23:00:00Z", 48},
		{"23:00 exactly", "2026-11-27T23:00:00Z", false, "2026-11-27T23:00:00Z", "2026-11-28T23:00:00Z", 48},
		// 00:07 GMT on the spring day: to 23:00 BST = 22:00Z, 22 hours (a normal day's 23 less
		// the hour the clocks skip).
		{"spring day, just after midnight", "2026-03-29T00:07:00Z", false, "2026-03-29T00:00:00Z", "2026-03-29T22:00:00Z", 44},
		{"spring day, with tomorrow", "2026-03-29T00:07:00Z", true, "2026-03-29T00:00:00Z", "2026-03-30T22:00:00Z", 92},
		// 00:07 BST on the autumn day (23:07Z the day before): to 23:00 GMT, 24 hours.
		{"autumn day, just after midnight", "2026-10-24T23:07:00Z", false, "2026-10-24T23:00:00Z", "2026-10-25T23:00:00Z", 48},
		// 23:10 BST the evening before the autumn day: tomorrow (25 hours long) to its 23:00.
		{"the evening before the autumn day", "2026-10-24T22:10:00Z", false, "2026-10-24T22:00:00Z", "2026-10-25T23:00:00Z", 50},
		// 23:40 GMT the evening before the spring day: to 23:00 BST on the 29th.
		{"the evening before the spring day", "2026-03-28T23:40:00Z", false, "2026-03-28T23:30:00Z", "2026-03-29T22:00:00Z", 45},
	} {
		from, to := prices.Horizon(utc(tc.now), tc.declared)
		if !from.Equal(utc(tc.from)) || !to.Equal(utc(tc.to)) {
			t.Errorf("%s: [%s, %s), want [%s, %s)", tc.name, from.UTC(), to.UTC(), tc.from, tc.to)
		}
		if n := len(prices.Curve(from, to, nil)); n != tc.periods {
			t.Errorf("%s: a curve of %d periods, want %d", tc.name, n, tc.periods)
		}
	}
	if got := prices.Tomorrow(utc("2026-10-24T23:30:00Z")).String(); got != "2026-10-26" {
		t.Errorf("tomorrow at 00:30 BST on the 25th: %s", got)
	}
}

func TestCurveWithGaps(t *testing.T) {
	from, to := utc("2026-11-27T10:00:00Z"), utc("2026-11-27T12:00:00Z")
	declared := []prices.Price{
		{Start: utc("2026-11-27T11:30:00Z"), Centi: -250},
		{Start: utc("2026-11-27T10:00:00Z"), Centi: 4567},
		{Start: utc("2026-11-27T12:00:00Z"), Centi: 1}, // outside the span
		{Start: utc("2026-11-27T09:30:00Z"), Centi: 2}, // outside the span
	}
	got := prices.Curve(from, to, declared)
	want := []*prices.Centi{ptr(4567), nil, nil, ptr(-250)}
	if len(got) != len(want) {
		t.Fatalf("%d periods, want %d", len(got), len(want))
	}
	for i, p := range got {
		if !p.Start.Equal(from.Add(time.Duration(i)*30*time.Minute)) || p.Start.Location() != time.UTC {
			t.Errorf("period %d starts %s", i, p.Start)
		}
		if (p.Centi == nil) != (want[i] == nil) || (p.Centi != nil && *p.Centi != *want[i]) {
			t.Errorf("period %d: %v, want %v", i, p.Centi, want[i])
		}
	}
	if got := prices.Curve(to, from, declared); len(got) != 0 {
		t.Errorf("an empty span has periods: %v", got)
	}
}

func ptr(c prices.Centi) *prices.Centi { return &c }
