// Package jsonappend writes the JSON of the hot reads by appending to a byte slice, exactly as
// encoding/json and time.Format would write it, without their reflection and layout parsing: a
// page of reward transactions, the readings' verdicts. The tests hold each function to the
// standard library's output.
package jsonappend

import (
	"encoding/json"
	"math"
	"strconv"
	"time"
)

// RFC3339 appends Unix second sec as time.RFC3339 in UTC ("2006-01-02T15:04:05Z"),
// as t.UTC().AppendFormat(b, time.RFC3339) does, without parsing the layout: a page of
// transactions writes two per record. Years outside 0000..9999 go through AppendFormat.
func RFC3339(b []byte, sec int64) []byte {
	days, rem := sec/86400, sec%86400
	if rem < 0 {
		days, rem = days-1, rem+86400
	}
	y, m, d := civil(days)
	if y < 0 || y > 9999 {
		return time.Unix(sec, 0).UTC().AppendFormat(b, time.RFC3339)
	}
	return appendClock(appendYMD(b, y, m, d), rem)
}

// appendClock appends "Thh:mm:ssZ" of second rem of a day.
func appendClock(b []byte, rem int64) []byte {
	h, mi, s := rem/3600, rem/60%60, rem%60
	return append(b, 'T', byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':',
		byte('0'+s/10), byte('0'+s%10), 'Z')
}

// DayMemo writes what RFC3339 and Day write, remembering the date of the last
// day it wrote: a day of the same month is that date moved by the difference, without the
// calendar arithmetic (civil), which was a tenth of a transactions read's CPU.
//
// It remembers the last time of day it wrote too: a history's times are mostly at the same
// hour (midnight, the start of a settlement period).
type DayMemo struct {
	day              int64
	dayOfMonth, days int64 // the last day's day of month, and its month's length
	text             [len(time.DateOnly)]byte
	set              bool
	clockRem         int64 // the last second of the day written, and its text
	clock            [len("T15:04:05Z")]byte
	clockSet         bool
}

// date is the memo's text for day number day (false outside years 0000..9999). A day of the
// same month, or of the month before or after (a week's walk across a month's end), moves
// the last date without the calendar arithmetic.
func (m *DayMemo) date(day int64) (*[len(time.DateOnly)]byte, bool) {
	if m.set && day != m.day {
		d := m.dayOfMonth + day - m.day
		switch {
		case d >= 1 && d <= m.days:
			m.text[8], m.text[9] = byte('0'+d/10), byte('0'+d%10)
			m.day, m.dayOfMonth = day, d
		case d > m.days && d-m.days <= 28:
			m.moveMonth(day, d-m.days, 1)
		case d < 1 && d > -28:
			m.moveMonth(day, d, -1)
		}
	}
	if !m.set || m.day != day {
		y, mo, d := civil(day)
		if y < 0 || y > 9999 {
			return nil, false
		}
		appendYMD(m.text[:0], y, mo, d)
		m.day, m.dayOfMonth, m.days, m.set = day, d, monthDays(y, mo), true
	}
	return &m.text, true
}

// moveMonth makes the memo day number day, in the month after (step 1) or before (-1) the
// last date's; d is its day of month, or for the month before, that less the month's length.
// Years stay within 0000..9999, else the memo is left as it was (date works it out).
func (m *DayMemo) moveMonth(day, d, step int64) {
	y := int64(m.text[0]-'0')*1000 + int64(m.text[1]-'0')*100 + int64(m.text[2]-'0')*10 + int64(m.text[3]-'0')
	mo := int64(m.text[5]-'0')*10 + int64(m.text[6]-'0') + step
	switch mo {
	case 0:
		y, mo = y-1, 12
	case 13:
		y, mo = y+1, 1
	}
	days := monthDays(y, mo)
	if step < 0 {
		d += days
	}
	if y < 0 || y > 9999 || d < 1 || d > days {
		return
	}
	appendYMD(m.text[:0], y, mo, d)
	m.day, m.dayOfMonth, m.days = day, d, days
}

// monthDays is the length of month mo (1..12) of year y (proleptic Gregorian).
func monthDays(y, mo int64) int64 {
	switch mo {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

func (m *DayMemo) RFC3339(b []byte, sec int64) []byte {
	days, rem := sec/86400, sec%86400
	if rem < 0 {
		days, rem = days-1, rem+86400
	}
	text, ok := m.date(days)
	if !ok {
		return RFC3339(b, sec)
	}
	if !m.clockSet || m.clockRem != rem {
		appendClock(m.clock[:0], rem)
		m.clockRem, m.clockSet = rem, true
	}
	return append(append(b, text[:]...), m.clock[:]...)
}

func (m *DayMemo) Day(b []byte, day int64) []byte {
	text, ok := m.date(day)
	if !ok {
		return Day(b, day)
	}
	return append(b, text[:]...)
}

// Day appends day number day (days since 1970-01-01) as time.DateOnly.
func Day(b []byte, day int64) []byte {
	y, m, d := civil(day)
	if y < 0 || y > 9999 {
		return time.Unix(day*86400, 0).UTC().AppendFormat(b, time.DateOnly)
	}
	return appendYMD(b, y, m, d)
}

func appendYMD(b []byte, y, m, d int64) []byte {
	return append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-',
		byte('0'+m/10), byte('0'+m%10), '-', byte('0'+d/10), byte('0'+d%10))
}

// civil converts days since 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's
// days_from_civil, inverted).
func civil(days int64) (y, m, d int64) {
	z := days + 719468
	era := z / 146097
	if z < 0 && z%146097 != 0 {
		era--
	}
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// Kilo appends thousandths (Wh as kWh) as encoding/json writes float64(v)/1000: the
// decimal itself, trailing zeros dropped. Below 10^12 in magnitude that decimal is the
// shortest that reads back as the same float64 (floats there are far closer together than
// 0.001); beyond, strconv decides.
func Kilo(b []byte, v int64) []byte {
	if v <= -1e12 || v >= 1e12 {
		return Float(b, float64(v)/1000)
	}
	if v < 0 {
		b = append(b, '-')
		v = -v
	}
	b = strconv.AppendInt(b, v/1000, 10)
	frac := v % 1000
	if frac == 0 {
		return b
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	return append(append(b, '.'), digits[:n]...)
}

// String quotes s; anything but printable ASCII that needs no escaping (quotes,
// backslashes, the HTML characters <, > and &, control and non-ASCII bytes) goes through
// encoding/json, which escapes and repairs it as the Encoder does.
func String(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if !plainJSON[s[i]] {
			quoted, _ := json.Marshal(s) // a string always encodes
			return append(b, quoted...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// plainJSON marks the bytes a JSON string holds as they are (HTML-safe, as the Encoder).
var plainJSON = func() (t [256]bool) {
	for c := 0x20; c < 0x7f; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

// Float writes a float64 as encoding/json does (ES6 number formatting).
func Float(b []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(b, "null"...) // encoding/json fails here; a ledger cannot hold either
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// clean up e-09 to e-9
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}
