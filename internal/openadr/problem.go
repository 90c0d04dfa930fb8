package openadr

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// problemContentType is RFC 9457's media type for a problem body. The document describes
// problems as application/json; both name the same body, and clients generated from the
// document read either.
const problemContentType = "application/problem+json"

// problem is a refusal in the document's problem form, with its HTTP status and headers.
type problem struct {
	oadr.Problem
	headers map[string]string
}

func (p *problem) Error() string { return fmt.Sprintf("%d: %s", *p.Status, *p.Detail) }

func newProblem(status int, format string, args ...any) *problem {
	title := http.StatusText(status)
	detail := fmt.Sprintf(format, args...)
	s := int32(status)
	return &problem{Problem: oadr.Problem{Title: &title, Status: &s, Detail: &detail}}
}

// badRequest is a 400: the document's answer to input it cannot take.
func badRequest(format string, args ...any) error {
	return newProblem(http.StatusBadRequest, format, args...)
}

// forbidden is a 403: the caller's scopes (its client's roles) do not reach the operation.
func forbidden(format string, args ...any) error {
	return newProblem(http.StatusForbidden, format, args...)
}

// notFound is a 404: the object is not the caller's organisation's, or not one it may see.
//
//nolint:unused // the VEN, resource, report and subscription handlers answer it
func notFound(what, id string) error {
	return newProblem(http.StatusNotFound, "%s %q not found", what, id)
}

// conflict is a 409.
//
//nolint:unused // the resource and report handlers answer it
func conflict(format string, args ...any) error {
	return newProblem(http.StatusConflict, format, args...)
}

// writeProblem answers err in the problem form: a problem as itself; a use case's refusal or
// a web answer with its status (a field refusal, the REST API's 422, is the document's 400)
// and its detail in words; anything else a logged 500 that reveals nothing of its cause.
func writeProblem(log logr.Logger, w http.ResponseWriter, r *http.Request, err error) {
	p, ok := err.(*problem) //nolint:errorlint // answers are returned as they are, not wrapped
	if !ok {
		p = asProblem(err)
		if p == nil {
			log.Error(err, "request failed", "method", r.Method, "route", web.RouteOf(r))
			p = newProblem(http.StatusInternalServerError, "Internal server error")
		}
	}
	for k, v := range p.headers {
		w.Header().Set(k, v)
	}
	body, err := json.Marshal(p.Problem)
	if err != nil {
		body = []byte(`{"title":"Internal Server Error","status":500}`)
	}
	h := w.Header()
	h.Set("Content-Type", problemContentType)
	h.Set("Content-Length", strconv.Itoa(len(body)+1))
	w.WriteHeader(int(*p.Status))
	_, _ = w.Write(append(body, '\n'))
}

// asProblem is a web answer or a use case's refusal in the problem form (nil for anything
// else).
func asProblem(err error) *problem {
	e := web.HTTPError(err)
	if e == nil {
		return nil
	}
	status := e.Status
	if status == http.StatusUnprocessableEntity {
		status = http.StatusBadRequest
	}
	p := newProblem(status, "%s", detailText(e.Detail))
	p.headers = e.Headers
	return p
}

// detailText words a refusal's detail: a sentence as it is, a list of fields at fault as
// "where: what" sentences.
func detailText(detail any) string {
	switch d := detail.(type) {
	case string:
		return d
	case []app.FieldError:
		parts := make([]string, len(d))
		for i, f := range d {
			loc := make([]string, len(f.Loc))
			for j, l := range f.Loc {
				loc[j] = fmt.Sprint(l)
			}
			parts[i] = strings.Join(loc, ".") + ": " + f.Msg
		}
		return strings.Join(parts, "; ")
	case []string:
		return strings.Join(d, "; ")
	}
	b, err := json.Marshal(detail)
	if err != nil {
		return fmt.Sprint(detail)
	}
	return string(b)
}
