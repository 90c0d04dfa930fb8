package validation

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // the zones on a machine without a zone database (the image has none)
)

// ---------------------------------------------------------------------------------------
// Tariffs: off-peak times and time zones (docs/api.md, "Asset events: what the devices tell
// Flexsite")

// A tariff's off_peak_times is the subset of OpenStreetMap's opening_hours that prod accepts:
// the same time ranges every day, no day selectors, nothing else of that syntax. No maintained
// Go parser of opening_hours exists on the module proxy, and the subset is small enough that
// a full parser would accept far more than prod does, so it is read here by a small grammar:
//
//	off_peak_times = range { [ " " ] "," [ " " ] range }
//	range          = time "-" time
//	time           = HH ":" MM        (HH 00–24, MM 00–59; 24:00 only as an end)
//
// with each range's start before its end (a range does not wrap past midnight: an overnight
// off-peak is two ranges, "00:00-05:30, 23:30-24:00").

// MinuteRange is one off-peak range in minutes of the local day: Start in [0, 1440), End in
// (Start, 1440].
type MinuteRange struct{ Start, End int }

// String writes the range as off_peak_times does (HH:MM-HH:MM).
func (r MinuteRange) String() string {
	return fmt.Sprintf("%02d:%02d-%02d:%02d", r.Start/60, r.Start%60, r.End/60, r.End%60)
}

// FormatOffPeakTimes writes ranges back as an off_peak_times string, separated by ", ".
func FormatOffPeakTimes(ranges []MinuteRange) string {
	parts := make([]string, len(ranges))
	for i, r := range ranges {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}

// maxOffPeakLength bounds off_peak_times: 48 half-hour ranges, comfortably.
const maxOffPeakLength = 1024

// offPeakRangeRE is one range, exactly: two digits, colon, two digits, dash, likewise.
var offPeakRangeRE = regexp.MustCompile(`^([0-9]{2}):([0-9]{2})-([0-9]{2}):([0-9]{2})$`)

const minutesPerDay = 24 * 60

// ParseOffPeakTimes reads a tariff's off_peak_times into its ranges, in the order written.
// Anything outside the subset fails with Type "off_peak_times" and a message naming what is
// wrong.
func ParseOffPeakTimes(s string) ([]MinuteRange, error) {
	if strings.TrimSpace(s) == "" {
		return nil, offPeakError("off_peak_times must not be empty")
	}
	if len(s) > maxOffPeakLength {
		return nil, offPeakError(fmt.Sprintf("off_peak_times must be at most %d characters", maxOffPeakLength))
	}
	parts := strings.Split(s, ",")
	out := make([]MinuteRange, 0, len(parts))
	for i, part := range parts {
		// One space is allowed on either side of a comma (prod's own example), nowhere else.
		if i > 0 {
			part = strings.TrimPrefix(part, " ")
		}
		if i < len(parts)-1 {
			part = strings.TrimSuffix(part, " ")
		}
		r, err := parseOffPeakRange(part)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

func parseOffPeakRange(part string) (MinuteRange, error) {
	m := offPeakRangeRE.FindStringSubmatch(part)
	if m == nil {
		return MinuteRange{}, offPeakError(fmt.Sprintf(
			"%q is not a time range HH:MM-HH:MM (the same ranges every day: no day selectors or other opening_hours syntax)",
			part))
	}
	start, err := offPeakMinute(m[1], m[2], false)
	if err != nil {
		return MinuteRange{}, err
	}
	end, err := offPeakMinute(m[3], m[4], true)
	if err != nil {
		return MinuteRange{}, err
	}
	if start >= end {
		return MinuteRange{}, offPeakError(fmt.Sprintf(
			"%q ends before it starts: a range does not wrap past midnight (write 23:30-24:00, 00:00-05:30)", part))
	}
	return MinuteRange{Start: start, End: end}, nil
}

// offPeakMinute is HH:MM as minutes of the day; 24:00 only as an end.
func offPeakMinute(hh, mm string, end bool) (int, error) {
	h, _ := strconv.Atoi(hh) // two ASCII digits: the pattern says so
	m, _ := strconv.Atoi(mm)
	switch {
	case m > 59:
		return 0, offPeakError(fmt.Sprintf("%s:%s: minutes must be 00–59", hh, mm))
	case h > 24 || (h == 24 && m != 0):
		return 0, offPeakError(fmt.Sprintf("%s:%s: hours must be 00–24, and 24 only as 24:00", hh, mm))
	case h == 24 && !end:
		return 0, offPeakError("24:00 may only end a range")
	}
	return h*60 + m, nil
}

func offPeakError(msg string) error { return newError("off_peak_times", msg) }

// CheckTimezone requires an IANA time zone name that this build knows (Europe/London, UTC).
// The empty name and "Local" name no zone of the household's, and are refused (Type
// "timezone").
func CheckTimezone(name string) error {
	if name == "" || name == "Local" || len(name) > 64 {
		return newError("timezone", fmt.Sprintf("%q is not an IANA time zone", name))
	}
	if _, err := time.LoadLocation(name); err != nil {
		return newError("timezone", fmt.Sprintf("%q is not an IANA time zone", name))
	}
	return nil
}

// wallTimeRE is a time of day as pydantic reads one: HH:MM[:SS[.ffffff]], with an optional
// zone (Z or ±HH:MM) that a wall time ignores.
var wallTimeRE = regexp.MustCompile(`^([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.[0-9]{1,6})?)?(?:[Zz]|[+-][0-9]{2}:?[0-9]{2})?$`)

// ParseWallTime reads a time of day (an intent's ready_by_local_time) as minutes and seconds
// past midnight. Failures have Type "time_parsing".
func ParseWallTime(s string) (time.Duration, error) {
	m := wallTimeRE.FindStringSubmatch(s)
	if m == nil {
		return 0, newError("time_parsing", "Input should be in a valid time format, HH:MM[:SS]")
	}
	h, _ := strconv.Atoi(m[1])
	mi, _ := strconv.Atoi(m[2])
	sec := 0
	if m[3] != "" {
		sec, _ = strconv.Atoi(m[3])
	}
	if h > 23 || mi > 59 || sec > 59 {
		return 0, newError("time_parsing", "Input should be in a valid time format, hour 00–23, minute and second 00–59")
	}
	return time.Duration(h)*time.Hour + time.Duration(mi)*time.Minute + time.Duration(sec)*time.Second, nil
}

// FormatWallTime writes a time of day as ParseWallTime read it, HH:MM:SS (the seconds' fraction
// and any zone dropped: a wall time is kept as the household's clock shows it).
func FormatWallTime(d time.Duration) string {
	s := int(d / time.Second)
	return fmt.Sprintf("%02d:%02d:%02d", s/3600, s/60%60, s%60)
}
