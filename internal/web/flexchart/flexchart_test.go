package flexchart

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/settlementstore"
)

func event(start time.Time, flexKWh float64, pence int64, halfHours ...[2]int64) flexevents.SiteEvent {
	ev := flexevents.SiteEvent{Status: "settled", FlexKWh: &flexKWh, CreditPence: pence, Start: start,
		End: start.Add(time.Duration(len(halfHours)) * 30 * time.Minute)}
	for i, h := range halfHours {
		b := h[0]
		ev.HalfHours = append(ev.HalfHours, settlementstore.HalfHour{Start: start.Add(time.Duration(i) * 30 * time.Minute),
			BaselineMilliWh: &b, ActualMilliWh: h[1], CoveredSeconds: 1800})
	}
	return ev
}

func TestSentence(t *testing.T) {
	winter := time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC) // GMT
	summer := time.Date(2026, 6, 16, 16, 30, 0, 0, time.UTC)  // 17:30 BST
	for _, c := range []struct {
		ev   flexevents.SiteEvent
		want string
	}{
		{event(winter, -1.1, 35, [2]int64{1_800_000, 400_000}, [2]int64{2_600_000, 2_900_000}),
			"You used 1.1 kWh less than usual between 17:30 and 18:30: £0.35"},
		{event(summer, -1.2, 42, [2]int64{1, 1}, [2]int64{1, 1}),
			"You used 1.2 kWh less than usual between 17:30 and 18:30: £0.42"},
		{event(winter, 1.8, 20, [2]int64{1, 1}, [2]int64{1, 1}),
			"You used 1.8 kWh more than usual between 17:30 and 18:30: £0.20"},
		{event(winter, 0.04, 0, [2]int64{1, 1}), "You used about as much as usual between 17:30 and 18:00: £0.00"},
	} {
		if got := Sentence(c.ev); got != c.want {
			t.Errorf("Sentence = %q, want %q", got, c.want)
		}
	}
}

// The chart is well-formed SVG, an image titled and described for screen readers, with a bar
// for the usual and the actual energy of each half-hour.
func TestDraw(t *testing.T) {
	ev := event(time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC), -1.1, 35,
		[2]int64{1_800_000, 400_000}, [2]int64{2_600_000, 2_900_000})
	got := Draw("e1", ev)
	svg := string(got.Chart)
	if err := xml.Unmarshal([]byte(svg), new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v\n%s", err, svg)
	}
	for _, want := range []string{`role="img"`, `aria-labelledby="e1-title e1-desc"`, `<title id="e1-title">`,
		`17:30: usual 1.80 kWh, actual 0.40 kWh; 18:00: usual 2.60 kWh, actual 2.90 kWh.`} {
		if !strings.Contains(svg, want) {
			t.Errorf("chart lacks %q:\n%s", want, svg)
		}
	}
	if n := strings.Count(svg, `class="usual"`) + strings.Count(svg, `class="actual"`); n != 4 {
		t.Errorf("%d bars, want 4", n)
	}
	if got.Day != "Tuesday 17 November 2026" || len(got.Rows) != 2 || got.Rows[1] != (Row{"18:00", "2.60 kWh", "2.90 kWh"}) {
		t.Errorf("Draw = %+v", got)
	}
}
