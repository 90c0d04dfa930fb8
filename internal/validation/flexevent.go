package validation

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A flex event's rules (docs/platform.md, "Flex events"): the
// window, the direction and the rate. CheckFlexEvent is their one composition: the REST API's
// use case (internal/app/flexevents), the admission webhook and internal/settlement call it,
// and the CRD's CEL rules are its declarative twin where CEL can say the same
// (controllers/flexevent_rules_test.go feeds both one table). It lives here, not in
// internal/settlement, because it judges what is declared, before any settling: the doors
// import this package already, and settlement imports it too.

// MaxFlexWindow is the longest flex event window: its baseline lays the window on previous
// days, which only makes sense within a day.
const MaxFlexWindow = 24 * time.Hour

// MaxFlexRateCentipence is the highest rate, in hundredths of a penny per kWh: 999,999.99 p,
// six digits before the point (the CRD's pattern allows no more).
const MaxFlexRateCentipence = 99_999_999

// MaxFlexBackdate is how far before now (when it is declared) a flex event may start.
// Settlement of history is what readings are for: an event declared over a past window
// could be fitted to readings already sent, and pay for flexibility nobody was asked for.
const MaxFlexBackdate = 7 * 24 * time.Hour

// DefaultMaxFlexRateCentipence is an organisation's highest flex rate, in hundredths of a
// penny per kWh (1,000 p/kWh), when its namespace does not declare one
// (flexv1.MaxFlexRateAnnotation).
const DefaultMaxFlexRateCentipence = 100_000

// FlexDirections are the directions a flex event asks for, as the REST API spells them.
var FlexDirections = []string{"turn_down", "turn_up"}

// Messages of the flex event rules.
const (
	msgHalfHour   = "Time must be on a half-hour boundary (hh:00:00 or hh:30:00)"
	msgEndAfter   = "end_at must be after start_at"
	msgWindowLong = "A flex event must last at most 24 hours"
	msgDirection  = "Input should be 'turn_down' or 'turn_up'"
	msgRate       = "Rate must be a number of pence per kWh, at least 0, with at most 2 decimal places"
	msgRateHigh   = "Rate must be at most 999999.99 pence per kWh"
	msgStartOld   = "A flex event may start at most 7 days before it is declared: settlement of history is what readings are for"
	msgDeadline   = "deadline must not be before endAt"
)

// FlexEvent is what CheckFlexEvent reads of a flex event, whichever door declared it.
type FlexEvent struct {
	// Start and End bound the window [Start, End).
	Start, End time.Time
	// Direction is turn_down or turn_up.
	Direction string
	// RateCentipence is the household's rate in hundredths of a penny per kWh. A door that
	// could not read the rate reports that itself and passes 0, so it is not reported twice.
	RateCentipence int64
	// Deadline is when sites still without readings are settled; zero: the default, which is
	// after End.
	Deadline time.Time
	// DeclaredAt is when the event is being declared, for the bound on how far back it may
	// start (MaxFlexBackdate); zero when it is not being declared (settlement reads an event
	// declared long ago, and an update that keeps the start is not a new declaration).
	DeclaredAt time.Time
}

// FlexField names the part of a flex event a problem is with; each door spells it its own
// way (start_at on REST, spec.startAt in admission).
type FlexField string

// The parts of a flex event.
const (
	FlexStartField     FlexField = "start"
	FlexEndField       FlexField = "end"
	FlexDirectionField FlexField = "direction"
	FlexRateField      FlexField = "rate"
	FlexDeadlineField  FlexField = "deadline"
)

// FlexProblem is one thing wrong with a flex event, on one of its parts.
type FlexProblem struct {
	Field FlexField
	Err   *Error
}

// Error is the field and the message, for a door that has no field of its own to name.
func (p FlexProblem) Error() string { return string(p.Field) + ": " + p.Err.Msg }

// CheckFlexEvent is every rule of a flex event's window, direction and rate, in the order a
// person reads them: each time within the supported range (TimeInRange), the start (on a half-hour; not more than MaxFlexBackdate before
// DeclaredAt), the end (on a half-hour; after the start; at most MaxFlexWindow after it), the
// direction, the rate, the deadline (not before the end). Nil when none is broken.
func CheckFlexEvent(e FlexEvent) []FlexProblem {
	var out []FlexProblem
	add := func(f FlexField, err error) {
		if err != nil {
			out = append(out, FlexProblem{Field: f, Err: err.(*Error)})
		}
	}
	// An instant out of the supported range (TimeInRange), whichever door it came through; a
	// zero one is the door's to report (it could not read it).
	for _, t := range []struct {
		f  FlexField
		at time.Time
	}{{FlexStartField, e.Start}, {FlexEndField, e.End}, {FlexDeadlineField, e.Deadline}} {
		if !t.at.IsZero() {
			add(t.f, TimeInRange(t.at))
		}
	}
	add(FlexStartField, HalfHourBoundary(e.Start))
	if !e.DeclaredAt.IsZero() {
		add(FlexStartField, FlexStartNotTooEarly(e.Start, e.DeclaredAt))
	}
	add(FlexEndField, HalfHourBoundary(e.End))
	add(FlexEndField, FlexWindow(e.Start, e.End))
	add(FlexDirectionField, FlexDirection(e.Direction))
	add(FlexRateField, FlexRateCentipence(e.RateCentipence))
	if !e.Deadline.IsZero() && e.Deadline.Before(e.End) {
		add(FlexDeadlineField, newError("value_error", msgDeadline))
	}
	return out
}

// HalfHourBoundary refuses a time not on a half-hour boundary (UTC and UK local time alike:
// the UK's offsets are whole hours), with Type "value_error".
func HalfHourBoundary(t time.Time) error {
	if t.IsZero() || t.Nanosecond() != 0 || t.Unix()%1800 != 0 {
		return newError("value_error", msgHalfHour)
	}
	return nil
}

// FlexWindow refuses a window whose end is not after its start, or that lasts longer than
// MaxFlexWindow, with Type "value_error". Its boundaries are HalfHourBoundary's to judge.
func FlexWindow(start, end time.Time) error {
	switch {
	case !end.After(start):
		return newError("value_error", msgEndAfter)
	case end.Sub(start) > MaxFlexWindow:
		return newError("value_error", msgWindowLong)
	}
	return nil
}

// FlexDirection refuses a direction other than turn_down and turn_up, with Type "enum".
func FlexDirection(d string) error {
	for _, ok := range FlexDirections {
		if d == ok {
			return nil
		}
	}
	return newError("enum", msgDirection)
}

// FlexRateCentipence refuses a rate (hundredths of a penny per kWh) below zero or above
// MaxFlexRateCentipence, with Type "value_error".
func FlexRateCentipence(c int64) error {
	switch {
	case c < 0:
		return newError("value_error", msgRate)
	case c > MaxFlexRateCentipence:
		return newError("value_error", msgRateHigh)
	}
	return nil
}

// FlexStartNotTooEarly refuses an event that starts more than MaxFlexBackdate before now,
// with Type "value_error".
func FlexStartNotTooEarly(start, now time.Time) error {
	if start.Before(now.Add(-MaxFlexBackdate)) {
		return newError("value_error", msgStartOld)
	}
	return nil
}

// FlexRateAtMost refuses a rate (hundredths of a penny per kWh) above the organisation's
// maximum (OrganisationMaxFlexRate), with Type "value_error".
func FlexRateAtMost(c, maximum int64) error {
	if c > maximum {
		return newError("value_error", fmt.Sprintf(
			"Rate must be at most %s pence per kWh, the organisation's maximum", FormatFlexRate(maximum)))
	}
	return nil
}

// OrganisationMaxFlexRate is an organisation's highest flex rate in hundredths of a penny
// per kWh, from its namespace's annotation (flexv1.MaxFlexRateAnnotation: pence per kWh, as
// a FlexEvent spells a rate, "1000" or "1250.5"): DefaultMaxFlexRateCentipence when it is
// absent or not a rate, so that a mistyped annotation never lifts the bound.
func OrganisationMaxFlexRate(annotation string, present bool) int64 {
	if !present {
		return DefaultMaxFlexRateCentipence
	}
	c, err := ParseFlexRate(strings.TrimSpace(annotation))
	if err != nil {
		return DefaultMaxFlexRateCentipence
	}
	return c
}

// flexRateRE is a rate as a FlexEvent spells it: pence per kWh, at most six digits before
// the point and two after, no sign. The CRD's pattern is the same expression.
var flexRateRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,5})(\.[0-9]{1,2})?$`)

// FlexRatePattern is flexRateRE's expression, for the CRD's marker to be checked against.
const FlexRatePattern = `^(0|[1-9][0-9]{0,5})(\.[0-9]{1,2})?$`

// ParseFlexRate reads a FlexEvent's rate ("25", "12.5", "0.75") into hundredths of a penny
// per kWh, exactly (no float on the way).
func ParseFlexRate(s string) (int64, error) {
	if !flexRateRE.MatchString(s) {
		return 0, newError("value_error", msgRate)
	}
	whole, frac, _ := strings.Cut(s, ".")
	frac += strings.Repeat("0", 2-len(frac))
	c, err := strconv.ParseInt(whole+frac, 10, 64)
	if err != nil {
		return 0, newError("value_error", msgRate)
	}
	return c, FlexRateCentipence(c)
}

// FlexRateNumber reads a rate sent as a JSON number (the REST API's rate_pence_per_kwh) into
// hundredths of a penny per kWh: finite, at least 0, with at most 2 decimal places (25.5 is
// 2550; 25.555 is refused rather than rounded, as money is not rounded silently).
func FlexRateNumber(x float64) (int64, error) {
	if err := FiniteNumber(x); err != nil {
		return 0, err
	}
	if x < 0 {
		return 0, newError("value_error", msgRate)
	}
	if x > float64(MaxFlexRateCentipence)/100 {
		return 0, newError("value_error", msgRateHigh)
	}
	c := math.Round(x * 100)
	if math.Abs(x*100-c) > 1e-6 {
		return 0, newError("value_error", msgRate)
	}
	return int64(c), nil
}

// FormatFlexRate is a rate (hundredths of a penny per kWh) as a FlexEvent spells it:
// 2500 is "25", 1250 is "12.5", 75 is "0.75".
func FormatFlexRate(c int64) string {
	s := fmt.Sprintf("%d.%02d", c/100, c%100)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}
