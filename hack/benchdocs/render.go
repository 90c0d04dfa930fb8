package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
)

// results is what the generator reads of bench/results.json (cmd/flexsite-bench's report).
type results struct {
	Mode            string  `json:"mode"`
	StartedAt       string  `json:"started_at"`
	DurationSeconds float64 `json:"duration_seconds"`
	Machine         struct {
		NProc        int    `json:"nproc"`
		MemoryBytes  int64  `json:"memory_bytes"`
		CPUModel     string `json:"cpu_model"`
		GoVersion    string `json:"go_version"`
		GitCommit    string `json:"git_commit"`
		LoadAvgStart string `json:"loadavg_start"`
		LoadAvgEnd   string `json:"loadavg_end"`
	} `json:"machine"`
	Figures map[string]map[string]float64 `json:"figures"`
	Targets []struct {
		Figure string  `json:"figure"`
		Target string  `json:"target"`
		Value  float64 `json:"value"`
		Met    bool    `json:"met"`
	} `json:"targets"`
	Error string `json:"error"`
	// code is what the bench's source writes: a target the run did not judge is shown as the
	// source states it.
	code []benchFigure
}

func readResults(file string) (*results, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var r results
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return &r, nil
}

// value answers a figure's value, if the run has it.
func (r *results) value(figure string) (float64, bool) {
	scenario, key, ok := strings.Cut(figure, ".")
	if !ok {
		return 0, false
	}
	v, ok := r.Figures[scenario][key]
	return v, ok
}

// expand answers the run's figures a row names (a pattern may name several), sorted.
func (r *results) expand(pattern string) []string {
	if !strings.Contains(pattern, "*") {
		return []string{pattern}
	}
	var out []string
	for scenario, figs := range r.Figures {
		for key := range figs {
			if ok, _ := path.Match(pattern, scenario+"."+key); ok {
				out = append(out, scenario+"."+key)
			}
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return []string{pattern}
	}
	return out
}

// target answers the run's target of a figure: "≥ 0.8 ✓", or "" when it has none.
func (r *results) target(figure string) (string, bool, bool) {
	for _, t := range r.Targets {
		if t.Figure == figure {
			return targetText(t.Target), t.Met, true
		}
	}
	return "", false, false
}

// codeTarget answers the target the bench's source gives figure, or "".
func (r *results) codeTarget(figure string) string {
	for _, f := range r.code {
		if ok, _ := path.Match(f.Pattern, figure); ok && f.Target && f.Bound != "" {
			return f.Bound
		}
	}
	return ""
}

func targetText(t string) string {
	t = strings.Replace(t, ">=", "≥", 1)
	t = strings.Replace(t, "<=", "≤", 1)
	return strings.Replace(t, "==", "=", 1)
}

func mark(met bool) string {
	if met {
		return "✓"
	}
	return "✗"
}

// runLine says which run the figures are from.
func (r *results) runLine() string {
	var b strings.Builder
	kind := "A full run (`make bench`)"
	if r.Mode != "full" {
		kind = "A quick run (`BENCH_QUICK=1 make bench`)"
	}
	steps := make([]string, 0, len(r.Figures))
	for s := range r.Figures {
		steps = append(steps, s)
	}
	sort.Strings(steps)
	commit := r.Machine.GitCommit
	if commit == "" {
		commit = "unknown"
	}
	date, _, _ := strings.Cut(r.StartedAt, "T")
	fmt.Fprintf(&b, "%s of commit %s on %s, %s: %d CPUs (%s), %.0f GiB, %s, load average %s → %s. Steps measured: %s.",
		kind, commit, date, duration(r.DurationSeconds), r.Machine.NProc, r.Machine.CPUModel,
		float64(r.Machine.MemoryBytes)/(1<<30), r.Machine.GoVersion, first(r.Machine.LoadAvgStart),
		first(r.Machine.LoadAvgEnd), strings.Join(steps, ", "))
	met := 0
	for _, t := range r.Targets {
		if t.Met {
			met++
		}
	}
	fmt.Fprintf(&b, " Targets met: %d of %d.", met, len(r.Targets))
	if r.Error != "" {
		fmt.Fprintf(&b, " **Incomplete**: %s.", r.Error)
	}
	return b.String()
}

func first(loadavg string) string {
	f := strings.Fields(loadavg)
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

func duration(s float64) string {
	d := int(s)
	switch {
	case d >= 3600:
		return fmt.Sprintf("%d h %02d min", d/3600, d%3600/60)
	case d >= 60:
		return fmt.Sprintf("%d min %02d s", d/60, d%60)
	}
	return fmt.Sprintf("%d s", d)
}

// format writes a figure's value with the unit its name ends in.
func format(figure string, v float64) string {
	key := figure[strings.Index(figure, ".")+1:]
	unit := ""
	switch {
	case strings.HasSuffix(key, "_ratio"):
		return strconv.FormatFloat(v, 'f', 2, 64)
	case strings.HasSuffix(key, "_ms"):
		unit = " ms"
	case strings.HasSuffix(key, "_seconds"):
		unit = " s"
	case strings.HasSuffix(key, "_us") || strings.Contains(key, "_us_per_"):
		unit = " µs"
	case strings.HasSuffix(key, "_mib") || strings.Contains(key, "_mib_"):
		unit = " MiB"
	case strings.HasPrefix(key, "etcd_kb"):
		unit = " KiB"
	case strings.HasSuffix(key, "_per_second") || strings.HasSuffix(key, "_per_sec") || strings.HasSuffix(key, "_rps"):
		unit = "/s"
	}
	return number(v) + unit
}

// number: thousands grouped from 1,000, no decimals from 100, two below (trailing zeros cut).
func number(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000:
		s := strconv.FormatInt(int64(math.Round(a)), 10)
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if v < 0 {
			return "-" + b.String()
		}
		return b.String()
	case a >= 100:
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

const notInRun = "not in this run"

// topicTable renders one topic's table.
func (r *results) topicTable(t topic) string {
	var b strings.Builder
	b.WriteString("| Figure | What it compares | Now | Target |\n|---|---|---|---|\n")
	for _, row := range t.Rows {
		for _, fig := range r.expand(row.Figure) {
			now := notInRun
			if v, ok := r.value(fig); ok {
				now = format(fig, v)
			}
			tgt := "—"
			if text, met, ok := r.target(fig); ok {
				tgt = text + " " + mark(met)
			} else if bound := r.codeTarget(fig); bound != "" {
				tgt = targetText(bound)
				if now != notInRun {
					tgt += " (not judged in this run)"
				}
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", fig, row.What, now, tgt)
		}
	}
	return b.String()
}

// readmeTable renders every target of the run, by topic, and names the topics the run did not
// measure.
func (r *results) readmeTable() string {
	var b strings.Builder
	b.WriteString(r.runLine() + "\n\n")
	b.WriteString("| Topic | Figure | What it compares | Now | Target |\n|---|---|---|---|---|\n")
	var missing []string
	shown := map[string]bool{}
	for _, t := range topics {
		measured := false
		for _, row := range t.Rows {
			for _, fig := range r.expand(row.Figure) {
				if _, ok := r.value(fig); ok {
					measured = true // a topic of figures without targets is measured all the same
				}
				text, met, ok := r.target(fig)
				if !ok || shown[fig] {
					continue
				}
				shown[fig] = true
				v, _ := r.value(fig)
				fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %s %s |\n", t.Title, fig, row.What, format(fig, v), text, mark(met))
			}
		}
		if !measured {
			missing = append(missing, t.Title)
		}
	}
	for _, t := range r.Targets { // a target no topic names (benchdocs refuses to write them, but never hide one)
		if !shown[t.Figure] {
			fmt.Fprintf(&b, "| — | `%s` | | %s | %s %s |\n", t.Figure, format(t.Figure, t.Value), targetText(t.Target), mark(t.Met))
		}
	}
	if len(missing) > 0 {
		fmt.Fprintf(&b, "\nNot measured in this run: %s.\n", strings.Join(missing, "; "))
	}
	return b.String()
}

// block renders the generated block of an id.
func (r *results) block(id string) (string, error) {
	switch id {
	case "readme":
		return r.readmeTable(), nil
	case "run":
		return r.runLine() + "\n", nil
	}
	for _, t := range topics {
		if t.ID == id {
			return r.topicTable(t), nil
		}
	}
	return "", fmt.Errorf("no generated block has the id %q", id)
}
