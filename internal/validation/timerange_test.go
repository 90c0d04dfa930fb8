package validation

import (
	"testing"
	"time"
)

// The supported range of dates and times (docs/api.md, "Dates and times"): one rule, through
// every parser a door reads a date or a time with.
func TestTimeRange(t *testing.T) {
	instants := []struct {
		in, wantType string // "" when taken
	}{
		{"1900-01-01T00:00:00Z", ""},
		{"1900-01-01T01:00:00+01:00", ""}, // 1900-01-01T00:00Z
		{"2026-11-29T06:30:00Z", ""},
		{"9999-12-31T23:59:59.999999999Z", ""},
		{"9999-12-31T23:59:59Z", ""},
		{"1899-12-31T23:59:59.999999999Z", "greater_than_equal"},
		{"1900-01-01T00:30:00+01:00", "greater_than_equal"}, // 1899 in UTC
		{"1000-06-15T12:00:00Z", "greater_than_equal"},
		{"0001-01-01T00:00:00Z", "greater_than_equal"},
		{"0000-01-01T00:00:00Z", "datetime_parsing"},      // no year 0
		{"9999-12-31T23:59:59-01:00", "datetime_parsing"}, // year 10000 in UTC
		{"10000-01-01T00:00:00Z", "datetime_parsing"},
		{"-0001-01-01T00:00:00Z", "datetime_parsing"},
		{"infinity", "datetime_parsing"}, // PostgreSQL's spellings are no times here
		{"-infinity", "datetime_parsing"},
		{"Infinity", "datetime_parsing"},
		{"epoch", "datetime_parsing"},
		{"now", "datetime_parsing"},
		{"today", "datetime_parsing"},
		{"allballs", "datetime_parsing"},
		{"294277-01-01T00:00:00Z", "datetime_parsing"},
	}
	for _, tt := range instants {
		got, err := ParseAwareTimestamp(tt.in)
		if tt.wantType == "" {
			noErr(t, err)
			if err := TimeInRange(got); err != nil {
				t.Errorf("TimeInRange(%q) = %v", tt.in, err)
			}
			continue
		}
		_ = checkErr(t, err, tt.wantType)
	}

	dates := []struct {
		in, wantType string
	}{
		{"1900-01-01", ""},
		{"2026-11-29", ""},
		{"9999-12-31", ""},
		{"1899-12-31", "greater_than_equal"},
		{"0001-01-01", "greater_than_equal"},
		{"0000-01-01", "date_parsing"},
		{"10000-01-01", "date_parsing"},
		{"-0001-01-01", "date_parsing"},
		{"infinity", "date_parsing"},
		{"-infinity", "date_parsing"},
		{"epoch", "date_parsing"},
		{"today", "date_parsing"},
	}
	for _, tt := range dates {
		_, err := ParseDate(tt.in)
		if tt.wantType == "" {
			noErr(t, err)
			continue
		}
		_ = checkErr(t, err, tt.wantType)
	}

	// The rule itself, on instants that reach Flexsite some other way (admission, a store).
	for _, tt := range []struct {
		at       time.Time
		wantType string
	}{
		{EarliestTime, ""},
		{LatestTime, ""},
		{EarliestTime.Add(-time.Nanosecond), "greater_than_equal"},
		{LatestTime.Add(time.Nanosecond), "less_than_equal"},
		{time.Time{}, "greater_than_equal"},
		{time.Date(1900, 1, 1, 0, 30, 0, 0, time.FixedZone("", 3600)), "greater_than_equal"},
	} {
		err := TimeInRange(tt.at)
		if tt.wantType == "" {
			noErr(t, err)
			continue
		}
		_ = checkErr(t, err, tt.wantType)
	}
	if err := ValidateConsentTime(time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Now()); err == nil {
		t.Error("ValidateConsentTime took year 1")
	}
	if p := CheckFlexEvent(FlexEvent{Start: time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC),
		End: time.Date(1000, 1, 1, 1, 0, 0, 0, time.UTC), Direction: "turn_down"}); len(p) == 0 || p[0].Field != FlexStartField ||
		p[0].Err.Type != "greater_than_equal" {
		t.Errorf("CheckFlexEvent of a year-1000 window = %v", p)
	}
}
