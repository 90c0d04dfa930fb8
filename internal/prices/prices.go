// Package prices holds the rules of an organisation's half-hourly market prices
// (docs/api.md, "Prices"), pure:
//
//   - A day is a UK local day. Its settlement periods are its half-hours from local midnight to
//     the next local midnight: 48, or 46 on the day the clocks go forward and 50 on the day they
//     go back (Periods). A day's prices are declared whole: exactly one price per period, each
//     at its period's start (CheckDay).
//   - A price is in £/MWh with at most two decimals (ParsePrice), kept as an integer number of
//     hundredths (Centi), so no sum or comparison of prices ever rounds. It may be negative (GB
//     prices are, on windy nights) and its magnitude is at most MaxAbsCenti.
//   - A market's name is 1–64 characters of lower-case letters, digits, '_', '.' and '-',
//     beginning with a letter or digit (CheckMarket): it is a path segment of
//     /market-prices/{market}/{date} and the Proposition's spec.market.
//   - A price curve runs from the current settlement period to 23:00 UK time today, or to
//     23:00 tomorrow once tomorrow's prices are declared or today's 23:00 has passed (Horizon),
//     and names every period of it, a period without a declared price as nil (Curve).
package prices

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
)

// HalfHour is a settlement period's length.
const HalfHour = 30 * time.Minute

// MaxPeriods is the most settlement periods a day has (the day the clocks go back): a
// declaration longer than that is refused before any of it is read.
const MaxPeriods = 50

// Centi is a price in hundredths of £/MWh (pence per MWh).
type Centi int64

// MaxAbsCenti bounds a price's magnitude: £1,000,000.00/MWh, far beyond any GB market's cap
// (the day-ahead auctions' is about £5,000), so a typo is refused and no sum overflows.
const MaxAbsCenti Centi = 100_000_000

// String writes the price as the API does: £/MWh with two decimals.
func (c Centi) String() string {
	sign := ""
	v := int64(c)
	if v < 0 {
		sign, v = "-", -v
	}
	return fmt.Sprintf("%s%d.%02d", sign, v/100, v%100)
}

// Float is the price in £/MWh as a JSON number (two decimals, exact in its shortest form).
func (c Centi) Float() float64 { return float64(c) / 100 }

// priceRE is a JSON number with at most two decimals and no exponent.
var priceRE = regexp.MustCompile(`^-?(0|[1-9][0-9]{0,15})(\.[0-9]{1,2})?$`)

// ParsePrice reads a JSON number literal (as json.Number keeps it) into hundredths: at most
// two decimals, no exponent, at most MaxAbsCenti.
func ParsePrice(s string) (Centi, error) {
	if !priceRE.MatchString(s) {
		if _, err := strconv.ParseFloat(s, 64); err == nil {
			return 0, &validation.Error{Type: "decimal_max_places",
				Msg: "Decimal input should have no more than 2 decimal places"}
		}
		return 0, &validation.Error{Type: "decimal_parsing", Msg: "Input should be a valid number"}
	}
	whole, frac, _ := strings.Cut(strings.TrimPrefix(s, "-"), ".")
	for len(frac) < 2 {
		frac += "0"
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > int64(MaxAbsCenti)/100 {
		return 0, tooLarge()
	}
	f, _ := strconv.ParseInt(frac, 10, 64)
	c := Centi(w*100 + f)
	if c > MaxAbsCenti {
		return 0, tooLarge()
	}
	if strings.HasPrefix(s, "-") {
		c = -c
	}
	return c, nil
}

func tooLarge() error {
	return &validation.Error{Type: "less_than_equal",
		Msg: fmt.Sprintf("A price's magnitude must be at most %s £/MWh", MaxAbsCenti)}
}

// marketRE is a market's name (see the package documentation).
var marketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)

// CheckMarket checks a market's name.
func CheckMarket(name string) error {
	if !marketRE.MatchString(name) {
		return &validation.Error{Type: "string_pattern_mismatch",
			Msg: "A market is 1-64 characters of a-z, 0-9, '_', '.' and '-', beginning with a letter or digit"}
	}
	return nil
}

// Day is a UK local day.
type Day struct {
	Year  int
	Month time.Month
	Day   int
}

// ParseDay reads YYYY-MM-DD (validation.ParseDate: a real date within the supported range,
// docs/api.md "Dates and times"). Text that is no date is refused as prod's path date is,
// "date_from_datetime_parsing"; a date out of the range as validation refuses it.
func ParseDay(s string) (Day, error) {
	t, err := validation.ParseDate(s)
	if err != nil {
		if ve := (*validation.Error)(nil); errors.As(err, &ve) && ve.Type != "date_parsing" {
			return Day{}, err
		}
		return Day{}, &validation.Error{Type: "date_from_datetime_parsing",
			Msg: "Input should be a valid date in the format YYYY-MM-DD"}
	}
	return Day{t.Year(), t.Month(), t.Day()}, nil
}

// DayOf is the UK local day t falls in.
func DayOf(t time.Time) Day {
	l := t.In(settlement.London)
	return Day{l.Year(), l.Month(), l.Day()}
}

// String writes YYYY-MM-DD.
func (d Day) String() string { return fmt.Sprintf("%04d-%02d-%02d", d.Year, d.Month, d.Day) }

// Start is the day's local midnight.
func (d Day) Start() time.Time {
	return time.Date(d.Year, d.Month, d.Day, 0, 0, 0, 0, settlement.London)
}

// Next is the following day.
func (d Day) Next() Day {
	return DayOf(time.Date(d.Year, d.Month, d.Day+1, 12, 0, 0, 0, settlement.London))
}

// End is the next day's local midnight.
func (d Day) End() time.Time { return d.Next().Start() }

// At is the instant of the day's local wall time hh:mm.
func (d Day) At(hh, mm int) time.Time {
	return time.Date(d.Year, d.Month, d.Day, hh, mm, 0, 0, settlement.London)
}

// Periods are the starts of the day's settlement periods, in order: 46, 48 or 50.
func (d Day) Periods() []time.Time {
	var out []time.Time
	for t, end := d.Start(), d.End(); t.Before(end); t = t.Add(HalfHour) {
		out = append(out, t)
	}
	return out
}

// Price is one settlement period's price.
type Price struct {
	Start time.Time
	Centi Centi
}

// Problem is what is wrong with a declared day: Index is the price at fault (-1: the list as a
// whole), Field the field of it ("" for the price as a whole).
type Problem struct {
	Index int
	Field string
	Err   *validation.Error
}

// CheckDay checks a day's declared prices: exactly one per settlement period, each at its
// period's start. It answers the prices in period order, or every problem found.
func CheckDay(d Day, in []Price) ([]Price, []Problem) {
	periods := d.Periods()
	var problems []Problem
	if len(in) != len(periods) {
		problems = append(problems, Problem{Index: -1, Err: &validation.Error{Type: "settlement_periods",
			Msg: fmt.Sprintf("%s has %d settlement periods (UK local time): %d prices were given",
				d, len(periods), len(in))}})
	}
	first, period := periods[0], map[int64]int{}
	for i, t := range periods {
		period[t.Unix()] = i
	}
	seen := make([]int, len(periods))
	for i := range seen {
		seen[i] = -1
	}
	for i, p := range in {
		j, ok := period[p.Start.Unix()]
		switch {
		case !ok || p.Start.Nanosecond() != 0:
			problems = append(problems, Problem{Index: i, Field: "start_timestamp", Err: &validation.Error{
				Type: "settlement_period", Msg: fmt.Sprintf("%s is not the start of a settlement period of %s "+
					"(UK local time: from %s, every 30 minutes)", p.Start.Format(time.RFC3339), d,
					first.Format(time.RFC3339))}})
		case seen[j] >= 0:
			problems = append(problems, Problem{Index: i, Field: "start_timestamp", Err: &validation.Error{
				Type: "duplicate", Msg: fmt.Sprintf("%s is priced twice (also at %d)",
					p.Start.Format(time.RFC3339), seen[j])}})
		default:
			seen[j] = i
		}
	}
	if len(problems) > 0 {
		return nil, problems
	}
	out := slices.Clone(in)
	for i := range out {
		out[i].Start = out[i].Start.UTC()
	}
	slices.SortFunc(out, func(a, b Price) int { return a.Start.Compare(b.Start) })
	return out, nil
}

// PeriodStart is the start of the settlement period t falls in. UK offsets are whole hours, so
// the half-hours of UTC are the local ones.
func PeriodStart(t time.Time) time.Time { return t.Truncate(HalfHour) }

// Horizon is a price curve's span at now: from the current settlement period's start to 23:00
// UK time today, or to 23:00 tomorrow when tomorrowDeclared or today's 23:00 has passed.
func Horizon(now time.Time, tomorrowDeclared bool) (from, to time.Time) {
	today := DayOf(now)
	from, to = PeriodStart(now), today.At(23, 0)
	if tomorrowDeclared || !now.Before(to) {
		to = today.Next().At(23, 0)
	}
	return from, to
}

// Tomorrow is the UK local day after now's: the day whose declaration extends the horizon.
func Tomorrow(now time.Time) Day { return DayOf(now).Next() }

// Period is one settlement period of a curve; Centi is nil when no price is declared.
type Period struct {
	Start time.Time
	Centi *Centi
}

// Curve names every settlement period in [from, to) with its declared price, nil where none.
func Curve(from, to time.Time, declared []Price) []Period {
	byStart := make(map[int64]Centi, len(declared))
	for _, p := range declared {
		byStart[p.Start.Unix()] = p.Centi
	}
	n := int(math.Max(0, float64(to.Sub(from)/HalfHour)))
	out := make([]Period, 0, n)
	for t := PeriodStart(from); t.Before(to); t = t.Add(HalfHour) {
		p := Period{Start: t.UTC()}
		if c, ok := byStart[t.Unix()]; ok {
			p.Centi = &c
		}
		out = append(out, p)
	}
	return out
}
