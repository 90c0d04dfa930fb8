// Package web is the HTTP plumbing every door shares: request ids, the access log and request
// metrics, rate limits, the client's address behind trusted proxies, bearer-token
// authentication, CORS for end-user tokens, security headers, reading JSON and form bodies
// into typed fields, and writing JSON answers and refusals. No rule lives here: a door reads
// a request with it, calls a use case (internal/app), and answers with it.
package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app"
)

// HeaderRetryAfter tells a client when to try again (a rate limit, a change still under way).
const HeaderRetryAfter = "Retry-After"

// Error is an HTTP answer that is not a use case's refusal: a 401 with its challenge, an OAuth
// error of the token endpoint, a 429 with Retry-After.
type Error struct {
	Status int
	// Detail is the body's "detail" member.
	Detail  any
	Headers map[string]string
	// OAuth is the RFC 6749 (5.2) error code the token endpoint adds as "error", so that
	// OAuth2 client libraries can read the failure; empty elsewhere.
	OAuth string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %v", e.Status, e.Detail) }

// Fail returns an answer of status with {"detail": message}.
func Fail(status int, format string, args ...any) error {
	return &Error{Status: status, Detail: fmt.Sprintf(format, args...)}
}

// statusOf is the HTTP status of a use case's refusal.
var statusOf = map[app.Kind]int{
	app.Internal:        http.StatusInternalServerError,
	app.Invalid:         http.StatusUnprocessableEntity,
	app.BadRequest:      http.StatusBadRequest,
	app.Unauthorized:    http.StatusUnauthorized,
	app.Forbidden:       http.StatusForbidden,
	app.NotFound:        http.StatusNotFound,
	app.Conflict:        http.StatusConflict,
	app.Gone:            http.StatusGone,
	app.TooLarge:        http.StatusRequestEntityTooLarge,
	app.Refused:         http.StatusUnprocessableEntity,
	app.TooManyRequests: http.StatusTooManyRequests,
	app.Unavailable:     http.StatusServiceUnavailable,
}

// HTTPError is err as an HTTP answer: itself when it is one, a use case's refusal with its
// status, and nil for anything else (an internal failure).
func HTTPError(err error) *Error {
	if e, ok := err.(*Error); ok { //nolint:errorlint // answers are returned as they are, not wrapped
		return e
	}
	ae := app.As(err)
	if ae == nil {
		return nil
	}
	out := &Error{Status: statusOf[ae.Kind], Detail: ae.Detail}
	if ae.RetryAfter != "" {
		out.Headers = map[string]string{HeaderRetryAfter: ae.RetryAfter}
	}
	return out
}

// WriteError answers err: an answer or a refusal as itself, anything else as a logged 500 that
// reveals nothing of the cause.
func WriteError(log logr.Logger, w http.ResponseWriter, r *http.Request, err error) {
	e := HTTPError(err)
	if e == nil {
		log.Error(err, "request failed", "method", r.Method, "route", RouteOf(r)) // not the path: a hosted link carries its code
		e = &Error{Status: http.StatusInternalServerError, Detail: "Internal server error"}
	}
	for k, v := range e.Headers {
		w.Header().Set(k, v)
	}
	body := map[string]any{"detail": e.Detail}
	if e.OAuth != "" {
		body["error"] = e.OAuth
		if msg, ok := e.Detail.(string); ok {
			body["error_description"] = msg
		}
	}
	WriteJSON(w, e.Status, body)
}

// Appender is an answer that encodes itself, as encoding/json's Encoder would (HTML-safe, a
// trailing newline), without reflection: the large read answers.
type Appender interface {
	AppendJSON(b []byte) []byte
}

// bodyBuffers hold answers encoding/json encodes while they are encoded, so that each is
// written whole, with its Content-Length; a buffer grown by an unusually large answer is not
// kept.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// appendBuffers hold the answers of Appenders while they are written: an Appender appends to
// the slice itself, so nothing copies its answer before it is written.
var appendBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledBody = 256 << 10

// WriteJSON answers body with status: an app.EncodedJSON as it is (no copy: the writer does
// not keep it), an Appender by itself into a pooled slice, anything else through
// encoding/json's Encoder.
func WriteJSON(w http.ResponseWriter, status int, body any) {
	switch b := body.(type) {
	case app.EncodedJSON:
		writeBody(w, status, b)
		return
	case Appender:
		p := appendBuffers.Get().(*[]byte)
		out := b.AppendJSON((*p)[:0])
		writeBody(w, status, out)
		if cap(out) <= maxPooledBody {
			*p = out[:0]
			appendBuffers.Put(p)
		}
		return
	}
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	if err := EncodeJSON(buf, body); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		buf.WriteString(`{"detail":"Internal Server Error"}` + "\n")
	}
	writeBody(w, status, buf.Bytes())
}

// writeBody answers body, a whole JSON answer, with status and its Content-Length.
func writeBody(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h["Content-Type"] = jsonContentType
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// jsonContentType is the Content-Type header's value of every JSON answer, shared: Set would
// allocate a slice per answer. net/http only reads it (and Set or Add replace it, never
// change it in place).
var jsonContentType = []string{"application/json"}

// EncodeJSON encodes an answer as WriteJSON sends it.
func EncodeJSON(buf *bytes.Buffer, body any) error {
	switch b := body.(type) {
	case app.EncodedJSON:
		buf.Write(b)
		return nil
	case Appender:
		buf.Write(b.AppendJSON(buf.AvailableBuffer()))
		return nil
	}
	return json.NewEncoder(buf).Encode(body)
}

// Streamer is an answer too long to hold whole (the whole reward history): its body is
// written as it is read, without a Content-Length (chunked, in HTTP/1.1).
type Streamer interface {
	// StreamJSON writes the body to w, a part at a time. An error is a failure to read what
	// follows (or to write it): the status was sent already.
	StreamJSON(ctx context.Context, w io.Writer) error
}

// WriteStream answers s with status. What can fail before anything is written is the
// Streamer's maker's to find (and answer as an error); once the status is sent, a failure can
// no longer be one: the connection is aborted (http.ErrAbortHandler: HTTP/1.1 closes it
// without the chunked body's end, HTTP/2 resets the stream), so that the client reads a
// truncated body, never a short one that parses.
func WriteStream(log logr.Logger, w http.ResponseWriter, r *http.Request, status int, s Streamer) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if err := s.StreamJSON(r.Context(), w); err != nil {
		if r.Context().Err() != nil { // the client went away: nothing to tell
			log.V(1).Info("answer aborted: the client went away", "method", r.Method, "route", RouteOf(r))
		} else {
			log.Error(err, "answer aborted after it began", "method", r.Method, "route", RouteOf(r))
		}
		panic(http.ErrAbortHandler)
	}
}

// PublicBase is the scheme and host links point at: publicURL, else the request's.
func PublicBase(publicURL string, r *http.Request) string {
	if publicURL != "" {
		return strings.TrimSuffix(publicURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}

// OAuthCallbackPath is Flexsite's callback of a device authorisation (the provider sends the
// household's browser there).
const OAuthCallbackPath = "/oauth/callback"
