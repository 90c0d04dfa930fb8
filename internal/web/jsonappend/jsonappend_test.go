package jsonappend

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// The hand-written formats read exactly as the standard library's.
func TestFastFormatsMatchTheStandardLibrary(t *testing.T) {
	secs := make([]int64, 0, 20100)
	secs = append(secs, 0, -1, 1, 86399, 86400, -86400, -86401, 951782400, 1735689599, 1735689600, 4102444800,
		253402300799, 253402300800, -62135596800, -62135596801, math.MaxInt32, math.MinInt32)
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		secs = append(secs, r.Int64N(2*253402300800)-253402300800)
	}
	for _, s := range secs {
		if got, want := string(RFC3339(nil, s)), time.Unix(s, 0).UTC().Format(time.RFC3339); got != want {
			t.Fatalf("RFC3339(%d) = %s, want %s", s, got, want)
		}
		day := s / 86400
		if got, want := string(Day(nil, day)), time.Unix(day*86400, 0).UTC().Format(time.DateOnly); got != want {
			t.Fatalf("Day(%d) = %s, want %s", day, got, want)
		}
	}
	// The memo, fed runs of the same day and jumps between days (and years out of range).
	var memo DayMemo
	for i, s := range secs {
		for _, sec := range []int64{s, s + 3600*int64(i%3), s - 1, secs[(i*7)%len(secs)]} {
			if got, want := string(memo.RFC3339(nil, sec)), time.Unix(sec, 0).UTC().Format(time.RFC3339); got != want {
				t.Fatalf("DayMemo.RFC3339(%d) = %s, want %s", sec, got, want)
			}
			day := sec / 86400
			if got, want := string(memo.Day(nil, day)), time.Unix(day*86400, 0).UTC().Format(time.DateOnly); got != want {
				t.Fatalf("DayMemo.Day(%d) = %s, want %s", day, got, want)
			}
		}
	}
	// Walks of a few days at a time, across months, leap days and years.
	memo = DayMemo{}
	for day := int64(-800); day < 800*365; day += 1 + (day%9+9)%9 {
		for _, d := range []int64{day, day + 1, day - 3, day + 27} {
			if got, want := string(memo.Day(nil, d)), time.Unix(d*86400, 0).UTC().Format(time.DateOnly); got != want {
				t.Fatalf("DayMemo.Day(%d) = %s, want %s", d, got, want)
			}
		}
	}
	whs := make([]int64, 0, 40100)
	whs = append(whs, 0, 1, -1, 10, 100, 999, 1000, 1001, 1010, 1100, -1500, 123456789, 999999999999, -999999999999,
		1e12, -1e12, 1e15+7, math.MaxInt64, math.MinInt64)
	for range 20000 {
		whs = append(whs, r.Int64N(2e13)-1e13, r.Int64N(20000)-10000)
	}
	for _, wh := range whs {
		if got, want := string(Kilo(nil, wh)), string(Float(nil, float64(wh)/1000)); got != want {
			t.Fatalf("Kilo(%d) = %s, want %s", wh, got, want)
		}
	}
}
