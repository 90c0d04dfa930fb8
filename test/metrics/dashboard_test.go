package metrics_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/testenv"
)

// query is one panel target of the Grafana dashboard and the metrics its expression names.
type query struct {
	panel, expr string
	metrics     []string
}

var (
	// What in a PromQL expression is not a metric name: label matchers, grouping clauses,
	// range selectors, Grafana variables, quoted strings.
	promqlNoise = regexp.MustCompile(`\{[^}]*\}|\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)|\[[^\]]*\]|\$\w+|"[^"]*"`)
	identifier  = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*(\s*\()?`)
	keywords    = []string{"by", "without", "on", "ignoring", "bool", "and", "or", "unless", "offset"}
	// A histogram is served as one family; its queries name its series.
	histogramSuffix = regexp.MustCompile(`_(bucket|sum|count)$`)
)

// metricNames are the metric names of a PromQL expression (function names and keywords left out).
func metricNames(expr string) []string {
	var names []string
	for _, id := range identifier.FindAllString(promqlNoise.ReplaceAllString(expr, " "), -1) {
		if strings.HasSuffix(id, "(") || slices.Contains(keywords, id) {
			continue // a function call or an operator
		}
		names = append(names, histogramSuffix.ReplaceAllString(id, ""))
	}
	return names
}

// dashboardQueries reads docs/grafana/flexsite-dashboard.json, checking its shape on the way.
func dashboardQueries(g Gomega) []query {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "grafana", "flexsite-dashboard.json"))
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var dash struct {
		Title      string `json:"title"`
		UID        string `json:"uid"`
		Templating struct {
			List []struct{ Name, Type, Query any } `json:"list"`
		} `json:"templating"`
		Panels []struct {
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	g.ExpectWithOffset(1, json.Unmarshal(data, &dash)).To(Succeed())
	g.ExpectWithOffset(1, dash.UID).NotTo(BeEmpty())
	g.ExpectWithOffset(1, dash.Templating.List).To(ContainElement(And(
		HaveField("Name", "datasource"), HaveField("Type", "datasource"), HaveField("Query", "prometheus"))),
		"the dashboard picks its Prometheus through a datasource variable")
	var out []query
	for _, p := range dash.Panels {
		if p.Type == "row" {
			continue
		}
		g.ExpectWithOffset(1, p.Datasource.UID).To(Equal("${datasource}"), "panel %q", p.Title)
		g.ExpectWithOffset(1, p.Targets).NotTo(BeEmpty(), "panel %q has no query", p.Title)
		for _, t := range p.Targets {
			out = append(out, query{panel: p.Title, expr: t.Expr, metrics: metricNames(t.Expr)})
		}
	}
	g.ExpectWithOffset(1, out).NotTo(BeEmpty())
	return out
}

var _ = Describe("metricNames", func() {
	It("finds the metrics of the dashboard's kinds of query", func() {
		Expect(metricNames(`sum by (route, code) (rate(flexsite_http_requests_total{job=~"$job"}[$__rate_interval]))`)).
			To(Equal([]string{"flexsite_http_requests_total"}))
		Expect(metricNames(`histogram_quantile(0.99, sum by (le, name) (rate(workqueue_queue_duration_seconds_bucket{job=~"$job"}[5m])))`)).
			To(Equal([]string{"workqueue_queue_duration_seconds"}))
		Expect(metricNames(`sum by (name) (workqueue_depth) / on (name) sum(up)`)).To(Equal([]string{"workqueue_depth", "up"}))
	})
})
