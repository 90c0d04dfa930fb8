// Package lazylog defers a logger's WithValues to the lines that are actually written.
//
// controller-runtime gives every reconcile and every admission request a logger of its own
// (controller, object, reconcile id; webhook, request uid). zap encodes such values at once,
// into a buffer of a kilobyte per logger, although most reconciles and requests then write
// no line at the configured level: that was a tenth of everything the manager allocated while
// a fleet grew, and the churn leaves the heap's pages half-used. Wrapped in Sink, WithValues
// only remembers the values; a line that is written hands them to the wrapped sink with its
// own, in the same order.
package lazylog

import "github.com/go-logr/logr"

// New wraps l so that its WithValues costs nothing until a line is written.
func New(l logr.Logger) logr.Logger {
	if l.GetSink() == nil {
		return l
	}
	return logr.New(&Sink{sink: l.GetSink()})
}

// Sink is a logr.LogSink that keeps the values of WithValues until a line is written.
type Sink struct {
	sink logr.LogSink
	kvs  []any
}

var (
	_ logr.LogSink          = (*Sink)(nil)
	_ logr.CallDepthLogSink = (*Sink)(nil)
)

// Init tells the wrapped sink about the one frame this sink adds between the caller and it
// (the wrapped sink was initialised with the logr.Logger's own frames when it was made).
func (s *Sink) Init(logr.RuntimeInfo) { s.sink.Init(logr.RuntimeInfo{CallDepth: 1}) }

// Enabled is the wrapped sink's.
func (s *Sink) Enabled(level int) bool { return s.sink.Enabled(level) }

// Info writes the line with the values kept so far first.
func (s *Sink) Info(level int, msg string, kvs ...any) { s.sink.Info(level, msg, s.with(kvs)...) }

// Error writes the line with the values kept so far first.
func (s *Sink) Error(err error, msg string, kvs ...any) { s.sink.Error(err, msg, s.with(kvs)...) }

// WithValues keeps kvs for the lines to come.
func (s *Sink) WithValues(kvs ...any) logr.LogSink {
	return &Sink{sink: s.sink, kvs: s.with(kvs)}
}

// WithName is the wrapped sink's (names are few: one per controller or webhook).
func (s *Sink) WithName(name string) logr.LogSink {
	return &Sink{sink: s.sink.WithName(name), kvs: s.kvs}
}

// WithCallDepth is the wrapped sink's, when it has one.
func (s *Sink) WithCallDepth(depth int) logr.LogSink {
	cd, ok := s.sink.(logr.CallDepthLogSink)
	if !ok {
		return s
	}
	return &Sink{sink: cd.WithCallDepth(depth), kvs: s.kvs}
}

// with is the values kept followed by kvs, in a slice of its own (s.kvs is shared by the
// loggers derived from s).
func (s *Sink) with(kvs []any) []any {
	if len(s.kvs) == 0 {
		return kvs
	}
	out := make([]any, 0, len(s.kvs)+len(kvs))
	return append(append(out, s.kvs...), kvs...)
}
