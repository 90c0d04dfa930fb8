package validation

import "time"

// ---------------------------------------------------------------------------------------
// The supported range of dates and times: one rule for every date and time a client sends
// (path, query, body, form; docs/api.md, "Dates and times").
//
// PostgreSQL's timestamptz and date reach far wider (4713 BC onwards), but Go, JSON and
// RFC 3339 stop at year 9999, year 0 (1 BC) is no year a person means and no Python datetime
// (MINYEAR 1), and before 1900 the UK zone is not even GMT everywhere (local mean time until
// 1847, offsets in seconds that RFC 3339 cannot write). Nothing Flexsite records (a reading, a
// price, a dispatch, a transaction, a consent, an installation) is older than 1900, so that
// is the first year taken; the last is 9999, the last year RFC 3339 writes. An instant is
// judged in UTC, as it is stored.

// EarliestTime and LatestTime bound the instants taken (both included); EarliestDate and
// LatestDate the calendar dates.
var (
	EarliestTime = time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)
	LatestTime   = time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	EarliestDate = EarliestTime
	LatestDate   = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)
)

// Messages of the range rule.
const (
	msgTimeTooEarly = "Input should be greater than or equal to 1900-01-01T00:00:00Z"
	msgTimeTooLate  = "Input should be less than or equal to 9999-12-31T23:59:59Z"
	msgDateTooEarly = "Input should be greater than or equal to 1900-01-01"
	msgDateTooLate  = "Input should be less than or equal to 9999-12-31"
)

// TimeInRange refuses an instant outside EarliestTime..LatestTime (in UTC) with Type
// "greater_than_equal" or "less_than_equal", as pydantic's ge/le constraints do.
// ParseAwareTimestamp calls it; call it on any instant a client sends that reaches Flexsite
// some other way.
func TimeInRange(t time.Time) error {
	switch u := t.UTC(); {
	case u.Before(EarliestTime):
		return newError("greater_than_equal", msgTimeTooEarly)
	case u.After(LatestTime):
		return newError("less_than_equal", msgTimeTooLate)
	}
	return nil
}

// DateInRange refuses a calendar date (its year, month and day; the zone is not looked at)
// outside EarliestDate..LatestDate, with Type "greater_than_equal" or "less_than_equal".
// ParseDate calls it.
func DateInRange(year int, month time.Month, day int) error {
	d := time.Date(year, month, day, 0, 0, 0, 0, time.UTC)
	switch {
	case d.Before(EarliestDate):
		return newError("greater_than_equal", msgDateTooEarly)
	case d.After(LatestDate):
		return newError("less_than_equal", msgDateTooLate)
	}
	return nil
}
