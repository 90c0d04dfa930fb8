package facade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"

	gojson "github.com/goccy/go-json"

	"github.com/flexsite/flexsite/internal/metrics"
)

// ValidationItem is one entry of a 422 validation error record (FastAPI/pydantic form).
type ValidationItem struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// apiError is an error with the HTTP answer it deserves. Handlers return it; writeError is
// the one place that turns errors into responses.
type apiError struct {
	status int
	// detail is the body's "detail" member: a string, a []ValidationItem, a []string (MPAN
	// validation) or an object (asset conflict, prerequisites not met).
	detail  any
	headers map[string]string
	// oauth is the RFC 6749 (5.2) error code the token endpoint adds as "error", so that
	// OAuth2 client libraries can read the failure; empty elsewhere.
	oauth string
	// refusal is the code of a refused enrolment (previously_withdrew, consent_required, ...),
	// which the business metrics count by; empty for any other error.
	refusal string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d: %v", e.status, e.detail) }

// fail returns an error answered with status and {"detail": message}.
func fail(status int, format string, args ...any) error {
	return &apiError{status: status, detail: fmt.Sprintf(format, args...)}
}

// invalid returns a 422 validation error record.
func invalid(items ...ValidationItem) error {
	return &apiError{status: http.StatusUnprocessableEntity, detail: items}
}

// field builds a ValidationItem.
func field(msg, typ string, loc ...any) ValidationItem {
	return ValidationItem{Loc: loc, Msg: msg, Type: typ}
}

// headerRetryAfter tells a client when to try again (a rate limit, a change still under way).
const headerRetryAfter = "Retry-After"

var errSiteNotFound = fail(http.StatusNotFound, "Site not found or not authorized")

// assetConflict is the 409 object form: the asset's external id is registered to another site.
func assetConflict(externalID, existingAssetID string) error {
	return &apiError{status: http.StatusConflict, detail: map[string]any{
		"message":           fmt.Sprintf("Asset with external_id %q is already registered to a different site", externalID),
		"existing_asset_id": existingAssetID,
		"external_id":       externalID,
	}}
}

// prerequisitesNotMet is the 422 object form with a code and the eligibility record.
func prerequisitesNotMet(code, message string, eligibility *EligibilityRecord) error {
	return &apiError{status: http.StatusUnprocessableEntity, detail: map[string]any{
		"message": message, "code": code, "eligibility": eligibility,
	}, refusal: code}
}

// enrolOutcome is the outcome label of an onboard or enrol request that answered status or
// err: the status, the refusal code, or invalid / error (a bounded set either way).
func enrolOutcome(status string, err error) string {
	var ae *apiError
	switch {
	case err == nil:
		return status
	case !errors.As(err, &ae) || ae.status >= http.StatusInternalServerError:
		return metrics.OutcomeError
	case ae.refusal != "":
		return ae.refusal
	default:
		return metrics.OutcomeInvalid
	}
}

// writeError answers err: an apiError as itself, anything else as a logged 500 that reveals
// nothing of the cause.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	var ae *apiError
	if !errors.As(err, &ae) {
		s.Log.Error(err, "request failed", "method", r.Method, "route", routeOf(r)) // not the path: a hosted link carries its code
		ae = &apiError{status: http.StatusInternalServerError, detail: "Internal server error"}
	}
	for k, v := range ae.headers {
		w.Header().Set(k, v)
	}
	body := map[string]any{"detail": ae.detail}
	if ae.oauth != "" {
		body["error"] = ae.oauth
		if msg, ok := ae.detail.(string); ok {
			body["error_description"] = msg
		}
	}
	writeJSON(w, ae.status, body)
}

// bodyBuffers hold answers while they are encoded, so that each is written whole, with its
// Content-Length; a buffer grown by an unusually large answer is not kept.
var bodyBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

const maxPooledBody = 256 << 10

func writeJSON(w http.ResponseWriter, status int, body any) {
	buf := bodyBuffers.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= maxPooledBody {
			buf.Reset()
			bodyBuffers.Put(buf)
		}
	}()
	if err := encodeJSON(buf, body); err != nil {
		buf.Reset()
		status = http.StatusInternalServerError
		buf.WriteString(`{"detail":"Internal Server Error"}` + "\n")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// encodeJSON encodes an answer as encoding/json's Encoder does (HTML-safe, a trailing
// newline). The two large read answers skip its reflection: a page of transactions is
// written by hand (appendTransactions), eligibility goes through goccy/go-json, both byte
// for byte alike (encode_internal_test holds them to that); every other answer stays with
// encoding/json.
func encodeJSON(buf *bytes.Buffer, body any) error {
	switch b := body.(type) {
	case TransactionsResponse:
		buf.Write(appendTransactions(buf.AvailableBuffer(), &b))
		return nil
	case *transactionsPage:
		buf.Write(b.appendPage(buf.AvailableBuffer()))
		return nil
	case encodedJSON:
		buf.Write(b)
		return nil
	case *EligibilityRecord:
		return gojson.NewEncoder(buf).Encode(body)
	}
	return json.NewEncoder(buf).Encode(body)
}
