package validation

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestHalfHourBoundary(t *testing.T) {
	london, err := time.LoadLocation("Europe/London")
	if err != nil {
		t.Skip("no zone database")
	}
	for _, c := range []struct {
		t  time.Time
		ok bool
	}{
		{time.Date(2026, 1, 13, 17, 30, 0, 0, time.UTC), true},
		{time.Date(2026, 1, 13, 17, 0, 0, 0, time.UTC), true},
		{time.Date(2026, 7, 13, 17, 30, 0, 0, london), true}, // BST
		{time.Date(2026, 1, 13, 17, 15, 0, 0, time.UTC), false},
		{time.Date(2026, 1, 13, 17, 30, 1, 0, time.UTC), false},
		{time.Date(2026, 1, 13, 17, 30, 0, 1, time.UTC), false},
		{time.Date(2026, 1, 13, 17, 30, 0, 0, time.FixedZone("IST", 5*3600+1800)), true}, // 12:00 UTC
		{time.Date(2026, 1, 13, 17, 0, 0, 0, time.FixedZone("NPT", 5*3600+45*60)), false},
		{time.Time{}, false},
	} {
		if err := HalfHourBoundary(c.t); (err == nil) != c.ok {
			t.Errorf("HalfHourBoundary(%v) = %v", c.t, err)
		}
	}
}

func TestFlexWindow(t *testing.T) {
	start := time.Date(2026, 1, 13, 17, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		end  time.Time
		want string
	}{
		{start.Add(30 * time.Minute), ""},
		{start.Add(24 * time.Hour), ""},
		{start, msgEndAfter},
		{start.Add(-time.Hour), msgEndAfter},
		{start.Add(24*time.Hour + 30*time.Minute), msgWindowLong},
	} {
		err := FlexWindow(start, c.end)
		if got := msg(err); got != c.want {
			t.Errorf("FlexWindow(%v, %v) = %q, want %q", start, c.end, got, c.want)
		}
	}
}

func TestFlexDirection(t *testing.T) {
	for _, d := range []string{"turn_down", "turn_up"} {
		if err := FlexDirection(d); err != nil {
			t.Errorf("%s: %v", d, err)
		}
	}
	for _, d := range []string{"", "down", "TURN_UP", "turn_down "} {
		if err := FlexDirection(d); err == nil || err.(*Error).Type != "enum" {
			t.Errorf("%q: %v", d, err)
		}
	}
}

func TestParseFlexRate(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"25", 2500, true}, {"0", 0, true}, {"12.5", 1250, true}, {"0.75", 75, true}, {"0.01", 1, true},
		{"999999.99", 99_999_999, true},
		{"-1", 0, false}, {"1000000", 0, false}, {"25.555", 0, false}, {"025", 0, false}, {"", 0, false},
		{"25.", 0, false}, {".5", 0, false}, {"1e3", 0, false}, {" 25", 0, false}, {"NaN", 0, false},
	} {
		got, err := ParseFlexRate(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseFlexRate(%q) = %d, %v", c.in, got, err)
		}
		if c.ok && FormatFlexRate(got) != c.in {
			t.Errorf("FormatFlexRate(%d) = %q, want %q", got, FormatFlexRate(got), c.in)
		}
	}
	if flexRateRE.String() != FlexRatePattern {
		t.Error("FlexRatePattern is not the expression the rule uses")
	}
}

func TestFlexRateNumber(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want int64
		typ  string
	}{
		{25, 2500, ""}, {0, 0, ""}, {12.5, 1250, ""}, {0.1, 10, ""}, {0.29, 29, ""}, {1.15, 115, ""},
		{999999.99, 99_999_999, ""},
		{-0.01, 0, "value_error"}, {25.555, 0, "value_error"}, {1e6, 0, "value_error"},
		{math.NaN(), 0, "finite_number"}, {math.Inf(1), 0, "finite_number"},
	} {
		got, err := FlexRateNumber(c.in)
		typ := ""
		if err != nil {
			typ = err.(*Error).Type
		}
		if got != c.want || typ != c.typ {
			t.Errorf("FlexRateNumber(%v) = %d, %v; want %d, %q", c.in, got, err, c.want, c.typ)
		}
	}
}

func TestFlexRateCentipence(t *testing.T) {
	for c, ok := range map[int64]bool{0: true, 2500: true, MaxFlexRateCentipence: true, -1: false, MaxFlexRateCentipence + 1: false} {
		if err := FlexRateCentipence(c); (err == nil) != ok {
			t.Errorf("FlexRateCentipence(%d) = %v", c, err)
		}
	}
}

func msg(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestFlexStartNotTooEarly(t *testing.T) {
	now := time.Date(2026, 11, 27, 9, 10, 0, 0, time.UTC)
	for _, c := range []struct {
		start time.Time
		want  string
	}{
		{now.Add(24 * time.Hour), ""},
		{now.Add(-time.Hour), ""},
		{now.Add(-MaxFlexBackdate), ""},
		{now.Add(-MaxFlexBackdate - time.Second), msgStartOld},
		{now.AddDate(-1, 0, 0), msgStartOld},
	} {
		if got := msg(FlexStartNotTooEarly(c.start, now)); got != c.want {
			t.Errorf("FlexStartNotTooEarly(%v) = %q, want %q", c.start, got, c.want)
		}
	}
}

func TestFlexRateAtMost(t *testing.T) {
	for _, c := range []struct {
		rate, maximum int64
		ok            bool
	}{
		{2500, DefaultMaxFlexRateCentipence, true},
		{DefaultMaxFlexRateCentipence, DefaultMaxFlexRateCentipence, true},
		{DefaultMaxFlexRateCentipence + 1, DefaultMaxFlexRateCentipence, false},
		{MaxFlexRateCentipence, DefaultMaxFlexRateCentipence, false},
		{MaxFlexRateCentipence, MaxFlexRateCentipence, true},
		{0, 0, true},
		{1, 0, false},
	} {
		err := FlexRateAtMost(c.rate, c.maximum)
		if (err == nil) != c.ok {
			t.Errorf("FlexRateAtMost(%d, %d) = %v", c.rate, c.maximum, err)
		}
		if err != nil && err.(*Error).Type != "value_error" {
			t.Errorf("FlexRateAtMost(%d, %d) type %q", c.rate, c.maximum, err.(*Error).Type)
		}
	}
	if got := msg(FlexRateAtMost(100_001, 100_000)); got != "Rate must be at most 1000 pence per kWh, the organisation's maximum" {
		t.Errorf("message %q", got)
	}
}

func TestOrganisationMaxFlexRate(t *testing.T) {
	for _, c := range []struct {
		value   string
		present bool
		want    int64
	}{
		{"", false, DefaultMaxFlexRateCentipence},
		{"5000", true, 500_000},
		{" 1250.5 ", true, 125_050},
		{"0", true, 0},
		{"999999.99", true, MaxFlexRateCentipence},
		{"1000000", true, DefaultMaxFlexRateCentipence}, // above any rate: not a rate
		{"-1", true, DefaultMaxFlexRateCentipence},
		{"lots", true, DefaultMaxFlexRateCentipence},
		{"", true, DefaultMaxFlexRateCentipence},
	} {
		if got := OrganisationMaxFlexRate(c.value, c.present); got != c.want {
			t.Errorf("OrganisationMaxFlexRate(%q, %v) = %d, want %d", c.value, c.present, got, c.want)
		}
	}
}

func TestCheckFlexEvent(t *testing.T) {
	start := time.Date(2026, 6, 30, 17, 30, 0, 0, time.UTC)
	ok := FlexEvent{Start: start, End: start.Add(time.Hour), Direction: "turn_down", RateCentipence: 2500}
	for _, c := range []struct {
		name   string
		change func(*FlexEvent)
		want   []string // "field: message", in order
	}{
		{"an hour's event", func(*FlexEvent) {}, nil},
		{"declared a day before", func(e *FlexEvent) { e.DeclaredAt = start.Add(-24 * time.Hour) }, nil},
		{"declared 7 days after", func(e *FlexEvent) { e.DeclaredAt = start.Add(MaxFlexBackdate) }, nil},
		{"declared more than 7 days after", func(e *FlexEvent) { e.DeclaredAt = start.Add(MaxFlexBackdate + time.Second) },
			[]string{"start: " + msgStartOld}},
		{"off the half-hour, both ends", func(e *FlexEvent) { e.Start, e.End = start.Add(time.Minute), start.Add(time.Hour+time.Minute) },
			[]string{"start: " + msgHalfHour, "end: " + msgHalfHour}},
		{"an end before the start", func(e *FlexEvent) { e.End = start.Add(-time.Hour) }, []string{"end: " + msgEndAfter}},
		{"longer than a day", func(e *FlexEvent) { e.End = start.Add(MaxFlexWindow + 30*time.Minute) }, []string{"end: " + msgWindowLong}},
		{"no direction", func(e *FlexEvent) { e.Direction = "" }, []string{"direction: " + msgDirection}},
		{"a negative rate", func(e *FlexEvent) { e.RateCentipence = -1 }, []string{"rate: " + msgRate}},
		{"a deadline at the end", func(e *FlexEvent) { e.Deadline = e.End }, nil},
		{"a deadline before the end", func(e *FlexEvent) { e.Deadline = e.End.Add(-time.Minute) }, []string{"deadline: " + msgDeadline}},
		{"nothing right", func(e *FlexEvent) { *e = FlexEvent{DeclaredAt: start, RateCentipence: MaxFlexRateCentipence + 1} },
			[]string{"start: " + msgHalfHour, "start: " + msgStartOld, "end: " + msgHalfHour, "end: " + msgEndAfter,
				"direction: " + msgDirection, "rate: " + msgRateHigh}},
	} {
		e := ok
		c.change(&e)
		problems := CheckFlexEvent(e)
		got := make([]string, 0, len(problems))
		for _, p := range problems {
			got = append(got, p.Error())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s: CheckFlexEvent = %q, want %q", c.name, got, c.want)
		}
	}
}
