package validation

import (
	"slices"
	"testing"
	"time"
)

func TestParseOffPeakTimes(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []MinuteRange // nil: refused
	}{
		{"00:00-07:00", []MinuteRange{{0, 420}}},
		{"00:00-05:30, 23:30-24:00", []MinuteRange{{0, 330}, {1410, 1440}}},
		{"00:00-05:30,23:30-24:00", []MinuteRange{{0, 330}, {1410, 1440}}},
		{"00:00-05:30 ,23:30-24:00", []MinuteRange{{0, 330}, {1410, 1440}}},
		{"00:00-05:30 , 23:30-24:00", []MinuteRange{{0, 330}, {1410, 1440}}},
		{"13:00-16:00, 00:30-04:30, 22:00-23:59", []MinuteRange{{780, 960}, {30, 270}, {1320, 1439}}},
		{"00:00-24:00", []MinuteRange{{0, 1440}}},
		// Anything else of opening_hours, or of any other syntax, is refused.
		{"", nil},
		{" ", nil},
		{"Mo-Fr 00:00-07:00", nil},
		{"Mo-Su 00:00-07:00", nil},
		{"24/7", nil},
		{"00:00-07:00; Sa 00:00-24:00", nil},
		{"00:00-07:00 off", nil},
		{"sunrise-sunset", nil},
		{"00:00+", nil},
		{"0:00-7:00", nil},
		{"00:00-07:00,", nil},
		{",00:00-07:00", nil},
		{" 00:00-07:00", nil},
		{"00:00-07:00 ", nil},
		{"00:00-05:30,  23:30-24:00", nil},
		{"00:00 - 07:00", nil},
		{"25:00-26:00", nil},
		{"00:00-25:00", nil},
		{"00:60-01:00", nil},
		{"00:00-00:60", nil},
		{"24:00-24:00", nil},
		{"24:00-01:00", nil},
		{"00:00-24:30", nil},
		{"07:00-00:00", nil},
		{"23:30-05:30", nil},
		{"07:00-07:00", nil},
		{"０0:00-07:00", nil},
	} {
		got, err := ParseOffPeakTimes(tc.in)
		if tc.want == nil {
			if err == nil {
				t.Errorf("%q: accepted as %v", tc.in, got)
			} else if ve, ok := err.(*Error); !ok || ve.Type != "off_peak_times" || ve.Msg == "" { //nolint:errorlint // the package's own error
				t.Errorf("%q: error %#v", tc.in, err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

func TestCheckTimezone(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"Europe/London", true}, {"UTC", true}, {"America/New_York", true},
		{"", false}, {"Local", false}, {"Europe/Narnia", false}, {"GMT+25", false}, {"../../etc/passwd", false},
		{"europe/london", false},
	} {
		if err := CheckTimezone(tc.in); (err == nil) != tc.ok {
			t.Errorf("%q: %v", tc.in, err)
		}
	}
}

func TestParseWallTime(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration // -1: refused
	}{
		{"07:30", 7*time.Hour + 30*time.Minute}, {"07:30:15", 7*time.Hour + 30*time.Minute + 15*time.Second},
		{"23:59:59.5", 23*time.Hour + 59*time.Minute + 59*time.Second}, {"07:30:00Z", 7*time.Hour + 30*time.Minute},
		{"07:30+01:00", 7*time.Hour + 30*time.Minute},
		{"24:00", -1}, {"7:30", -1}, {"07:60", -1}, {"07:30:60", -1}, {"", -1}, {"2026-01-01T07:30:00Z", -1},
	} {
		got, err := ParseWallTime(tc.in)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%q: accepted as %v", tc.in, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if again, err := ParseWallTime(FormatWallTime(got)); err != nil || again != got.Truncate(time.Second) {
			t.Errorf("%q: written as %q, read back as %v, %v", tc.in, FormatWallTime(got), again, err)
		}
	}
	if got := FormatWallTime(7*time.Hour + 5*time.Minute + 9*time.Second + time.Millisecond); got != "07:05:09" {
		t.Errorf("FormatWallTime: %q", got)
	}
}

// FuzzParseOffPeakTimes: the grammar never panics, refuses with its own error, and what it
// accepts is within the day and written back (FormatOffPeakTimes) reads as the same ranges.
func FuzzParseOffPeakTimes(f *testing.F) {
	for _, s := range []string{
		"00:00-07:00", "00:00-05:30, 23:30-24:00", "00:00-05:30,23:30-24:00", "Mo-Fr 00:00-07:00", "24:00-24:00",
		"07:00-00:00", "00:60-01:00", "", ",", "00:00-07:00 ,  ", "99:99-99:99",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseOffPeakTimes(in)
		if err != nil {
			fuzzErr(t, in, err, "off_peak_times")
			return
		}
		if len(got) == 0 {
			t.Fatalf("%q: accepted with no range", in)
		}
		for _, r := range got {
			if r.Start < 0 || r.Start >= r.End || r.End > minutesPerDay {
				t.Fatalf("%q: range %+v outside the day", in, r)
			}
		}
		again, err := ParseOffPeakTimes(FormatOffPeakTimes(got))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("%q: written back as %q, read as %v, %v", in, FormatOffPeakTimes(got), again, err)
		}
	})
}
