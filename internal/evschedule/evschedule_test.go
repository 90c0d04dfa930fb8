package evschedule_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/evschedule"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
)

const hh = 30 * time.Minute

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func block(from, to string) evschedule.Block { return evschedule.Block{Start: utc(from), End: utc(to)} }

// curve prices every half-hour in [from, to) at base, but those named in special (RFC 3339
// start → £/MWh).
func curve(from, to string, base prices.Centi, special map[string]prices.Centi) []prices.Price {
	var out []prices.Price
	for t := utc(from); t.Before(utc(to)); t = t.Add(hh) {
		c := base
		if v, ok := special[t.Format(time.RFC3339)]; ok {
			c = v
		}
		out = append(out, prices.Price{Start: t, Centi: c})
	}
	return out
}

func wall(h, m int) *time.Duration {
	d := time.Duration(h)*time.Hour + time.Duration(m)*time.Minute
	return &d
}

func tariff(t *testing.T, offPeak, zone string) *evschedule.Tariff {
	ranges, err := validation.ParseOffPeakTimes(offPeak)
	if err != nil {
		t.Fatal(err)
	}
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	return &evschedule.Tariff{OffPeak: ranges, Zone: loc}
}

// Worked examples, by hand, in the spec's terms. 27 November 2026 is GMT: UK time is UTC.
func TestPlanWorkedExamples(t *testing.T) {
	overnight := curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 5000, map[string]prices.Centi{
		"2026-11-28T01:00:00Z": 2000, "2026-11-28T01:30:00Z": 2000, "2026-11-28T02:00:00Z": 2000, "2026-11-28T02:30:00Z": 2000,
		"2026-11-28T03:00:00Z": 3000, "2026-11-28T03:30:00Z": 3000,
	})
	for _, tc := range []struct {
		name     string
		in       evschedule.Input
		want     []evschedule.Block
		changed  bool
		window   [2]string
		n, cands int
	}{
		{
			// Plugged in at 22:00 asking for 2 hours now (n = 4); ready by 07:00, so the window
			// runs past midnight to 07:00 on the 28th: 18 half-hours, all priced. The four at
			// £20 (01:00–03:00) are the cheapest, and adjacent: one block.
			name: "a deadline past midnight",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-28T00:00:00Z")},
				Prices: overnight, Intent: &evschedule.Intent{ReadyBy: wall(7, 0)}},
			want: []evschedule.Block{block("2026-11-28T01:00:00Z", "2026-11-28T03:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 4, cands: 18,
		},
		{
			// A turn-down dispatch 01:30–02:15 covers the half-hours from 01:30 and from 02:00
			// (it overlaps both): they are not candidates. The four cheapest left: 01:00 and
			// 02:30 at £20, then 03:00 and 03:30 at £30 — 02:30–04:00 merged.
			name: "a turn-down dispatch inside the window",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-28T00:00:00Z")},
				Prices: overnight, Intent: &evschedule.Intent{ReadyBy: wall(7, 0)},
				TurnDown: []evschedule.Block{block("2026-11-28T01:30:00Z", "2026-11-28T02:15:00Z")}},
			want: []evschedule.Block{block("2026-11-28T01:00:00Z", "2026-11-28T01:30:00Z"),
				block("2026-11-28T02:30:00Z", "2026-11-28T04:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 4, cands: 16,
		},
		{
			// n = 2. The £20 half-hours are 22:30, 23:30 and 00:00: ties go to the earliest,
			// 22:30 and 23:30, which are not adjacent: two blocks.
			name: "ties to the earliest",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-27T22:30:00Z": 2000, "2026-11-27T23:30:00Z": 2000, "2026-11-28T00:00:00Z": 2000}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0)}},
			want: []evschedule.Block{block("2026-11-27T22:30:00Z", "2026-11-27T23:00:00Z"),
				block("2026-11-27T23:30:00Z", "2026-11-28T00:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 2, cands: 18,
		},
		{
			// n = 4, but only three of the window's half-hours are priced: the request comes
			// back as it was.
			name: "too few priced half-hours",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-28T00:00:00Z")},
				Prices: curve("2026-11-28T01:00:00Z", "2026-11-28T02:30:00Z", 1000, nil),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0)}},
			want: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-28T00:00:00Z")}, changed: false,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 4, cands: 3,
		},
		{
			// n = 2. 23:00, 23:30, 01:00 and 01:30 are all £20; the tariff's off-peak is
			// 00:30–05:00 and the car may not charge at peak: 01:00 and 01:30, off-peak, win the
			// tie over the earlier 23:00 and 23:30.
			name: "may_charge_peak false: off-peak wins a price tie",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-27T23:00:00Z": 2000, "2026-11-27T23:30:00Z": 2000, "2026-11-28T01:00:00Z": 2000, "2026-11-28T01:30:00Z": 2000}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0), MayChargePeak: false},
				Tariff: tariff(t, "00:30-05:00", "Europe/London")},
			want: []evschedule.Block{block("2026-11-28T01:00:00Z", "2026-11-28T02:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 2, cands: 18,
		},
		{
			// The same, but 23:00 is £19.99: a cheaper peak half-hour still wins (off-peak only
			// breaks ties); the second is 01:00, off-peak, ahead of the earlier 23:30.
			name: "may_charge_peak false: a cheaper peak half-hour still wins",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-27T23:00:00Z": 1999, "2026-11-27T23:30:00Z": 2000, "2026-11-28T01:00:00Z": 2000, "2026-11-28T01:30:00Z": 2000}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0), MayChargePeak: false},
				Tariff: tariff(t, "00:30-05:00", "Europe/London")},
			want: []evschedule.Block{block("2026-11-27T23:00:00Z", "2026-11-27T23:30:00Z"),
				block("2026-11-28T01:00:00Z", "2026-11-28T01:30:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 2, cands: 18,
		},
		{
			// may_charge_peak true: the tariff does not matter, ties go to time order: 23:00 and
			// 23:30.
			name: "may_charge_peak true: time order",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-27T23:00:00Z": 2000, "2026-11-27T23:30:00Z": 2000, "2026-11-28T01:00:00Z": 2000, "2026-11-28T01:30:00Z": 2000}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0), MayChargePeak: true},
				Tariff: tariff(t, "00:30-05:00", "Europe/London")},
			want: []evschedule.Block{block("2026-11-27T23:00:00Z", "2026-11-28T00:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T07:00:00Z"}, n: 2, cands: 18,
		},
		{
			// No intent: the deadline is the last block's end, 00:30. Blocks 22:00–23:00 and
			// 00:00–00:30 are 1.5 hours, n = 3, in a window of five half-hours. 23:00 and 23:30
			// are £10; the third is the earliest £30, 22:00. 00:30 (£1) ends after the deadline.
			name: "no intent: the deadline is the last block's end",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T23:00:00Z"),
				block("2026-11-28T00:00:00Z", "2026-11-28T00:30:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-27T23:00:00Z": 1000, "2026-11-27T23:30:00Z": 1000, "2026-11-28T00:30:00Z": 100})},
			want: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:30:00Z"),
				block("2026-11-27T23:00:00Z", "2026-11-28T00:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T00:30:00Z"}, n: 3, cands: 5,
		},
		{
			// 22:10–22:50 is 40 minutes: n = 2 (rounded up). The window starts at 22:00 (rounded
			// down) and ends at 01:00, the intent's ready-by. 00:00 and 00:30 are the cheapest.
			name: "n rounded up, the start rounded down",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:10:00Z", "2026-11-27T22:50:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-28T00:00:00Z": 1500, "2026-11-28T00:30:00Z": 1500}),
				Intent: &evschedule.Intent{ReadyBy: wall(1, 0)}},
			want: []evschedule.Block{block("2026-11-28T00:00:00Z", "2026-11-28T01:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T01:00:00Z"}, n: 2, cands: 6,
		},
		{
			// The clocks go back at 02:00 BST on 25 October 2026. Plugged in at 22:00 BST
			// (21:00Z), ready by 07:00 GMT (07:00Z): the window is 10 hours, 20 half-hours (a
			// normal night's 9 hours plus the repeated hour). n = 4: 06:30Z (£10, the window's
			// last half-hour, ending exactly at the deadline), then the earliest three £20s —
			// 00:00Z, 00:30Z (01:00 and 01:30 BST) and 01:00Z (01:00 GMT, the repeated hour).
			name: "clocks back: a 50-period day",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-10-24T21:00:00Z", "2026-10-24T23:00:00Z")},
				Prices: curve("2026-10-24T21:00:00Z", "2026-10-25T09:00:00Z", 3000, map[string]prices.Centi{
					"2026-10-25T00:00:00Z": 2000, "2026-10-25T00:30:00Z": 2000, "2026-10-25T01:00:00Z": 2000,
					"2026-10-25T01:30:00Z": 2000, "2026-10-25T06:30:00Z": 1000, "2026-10-25T07:00:00Z": 1}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0)}},
			want: []evschedule.Block{block("2026-10-25T00:00:00Z", "2026-10-25T01:30:00Z"),
				block("2026-10-25T06:30:00Z", "2026-10-25T07:00:00Z")}, changed: true,
			window: [2]string{"2026-10-24T21:00:00Z", "2026-10-25T07:00:00Z"}, n: 4, cands: 20,
		},
		{
			// The clocks go forward at 01:00 GMT on 29 March 2026. Plugged in at 22:00 GMT, ready
			// by 07:00 BST = 06:00Z: the window is 8 hours, 16 half-hours. n = 2: 05:30Z (£10),
			// then the earliest £30, 22:00Z; 06:00Z (£0.05) is 07:00 BST, past the deadline.
			name: "clocks forward: a 46-period day",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-03-28T22:00:00Z", "2026-03-28T23:00:00Z")},
				Prices: curve("2026-03-28T22:00:00Z", "2026-03-29T09:00:00Z", 3000, map[string]prices.Centi{
					"2026-03-29T05:30:00Z": 1000, "2026-03-29T06:00:00Z": 5}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0)}},
			want: []evschedule.Block{block("2026-03-28T22:00:00Z", "2026-03-28T22:30:00Z"),
				block("2026-03-29T05:30:00Z", "2026-03-29T06:00:00Z")}, changed: true,
			window: [2]string{"2026-03-28T22:00:00Z", "2026-03-29T06:00:00Z"}, n: 2, cands: 16,
		},
		{
			// No intent: may_charge_peak is prod's default, false, so the tariff's off-peak
			// still breaks the tie. The deadline is the last block's end, 23:30: a window of
			// three half-hours, all £20, n = 2. 23:00 is off-peak and wins; then the earliest,
			// 22:00 (without the preference the answer would be 22:00–23:00).
			name: "no intent: may_charge_peak defaults to false",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:30:00Z"),
				block("2026-11-27T23:00:00Z", "2026-11-27T23:30:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 2000, nil),
				Tariff: tariff(t, "23:00-24:00", "Europe/London")},
			want: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:30:00Z"),
				block("2026-11-27T23:00:00Z", "2026-11-27T23:30:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-27T23:30:00Z"}, n: 2, cands: 3,
		},
		{
			// The tariff's zone reads the wall time: ready by 07:00 in Paris (CET, UTC+1) is
			// 06:00Z. Off-peak 01:00–03:00 Paris is 00:00Z–02:00Z, so with may_charge_peak false
			// the £20 at 00:30Z beats the earlier £20 at 23:30Z.
			name: "the tariff's timezone",
			in: evschedule.Input{Requested: []evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:30:00Z")},
				Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 3000, map[string]prices.Centi{
					"2026-11-27T23:30:00Z": 2000, "2026-11-28T00:30:00Z": 2000}),
				Intent: &evschedule.Intent{ReadyBy: wall(7, 0)},
				Tariff: tariff(t, "01:00-03:00", "Europe/Paris")},
			want: []evschedule.Block{block("2026-11-28T00:30:00Z", "2026-11-28T01:00:00Z")}, changed: true,
			window: [2]string{"2026-11-27T22:00:00Z", "2026-11-28T06:00:00Z"}, n: 1, cands: 16,
		},
	} {
		got := evschedule.Plan(tc.in)
		if !slices.EqualFunc(got.Blocks, tc.want, sameBlock) || got.Changed != tc.changed {
			t.Errorf("%s: blocks %s (changed %v), want %s (changed %v)", tc.name, blocks(got.Blocks), got.Changed,
				blocks(tc.want), tc.changed)
		}
		if !got.WindowStart.Equal(utc(tc.window[0])) || !got.WindowEnd.Equal(utc(tc.window[1])) {
			t.Errorf("%s: window [%s, %s), want [%s, %s)", tc.name, got.WindowStart.UTC(), got.WindowEnd.UTC(),
				tc.window[0], tc.window[1])
		}
		if got.Needed != tc.n || got.Candidates != tc.cands {
			t.Errorf("%s: n = %d with %d candidates, want %d with %d", tc.name, got.Needed, got.Candidates, tc.n, tc.cands)
		}
	}
}

func TestPlanEmptyRequest(t *testing.T) {
	got := evschedule.Plan(evschedule.Input{Prices: curve("2026-11-27T22:00:00Z", "2026-11-28T08:00:00Z", 1, nil)})
	if got.Changed || len(got.Blocks) != 0 || !got.WindowStart.IsZero() {
		t.Errorf("an empty request: %+v", got)
	}
}

func TestNeeded(t *testing.T) {
	for _, tc := range []struct {
		blocks []evschedule.Block
		n      int
	}{
		{nil, 0},
		{[]evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:30:00Z")}, 1},
		{[]evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:31:00Z")}, 2},
		{[]evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:20:00Z"), block("2026-11-27T23:00:00Z", "2026-11-27T23:20:00Z")}, 2},
		{[]evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T22:01:00Z")}, 1},
		// A block that ends before it starts adds nothing.
		{[]evschedule.Block{block("2026-11-27T22:00:00Z", "2026-11-27T21:00:00Z")}, 0},
	} {
		if got := evschedule.Needed(tc.blocks); got != tc.n {
			t.Errorf("%s: n = %d, want %d", blocks(tc.blocks), got, tc.n)
		}
	}
}

func sameBlock(a, b evschedule.Block) bool { return a.Start.Equal(b.Start) && a.End.Equal(b.End) }

func blocks(bs []evschedule.Block) string {
	out := "["
	for _, b := range bs {
		out += fmt.Sprintf(" %s–%s", b.Start.UTC().Format("01-02T15:04"), b.End.UTC().Format("01-02T15:04"))
	}
	return out + " ]"
}

// --- Property test against brute force ---

type cand struct {
	start   time.Time
	price   prices.Centi
	offPeak bool
}

// offPeakByMinutes tells whether every minute of the half-hour from t is inside an off-peak
// range, read minute by minute in the zone: independent of the rule's arithmetic.
func offPeakByMinutes(t time.Time, tr *evschedule.Tariff) bool {
	for m := 0; m < 30; m++ {
		l := t.Add(time.Duration(m) * time.Minute).In(tr.Zone)
		minute := l.Hour()*60 + l.Minute()
		in := false
		for _, r := range tr.OffPeak {
			if r.Start <= minute && minute < r.End {
				in = true
			}
		}
		if !in {
			return false
		}
	}
	return true
}

func overlaps(t time.Time, ws []evschedule.Block) bool {
	for _, w := range ws {
		if w.Start.Before(t.Add(hh)) && w.End.After(t) {
			return true
		}
	}
	return false
}

// better is the tie rule's order on candidates: price, then off-peak, then time.
func keyLess(a, b cand) int {
	if a.price != b.price {
		if a.price < b.price {
			return -1
		}
		return 1
	}
	if a.offPeak != b.offPeak {
		if a.offPeak {
			return -1
		}
		return 1
	}
	return a.start.Compare(b.start)
}

// bruteForce enumerates every n-subset of the candidates: the cheapest total, and among the
// subsets of that total the one the tie rules select (its candidates, ordered by the tie
// rule's key, lexicographically least), and the most off-peak half-hours any cheapest subset
// holds.
func bruteForce(cands []cand, n int) (best []cand, cost int64, maxOffPeak int) {
	var pick []cand
	var rec func(i int)
	rec = func(i int) {
		if len(pick) == n {
			var c int64
			off := 0
			for _, p := range pick {
				c += int64(p.price)
				if p.offPeak {
					off++
				}
			}
			sorted := slices.Clone(pick)
			slices.SortFunc(sorted, keyLess)
			switch {
			case best == nil || c < cost:
				best, cost, maxOffPeak = sorted, c, off
			case c == cost:
				maxOffPeak = max(maxOffPeak, off)
				if slices.CompareFunc(sorted, best, keyLess) < 0 {
					best = sorted
				}
			}
			return
		}
		if i == len(cands) || len(pick)+len(cands)-i < n {
			return
		}
		pick = append(pick, cands[i])
		rec(i + 1)
		pick = pick[:len(pick)-1]
		rec(i + 1)
	}
	rec(0)
	return best, cost, maxOffPeak
}

// randomInput is a small random case: a request from one of a few evenings (ordinary and
// clock-change), maybe an intent, maybe a tariff in one of a few zones, turn-downs, and prices
// from a small set (ties) with gaps, shuffled. first is the request's first start.
func randomInput(rng *rand.Rand) (evschedule.Input, time.Time) {
	bases := []string{"2026-11-27T21:00:00Z", "2026-10-24T23:00:00Z", "2026-10-25T00:00:00Z", "2026-03-29T00:00:00Z", "2026-07-01T20:30:00Z"}
	zones := []string{"Europe/London", "Europe/Paris", "America/New_York"}
	base := utc(bases[rng.IntN(len(bases))])
	first := base.Add(time.Duration(rng.IntN(4)) * 10 * time.Minute)
	req := make([]evschedule.Block, 0, 3)
	at := first
	for range 1 + rng.IntN(3) {
		length := time.Duration(1+rng.IntN(60)) * time.Minute
		req = append(req, evschedule.Block{Start: at, End: at.Add(length)})
		at = at.Add(length + time.Duration(rng.IntN(60))*time.Minute)
	}
	in := evschedule.Input{Requested: req}
	if rng.IntN(4) > 0 {
		// A ready-by at most 6 hours on from the window start: ≤ 12 half-hours.
		l := first.Truncate(hh).Add(time.Duration(1+rng.IntN(12)) * hh).In(settlement.London)
		in.Intent = &evschedule.Intent{ReadyBy: wall(l.Hour(), l.Minute()), MayChargePeak: rng.IntN(2) == 0}
	}
	if rng.IntN(2) == 0 {
		loc, _ := time.LoadLocation(zones[rng.IntN(len(zones))])
		var ranges []validation.MinuteRange
		for s := rng.IntN(8) * 15; s < 1440; {
			e := min(1440, s+15*(1+rng.IntN(12)))
			ranges = append(ranges, validation.MinuteRange{Start: s, End: e})
			s = e + 15*(1+rng.IntN(30))
		}
		in.Tariff = &evschedule.Tariff{OffPeak: ranges, Zone: loc}
		if in.Tariff.Zone.String() != "Europe/London" && in.Intent != nil && rng.IntN(2) == 0 {
			in.Intent.ReadyBy = nil // the deadline from the blocks, in another zone
		}
	}
	for range rng.IntN(3) {
		s := first.Add(time.Duration(rng.IntN(14*30)) * time.Minute)
		in.TurnDown = append(in.TurnDown, evschedule.Block{Start: s, End: s.Add(time.Duration(1+rng.IntN(90)) * time.Minute)})
	}
	for t := first.Truncate(hh).Add(-2 * hh); t.Before(first.Add(16 * hh)); t = t.Add(hh) {
		if rng.IntN(6) > 0 {
			in.Prices = append(in.Prices, prices.Price{Start: t, Centi: prices.Centi((rng.IntN(7) - 2) * 100)})
		}
	}
	rng.Shuffle(len(in.Prices), func(i, j int) { in.Prices[i], in.Prices[j] = in.Prices[j], in.Prices[i] })
	return in, first
}

// wellFormed checks the blocks are sorted, disjoint, merged, half-hour aligned, inside the window
// and clear of the turn-downs, and answers their half-hours.
func wellFormed(t *testing.T, c int, bs []evschedule.Block, start, deadline time.Time, turnDown []evschedule.Block) []time.Time {
	t.Helper()
	var chosen []time.Time
	for i, b := range bs {
		if !b.Start.Before(b.End) || b.Start.Truncate(hh) != b.Start || b.End.Truncate(hh) != b.End {
			t.Fatalf("case %d: block %d malformed: %s", c, i, blocks(bs))
		}
		if i > 0 && !bs[i-1].End.Before(b.Start) {
			t.Fatalf("case %d: blocks overlap, touch or are out of order: %s", c, blocks(bs))
		}
		if b.Start.Before(start) || b.End.After(deadline) {
			t.Fatalf("case %d: %s outside [%s, %s)", c, blocks(bs), start, deadline)
		}
		for t0 := b.Start; t0.Before(b.End); t0 = t0.Add(hh) {
			if overlaps(t0, turnDown) {
				t.Fatalf("case %d: %s under a turn-down", c, t0)
			}
			chosen = append(chosen, t0)
		}
	}
	return chosen
}

// Random small horizons (≤ 12 half-hours in the window, on ordinary and clock-change nights),
// prices from a small set (ties), gaps, requests, turn-downs and tariffs: the rule's answer is
// the brute-force optimum the tie rules select, and its blocks are well formed.
func TestPlanAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 2026))
	checked, changed := 0, 0
	for c := 0; c < 2000; c++ {
		in, first := randomInput(rng)
		req := in.Requested
		start, deadline, _ := evschedule.Window(in)
		if !start.Equal(first.Truncate(hh)) {
			t.Fatalf("case %d: window start %s, want %s", c, start, first.Truncate(hh))
		}
		if deadline.Sub(start) > 12*hh {
			continue // a deadline from the blocks can be further: keep brute force small
		}
		n := evschedule.Needed(req)
		priced := map[int64]prices.Centi{}
		for _, p := range in.Prices {
			priced[p.Start.Unix()] = p.Centi
		}
		preferOffPeak := in.Tariff != nil && (in.Intent == nil || !in.Intent.MayChargePeak)
		var cands []cand
		for t := start; !t.Add(hh).After(deadline); t = t.Add(hh) {
			p, ok := priced[t.Unix()]
			if !ok || overlaps(t, in.TurnDown) {
				continue
			}
			cands = append(cands, cand{start: t, price: p, offPeak: preferOffPeak && offPeakByMinutes(t, in.Tariff)})
		}
		got := evschedule.Plan(in)
		checked++
		if got.Needed != n || got.Candidates != len(cands) {
			t.Fatalf("case %d: n %d, %d candidates; want %d, %d", c, got.Needed, got.Candidates, n, len(cands))
		}
		if n == 0 || len(cands) < n {
			if got.Changed || !slices.EqualFunc(got.Blocks, req, sameBlock) {
				t.Fatalf("case %d: too few candidates (%d < %d) but %s changed %v", c, len(cands), n, blocks(got.Blocks), got.Changed)
			}
			continue
		}
		changed++
		if !got.Changed {
			t.Fatalf("case %d: not changed with %d candidates for n = %d", c, len(cands), n)
		}
		// (c) well formed, n half-hours in all.
		chosen := wellFormed(t, c, got.Blocks, start, deadline, in.TurnDown)
		if len(chosen) != n {
			t.Fatalf("case %d: %d half-hours chosen, want %d", c, len(chosen), n)
		}
		// (a) no other choice is cheaper; (b) it is the one the tie rules select.
		best, cost, maxOff := bruteForce(cands, n)
		var gotCost int64
		off := 0
		byStart := map[int64]cand{}
		for _, k := range cands {
			byStart[k.start.Unix()] = k
		}
		for _, t0 := range chosen {
			k, ok := byStart[t0.Unix()]
			if !ok {
				t.Fatalf("case %d: %s is not a candidate", c, t0)
			}
			gotCost += int64(k.price)
			if k.offPeak {
				off++
			}
		}
		if gotCost != cost {
			t.Fatalf("case %d: cost %d, brute force finds %d", c, gotCost, cost)
		}
		want := make([]time.Time, len(best))
		for i, k := range best {
			want[i] = k.start
		}
		slices.SortFunc(want, time.Time.Compare)
		if !slices.EqualFunc(chosen, want, time.Time.Equal) {
			t.Fatalf("case %d: chose %v, the tie rules select %v", c, chosen, want)
		}
		if off != maxOff {
			t.Fatalf("case %d: %d off-peak half-hours, a cheapest choice has %d", c, off, maxOff)
		}
	}
	t.Logf("%d cases checked, %d rescheduled", checked, changed)
	if checked < 1000 || changed < 500 {
		t.Errorf("only %d cases checked, %d rescheduled: the generator is too narrow", checked, changed)
	}
}

// A 48-period horizon: plugged in at 18:00, two blocks asking for 4 hours, ready by 18:00 the
// next day, a tariff, a turn-down dispatch.
func benchInput() evschedule.Input {
	from := utc("2026-11-27T18:00:00Z")
	in := evschedule.Input{
		Requested: []evschedule.Block{{Start: from, End: from.Add(3 * time.Hour)}, {Start: from.Add(5 * time.Hour), End: from.Add(6 * time.Hour)}},
		Intent:    &evschedule.Intent{ReadyBy: wall(18, 0)},
		Tariff:    &evschedule.Tariff{OffPeak: []validation.MinuteRange{{Start: 0, End: 7 * 60}, {Start: 23*60 + 30, End: 24 * 60}}, Zone: settlement.London},
		TurnDown:  []evschedule.Block{{Start: from.Add(8 * time.Hour), End: from.Add(9 * time.Hour)}},
	}
	for i := range 48 {
		in.Prices = append(in.Prices, prices.Price{Start: from.Add(time.Duration(i) * hh), Centi: prices.Centi((i*7919)%5000 + 1000)})
	}
	return in
}

func BenchmarkPlan48(b *testing.B) {
	in := benchInput()
	if s := evschedule.Plan(in); !s.Changed || s.Candidates < 40 {
		b.Fatalf("not a 48-period plan: %+v", s)
	}
	b.ReportAllocs()
	for b.Loop() {
		evschedule.Plan(in)
	}
}
