package web

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"

	"github.com/flexsite/flexsite/internal/auth"
)

// Every answer carries a request id, and every request leaves one access log line and its
// metrics. The log line names the route pattern (never the raw path, which carries ids), the
// status, the latency, the API client (and end user) and the request id: never a token, a
// password or a body.

// HeaderRequestID carries the request's id: the caller's, when it sent a sane one (so a
// client's and a proxy's logs can be joined with ours), otherwise a new UUID.
const HeaderRequestID = "X-Request-Id"

// newRequestID is a new random (version 4) UUID, in its canonical text. A request id must be
// unique, not secret: its 122 random bits come from the runtime's generator (math/rand/v2:
// ChaCha8, seeded from the system per thread), without a read of the system's random source
// or an allocation for the bytes, on every request that brings no id of its own.
func newRequestID() string {
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[:8], rand.Uint64())
	binary.BigEndian.PutUint64(u[8:], rand.Uint64())
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // the RFC 9562 variant
	return u.String()
}

// requestInfo is what the inner handlers learn about a request that the access log needs.
type requestInfo struct {
	id        string
	principal *auth.Principal
}

// infoOf is the request's info, carried by the writer observe hands on (nil outside
// observe, e.g. in a handler called directly). Not in the request's context: that would copy
// the request once more on every call.
func infoOf(w http.ResponseWriter) *requestInfo {
	if rec, ok := w.(*statusRecorder); ok {
		return &rec.info
	}
	return nil
}

// statusRecorder remembers the status a handler answered, and the request's info.
type statusRecorder struct {
	http.ResponseWriter
	status int
	info   requestInfo
	// idHeader is the X-Request-Id header's value (Observe).
	idHeader [1]string
}

func (w *statusRecorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusRecorder) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Observe wraps next with the request id, the access log line (to log) and the request
// metrics; client addresses are read behind the trusted proxies.
//
// A read answered without an error (GET, HEAD or OPTIONS below 400) is logged at debug level
// (V(1): the manager's --zap-log-level=debug shows it); every write, and every request answered
// 4xx or 5xx, at info. The line of a read costs more than the read itself at info level (its
// JSON encoding and its write to the log); its metrics are counted either way.
func Observe(log logr.Logger, trusted []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := r.Header.Get(HeaderRequestID)
		if !saneRequestID(id) {
			id = newRequestID()
		}
		rec := &statusRecorder{ResponseWriter: w, info: requestInfo{id: id}}
		// The header's value in the recorder, allocated with it: Set would allocate a slice.
		rec.idHeader[0] = id
		w.Header()[HeaderRequestID] = rec.idHeader[:]
		info := &rec.info
		aborted := serveRecovering(log, rec, r, next)

		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		elapsed := time.Since(start)
		route := RouteOf(r)
		requestSeries(route, r.Method, rec.status).observe(elapsed)
		line := log
		// An aborted answer is a failure, whatever status it began with: logged at info.
		if !aborted && quietRead(r.Method, rec.status) {
			if line = log.V(1); !line.Enabled() {
				return
			}
		}
		// Room for every pair at once: growing the slice for the principal's pairs was a tenth
		// of a cached read's allocations.
		kv := make([]any, 0, 18)
		kv = append(kv, "method", r.Method, "route", route, "status", rec.status,
			"latencyMs", float64(elapsed.Microseconds())/1000, "requestID", id, "remote", ClientAddress(r, trusted))
		if p := info.principal; p != nil {
			kv = append(kv, "namespace", p.Namespace, "apiClient", p.ClientName)
			if p.Kind == auth.KindEndUser {
				kv = append(kv, "endUser", p.UserID)
			}
		}
		if aborted {
			kv = append(kv, "aborted", true)
		}
		line.Info("request", kv...)
		if aborted { // logged and counted: now net/http drops the connection
			panic(http.ErrAbortHandler)
		}
	})
}

// quietRead reports whether a request's access log line goes at debug level: a read that
// did not fail.
func quietRead(method string, status int) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return status < http.StatusBadRequest
	}
	return false
}

// saneRequestID reports whether a caller's request id may be kept: 1 to 128 of
// [A-Za-z0-9._-]. A table, not a regular expression: it runs on every request.
func saneRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if !requestIDByte[id[i]] {
			return false
		}
	}
	return true
}

var requestIDByte = func() (t [256]bool) {
	for _, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-" {
		t[c] = true
	}
	return t
}()

// serveRecovering serves r with next; a handler that panics is a bug, but the caller still
// gets the documented error form (500, unless the answer had begun) and the log the stack,
// instead of a dropped connection. A handler that aborts its answer on purpose
// (http.ErrAbortHandler: WriteStream after the body began) is aborted: true, and the caller
// panics with it again once the request is logged.
func serveRecovering(log logr.Logger, w *statusRecorder, r *http.Request, next http.Handler) (aborted bool) {
	defer func() {
		v := recover()
		if v == nil {
			return
		}
		if v == http.ErrAbortHandler { //nolint:errorlint // net/http panics with this very value
			aborted = true
			return
		}
		log.Error(fmt.Errorf("panic: %v", v), "handler panicked", "method", r.Method, "route", RouteOf(r),
			"stack", string(debug.Stack()))
		if w.status == 0 {
			WriteError(log, w, r, errHandlerPanicked)
		}
	}()
	next.ServeHTTP(w, r)
	return false
}

var errHandlerPanicked = Fail(http.StatusInternalServerError, "Internal server error")

// RouteOf is the route pattern the mux matched, without its method ("/entities/site/{site_id}");
// "unmatched" for a path no route serves, so unknown paths make one series, not one each.
func RouteOf(r *http.Request) string {
	pattern := r.Pattern
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = pattern[i+1:]
	}
	if pattern == "" || pattern == "/" {
		return "unmatched"
	}
	return pattern
}
