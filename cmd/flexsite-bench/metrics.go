package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"k8s.io/client-go/rest"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/probe"
)

// requestCounter reads the API server's own count of requests (apiserver_request_total) for
// Flexsite's API group: what it was asked to do, whoever asked, answered or not.
type requestCounter struct {
	hc  *http.Client
	url string
}

func newRequestCounter(cfg *rest.Config) (*requestCounter, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &requestCounter{hc: hc, url: strings.TrimSuffix(cfg.Host, "/") + "/metrics"}, nil
}

// writeVerbs are the request verbs that write. The brief's POST/PUT/PATCH/DELETE, plus the
// server-side apply and collection delete verbs, which are writes too (Flexsite uses neither).
var writeVerbs = []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"}

// readVerbs are one-off reads; watches are long-running and not counted.
var readVerbs = []string{"GET", "LIST"}

// requestKey is one series of requests: "sites/status PATCH 200".
type requestKey struct {
	Resource, Subresource, Verb, Code string
}

func (k requestKey) String() string {
	r := k.Resource
	if k.Subresource != "" {
		r += "/" + k.Subresource
	}
	return r + " " + k.Verb + " " + k.Code
}

func isWrite(k requestKey) bool { return slices.Contains(writeVerbs, k.Verb) }

func isRead(k requestKey) bool { return slices.Contains(readVerbs, k.Verb) }

// requestCounts are requests per series.
type requestCounts map[requestKey]float64

func (w *requestCounter) snapshot(ctx context.Context) (requestCounts, error) {
	return w.snapshotOf(ctx, func(group string) bool { return group == flexv1.GroupVersion.Group })
}

// snapshotAll counts the requests of every API group (Secrets are the core group's).
func (w *requestCounter) snapshotAll(ctx context.Context) (requestCounts, error) {
	return w.snapshotOf(ctx, func(string) bool { return true })
}

func (w *requestCounter) snapshotOf(ctx context.Context, group func(string) bool) (requestCounts, error) {
	samples, err := probe.Fetch(ctx, w.hc, w.url, "apiserver_request_total")
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	out := requestCounts{}
	for _, s := range samples {
		l := s.Labels
		if !group(l["group"]) {
			continue
		}
		out[requestKey{Resource: l["resource"], Subresource: l["subresource"], Verb: l["verb"], Code: l["code"]}] += s.Value
	}
	return out, nil
}

// minus is what was counted since before.
func (w requestCounts) minus(before requestCounts) requestCounts {
	out := requestCounts{}
	for k, v := range w {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (w requestCounts) add(other requestCounts) {
	for k, v := range other {
		w[k] += v
	}
}

func (w requestCounts) total() float64 {
	t := 0.0
	for _, v := range w {
		t += v
	}
	return t
}

// where keeps the series that pass keep.
func (w requestCounts) where(keep func(requestKey) bool) requestCounts {
	out := requestCounts{}
	for k, v := range w {
		if keep(k) {
			out[k] = v
		}
	}
	return out
}

// perUnit is the series divided by n, keyed by their names, for the JSON report.
func (w requestCounts) perUnit(n float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range w {
		out[k.String()] = round3(v / n)
	}
	return out
}

// perUnitString lists the series divided by n, largest first: "sites/status PATCH 200: 1.00, ...".
func (w requestCounts) perUnitString(n float64) string {
	keys := make([]requestKey, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if w[keys[i]] != w[keys[j]] {
			return w[keys[i]] > w[keys[j]]
		}
		return keys[i].String() < keys[j].String()
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %s", k, trimFloat(w[k]/n))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
