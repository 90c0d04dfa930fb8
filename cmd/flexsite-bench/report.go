package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// The table's sections: the numbered scenarios.
const (
	labelOnboard     = "1 onboard"
	labelConvergence = "2 convergence"
	labelReads       = "3 reads"
	labelScale       = "4 scale"
	labelWrites      = "5 writes"
	labelNotify      = "6 notifications"
	labelReadings    = "7 readings"
	labelSettlement  = "8 settlement"
	labelHostile     = "9 hostile input"
	labelDispatch    = "10 dispatch"
	labelCallbacks   = "11 callbacks"
)

// scenarioLabels maps the JSON report's scenario keys to the table's sections.
var scenarioLabels = map[string]string{
	"onboard":          labelOnboard,
	"convergence":      labelConvergence,
	"catalogue":        labelConvergence,
	"reads":            labelReads,
	"scale":            labelScale,
	"writes":           labelWrites,
	"resync":           labelWrites,
	"notifications":    labelNotify,
	readingsScenario:   labelReadings,
	scenarioSettlement: labelSettlement,
	hostileScenario:    labelHostile,
	dispatchScenario:   labelDispatch,
	callbacksScenario:  labelCallbacks,
	scenarioFleet:      labelFleet,
}

// Units of figures; the table formats values by unit.
const (
	unitRatio   = "x"
	unitPerSec  = "/s"
	unitMS      = "ms"
	unitSeconds = "s"
	unitMiB     = "MiB"
	unitCount   = ""
	unitKB      = "KB"
)

// target is a figure's goal from the issue: value op bound.
type target struct {
	Op    string  `json:"op"` // ">=", "<=" or "=="
	Bound float64 `json:"bound"`
}

func (t target) met(v float64) bool {
	switch t.Op {
	case ">=":
		return v >= t.Bound
	case "<=":
		return v <= t.Bound
	default:
		return v == t.Bound
	}
}

func (t target) String() string { return fmt.Sprintf("%s %s", t.Op, trimFloat(t.Bound)) }

// row is one line of the table.
type row struct {
	scenario, key string
	value         float64
	unit          string
	target        *target
}

// targetResult is a target's outcome in the JSON report.
type targetResult struct {
	Figure string  `json:"figure"`
	Target string  `json:"target"`
	Value  float64 `json:"value"`
	Met    bool    `json:"met"`
}

// report collects the figures of a run. In JSON, figures are grouped by scenario and every
// ratio's name ends in _ratio, so two runs' files can be compared key by key.
type report struct {
	Mode            string                        `json:"mode"`
	StartedAt       time.Time                     `json:"started_at"`
	DurationSeconds float64                       `json:"duration_seconds"`
	Machine         machineInfo                   `json:"machine"`
	Params          params                        `json:"params"`
	Figures         map[string]map[string]float64 `json:"figures"`
	Targets         []targetResult                `json:"targets"`
	Details         map[string]any                `json:"details"`
	Error           string                        `json:"error,omitempty"`
	rows            []row
}

func newReport(p params) *report {
	return &report{Mode: p.Mode, StartedAt: time.Now().UTC().Truncate(time.Second), Machine: readMachine(), Params: p,
		Figures: map[string]map[string]float64{}, Details: map[string]any{}}
}

// add records a figure.
func (r *report) add(scenario, key string, value float64, unit string) {
	r.addRow(row{scenario: scenario, key: key, value: value, unit: unit})
}

// addTarget records a figure that has a target.
func (r *report) addTarget(scenario, key string, value float64, unit string, t target) {
	r.addRow(row{scenario: scenario, key: key, value: value, unit: unit, target: &t})
	r.Targets = append(r.Targets, targetResult{Figure: scenario + "." + key, Target: t.String(), Value: round3(value), Met: t.met(value)})
}

func (r *report) addRow(rw row) {
	if r.Figures[rw.scenario] == nil {
		r.Figures[rw.scenario] = map[string]float64{}
	}
	r.Figures[rw.scenario][rw.key] = round3(rw.value)
	r.rows = append(r.rows, rw)
}

// detail records something that is not a single figure (a breakdown, a list).
func (r *report) detail(key string, v any) { r.Details[key] = v }

func (r *report) finish() {
	r.DurationSeconds = time.Since(benchStart).Round(time.Second).Seconds()
	r.Machine.LoadAvgEnd = readLoadAvg()
}

// printTable writes the table, grouped by the scenario numbers.
func (r *report) printTable(out io.Writer) {
	fmt.Fprintf(out, "\nFlexsite bench, %s mode, %d CPUs (%s), load %s -> %s, %s\n\n",
		r.Mode, r.Machine.NProc, r.Machine.CPUModel, r.Machine.LoadAvgStart, r.Machine.LoadAvgEnd,
		time.Duration(r.DurationSeconds)*time.Second)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCENARIO\tFIGURE\tVALUE\tTARGET\tMET?")
	for _, label := range []string{labelOnboard, labelConvergence, labelReads, labelScale, labelWrites, labelNotify,
		labelReadings, labelSettlement, labelHostile, labelDispatch, labelCallbacks,
		labelEVSchedule, labelPricing, labelMeters, labelFleet, labelShards, labelOpenADR} {
		for _, rw := range r.rows {
			if scenarioLabels[rw.scenario] != label {
				continue
			}
			tgt, met := "", ""
			if rw.target != nil {
				tgt, met = rw.target.String(), "yes"
				if !rw.target.met(rw.value) {
					met = "NO"
				}
			}
			fmt.Fprintf(tw, "%s\t%s.%s\t%s\t%s\t%s\n", label, rw.scenario, rw.key, formatValue(rw.value, rw.unit), tgt, met)
		}
	}
	_ = tw.Flush()
	if r.Error != "" {
		fmt.Fprintf(out, "\nINCOMPLETE: %s\n", r.Error)
	}
}

func formatValue(v float64, unit string) string {
	switch unit {
	case unitRatio:
		return fmt.Sprintf("%.2f", v)
	case unitCount:
		return trimFloat(v)
	case unitSeconds:
		return fmt.Sprintf("%.2f s", v)
	default:
		return fmt.Sprintf("%.1f %s", v, unit)
	}
}

func trimFloat(v float64) string {
	if v == float64(int64(v)) {
		return fmt.Sprintf("%d", int64(v))
	}
	return fmt.Sprintf("%.2f", v)
}

// write saves the report as indented JSON.
func (r *report) write(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

// machineInfo says where the figures come from: ratios travel between machines, absolute
// figures do not.
type machineInfo struct {
	NProc        int    `json:"nproc"`
	MemoryBytes  int64  `json:"memory_bytes"`
	CPUModel     string `json:"cpu_model"`
	GoVersion    string `json:"go_version"`
	Kernel       string `json:"kernel"`
	GitCommit    string `json:"git_commit"`
	LoadAvgStart string `json:"loadavg_start"`
	LoadAvgEnd   string `json:"loadavg_end"`
}

func readMachine() machineInfo {
	m := machineInfo{NProc: runtime.NumCPU(), GoVersion: runtime.Version(), LoadAvgStart: readLoadAvg()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		var v int64
		if _, err := fmt.Sscanf(kb, "%d kB", &v); err == nil {
			m.MemoryBytes = v * 1024
		}
	}
	if data, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(data))
	}
	if out, err := exec.Command("git", "describe", "--always", "--dirty").Output(); err == nil {
		m.GitCommit = strings.TrimSpace(string(out))
	}
	return m
}

// procField returns the value of the first "key: value" line of a /proc file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func readLoadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}
