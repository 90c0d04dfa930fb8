package web

import (
	"maps"
	"strconv"
	"sync"
	"sync/atomic"
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

// keptSeries are the series looked up so far, replaced whole (never changed in place) under
// mu when one is added: a request reads them with one atomic load, where a read lock wrote
// the lock's shared counter twice a request from every core.
var keptSeries struct {
	mu sync.Mutex
	m  atomic.Pointer[map[seriesKey]series]
}

// requestSeries are the metrics of a request of route and method answered with status.
func requestSeries(route, method string, status int) series {
	k := seriesKey{route, method, status}
	if m := keptSeries.m.Load(); m != nil {
		if s, ok := (*m)[k]; ok {
			return s
		}
	}
	s := series{requests: metrics.HTTPRequests.WithLabelValues(route, method, strconv.Itoa(status)),
		duration: metrics.HTTPDuration.WithLabelValues(route, method)}
	keptSeries.mu.Lock()
	defer keptSeries.mu.Unlock()
	var m map[seriesKey]series
	if old := keptSeries.m.Load(); old != nil {
		m = *old
	}
	if _, ok := m[k]; !ok && len(m) < maxKeptSeries {
		next := maps.Clone(m)
		if next == nil {
			next = map[seriesKey]series{}
		}
		next[k] = s
		keptSeries.m.Store(&next)
	}
	return s
}
