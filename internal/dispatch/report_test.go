package dispatch_test

import (
	"errors"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/validation"
)

// A report is judged on its timestamp and its arrival against the dispatch's window, with
// MaxReportSkew of leeway each way (dispatch.Judge, dispatch.CheckReportTime).
func TestReportTiming(t *testing.T) {
	now := time.Date(2026, 11, 29, 17, 0, 0, 0, time.UTC)
	skew := dispatch.MaxReportSkew
	if skew != validation.MaxClockSkew {
		t.Fatalf("MaxReportSkew %s, want the consent times' %s", skew, validation.MaxClockSkew)
	}
	for _, tc := range []struct {
		name        string
		from, to    dispatch.Status
		at, arrival time.Time
		windowStart time.Time
		changed     bool
		err         error
	}{
		{"executed within the window", dispatch.Accepted, dispatch.Executed, now, now, now.Add(-time.Hour), true, nil},
		{"executed at the window's start", dispatch.Accepted, dispatch.Executed, now, now, now, true, nil},
		{"executed a clock's skew early", dispatch.Accepted, dispatch.Executed, now, now, now.Add(skew), true, nil},
		{"executed before the window", dispatch.Accepted, dispatch.Executed, now, now, now.Add(skew + time.Second), false,
			dispatch.ErrNotStarted},
		{"executed a day ahead", dispatch.Requested, dispatch.Executed, now, now, now.Add(24 * time.Hour), false,
			dispatch.ErrNotStarted},
		{"executed, timestamped before the window, arriving in it", dispatch.Accepted, dispatch.Executed,
			now.Add(-time.Hour), now, now.Add(-30 * time.Minute), false, dispatch.ErrNotStarted},
		{"executed, timestamped in the window, arriving before it", dispatch.Accepted, dispatch.Executed,
			now.Add(time.Hour), now, now.Add(30 * time.Minute), false, dispatch.ErrNotStarted},
		{"executed in year 1 of a window today", dispatch.Accepted, dispatch.Executed,
			time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), now, now.Add(-time.Hour), false, dispatch.ErrNotStarted},
		{"accepted before the window", dispatch.Received, dispatch.Accepted, now, now, now.Add(24 * time.Hour), true, nil},
		{"failed before the window", dispatch.Accepted, dispatch.Failed, now, now, now.Add(24 * time.Hour), true, nil},
		{"rejected before the window", dispatch.Requested, dispatch.Rejected, now, now, now.Add(24 * time.Hour), true, nil},
		{"executed again, unchanged", dispatch.Executed, dispatch.Executed, now, now, now.Add(24 * time.Hour), false, nil},
		{"a step back is the machine's refusal first", dispatch.Executed, dispatch.Accepted, now, now, now.Add(time.Hour),
			false, dispatch.ErrFinal},
	} {
		changed, err := dispatch.Judge(tc.from, tc.to, tc.at, tc.arrival, tc.windowStart)
		if changed != tc.changed || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
			t.Errorf("%s: Judge = %v, %v; want %v, %v", tc.name, changed, err, tc.changed, tc.err)
		}
	}

	for _, tc := range []struct {
		name     string
		at       time.Time
		wantType string
	}{
		{"now", now, ""},
		{"a minute ago", now.Add(-time.Minute), ""},
		{"last year", now.AddDate(-1, 0, 0), ""},
		{"a skew ahead", now.Add(skew), ""},
		{"beyond the skew", now.Add(skew + time.Second), "value_error"},
		{"year 9999", time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), "value_error"},
		{"year 1", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), "greater_than_equal"},
		{"1899", time.Date(1899, 12, 31, 23, 0, 0, 0, time.UTC), "greater_than_equal"},
		{"year 10000", time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), "less_than_equal"},
	} {
		err := dispatch.CheckReportTime(tc.at, now)
		if tc.wantType == "" {
			if err != nil {
				t.Errorf("%s: CheckReportTime = %v", tc.name, err)
			}
			continue
		}
		var ve *validation.Error
		if !errors.As(err, &ve) || ve.Type != tc.wantType {
			t.Errorf("%s: CheckReportTime = %v, want a %s validation error", tc.name, err, tc.wantType)
		}
		if tc.wantType == "value_error" && !errors.Is(err, dispatch.ErrReportInFuture) {
			t.Errorf("%s: %v is not ErrReportInFuture", tc.name, err)
		}
	}
}
