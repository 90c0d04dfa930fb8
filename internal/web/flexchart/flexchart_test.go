package flexchart

import (
	"encoding/xml"
	"slices"
	"strings"
	"testing"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
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

// The household is shown its settled events, drawn, and the events its devices executed a
// dispatch of, settled or not: each with a sentence per different thing its devices did.
func TestOf(t *testing.T) {
	start := time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC)
	paused := func(typ flexv1.AssetType, asset string) flexevents.ExecutedDispatch {
		return flexevents.ExecutedDispatch{AssetID: asset, AssetType: typ, LevelKW: 0, From: start, To: start.Add(time.Hour)}
	}
	settled := event(start, -1.1, 35, [2]int64{1_800_000, 400_000}, [2]int64{2_600_000, 2_900_000})
	settled.ID = "settled"
	settled.Executed = []flexevents.ExecutedDispatch{paused(flexv1.AssetTypeCharger, "c1"), paused(flexv1.AssetTypeCharger, "c2"),
		{AssetID: "b1", AssetType: flexv1.AssetTypeBattery, LevelKW: 5, From: start, To: start.Add(time.Hour)}}
	quiet := event(start.Add(-48*time.Hour), -0.5, 10, [2]int64{1, 1})
	pending := flexevents.SiteEvent{ID: "pending", Status: "pending", Start: start.Add(24 * time.Hour),
		Executed: []flexevents.ExecutedDispatch{paused("", "gone")}}
	waiting := flexevents.SiteEvent{ID: "waiting", Status: "pending", Start: start.Add(48 * time.Hour)}
	skipped := flexevents.SiteEvent{ID: "skipped", Status: "skipped", Start: start.Add(-24 * time.Hour)}

	got := Of([]flexevents.SiteEvent{waiting, pending, settled, skipped, quiet})
	if len(got) != 3 {
		t.Fatalf("Of = %d events, want the pending one with a dispatch executed and the two settled: %+v", len(got), got)
	}
	if got[0].ID != "flex-event-2" || got[0].Day != "Wednesday 18 November 2026" || got[0].Sentence != "" ||
		got[0].Chart != "" || len(got[0].Rows) != 0 ||
		!slices.Equal(got[0].Devices, []string{"Your device was paused from 17:30 to 18:30"}) {
		t.Errorf("the pending event: %+v", got[0])
	}
	if got[1].Sentence == "" || got[1].Chart == "" || !slices.Equal(got[1].Devices, []string{
		"Your charger was paused from 17:30 to 18:30", "Your battery was discharged from 17:30 to 18:30"}) {
		t.Errorf("the settled event: %+v", got[1])
	}
	if got[2].Chart == "" || got[2].Devices != nil {
		t.Errorf("a settled event without executed dispatches: %+v", got[2])
	}
}
