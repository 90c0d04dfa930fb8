// Package settlement holds the rules that turn a flex event and a site's half-hourly energy
// into what the site delivered and what it is credited: the baseline, the actual, the
// delivered energy and the credit (docs/platform.md, "How a site is settled"), as one pure
// function, Settle, so anyone can recompute a household's reward by hand. It also turns raw
// readings into that half-hourly energy (readings.go).
//
// The package is pure: no clock, no I/O, no Kubernetes, no database, no HTTP
// (test/architecture holds it to that). It embeds the time zone database, so the UK's
// half-hours are right on a machine without one.
//
// # Units
//
// Energy is an integer number of milliwatt-hours (mWh): the spec's own rounding example
// (30 p × 1.2345 kWh) needs a tenth of a watt-hour, and integers add up exactly where floats
// do not. The rate is an integer number of hundredths of a penny per kWh (25 p = 2500).
// flex_kwh is returned as whole watt-hours (kWh with 3 decimals). The baseline is a mean, so
// not always a whole number of mWh: the rules compute with the sum over the days used (exact)
// and divide once, at the end; the per-half-hour baseline and delivered figures in a Result
// are those means rounded to the mWh, for people.
//
// # The rules
//
//  1. The event's window [Start, End) is cut into half-hours (UK local half-hours begin at
//     :00 and :30 UTC too, since the UK's offsets are whole hours). Each half-hour is known by
//     its UK local clock time and its day relative to the local day the event starts on.
//  2. The event's kind is that of its local start day: a working day (Monday to Friday) or a
//     weekend day (Saturday, Sunday).
//  3. A day D (UK local) qualifies when it is of the event's kind, no day the window spans
//     when laid on D is among the site's other events' days, every half-hour of the window
//     exists exactly once on D's clock (the clocks-change nights' 01:00–02:00 do not), and the
//     readings cover at least 80 % (1,440 s) of every half-hour of the window on D. The same
//     local clock time is a different UTC instant in summer (BST) and in winter (GMT).
//  4. The days looked at are the 60 before the event's local start day, most recent first;
//     the first 10 qualifying ones are used (4 for a weekend event). Fewer than 5 (2 for a
//     weekend event): skipped, insufficient_history.
//  5. Baseline of a half-hour: the mean of the used days' energy in it. Actual: the event's
//     own energy in it, as measured (not scaled up for partial coverage). When the readings
//     cover less than 80 % of the whole event (seconds covered over the window's seconds):
//     skipped, insufficient_readings. History is judged first.
//  6. Delivered per half-hour: baseline − actual for turn_down, actual − baseline for turn_up.
//  7. flex_kwh = Σ actual − Σ baseline, in whole Wh, halves rounded away from zero (so a
//     site's energy and its negation give opposite figures), whatever the direction.
//  8. credit_pence = rate × Σ max(0, delivered), in pence, halves rounded up.
//  9. Σ max(0, delivered) is at most what the site's assets can deliver over the window:
//     PlausiblePowerW of the sum of their power ratings (+ 50 %, at most a 100 A domestic
//     supply, 23 kW) × the window's length (MaxDeliveredMilliWh). So a credit is at most
//     rate × rated power × window, whatever the readings say: Flexsite's own bound, not the
//     spec's, so that readings cannot mint money.
package settlement

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"
	_ "time/tzdata" // Europe/London on a machine without a zone database

	"github.com/flexsite/flexsite/internal/validation"
)

// London is the zone of the half-hours: UK local time.
var London = func() *time.Location {
	loc, err := time.LoadLocation("Europe/London")
	if err != nil {
		panic(err) // the database is embedded: never
	}
	return loc
}()

// HalfHourSeconds is the length of a half-hour.
const HalfHourSeconds = 1800

// Limits of the rules.
const (
	// LookbackDays is how many days before the event are looked at for the baseline.
	LookbackDays = 60
	// MinCoveredSeconds is 80 % of a half-hour: the least a baseline day's readings cover of
	// each half-hour of the window.
	MinCoveredSeconds = HalfHourSeconds * 80 / 100
)

// Direction says which way the household is asked to flex.
type Direction string

// The directions.
const (
	TurnDown Direction = "turn_down"
	TurnUp   Direction = "turn_up"
)

// Status is the outcome of settling one site.
type Status string

// The outcomes.
const (
	Settled Status = "settled"
	Skipped Status = "skipped"
)

// Reason is why a site was skipped.
type Reason string

// The reasons.
const (
	InsufficientHistory  Reason = "insufficient_history"
	InsufficientReadings Reason = "insufficient_readings"
	// TransactionIDTaken: the credit's transaction id (derived from the organisation, the
	// event and the site) was already used by an API client of the organisation for another
	// transaction; the site is not credited (never twice, and the event's other sites settle).
	TransactionIDTaken Reason = "transaction_id_taken"
)

// Energy is one half-hour's energy at a site and how much of the half-hour the readings
// behind it cover.
type Energy struct {
	// MilliWh is the net energy imported in the half-hour, in mWh (negative: exported).
	MilliWh int64
	// CoveredSeconds is how many of the half-hour's 1,800 seconds the readings cover.
	CoveredSeconds int32
}

// Series is a site's half-hourly energy keyed by each half-hour's start in Unix seconds
// (see Key). A half-hour absent from it has no readings.
type Series map[int64]Energy

// Key is the key of the half-hour starting at t.
func Key(t time.Time) int64 { return t.Unix() }

// Date is a UK local calendar day.
type Date struct {
	Year  int
	Month time.Month
	Day   int
}

// DateOf is the UK local day of instant t.
func DateOf(t time.Time) Date {
	y, m, d := t.In(London).Date()
	return Date{y, m, d}
}

// String is the day as YYYY-MM-DD.
func (d Date) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// AddDays is the day n days after d (before, when n is negative).
func (d Date) AddDays(n int) Date {
	y, m, dd := time.Date(d.Year, d.Month, d.Day+n, 12, 0, 0, 0, time.UTC).Date()
	return Date{y, m, dd}
}

// Weekday is d's day of the week.
func (d Date) Weekday() time.Weekday {
	return time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC).Weekday()
}

// Weekend reports whether d is a Saturday or a Sunday.
func (d Date) Weekend() bool { w := d.Weekday(); return w == time.Saturday || w == time.Sunday }

// Event is what the rules need of a flex event.
type Event struct {
	// Start and End bound the window [Start, End), on half-hour boundaries.
	Start, End time.Time
	Direction  Direction
	// RateCentipence is the household's rate in hundredths of a penny per kWh (25 p = 2500).
	RateCentipence int64
}

// Input is everything Settle reads.
type Input struct {
	Event Event
	// Energy is the site's half-hourly energy over the event and the 60 days before it.
	Energy Series
	// OtherEventDays are the UK local days on which the site had another event (any part of
	// one): they never serve as a baseline day.
	OtherEventDays map[Date]bool
	// RatedPowerW is the sum of the site's assets' power ratings, in W (0: none rated): the
	// delivered energy credited is at most PlausiblePowerW of it over the window (rule 9).
	RatedPowerW int64
}

// HalfHour is one half-hour of the event, settled.
type HalfHour struct {
	// Start is the half-hour's start (UTC).
	Start time.Time
	// ActualMilliWh is the site's energy in the half-hour during the event, and
	// ActualCoveredSeconds how much of it the readings cover.
	ActualMilliWh        int64
	ActualCoveredSeconds int32
	// BaselineSumMilliWh is the sum over the days used of their energy in this half-hour:
	// the baseline is this ÷ len(Result.DaysUsed), exactly. Zero when no day is used.
	BaselineSumMilliWh int64
	// BaselineMilliWh is the baseline rounded to the mWh (halves away from zero).
	BaselineMilliWh int64
	// DeliveredMilliWh is the delivered energy (baseline − actual for turn_down, actual −
	// baseline for turn_up) rounded to the mWh; it may be negative.
	DeliveredMilliWh int64
}

// Result is the settlement of one event at one site.
type Result struct {
	Status Status
	// Reason is why the site was skipped; empty when settled.
	Reason Reason
	// HalfHours are the window's half-hours in order, with their actual energy always and
	// their baseline and delivered energy when the site has enough history.
	HalfHours []HalfHour
	// DaysUsed are the baseline's days, most recent first (those found, when too few).
	DaysUsed []Date
	// CoveredSeconds is how much of the window the event's readings cover, out of
	// WindowSeconds.
	CoveredSeconds, WindowSeconds int64
	// FlexWh is Σ actual − Σ baseline in whole Wh (flex_kwh × 1000); zero when skipped.
	FlexWh int64
	// DeliveredMilliWh is Σ max(0, delivered) rounded to the mWh: what the credit pays for.
	DeliveredMilliWh int64
	// CreditPence is the rate × the delivered energy, halves rounded up; zero when skipped.
	CreditPence int64
	// EstimatedCreditPence is what the same rules credit for the readings there are, however
	// little of the event they cover (an event's estimated revenue before it is settled);
	// CreditPence once settled, zero without enough history.
	EstimatedCreditPence int64
	// Capped reports that the delivered energy was held at the site's plausible power over
	// the window (rule 9): the readings claim more than the site's assets can deliver.
	Capped bool
}

// MaxDeliveredMilliWh is the most energy a site whose assets' ratings add up to ratedW can
// deliver in a window of windowSeconds, in mWh: PlausiblePowerW(ratedW) over the window
// (1 mWh is 3.6 W·s).
func MaxDeliveredMilliWh(ratedW, windowSeconds int64) int64 {
	return PlausiblePowerW(ratedW) * windowSeconds * 10 / 36
}

// CheckEvent reports what is wrong with an event's window, direction or rate, or nil: the
// rules of validation.CheckFlexEvent, the ones the REST API and the admission webhook apply
// (without the bound on how far back a new event may start: this one was declared already).
func CheckEvent(e Event) error {
	problems := validation.CheckFlexEvent(validation.FlexEvent{Start: e.Start, End: e.End,
		Direction: string(e.Direction), RateCentipence: e.RateCentipence})
	errs := make([]error, len(problems))
	for i, p := range problems {
		errs[i] = p
	}
	return errors.Join(errs...)
}

// OnHalfHour reports whether t is on a half-hour boundary (UK local and UTC alike).
func OnHalfHour(t time.Time) bool { return t.Nanosecond() == 0 && t.Unix()%HalfHourSeconds == 0 }

// slot is one of the window's half-hours: its day relative to the event's local start day
// and its local clock time.
type slot struct {
	start        time.Time
	dayOffset    int
	hour, minute int
}

func window(e Event) []slot {
	first := DateOf(e.Start)
	firstNoon := time.Date(first.Year, first.Month, first.Day, 12, 0, 0, 0, time.UTC)
	var out []slot
	for t := e.Start.UTC(); t.Before(e.End); t = t.Add(HalfHourSeconds * time.Second) {
		l := t.In(London)
		d := DateOf(t)
		off := int(time.Date(d.Year, d.Month, d.Day, 12, 0, 0, 0, time.UTC).Sub(firstNoon) / (24 * time.Hour))
		out = append(out, slot{start: t, dayOffset: off, hour: l.Hour(), minute: l.Minute()})
	}
	return out
}

// on is the instant of s's local clock time on day d's counterpart, and false when that
// clock time does not exist on that day or exists twice (the clocks-change nights).
func (s slot) on(d Date) (time.Time, bool) {
	day := d.AddDays(s.dayOffset)
	t := time.Date(day.Year, day.Month, day.Day, s.hour, s.minute, 0, 0, London)
	same := func(u time.Time) bool {
		l := u.In(London)
		return DateOf(u) == day && l.Hour() == s.hour && l.Minute() == s.minute
	}
	if !same(t) || same(t.Add(time.Hour)) || same(t.Add(-time.Hour)) {
		return time.Time{}, false
	}
	return t.UTC(), true
}

// Settle applies the rules (see the package's documentation) to one event at one site. Its
// error is CheckEvent's: an event no rule can settle.
func Settle(in Input) (Result, error) {
	e := in.Event
	if err := CheckEvent(e); err != nil {
		return Result{}, err
	}
	slots := window(e)
	res := Result{HalfHours: make([]HalfHour, len(slots)), WindowSeconds: int64(len(slots)) * HalfHourSeconds}
	for i, s := range slots {
		got := in.Energy[Key(s.start)]
		res.HalfHours[i] = HalfHour{Start: s.start, ActualMilliWh: got.MilliWh, ActualCoveredSeconds: clampCover(got.CoveredSeconds)}
		res.CoveredSeconds += int64(clampCover(got.CoveredSeconds))
	}

	// The baseline's days.
	eventDay := DateOf(e.Start)
	weekend := eventDay.Weekend()
	want, least := 10, 5
	if weekend {
		want, least = 4, 2
	}
	lastOffset := slots[len(slots)-1].dayOffset
	sums := make([]int64, len(slots))
	for back := 1; back <= LookbackDays && len(res.DaysUsed) < want; back++ {
		d := eventDay.AddDays(-back)
		if d.Weekend() != weekend || hadEvent(in.OtherEventDays, d, lastOffset) {
			continue
		}
		day, ok := dayEnergy(in.Energy, slots, d)
		if !ok {
			continue
		}
		for i, v := range day {
			sums[i] += v
		}
		res.DaysUsed = append(res.DaysUsed, d)
	}
	if len(res.DaysUsed) < least {
		res.Status, res.Reason = Skipped, InsufficientHistory
		return res, nil
	}

	// Baseline, delivered and the totals, exactly: every figure times n, the days used.
	n := int64(len(res.DaysUsed))
	var actualSum, baselineSum, positive int64 // baselineSum, positive: × n
	for i := range res.HalfHours {
		h := &res.HalfHours[i]
		h.BaselineSumMilliWh = sums[i]
		h.BaselineMilliWh = divRoundAway(sums[i], n)
		deliveredN := sums[i] - n*h.ActualMilliWh
		if e.Direction == TurnUp {
			deliveredN = -deliveredN
		}
		h.DeliveredMilliWh = divRoundAway(deliveredN, n)
		actualSum += h.ActualMilliWh
		baselineSum += sums[i]
		if deliveredN > 0 {
			positive += deliveredN
		}
	}
	// Rule 9: no more delivered than the site's assets can deliver over the window.
	if most := MaxDeliveredMilliWh(in.RatedPowerW, res.WindowSeconds); positive > most*n {
		positive, res.Capped = most*n, true
	}
	// credit = rate/100 p per kWh × positive/n mWh ÷ 1e6 mWh per kWh; big integers, as
	// rate × energy can pass an int64.
	num := new(big.Int).Mul(big.NewInt(e.RateCentipence), big.NewInt(positive))
	den := new(big.Int).Mul(big.NewInt(n), big.NewInt(100*1_000_000))
	res.EstimatedCreditPence = halfUp(num, den)
	if res.CoveredSeconds*100 < res.WindowSeconds*80 {
		res.Status, res.Reason = Skipped, InsufficientReadings
		return res, nil
	}
	res.Status = Settled
	res.FlexWh = divRoundAway(n*actualSum-baselineSum, n*1000)
	res.DeliveredMilliWh = divRoundAway(positive, n)
	res.CreditPence = res.EstimatedCreditPence
	return res, nil
}

// hadEvent reports whether any of the days d .. d+span is among the other events' days.
func hadEvent(days map[Date]bool, d Date, span int) bool {
	for i := 0; i <= span; i++ {
		if days[d.AddDays(i)] {
			return true
		}
	}
	return false
}

// dayEnergy is day d's energy in each of the window's half-hours, and false when d does not
// qualify by its readings or its clock.
func dayEnergy(series Series, slots []slot, d Date) ([]int64, bool) {
	out := make([]int64, len(slots))
	for i, s := range slots {
		t, ok := s.on(d)
		if !ok {
			return nil, false
		}
		got, ok := series[Key(t)]
		if !ok || got.CoveredSeconds < MinCoveredSeconds {
			return nil, false
		}
		out[i] = got.MilliWh
	}
	return out, true
}

func clampCover(c int32) int32 { return max(0, min(c, HalfHourSeconds)) }

// divRoundAway is a ÷ b (b > 0) rounded to the nearest integer, halves away from zero.
func divRoundAway(a, b int64) int64 {
	neg := a < 0
	if neg {
		a = -a
	}
	q, r := a/b, a%b
	if 2*r >= b {
		q++
	}
	if neg {
		return -q
	}
	return q
}

// halfUp is num ÷ den (num ≥ 0, den > 0) rounded to the nearest integer, halves up.
func halfUp(num, den *big.Int) int64 {
	q, r := new(big.Int).QuoRem(num, den, new(big.Int))
	if r.Lsh(r, 1).Cmp(den) >= 0 {
		q.Add(q, big.NewInt(1))
	}
	if !q.IsInt64() {
		return math.MaxInt64 // beyond any real credit; held at the bound rather than wrapped
	}
	return q.Int64()
}
