// Package flexchart draws a settled flex event for the household: a small server-rendered
// SVG chart of the baseline against the actual energy per half-hour (readable without
// script, role="img" with a <title> and <desc>, and a table of the same figures beside it),
// and one plain sentence ("You used 1.2 kWh less than usual between 17:30 and 18:30: £0.42").
// The figures are the settlement's, as stored: nothing is recomputed. The rewards page and
// the hosted flow's rewards step both show it.
package flexchart

import (
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/settlementstore"
)

// Event is one settled event as the household sees it.
type Event struct {
	// ID names the event's elements (ids in the page).
	ID string
	// Day is the event's UK local date ("Tuesday 17 November 2026").
	Day string
	// Sentence says what the household did and earned; "" (and no Chart, no Rows) for an
	// event not settled yet, shown for its Devices alone.
	Sentence string
	// Chart is the SVG (role="img", titled and described).
	Chart template.HTML
	// Rows are the chart's figures, for the table beside it.
	Rows []Row
	// Devices say what the household's devices did, one sentence per executed dispatch
	// ("Your charger was paused from 17:30 to 18:30"), the same sentence once.
	Devices []string
}

// Row is one half-hour's figures.
type Row struct {
	Time   string `json:"time"`
	Usual  string `json:"usual"`
	Actual string `json:"actual"`
}

// Of are the events among a site's events the household is shown, newest first: the settled
// ones, drawn, and those its devices executed a dispatch of (settled or not yet).
func Of(events []flexevents.SiteEvent) []Event {
	var out []Event
	for i, ev := range events {
		id := fmt.Sprintf("flex-event-%d", i+1)
		switch {
		case ev.Status == string(settlement.Settled) && len(ev.HalfHours) > 0:
			out = append(out, Draw(id, ev))
		case len(ev.Executed) > 0:
			out = append(out, Event{ID: id, Day: day(ev.Start), Devices: Devices(ev)})
		}
	}
	return out
}

// Devices are the sentences of what the event's executed dispatches did, in the order given,
// each different sentence once (two chargers paused alike read as one).
func Devices(ev flexevents.SiteEvent) []string {
	var out []string
	for _, d := range ev.Executed {
		if s := household.DispatchWords(d.AssetType, d.LevelKW, d.From, d.To, d.Ongoing); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// day is the UK local date an event is headed by ("Tuesday 17 November 2026").
func day(start time.Time) string { return start.In(settlement.London).Format("Monday 2 January 2006") }

// Draw draws one settled event; id prefixes its elements' ids.
func Draw(id string, ev flexevents.SiteEvent) Event {
	start, end := ev.Start.In(settlement.London), ev.End.In(settlement.London)
	out := Event{ID: id, Day: day(ev.Start), Sentence: Sentence(ev), Devices: Devices(ev)}
	for _, h := range ev.HalfHours {
		out.Rows = append(out.Rows, Row{Time: h.Start.In(settlement.London).Format("15:04"),
			Usual: kwh(baseline(h)), Actual: kwh(h.ActualMilliWh)})
	}
	out.Chart = svg(id, ev, out.Rows, start, end)
	return out
}

func baseline(h settlementstore.HalfHour) int64 {
	if h.BaselineMilliWh == nil {
		return 0
	}
	return *h.BaselineMilliWh
}

// Sentence is "You used 1.2 kWh less than usual between 17:30 and 18:30: £0.42" (UK local
// times; "more" when the household used more; the amount is the event's credit).
func Sentence(ev flexevents.SiteEvent) string {
	var flexWh int64
	if ev.FlexKWh != nil {
		flexWh = int64(math.Round(*ev.FlexKWh * 1000))
	}
	between := fmt.Sprintf("between %s and %s", ev.Start.In(settlement.London).Format("15:04"),
		ev.End.In(settlement.London).Format("15:04"))
	money := fmt.Sprintf("£%d.%02d", ev.CreditPence/100, ev.CreditPence%100)
	amount := math.Round(math.Abs(float64(flexWh))/100) / 10 // kWh, one decimal
	switch {
	case amount == 0:
		return fmt.Sprintf("You used about as much as usual %s: %s", between, money)
	case flexWh < 0:
		return fmt.Sprintf("You used %.1f kWh less than usual %s: %s", amount, between, money)
	}
	return fmt.Sprintf("You used %.1f kWh more than usual %s: %s", amount, between, money)
}

func kwh(mwh int64) string { return fmt.Sprintf("%.2f kWh", float64(mwh)/1e6) }

// The chart's geometry, in SVG user units.
const (
	width, height = 320, 180
	left, right   = 58, 8
	top, bottom   = 12, 36
)

// usualStyle draws the usual energy: an outline, dashed, so that it reads without colour.
const usualStyle = `fill="#ffffff" stroke="#4a4a4a" stroke-width="2" stroke-dasharray="4 2"`

// svg draws grouped bars per half-hour: the usual (baseline) outlined, the actual filled.
func svg(id string, ev flexevents.SiteEvent, rows []Row, start, end time.Time) template.HTML {
	hh := ev.HalfHours
	var peak int64 = 1
	for _, h := range hh {
		peak = max(peak, baseline(h), h.ActualMilliWh)
	}
	plotW, plotH := float64(width-left-right), float64(height-top-bottom)
	slot := plotW / float64(len(hh))
	bar := math.Min(slot*0.35, 28)
	y := func(mwh int64) float64 { return float64(top) + plotH - plotH*float64(max(mwh, 0))/float64(peak) }
	esc := template.HTMLEscapeString
	var b strings.Builder
	title := fmt.Sprintf("Your electricity use during the event on %s, %s to %s", start.Format("2 January"),
		start.Format("15:04"), end.Format("15:04"))
	desc := make([]string, 0, len(rows))
	for _, r := range rows {
		desc = append(desc, fmt.Sprintf("%s: usual %s, actual %s", r.Time, r.Usual, r.Actual))
	}
	fmt.Fprintf(&b, `<svg class="flex-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" `+
		`role="img" aria-labelledby="%s-title %s-desc">`, width, height, width, height, esc(id), esc(id))
	fmt.Fprintf(&b, `<title id="%s-title">%s</title><desc id="%s-desc">%s.</desc>`, esc(id), esc(title), esc(id),
		esc(strings.Join(desc, "; ")))
	// Axis and scale.
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#555555" stroke-width="1"/>`,
		left, height-bottom, width-right, height-bottom)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a" text-anchor="end">%s</text>`,
		left-4, top+8, esc(fmt.Sprintf("%.1f kWh", float64(peak)/1e6)))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a" text-anchor="end">0</text>`, left-4, height-bottom)
	for i, h := range hh {
		x := float64(left) + slot*float64(i) + slot/2
		bl, ac := baseline(h), h.ActualMilliWh
		fmt.Fprintf(&b, `<rect class="usual" x="%.1f" y="%.1f" width="%.1f" height="%.1f" %s/>`,
			x-bar-1, y(bl), bar, float64(height-bottom)-y(bl), usualStyle)
		fmt.Fprintf(&b, `<rect class="actual" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#0b4f8a"/>`,
			x+1, y(ac), bar, float64(height-bottom)-y(ac))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" fill="#1a1a1a" text-anchor="middle">%s</text>`,
			x, height-bottom+14, esc(rows[i].Time))
	}
	// Legend.
	ly := height - 8
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" %s/>`, left, ly-9, usualStyle)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a">Usual</text>`, left+16, ly)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" fill="#0b4f8a"/>`, left+70, ly-9)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a">During the event</text>`, left+86, ly)
	b.WriteString(`</svg>`)
	//nolint:gosec // every text in it is escaped above; the rest is our own markup
	return template.HTML(b.String())
}
