// Package batterychart draws a battery's plan for the household: a small server-rendered SVG
// chart of the schedule's half-hours (charge, power the home, keep its charge) under the
// horizon's prices as a line (readable without script, role="img" with a <title> and <desc>,
// and a table of the same steps beside it), and one plain sentence from internal/household
// ("Your battery will charge 01:00–03:00, when energy is cheapest, and power your home
// 17:00–19:00, when energy is dearest"). The plan is internal/batteryschedule's, as the REST
// API answers it: nothing is recomputed here. The rewards page and the hosted flow's rewards
// step both show it.
package batterychart

import (
	"fmt"
	"html/template"
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/batteryschedule"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/settlement"
)

// Plan is one battery's plan as the household sees it.
type Plan struct {
	// ID names the plan's elements (ids in the page).
	ID string
	// Sentence says when the battery charges and powers the home.
	Sentence string
	// Chart is the SVG (role="img", titled and described).
	Chart template.HTML
	// Rows are the chart's steps, for the table beside it.
	Rows []Row
}

// Row is one step of the plan.
type Row struct {
	Time   string `json:"time"`
	Action string `json:"action"`
}

// Draw draws one battery's plan: its steps and the horizon's prices; id prefixes its
// elements' ids.
func Draw(id string, steps []batteryschedule.Step, periods []prices.Period) Plan {
	out := Plan{ID: id, Sentence: household.BatteryPlanWords(steps)}
	for _, s := range steps {
		out.Rows = append(out.Rows, Row{Time: clock(s.Start) + "–" + clock(s.End),
			Action: household.BatteryActionWords(s.Action, s.AllowDeviation)})
	}
	out.Chart = svg(id, steps, periods, out.Rows)
	return out
}

// clock is the UK local time of day of t, "17:30".
func clock(t time.Time) string { return t.In(settlement.London).Format("15:04") }

// The chart's geometry, in SVG user units.
const (
	width, height = 320, 190
	left, right   = 48, 8
	priceTop      = 12
	priceBottom   = 108
	stripTop      = 116
	stripBottom   = 134
)

// The actions' marks: charging filled dark, powering the home outlined and dashed, so that
// they read without colour.
const (
	chargeStyle    = `fill="#0b4f8a"`
	dischargeStyle = `fill="#ffffff" stroke="#1a1a1a" stroke-width="1.5" stroke-dasharray="3 2"`
)

// svg draws the steps as marks on a strip per half-hour and the prices as a line above it.
func svg(id string, steps []batteryschedule.Step, periods []prices.Period, rows []Row) template.HTML {
	esc := template.HTMLEscapeString
	var b strings.Builder
	var from, to time.Time
	if len(steps) > 0 {
		from, to = steps[0].Start, steps[len(steps)-1].End
	}
	title := "Your battery's plan"
	if !from.IsZero() {
		title = fmt.Sprintf("Your battery's plan from %s %s to %s %s", from.In(settlement.London).Format("2 January"), clock(from),
			to.In(settlement.London).Format("2 January"), clock(to))
	}
	desc := make([]string, 0, len(rows))
	for _, r := range rows {
		desc = append(desc, r.Time+": "+r.Action)
	}
	fmt.Fprintf(&b, `<svg class="battery-chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="%d" height="%d" `+
		`role="img" aria-labelledby="%s-title %s-desc">`, width, height, width, height, esc(id), esc(id))
	fmt.Fprintf(&b, `<title id="%s-title">%s</title><desc id="%s-desc">%s.</desc>`, esc(id), esc(title), esc(id),
		esc(strings.Join(desc, "; ")))
	slots := int(to.Sub(from) / batteryschedule.HalfHour)
	if slots <= 0 {
		b.WriteString(`</svg>`)
		//nolint:gosec // every text in it is escaped above; the rest is our own markup
		return template.HTML(b.String())
	}
	plotW := float64(width - left - right)
	slot := plotW / float64(slots)
	x := func(t time.Time) float64 { return float64(left) + slot*float64(t.Sub(from)/batteryschedule.HalfHour) }

	// The prices: a line through each priced half-hour's middle, broken where none is declared.
	lo, hi, priced := priceRange(periods)
	if priced {
		span := max(hi-lo, 1)
		y := func(c prices.Centi) float64 {
			return priceBottom - float64(priceBottom-priceTop)*float64(c-lo)/float64(span)
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#1a1a1a" text-anchor="end">£%s</text>`, left-4, priceTop+8, esc(hi.String()))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#1a1a1a" text-anchor="end">£%s</text>`, left-4, priceBottom, esc(lo.String()))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="10" fill="#1a1a1a" text-anchor="end">/MWh</text>`, left-4, priceTop+20)
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				fmt.Fprintf(&b, `<polyline class="price" points="%s" fill="none" stroke="#1a1a1a" stroke-width="1.5"/>`, strings.Join(pts, " "))
			}
			pts = pts[:0]
		}
		for _, p := range periods {
			if p.Centi == nil || p.Start.Before(from) || !p.Start.Before(to) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Start)+slot/2, y(*p.Centi)))
		}
		flush()
	}
	// The strip of the steps.
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="#ffffff" stroke="#555555" stroke-width="1"/>`,
		left, stripTop, plotW, stripBottom-stripTop)
	for _, s := range steps {
		style := ""
		switch s.Action {
		case batteryschedule.ChargeMax:
			style = chargeStyle
		case batteryschedule.DischargeMax:
			style = dischargeStyle
		default:
			continue
		}
		fmt.Fprintf(&b, `<rect class="%s" x="%.1f" y="%d" width="%.1f" height="%d" %s/>`, esc(string(s.Action)),
			x(s.Start), stripTop+2, x(s.End)-x(s.Start), stripBottom-stripTop-4, style)
	}
	// Times: the start, then every six hours on the hour (UK local).
	label := func(t time.Time) {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" fill="#1a1a1a" text-anchor="middle">%s</text>`,
			x(t), stripBottom+13, esc(clock(t)))
	}
	label(from)
	for t := from.Add(batteryschedule.HalfHour); t.Before(to); t = t.Add(batteryschedule.HalfHour) {
		if l := t.In(settlement.London); l.Minute() == 0 && l.Hour()%6 == 0 && x(t)-x(from) > 28 {
			label(t)
		}
	}
	// Legend.
	ly := height - 8
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" %s/>`, left, ly-9, chargeStyle)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a">Charge</text>`, left+16, ly)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" %s/>`, left+66, ly-9, dischargeStyle)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a">Power your home</text>`, left+82, ly)
	if priced {
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#1a1a1a" stroke-width="1.5"/>`, left+184, ly-4, left+196, ly-4)
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" fill="#1a1a1a">Price</text>`, left+200, ly)
	}
	b.WriteString(`</svg>`)
	//nolint:gosec // every text in it is escaped above; the rest is our own markup
	return template.HTML(b.String())
}

// priceRange is the lowest and highest declared price; priced is false when none is declared.
func priceRange(periods []prices.Period) (lo, hi prices.Centi, priced bool) {
	for _, p := range periods {
		if p.Centi == nil {
			continue
		}
		if !priced || *p.Centi < lo {
			lo = *p.Centi
		}
		if !priced || *p.Centi > hi {
			hi = *p.Centi
		}
		priced = true
	}
	return lo, hi, priced
}
