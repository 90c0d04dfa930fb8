package web

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/flexsite/flexsite/internal/metrics"
)

// seriesKey is one series of the request metrics.
type seriesKey struct {
	route, method string
	status        int
}

// series are a request's two metrics, looked up once per (route, method, status): a lookup
// through the vectors hashes the label values and formats the status on every request.
type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

func (s series) observe(elapsed time.Duration) {
	s.requests.Inc()
	s.duration.Observe(elapsed.Seconds())
}

// maxKeptSeries bounds the kept lookups: the routes are a fixed set, but the method is the
// caller's word. Past it, a series is looked up through the vectors each time (what it cost
// before), so a caller inventing methods grows nothing here.
const maxKeptSeries = 1024

var keptSeries = struct {
	sync.RWMutex
	m map[seriesKey]series
}{m: map[seriesKey]series{}}

// requestSeries are the metrics of a request of route and method answered with status.
func requestSeries(route, method string, status int) series {
	k := seriesKey{route, method, status}
	keptSeries.RLock()
	s, ok := keptSeries.m[k]
	keptSeries.RUnlock()
	if ok {
		return s
	}
	s = series{requests: metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)),
		duration: metrics.HTTPDuration.WithLabelValues(route, method)}
	keptSeries.Lock()
	if len(keptSeries.m) < maxKeptSeries {
		keptSeries.m[k] = s
	}
	keptSeries.Unlock()
	return s
}
