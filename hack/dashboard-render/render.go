package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"image/color"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// scrape is one reading of the endpoint: every sample by metric name, with its labels.
type scrape struct {
	at      time.Time
	samples map[string][]sample
}

type sample struct {
	labels map[string]string
	value  float64
}

func readScrapes(path string) ([]scrape, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []scrape
	for _, chunk := range strings.Split(string(data), "# SCRAPE ")[1:] {
		header, body, _ := strings.Cut(chunk, "\n")
		ms, err := strconv.ParseInt(strings.TrimSpace(header), 10, 64)
		if err != nil {
			return nil, err
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(bufio.NewReader(strings.NewReader(body)))
		if err != nil {
			continue // a scrape cut short when the load stopped
		}
		s := scrape{at: time.UnixMilli(ms), samples: map[string][]sample{}}
		for name, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				switch f.GetType() {
				case dto.MetricType_COUNTER:
					s.samples[name] = append(s.samples[name], sample{labels, m.GetCounter().GetValue()})
				case dto.MetricType_GAUGE:
					s.samples[name] = append(s.samples[name], sample{labels, m.GetGauge().GetValue()})
				case dto.MetricType_HISTOGRAM:
					// The text format's buckets include le="+Inf" (the sample count).
					for _, b := range m.GetHistogram().GetBucket() {
						bl := withLabel(labels, "le", strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64))
						s.samples[name+"_bucket"] = append(s.samples[name+"_bucket"], sample{bl, float64(b.GetCumulativeCount())})
					}
				}
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for lk, lv := range labels {
		out[lk] = lv
	}
	return out
}

// The dashboard's three query shapes; label matchers and the range are ignored.
var (
	reQuantile = regexp.MustCompile(`^histogram_quantile\(([0-9.]+), sum by \(([^)]*)\) \(rate\((\w+)(?:\{[^}]*\})?\[[^\]]*\]\)\)\)$`)
	reRate     = regexp.MustCompile(`^sum(?: by \(([^)]*)\))? ?\(rate\((\w+)(?:\{[^}]*\})?\[[^\]]*\]\)\)$`)
	reGauge    = regexp.MustCompile(`^sum(?: by \(([^)]*)\))? ?\((\w+)(?:\{[^}]*\})?\)$`)
)

// series is one line of a panel: a key of grouping label values, and a value per scrape.
type series map[string]map[string]string // key -> labels

func splitLabels(s string) []string {
	var out []string
	for _, l := range strings.Split(s, ",") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func groupKey(labels map[string]string, by []string) (string, map[string]string) {
	parts := make([]string, len(by))
	kept := map[string]string{}
	for i, l := range by {
		parts[i] = labels[l]
		kept[l] = labels[l]
	}
	return strings.Join(parts, "\x00"), kept
}

// sumBy sums name's samples of one scrape by the labels by.
func sumBy(s scrape, name string, by []string) (map[string]float64, series) {
	sums, labels := map[string]float64{}, series{}
	for _, smp := range s.samples[name] {
		k, kept := groupKey(smp.labels, by)
		sums[k] += smp.value
		labels[k] = kept
	}
	return sums, labels
}

// evaluate answers expr at each scrape that has one a window earlier: per group key, a value
// per scrape time (NaN where there is none).
func evaluate(expr string, scrapes []scrape, window time.Duration) (times []time.Time, values map[string][]float64, labels series, err error) {
	values, labels = map[string][]float64{}, series{}
	var quantile float64
	var by []string
	var name string
	rate := true
	switch {
	case reQuantile.MatchString(expr):
		m := reQuantile.FindStringSubmatch(expr)
		quantile, _ = strconv.ParseFloat(m[1], 64)
		by, name = splitLabels(m[2]), m[3]
	case reRate.MatchString(expr):
		m := reRate.FindStringSubmatch(expr)
		by, name = splitLabels(m[1]), m[2]
	case reGauge.MatchString(expr):
		m := reGauge.FindStringSubmatch(expr)
		by, name, rate = splitLabels(m[1]), m[2], false
	default:
		return nil, nil, nil, fmt.Errorf("a query this renderer cannot evaluate: %s", expr)
	}
	put := func(i int, k string, v float64) {
		if _, ok := values[k]; !ok {
			values[k] = make([]float64, len(scrapes))
			for j := range values[k] {
				values[k][j] = math.NaN()
			}
		}
		values[k][i] = v
	}
	prev := 0
	for i, s := range scrapes {
		times = append(times, s.at)
		now, nowLabels := sumBy(s, name, by)
		if !rate {
			for k, v := range now {
				labels[k] = nowLabels[k]
				put(i, k, v)
			}
			continue
		}
		for prev < i && s.at.Sub(scrapes[prev+1].at) >= window {
			prev++
		}
		if s.at.Sub(scrapes[prev].at) < window {
			continue
		}
		then, _ := sumBy(scrapes[prev], name, by)
		dt := s.at.Sub(scrapes[prev].at).Seconds()
		rates := map[string]float64{}
		for k, v := range now {
			r := (v - then[k]) / dt
			if r < 0 { // a counter reset (the manager restarted)
				r = v / dt
			}
			rates[k] = r
			labels[k] = nowLabels[k]
		}
		if quantile == 0 {
			for k, r := range rates {
				put(i, k, r)
			}
			continue
		}
		// histogram_quantile: per group without le, the rate of each cumulative bucket.
		buckets := map[string][][2]float64{}
		groupLabels := map[string]map[string]string{}
		for k, r := range rates {
			l := labels[k]
			le, _ := strconv.ParseFloat(l["le"], 64) // "+Inf" parses as +Inf
			var rest []string
			for _, b := range by {
				if b != "le" {
					rest = append(rest, b)
				}
			}
			gk, gl := groupKey(l, rest)
			buckets[gk] = append(buckets[gk], [2]float64{le, r})
			groupLabels[gk] = gl
		}
		for gk, bs := range buckets {
			if q, ok := bucketQuantile(quantile, bs); ok {
				labels["q"+gk] = groupLabels[gk]
				put(i, "q"+gk, q)
			}
		}
	}
	if quantile != 0 { // only the quantile lines, not the buckets' keys
		for k := range labels {
			if !strings.HasPrefix(k, "q") {
				delete(labels, k)
			}
		}
	}
	return times, values, labels, nil
}

// bucketQuantile is Prometheus's: linear interpolation within the bucket the rank falls in.
func bucketQuantile(q float64, buckets [][2]float64) (float64, bool) {
	sort.Slice(buckets, func(i, j int) bool { return buckets[i][0] < buckets[j][0] })
	if len(buckets) < 2 || !math.IsInf(buckets[len(buckets)-1][0], 1) {
		return 0, false
	}
	total := buckets[len(buckets)-1][1]
	if total <= 0 {
		return 0, false
	}
	rank := q * total
	for i, b := range buckets {
		if b[1] >= rank {
			if math.IsInf(b[0], 1) {
				return buckets[i-1][0], true
			}
			lower, below := 0.0, 0.0
			if i > 0 {
				lower, below = buckets[i-1][0], buckets[i-1][1]
			}
			if b[1] == below {
				return b[0], true
			}
			return lower + (b[0]-lower)*(rank-below)/(b[1]-below), true
		}
	}
	return 0, false
}

var legendVar = regexp.MustCompile(`\{\{\s*(\w+)\s*\}\}`)

type dashboard struct {
	Title  string `json:"title"`
	Panels []struct {
		Type        string `json:"type"`
		Title       string `json:"title"`
		FieldConfig struct {
			Defaults struct {
				Unit string `json:"unit"`
			} `json:"defaults"`
		} `json:"fieldConfig"`
		Targets []struct {
			Expr         string `json:"expr"`
			LegendFormat string `json:"legendFormat"`
		} `json:"targets"`
	} `json:"panels"`
}

func render(scrapesPath, dashboardPath, out string, window time.Duration, caption string) error {
	scrapes, err := readScrapes(scrapesPath)
	if err != nil {
		return err
	}
	if len(scrapes) < 2 {
		return fmt.Errorf("%s: %d scrapes, need a few", scrapesPath, len(scrapes))
	}
	data, err := os.ReadFile(dashboardPath)
	if err != nil {
		return err
	}
	var dash dashboard
	if err := json.Unmarshal(data, &dash); err != nil {
		return err
	}
	start := scrapes[0].at
	var plots []*plot.Plot
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		pl := plot.New()
		pl.Title.Text = p.Title
		pl.X.Label.Text = "seconds into the run"
		pl.Y.Label.Text = unitLabel(p.FieldConfig.Defaults.Unit)
		pl.Legend.Top = true
		pl.Legend.Left = true
		pl.Legend.TextStyle.Font.Size = vg.Points(7)
		pl.Add(plotter.NewGrid())
		line := 0
		for _, t := range p.Targets {
			times, values, labels, err := evaluate(t.Expr, scrapes, window)
			if err != nil {
				return fmt.Errorf("panel %q: %w", p.Title, err)
			}
			keys := make([]string, 0, len(labels))
			for k := range labels {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				pts := plotter.XYs{}
				for i, v := range values[k] {
					if !math.IsNaN(v) {
						pts = append(pts, plotter.XY{X: times[i].Sub(start).Seconds(), Y: v})
					}
				}
				if len(pts) == 0 {
					continue
				}
				l, err := plotter.NewLine(pts)
				if err != nil {
					return err
				}
				l.Color = plotutil.Color(line)
				l.Width = vg.Points(1.2)
				line++
				pl.Add(l)
				lk := labels[k]
				pl.Legend.Add(legendVar.ReplaceAllStringFunc(t.LegendFormat, func(v string) string {
					return lk[legendVar.FindStringSubmatch(v)[1]]
				}), l)
			}
		}
		if line == 0 {
			pl.Title.Text += " (no data in this run)"
		}
		plots = append(plots, pl)
	}

	const cols = 2
	rows := (len(plots) + cols - 1) / cols
	width, rowHeight, header := 16*vg.Inch, 4*vg.Inch, 0.6*vg.Inch
	img := vgimg.New(width, rowHeight*vg.Length(rows)+header)
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	titleFont := plot.DefaultFont
	titleFont.Size = vg.Points(16)
	heading := draw.TextStyle{Color: color.Black, Font: titleFont, Handler: plot.DefaultTextHandler, XAlign: draw.XCenter}
	dc.FillText(heading, vg.Point{X: width / 2, Y: dc.Max.Y - header/2}, dash.Title+" dashboard: "+caption)
	body := draw.Canvas{Canvas: dc.Canvas, Rectangle: vg.Rectangle{Min: dc.Min, Max: vg.Point{X: dc.Max.X, Y: dc.Max.Y - header}}}
	tiles := draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(8), PadY: vg.Points(8),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4)}
	for i, pl := range plots {
		pl.Draw(tiles.At(body, i%cols, i/cols))
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	_, err = vgimg.PngCanvas{Canvas: img}.WriteTo(f)
	return err
}

func unitLabel(unit string) string {
	switch unit {
	case "reqps":
		return "requests/s"
	case "ops":
		return "per second"
	case "s":
		return "seconds"
	}
	return ""
}
