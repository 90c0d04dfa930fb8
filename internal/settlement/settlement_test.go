package settlement

import (
	"math"
	"slices"
	"testing"
	"time"
)

// at is the instant of a UK local clock time in 2026.
func at(m time.Month, d, h, mi int) time.Time { return time.Date(2026, m, d, h, mi, 0, 0, London) }

// put records, on UK local day d, the energy (mWh) of consecutive half-hours starting at the
// local clock time h:mi, each covered for cover seconds.
func put(s Series, d Date, h, mi int, cover int32, mwh ...int64) {
	for i, v := range mwh {
		t := time.Date(d.Year, d.Month, d.Day, h, mi+30*i, 0, 0, London)
		s[Key(t)] = Energy{MilliWh: v, CoveredSeconds: cover}
	}
}

// history fills every day of the event's kind in the 60 days before day with the same
// half-hours.
func history(s Series, day Date, weekend bool, h, mi int, mwh ...int64) {
	for back := 1; back <= LookbackDays; back++ {
		d := day.AddDays(-back)
		if d.Weekend() == weekend {
			put(s, d, h, mi, HalfHourSeconds, mwh...)
		}
	}
}

// recent lists the n most recent working days before day, skipping those in skip.
func recent(day Date, n int, skip ...Date) []Date {
	var out []Date
	for d := day.AddDays(-1); len(out) < n; d = d.AddDays(-1) {
		if !d.Weekend() && !slices.Contains(skip, d) {
			out = append(out, d)
		}
	}
	return out
}

type want struct {
	status    Status
	reason    Reason
	flexWh    int64
	credit    int64
	baseline  []int64 // per half-hour, mWh
	delivered []int64 // per half-hour, mWh
	days      []Date  // nil: not checked
}

func check(t *testing.T, in Input, w want) Result {
	t.Helper()
	got, err := Settle(in)
	if err != nil {
		t.Fatalf("Settle: %v", err)
	}
	if got.Status != w.status || got.Reason != w.reason {
		t.Errorf("status %q (%q), want %q (%q)", got.Status, got.Reason, w.status, w.reason)
	}
	if got.FlexWh != w.flexWh || got.CreditPence != w.credit {
		t.Errorf("flex %d Wh, credit %d p; want %d Wh, %d p", got.FlexWh, got.CreditPence, w.flexWh, w.credit)
	}
	for i, h := range got.HalfHours {
		if w.baseline != nil && h.BaselineMilliWh != w.baseline[i] {
			t.Errorf("half-hour %d: baseline %d mWh, want %d", i, h.BaselineMilliWh, w.baseline[i])
		}
		if w.delivered != nil && h.DeliveredMilliWh != w.delivered[i] {
			t.Errorf("half-hour %d: delivered %d mWh, want %d", i, h.DeliveredMilliWh, w.delivered[i])
		}
	}
	if w.days != nil && !slices.Equal(got.DaysUsed, w.days) {
		t.Errorf("days used %v, want %v", got.DaysUsed, w.days)
	}
	return got
}

// The worked examples of docs/platform.md, "How a site is settled", with their figures.
func TestWorkedExamples(t *testing.T) {
	tuesday := Date{2026, time.January, 13}
	turnDown := Event{Start: at(time.January, 13, 17, 30), End: at(time.January, 13, 18, 30), Direction: TurnDown, RateCentipence: 2500}

	// 1. Turn-down, Tuesday 17:30–18:30 (two half-hours), rate 25 p. The 10 most recent
	// working days before it qualify, each with 1.8 and 2.6. Baseline 1.8, 2.6; actual 0.4,
	// 2.9. Delivered 1.4 and −0.3 (counted 0). credit_pence 35; flex_kwh = 3.3 − 4.4 = −1.100.
	t.Run("1 turn-down on a working day", func(t *testing.T) {
		s := Series{}
		history(s, tuesday, false, 17, 30, 1_800_000, 2_600_000)
		put(s, tuesday, 17, 30, HalfHourSeconds, 400_000, 2_900_000)
		got := check(t, Input{Event: turnDown, Energy: s}, want{
			status: Settled, flexWh: -1100, credit: 35,
			baseline: []int64{1_800_000, 2_600_000}, delivered: []int64{1_400_000, -300_000},
			days: recent(tuesday, 10),
		})
		if got.DeliveredMilliWh != 1_400_000 { // gross revenue: 1.4 kWh × 25 p = £0.35
			t.Errorf("delivered %d mWh, want 1400000", got.DeliveredMilliWh)
		}
		if got.HalfHours[0].Start != at(time.January, 13, 17, 30).UTC() || got.HalfHours[0].ActualMilliWh != 400_000 {
			t.Errorf("first half-hour %+v", got.HalfHours[0])
		}
	})

	// 2. The same, but the Thursday before had an event of that site and the Friday before
	// has readings for only 20 of the 30 minutes of 18:00–18:30 (67 %): both are passed over
	// and the 11th and 12th most recent working days are used instead.
	t.Run("2 a day with an event and a day at 67 % passed over", func(t *testing.T) {
		s := Series{}
		history(s, tuesday, false, 17, 30, 1_800_000, 2_600_000)
		put(s, tuesday, 17, 30, HalfHourSeconds, 400_000, 2_900_000)
		thursday, friday := Date{2026, time.January, 8}, Date{2026, time.January, 9}
		put(s, friday, 18, 0, 20*60, 2_600_000)
		all := recent(tuesday, 12)
		if all[1] != friday || all[2] != thursday {
			t.Fatalf("the calendar is not what the example says: %v", all[:3])
		}
		used := check(t, Input{Event: turnDown, Energy: s, OtherEventDays: map[Date]bool{thursday: true}}, want{
			status: Settled, flexWh: -1100, credit: 35, baseline: []int64{1_800_000, 2_600_000},
			days: recent(tuesday, 10, thursday, friday),
		}).DaysUsed
		if !slices.Contains(used, all[10]) || !slices.Contains(used, all[11]) {
			t.Errorf("the 11th and 12th most recent working days (%v, %v) are not used: %v", all[10], all[11], used)
		}
	})

	// 3. Turn-up, Sunday 13:00–14:00, rate 10 p: the 4 most recent qualifying weekend days
	// (2 Sundays, 2 Saturdays) give a baseline of 0.5 and 0.5; actual 2.5 and 0.3. Delivered
	// 2.0 and −0.2 (counted 0): credit_pence 20; flex_kwh = 2.8 − 1.0 = +1.800.
	t.Run("3 turn-up on a weekend", func(t *testing.T) {
		sunday := Date{2026, time.January, 18}
		s := Series{}
		history(s, sunday, true, 13, 0, 500_000, 500_000)
		put(s, sunday, 13, 0, HalfHourSeconds, 2_500_000, 300_000)
		check(t, Input{Event: Event{Start: at(time.January, 18, 13, 0), End: at(time.January, 18, 14, 0), Direction: TurnUp, RateCentipence: 1000}, Energy: s}, want{
			status: Settled, flexWh: 1800, credit: 20,
			baseline: []int64{500_000, 500_000}, delivered: []int64{2_000_000, -200_000},
			days: []Date{{2026, time.January, 17}, {2026, time.January, 11}, {2026, time.January, 10}, {2026, time.January, 4}},
		})
	})

	// 4. Only 4 qualifying working days in the 60 days before: insufficient_history, no
	// credit. Readings on the day covering 70 % of the window: insufficient_readings.
	t.Run("4 only 4 qualifying working days", func(t *testing.T) {
		s := Series{}
		for _, d := range recent(tuesday, 4) {
			put(s, d, 17, 30, HalfHourSeconds, 1_800_000, 2_600_000)
		}
		put(s, tuesday, 17, 30, HalfHourSeconds, 400_000, 2_900_000)
		check(t, Input{Event: turnDown, Energy: s}, want{status: Skipped, reason: InsufficientHistory, days: recent(tuesday, 4)})
	})
	t.Run("4 readings covering 70 % of the window", func(t *testing.T) {
		s := Series{}
		history(s, tuesday, false, 17, 30, 1_800_000, 2_600_000)
		put(s, tuesday, 17, 30, HalfHourSeconds*70/100, 400_000, 2_900_000)
		got := check(t, Input{Event: turnDown, Energy: s}, want{status: Skipped, reason: InsufficientReadings})
		if got.CoveredSeconds != 2520 || got.WindowSeconds != 3600 {
			t.Errorf("coverage %d of %d s", got.CoveredSeconds, got.WindowSeconds)
		}
		if got.EstimatedCreditPence != 35 { // what the readings there are would credit
			t.Errorf("estimated %d p, want 35", got.EstimatedCreditPence)
		}
	})

	// 5. Rounding: 30 p × 1.2345 kWh = 37.035 p → 37 p; 30 p × 0.05 kWh = 1.5 p → 2 p.
	for _, c := range []struct {
		name             string
		baseline, actual int64
		credit           int64
	}{
		{"5 37.035 p is 37 p", 2_000_000, 765_500, 37},
		{"5 1.5 p is 2 p (half up)", 500_000, 450_000, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Series{}
			history(s, tuesday, false, 17, 30, c.baseline)
			put(s, tuesday, 17, 30, HalfHourSeconds, c.actual)
			ev := Event{Start: turnDown.Start, End: turnDown.Start.Add(30 * time.Minute), Direction: TurnDown, RateCentipence: 3000}
			check(t, Input{Event: ev, Energy: s}, want{status: Settled, flexWh: divRoundAway(c.actual-c.baseline, 1000), credit: c.credit})
		})
	}
}

// The baseline is a mean that need not be whole: the credit is computed from the exact mean.
func TestBaselineMeanIsExact(t *testing.T) {
	tuesday := Date{2026, time.January, 13}
	s := Series{}
	// 5 working days: 4 at 1.000 kWh and one at 1.001: the mean is 1.0002 kWh.
	for i, d := range recent(tuesday, 5) {
		v := int64(1_000_000)
		if i == 0 {
			v = 1_001_000
		}
		put(s, d, 17, 30, HalfHourSeconds, v)
	}
	put(s, tuesday, 17, 30, HalfHourSeconds, 0)
	// Delivered 1.0002 kWh (the actual is 0) × 1,000 p = 1,000.2 p → 1,000.
	ev := Event{Start: at(time.January, 13, 17, 30), End: at(time.January, 13, 18, 0), Direction: TurnDown, RateCentipence: 100_000}
	check(t, Input{Event: ev, Energy: s}, want{status: Settled, flexWh: -1000, credit: 1000, baseline: []int64{1_000_200}})
}

// 6.25 p × 2.32 kWh is 14.5 p exactly, so 15 p; in floats it is 14.499999999999998 (14 p).
func TestNoFloatRounding(t *testing.T) {
	tuesday := Date{2026, time.January, 13}
	s := Series{}
	history(s, tuesday, false, 17, 30, 2_320_000)
	put(s, tuesday, 17, 30, HalfHourSeconds, 0)
	rate, kwh := 625.0, 2_320_000.0
	if f := rate / 100 * (kwh / 1e6); math.Floor(f+0.5) != 14 {
		t.Fatalf("the float example no longer errs: %v", f)
	}
	ev := Event{Start: at(time.January, 13, 17, 30), End: at(time.January, 13, 18, 0), Direction: TurnDown, RateCentipence: 625}
	check(t, Input{Event: ev, Energy: s}, want{status: Settled, flexWh: -2320, credit: 15})
}

// A window at 17:30–18:30 local is 16:30 UTC in summer and 17:30 UTC in winter: the event
// after the spring change takes its baseline from the same local clock on winter days.
func TestClocksChange(t *testing.T) {
	tuesday := Date{2026, time.March, 31} // BST since Sunday 29 March
	s := Series{}
	for back := 1; back <= LookbackDays; back++ {
		d := tuesday.AddDays(-back)
		if d.Weekend() {
			continue
		}
		put(s, d, 17, 30, HalfHourSeconds, 1_800_000, 2_600_000)
		// The same UTC clock on winter days is another local half-hour: a trap.
		if u := time.Date(d.Year, d.Month, d.Day, 16, 30, 0, 0, time.UTC); u.In(London).Hour() == 16 {
			s[Key(u)] = Energy{MilliWh: 9_999_000, CoveredSeconds: HalfHourSeconds}
		}
	}
	ev := Event{Start: at(time.March, 31, 17, 30), End: at(time.March, 31, 18, 30), Direction: TurnDown, RateCentipence: 2500}
	if ev.Start.UTC().Hour() != 16 {
		t.Fatalf("17:30 BST is %v", ev.Start.UTC())
	}
	put(s, tuesday, 17, 30, HalfHourSeconds, 400_000, 2_900_000)
	got := check(t, Input{Event: ev, Energy: s}, want{status: Settled, flexWh: -1100, credit: 35, baseline: []int64{1_800_000, 2_600_000}})
	if !slices.ContainsFunc(got.DaysUsed, func(d Date) bool { return d.Month == time.March && d.Day < 29 }) {
		t.Errorf("no winter day used: %v", got.DaysUsed)
	}

	// A weekend event at 01:00 local: 01:00–01:30 happens twice on Sunday 25 October (the
	// autumn change), so that day is passed over.
	sunday := Date{2026, time.November, 1}
	s = Series{}
	for back := 1; back <= 20; back++ {
		d := sunday.AddDays(-back)
		if d.Weekend() {
			put(s, d, 1, 0, HalfHourSeconds, 700_000)
		}
	}
	// On 25 October fill both 01:00s.
	first := time.Date(2026, time.October, 25, 0, 0, 0, 0, time.UTC) // 01:00 BST
	s[Key(first)] = Energy{MilliWh: 700_000, CoveredSeconds: HalfHourSeconds}
	s[Key(first.Add(time.Hour))] = Energy{MilliWh: 700_000, CoveredSeconds: HalfHourSeconds} // 01:00 GMT
	put(s, sunday, 1, 0, HalfHourSeconds, 200_000)
	ev = Event{Start: at(time.November, 1, 1, 0), End: at(time.November, 1, 1, 30), Direction: TurnDown, RateCentipence: 1000}
	check(t, Input{Event: ev, Energy: s}, want{
		status: Settled, flexWh: -500, credit: 5, baseline: []int64{700_000},
		days: []Date{{2026, time.October, 31}, {2026, time.October, 24}, {2026, time.October, 18}, {2026, time.October, 17}},
	})
}

// A window across midnight lays on each previous day the same way, and a day whose next
// day had an event is passed over.
func TestAcrossMidnight(t *testing.T) {
	wednesday := Date{2026, time.January, 14}
	s := Series{}
	for back := 1; back <= LookbackDays; back++ {
		d := wednesday.AddDays(-back)
		if !d.Weekend() {
			put(s, d, 23, 30, HalfHourSeconds, 1_000_000, 1_000_000) // 23:30 and 00:00 the next day
		}
	}
	put(s, wednesday, 23, 30, HalfHourSeconds, 500_000, 500_000)
	ev := Event{Start: at(time.January, 14, 23, 30), End: at(time.January, 15, 0, 30), Direction: TurnDown, RateCentipence: 100}
	tuesday := Date{2026, time.January, 13}
	check(t, Input{Event: ev, Energy: s, OtherEventDays: map[Date]bool{wednesday: true}}, want{
		status: Settled, flexWh: -1000, credit: 1,
		days: recent(wednesday, 10, tuesday), // Tuesday's window ends on Wednesday, which had an event
	})
}

func TestCheckEvent(t *testing.T) {
	start := at(time.January, 13, 17, 30)
	for _, c := range []struct {
		name string
		ev   Event
		ok   bool
	}{
		{"fine", Event{start, start.Add(time.Hour), TurnDown, 0}, true},
		{"a day", Event{start, start.Add(24 * time.Hour), TurnUp, 1}, true},
		{"longer than a day", Event{start, start.Add(24*time.Hour + 30*time.Minute), TurnUp, 1}, false},
		{"not on a half-hour", Event{start.Add(time.Minute), start.Add(time.Hour), TurnDown, 1}, false},
		{"end not on a half-hour", Event{start, start.Add(time.Hour + time.Second), TurnDown, 1}, false},
		{"end before start", Event{start, start.Add(-time.Hour), TurnDown, 1}, false},
		{"empty", Event{start, start, TurnDown, 1}, false},
		{"no direction", Event{start, start.Add(time.Hour), "", 1}, false},
		{"negative rate", Event{start, start.Add(time.Hour), TurnDown, -1}, false},
	} {
		if err := CheckEvent(c.ev); (err == nil) != c.ok {
			t.Errorf("%s: CheckEvent = %v", c.name, err)
		}
		if _, err := Settle(Input{Event: c.ev}); (err == nil) != c.ok {
			t.Errorf("%s: Settle = %v", c.name, err)
		}
	}
}

// Properties over random sites: the credit is never negative, flex does not depend on the
// direction, and a turn-down on a series pays what a turn-up pays on its negation.
func FuzzSettle(f *testing.F) {
	f.Add(int64(2500), uint8(2), int64(400), int64(2900), int64(1800), int64(2600), uint8(3), int32(1800))
	f.Add(int64(1000), uint8(1), int64(-5000), int64(0), int64(-7), int64(9), uint8(0), int32(1440))
	f.Fuzz(func(t *testing.T, rate int64, halfHours uint8, a0, a1, b0, b1 int64, seed uint8, cover int32) {
		if rate < 0 {
			rate = -rate
		}
		rate %= 1_000_000
		n := int(halfHours%6) + 1
		clip := func(v int64) int64 { return v % 100_000_000 } // ±100 kWh a half-hour
		a0, a1, b0, b1 = clip(a0), clip(a1), clip(b0), clip(b1)
		start := at(time.March, 27, 17, 0) // a Friday, days before across the clocks change
		s, neg := Series{}, Series{}
		day := DateOf(start)
		for back := 0; back <= LookbackDays; back++ {
			d := day.AddDays(-back)
			for i := range n {
				v := b0 + int64(back*i)*b1%1000 + int64(seed)*int64(i)
				c := cover + int32(back)*int32(seed)%400
				if back == 0 {
					v = a0 + int64(i)*a1
				}
				tt := time.Date(d.Year, d.Month, d.Day, 17, 30*i, 0, 0, London)
				s[Key(tt)] = Energy{MilliWh: v, CoveredSeconds: c}
				neg[Key(tt)] = Energy{MilliWh: -v, CoveredSeconds: c}
			}
		}
		ev := Event{Start: start, End: start.Add(time.Duration(n) * 30 * time.Minute), Direction: TurnDown, RateCentipence: rate}
		down, err := Settle(Input{Event: ev, Energy: s})
		if err != nil {
			t.Fatal(err)
		}
		ev.Direction = TurnUp
		up, _ := Settle(Input{Event: ev, Energy: s})
		mirror, _ := Settle(Input{Event: ev, Energy: neg})
		for _, r := range []Result{down, up, mirror} {
			if r.CreditPence < 0 || r.DeliveredMilliWh < 0 {
				t.Fatalf("negative credit: %+v", r)
			}
			if r.Status == Skipped && (r.CreditPence != 0 || r.FlexWh != 0) {
				t.Fatalf("skipped with a credit: %+v", r)
			}
			if r.EstimatedCreditPence < 0 || (r.Status == Settled && r.EstimatedCreditPence != r.CreditPence) {
				t.Fatalf("estimate %d p against credit %d p", r.EstimatedCreditPence, r.CreditPence)
			}
		}
		if down.Status != up.Status || down.FlexWh != up.FlexWh {
			t.Fatalf("flex depends on the direction: %+v / %+v", down, up)
		}
		if down.Status != mirror.Status || down.CreditPence != mirror.CreditPence || down.FlexWh != -mirror.FlexWh {
			t.Fatalf("turn-down and mirrored turn-up differ: %d p %d Wh / %d p %d Wh", down.CreditPence, down.FlexWh, mirror.CreditPence, mirror.FlexWh)
		}
	})
}

// The thresholds, on both sides: 80 % of a baseline half-hour (1,440 s) and of the event,
// 5 working days and 2 weekend days, the 60 days looked back.
func TestThresholds(t *testing.T) {
	tuesday, sunday := Date{2026, time.January, 13}, Date{2026, time.January, 18}
	workday := Event{Start: at(time.January, 13, 17, 30), End: at(time.January, 13, 18, 30), Direction: TurnDown, RateCentipence: 100}
	weekend := Event{Start: at(time.January, 18, 13, 0), End: at(time.January, 18, 14, 0), Direction: TurnDown, RateCentipence: 100}
	days := func(day Date, wantWeekend bool, from, to int) []Date { // days of the kind between from and to days back
		var out []Date
		for back := from; back <= to; back++ {
			if d := day.AddDays(-back); d.Weekend() == wantWeekend {
				out = append(out, d)
			}
		}
		return out
	}
	for _, c := range []struct {
		name   string
		ev     Event
		fill   func(Series)
		status Status
		reason Reason
		used   int
	}{
		{"baseline half-hours at 1,440 s qualify", workday, func(s Series) {
			for _, d := range recent(tuesday, 5) {
				put(s, d, 17, 30, 1440, 1_000_000, 1_000_000)
			}
		}, Settled, "", 5},
		{"at 1,439 s they do not", workday, func(s Series) {
			for _, d := range recent(tuesday, 5) {
				put(s, d, 17, 30, 1439, 1_000_000, 1_000_000)
			}
		}, Skipped, InsufficientHistory, 0},
		{"a day missing one half-hour does not qualify", workday, func(s Series) {
			for _, d := range recent(tuesday, 5) {
				put(s, d, 17, 30, HalfHourSeconds, 1_000_000)
			}
		}, Skipped, InsufficientHistory, 0},
		{"only days more than 60 back", workday, func(s Series) {
			for _, d := range days(tuesday, false, 61, 120) {
				put(s, d, 17, 30, HalfHourSeconds, 1_000_000, 1_000_000)
			}
		}, Skipped, InsufficientHistory, 0},
		{"the 60th day back counts, the 61st not", workday, func(s Series) {
			for _, d := range days(tuesday, false, 50, 120) {
				put(s, d, 17, 30, HalfHourSeconds, 1_000_000, 1_000_000)
			}
		}, Settled, "", len(days(tuesday, false, 50, 60))},
		{"2 weekend days suffice", weekend, func(s Series) {
			for _, d := range days(sunday, true, 1, 7) {
				put(s, d, 13, 0, HalfHourSeconds, 1_000_000, 1_000_000)
			}
		}, Settled, "", 2},
		{"1 does not", weekend, func(s Series) { put(s, sunday.AddDays(-1), 13, 0, HalfHourSeconds, 1_000_000, 1_000_000) },
			Skipped, InsufficientHistory, 1},
		{"working days are no baseline for a weekend event", weekend, func(s Series) {
			for _, d := range days(sunday, false, 1, 60) {
				put(s, d, 13, 0, HalfHourSeconds, 1_000_000, 1_000_000)
			}
		}, Skipped, InsufficientHistory, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Series{}
			c.fill(s)
			day := DateOf(c.ev.Start)
			h, m, _ := c.ev.Start.In(London).Clock()
			put(s, day, h, m, HalfHourSeconds, 0, 0)
			got, err := Settle(Input{Event: c.ev, Energy: s})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != c.status || got.Reason != c.reason || len(got.DaysUsed) != c.used {
				t.Errorf("%s %s with %d days (%v); want %s %s with %d", got.Status, got.Reason, len(got.DaysUsed), got.DaysUsed, c.status, c.reason, c.used)
			}
		})
	}

	// The event's own readings: 80 % of the window settles, less does not.
	for cover, want := range map[int32]Status{1440: Settled, 1439: Skipped} {
		s := Series{}
		history(s, tuesday, false, 17, 30, 1_000_000, 1_000_000)
		put(s, tuesday, 17, 30, cover, 0, 0)
		if got, _ := Settle(Input{Event: workday, Energy: s}); got.Status != want {
			t.Errorf("event covered %d s of each half-hour: %s, want %s", cover, got.Status, want)
		}
	}
	// ... over the whole event, not each half-hour: 100 % and 60 % make 80 %.
	s := Series{}
	history(s, tuesday, false, 17, 30, 1_000_000, 1_000_000)
	put(s, tuesday, 17, 30, HalfHourSeconds, 0)
	put(s, tuesday, 18, 0, 1080, 0)
	if got, _ := Settle(Input{Event: workday, Energy: s}); got.Status != Settled {
		t.Errorf("100 %% and 60 %%: %s %s", got.Status, got.Reason)
	}
}

// Rule 9: a credit is at most the rate × the site's plausible power × the window, whatever
// the readings claim (the money review's minting scenario: 1e6 kW on the days before, 0 kW on
// the day).
func TestCreditBoundedByRatedPower(t *testing.T) {
	tuesday := Date{2026, time.January, 13}
	hour := Event{Start: at(time.January, 13, 17, 30), End: at(time.January, 13, 18, 30), Direction: TurnDown}
	day := Event{Start: at(time.January, 13, 0, 0), End: at(time.January, 14, 0, 0), Direction: TurnDown}
	const megawattHalfHour = 500_000_000_000 // 1e6 kW for half an hour, in mWh
	flat := func(n int, v int64) []int64 {
		out := make([]int64, n)
		for i := range out {
			out[i] = v
		}
		return out
	}
	for _, c := range []struct {
		name        string
		ev          Event
		rate, rated int64
		baseline    int64 // per half-hour on the baseline days; the event's own is 0
		credit      int64
		delivered   int64
		capped      bool
	}{
		{"genuine flex under the bound is paid as delivered", hour, 2500, 7400, 3_000_000, 150, 6_000_000, false},
		{"1e6 kW at 25 p: 11.1 kW (a 7.4 kW charger + 50 %) for the hour", hour, 2500, 7400, megawattHalfHour, 278, 11_100_000, true},
		{"at the highest rate a FlexEvent can carry", hour, 99_999_999, 7400, megawattHalfHour, 11_100_000, 11_100_000, true},
		{"no rated asset: a 100 A supply, 23 kW", hour, 100_000, 0, megawattHalfHour, 23_000, 23_000_000, true},
		{"assets rated above the supply: still 23 kW", hour, 100_000, 1_000_000_000, megawattHalfHour, 23_000, 23_000_000, true},
		{"the longest window at the highest rate: the most one event pays a site", day, 99_999_999, 0, megawattHalfHour,
			551_999_994, 552_000_000, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			ev := c.ev
			ev.RateCentipence = c.rate
			n := int(ev.End.Sub(ev.Start) / (30 * time.Minute))
			s := Series{}
			l := ev.Start.In(London)
			for _, d := range recent(tuesday, 10) {
				put(s, d, l.Hour(), l.Minute(), HalfHourSeconds, flat(n, c.baseline)...)
			}
			put(s, tuesday, l.Hour(), l.Minute(), HalfHourSeconds, flat(n, 0)...)
			got, err := Settle(Input{Event: ev, Energy: s, RatedPowerW: c.rated})
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != Settled || got.CreditPence != c.credit || got.EstimatedCreditPence != c.credit ||
				got.DeliveredMilliWh != c.delivered || got.Capped != c.capped {
				t.Errorf("status %s, credit %d p (estimated %d), delivered %d mWh, capped %v; want credit %d p, delivered %d mWh, capped %v",
					got.Status, got.CreditPence, got.EstimatedCreditPence, got.DeliveredMilliWh, got.Capped, c.credit, c.delivered, c.capped)
			}
			if most := MaxDeliveredMilliWh(c.rated, got.WindowSeconds); got.DeliveredMilliWh > most {
				t.Errorf("delivered %d mWh, above the bound %d", got.DeliveredMilliWh, most)
			}
		})
	}
}
