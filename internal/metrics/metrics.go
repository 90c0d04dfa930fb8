// Package metrics holds Flexsite's own Prometheus metrics (prefix flexsite_), registered on
// controller-runtime's registry so the manager's metrics endpoint serves them beside the
// controller-runtime and client-go ones. Every door (REST facade, controllers, webhooks)
// counts through here; none imports another to do so.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// HTTPRequests counts REST API answers by route pattern (not the raw path: ids would
	// make every household a series), method and status code.
	HTTPRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexsite_http_requests_total",
		Help: "REST API requests answered, by route pattern, method and status code.",
	}, []string{"route", "method", "code"})

	// HTTPDuration is how long the REST API took to answer, by route pattern and method.
	HTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "flexsite_http_request_duration_seconds",
		Help:    "REST API request latency, by route pattern and method.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	}, []string{"route", "method"})
)

// RateLimited counts 429 answers by the limit that gave them.
var RateLimited = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "flexsite_rate_limited_total",
	Help: "Requests refused with 429, by limit (per_client, auth_failures, login_failures).",
}, []string{"limit"})

func init() {
	ctrlmetrics.Registry.MustRegister(HTTPRequests, HTTPDuration, RateLimited)
}
