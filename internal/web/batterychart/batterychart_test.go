package batterychart_test

import (
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/batteryschedule"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/web/batterychart"
)

func TestDraw(t *testing.T) {
	// 28 November 2026, winter: UK local time is UTC. Four hours from 00:00.
	at := func(hh, mm int) time.Time { return time.Date(2026, 11, 28, hh, mm, 0, 0, time.UTC) }
	centis := []prices.Centi{5000, 5000, 1000, 1000, 5000, 5000, 10000, 10000}
	ps := make([]prices.Price, 0, len(centis))
	for i, c := range centis {
		ps = append(ps, prices.Price{Start: at(0, 0).Add(time.Duration(i) * 30 * time.Minute), Centi: c})
	}
	steps := batteryschedule.Plan(batteryschedule.Input{From: at(0, 0), To: at(4, 0), Prices: ps, CapacityWh: 5000, PowerW: 5000})
	p := batterychart.Draw("battery-1", steps, prices.Curve(at(0, 0), at(4, 0), ps[:7])) // the last half-hour unpriced

	if want := "Your battery will charge 01:00–02:00, when energy is cheapest, and power your home 03:00–04:00, when energy is dearest"; p.Sentence != want {
		t.Errorf("sentence %q, want %q", p.Sentence, want)
	}
	wantRows := []batterychart.Row{{"00:00–01:00", "Keep charge for your home"}, {"01:00–02:00", "Charge"},
		{"02:00–03:00", "Keep charge for your home"}, {"03:00–04:00", "Power your home"}}
	if len(p.Rows) != len(wantRows) {
		t.Fatalf("rows %v, want %v", p.Rows, wantRows)
	}
	for i := range wantRows {
		if p.Rows[i] != wantRows[i] {
			t.Errorf("row %d: %v, want %v", i, p.Rows[i], wantRows[i])
		}
	}
	chart := string(p.Chart)
	if err := xml.Unmarshal([]byte(chart), new(struct{})); err != nil {
		t.Fatalf("the chart is not well-formed XML: %v\n%s", err, chart)
	}
	for _, want := range []string{`role="img"`, `aria-labelledby="battery-1-title battery-1-desc"`,
		`<title id="battery-1-title">Your battery&#39;s plan from 28 November 00:00 to 28 November 04:00</title>`,
		`<desc id="battery-1-desc">00:00–01:00: Keep charge for your home; 01:00–02:00: Charge; 02:00–03:00: Keep charge for your home; 03:00–04:00: Power your home.</desc>`,
		`£100.00`, `£10.00`} {
		if !strings.Contains(chart, want) {
			t.Errorf("the chart lacks %s:\n%s", want, chart)
		}
	}
	if n := strings.Count(chart, `class="charge_max"`); n != 1 {
		t.Errorf("%d charge marks, want 1 (the merged step)", n)
	}
	if n := strings.Count(chart, `class="discharge_max"`); n != 1 {
		t.Errorf("%d discharge marks, want 1", n)
	}
	// Seven priced half-hours in a row: one line of seven points.
	if n := strings.Count(chart, `<polyline`); n != 1 {
		t.Errorf("%d price lines, want 1", n)
	}
}

func TestDrawNoPricesNoSteps(t *testing.T) {
	at := func(hh int) time.Time { return time.Date(2026, 11, 28, hh, 0, 0, 0, time.UTC) }
	steps := batteryschedule.Plan(batteryschedule.Input{From: at(0), To: at(2), CapacityWh: 5000, PowerW: 5000})
	p := batterychart.Draw("b", steps, prices.Curve(at(0), at(2), nil))
	chart := string(p.Chart)
	if err := xml.Unmarshal([]byte(chart), new(struct{})); err != nil {
		t.Fatalf("not well-formed: %v", err)
	}
	if strings.Contains(chart, "<polyline") || strings.Contains(chart, "Price") {
		t.Errorf("a chart without prices draws no price line:\n%s", chart)
	}
	if p.Sentence != "Your battery will keep its charge for your home: no cheaper time to charge is planned yet" {
		t.Errorf("sentence %q", p.Sentence)
	}
	empty := batterychart.Draw("e", nil, nil)
	if err := xml.Unmarshal([]byte(empty.Chart), new(struct{})); err != nil || !strings.Contains(string(empty.Chart), `role="img"`) {
		t.Errorf("an empty plan's chart: %v %s", err, empty.Chart)
	}
}
