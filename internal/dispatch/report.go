package dispatch

import (
	"errors"
	"fmt"
	"time"

	"github.com/flexsite/flexsite/internal/validation"
)

// # When a report may be believed
//
// A status report carries its own timestamp, and arrives at Flexsite's now. The timestamp must
// be a time (within validation's supported range, docs/api.md "Dates and times"), and not later
// than now by more than MaxReportSkew (an asset controller's clock a little ahead of
// Flexsite's). EXECUTED says the device did what the dispatch asked over its window: it is
// refused while the window has not started, judged on the report's timestamp and on its arrival
// alike, each with MaxReportSkew of leeway (ExecutedWindowStartBy). The other statuses are about
// the offer (received, accepted, rejected) or its failure, which may come at any time before
// the window.

// MaxReportSkew is how far an asset controller's clock may be from Flexsite's: the consent
// times' leeway (validation.MaxClockSkew), one bound for every clock a client sends.
const MaxReportSkew = validation.MaxClockSkew

// Refusals of a report's timing.
var (
	// ErrReportInFuture: the report's timestamp is later than its arrival, beyond MaxReportSkew.
	ErrReportInFuture = errors.New("the report's timestamp is in the future")
	// ErrNotStarted: EXECUTED reported of a dispatch whose window has not started.
	ErrNotStarted = errors.New("the dispatch's window has not started")
)

// CheckReportTime judges a report's own timestamp at, arriving at now: an error wraps the
// validation.Error to answer at the timestamp field (a time out of the supported range, or
// ErrReportInFuture beyond MaxReportSkew of now).
func CheckReportTime(at, now time.Time) error {
	if err := validation.TimeInRange(at); err != nil {
		return err
	}
	if at.After(now.Add(MaxReportSkew)) {
		return fmt.Errorf("%w: %w", ErrReportInFuture, &validation.Error{Type: "value_error",
			Msg: fmt.Sprintf("Timestamp must not be in the future (more than %s ahead of the server's clock)", MaxReportSkew)})
	}
	return nil
}

// ExecutedWindowStartBy is the latest window start of a dispatch that may be reported
// EXECUTED by a report timestamped at arriving at now: the earlier of the two, plus
// MaxReportSkew, to the microsecond (as PostgreSQL keeps times, so that a store that judges
// the report in its own statement, comparing the window's start with it, judges alike).
func ExecutedWindowStartBy(at, now time.Time) time.Time {
	if now.Before(at) {
		at = now
	}
	return at.Add(MaxReportSkew).Truncate(time.Microsecond)
}

// Judge is Step (the state machine) and then the report's timing against the dispatch's
// window, which starts at windowStart: EXECUTED of a window that starts after
// ExecutedWindowStartBy(at, now) is ErrNotStarted (a conflict, as Step's refusals).
func Judge(from, to Status, at, now, windowStart time.Time) (changed bool, err error) {
	changed, err = Step(from, to)
	if err != nil || !changed {
		return changed, err
	}
	if to == Executed && windowStart.After(ExecutedWindowStartBy(at, now)) {
		return false, fmt.Errorf("%w: EXECUTED at %s of a window that starts at %s", ErrNotStarted, Stamp(at), Stamp(windowStart))
	}
	return true, nil
}
