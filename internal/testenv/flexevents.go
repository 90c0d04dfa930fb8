package testenv

import (
	"time"

	"github.com/flexsite/flexsite/internal/settlement"
)

// SettledWorkingDay is 17:30 UK time on the latest working day at least 3 days before now:
// the start of a flex event whose deadline (end + 48 h) has passed, and that starts less than
// 6 days before now, within validation.MaxFlexBackdate (at most a day for the time of day
// and two for a weekend go back past the 3).
func SettledWorkingDay(now time.Time) time.Time {
	then := now.Add(-72 * time.Hour).In(settlement.London)
	d := time.Date(then.Year(), then.Month(), then.Day(), 17, 30, 0, 0, settlement.London)
	if d.After(then) {
		d = d.AddDate(0, 0, -1)
	}
	for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
		d = d.AddDate(0, 0, -1)
	}
	return time.Date(d.Year(), d.Month(), d.Day(), 17, 30, 0, 0, settlement.London)
}
