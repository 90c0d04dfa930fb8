package app

import (
	"errors"
	"fmt"

	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/record"
)

// Kind is what sort of refusal an Error is. Each door translates it into its own language
// (the REST API and the hosted flow into an HTTP status, the rewards page into a message);
// the use cases never speak HTTP.
type Kind uint8

// The kinds of refusal a use case answers.
const (
	// Internal is a failure on Flexsite's side (never a refusal: its cause is logged, not told).
	Internal Kind = iota
	// Invalid: the input breaks a rule; Detail holds the []FieldError naming every problem.
	Invalid
	// BadRequest: the request cannot be served as asked (a site that still holds something,
	// an email the production service answers 400 for, consent missing for an enrolment).
	BadRequest
	// Unauthorized: no caller, or credentials that do not hold.
	Unauthorized
	// Forbidden: the caller may not do this at all (a token of the wrong kind or role).
	Forbidden
	// NotFound: no such object for this caller (another organisation's objects are not found).
	NotFound
	// Conflict: the request meets stored state it cannot be reconciled with.
	Conflict
	// Gone: the thing existed and cannot be used any more (a used or expired link).
	Gone
	// TooLarge: the input is larger than any request may be.
	TooLarge
	// Refused: a domain refusal with a code and, where it applies, the site's eligibility
	// (Detail is the {message, code, eligibility} object).
	Refused
	// TooManyRequests: a limit was reached; RetryAfter says when to come back.
	TooManyRequests
	// Unavailable: try again shortly (a race lost too often, a dependency down); RetryAfter
	// says when.
	Unavailable
)

// FieldError is one problem with one input field, at Loc (pydantic's validation record:
// docs/api.md, "Records and error forms").
type FieldError struct {
	Loc  []any  `json:"loc"`
	Msg  string `json:"msg"`
	Type string `json:"type"`
}

// Error is a use case's refusal: a kind, the detail the caller is told (a string, a
// []FieldError, a []string or an object), and, for an enrolment refused, its code.
type Error struct {
	Kind Kind
	// Detail is what the caller is told: a sentence (string), the fields at fault
	// ([]FieldError), a Refusal, an AssetConflict, or the problems of an MPAN ([]string).
	Detail any
	// Code is the refusal's code (previously_withdrew, consent_required, ...): the business
	// metrics count by it and the hosted flow words it; empty for any other error.
	Code string
	// RetryAfter, in whole seconds, tells a caller of an Unavailable or TooManyRequests error
	// when to try again (empty: no advice).
	RetryAfter string
}

func (e *Error) Error() string { return fmt.Sprintf("%d: %v", e.Kind, e.Detail) }

// Fail returns an error of kind k told as the formatted message.
func Fail(k Kind, format string, args ...any) error {
	return &Error{Kind: k, Detail: fmt.Sprintf(format, args...)}
}

// InvalidFields returns an Invalid error naming every problem.
func InvalidFields(items ...FieldError) error { return &Error{Kind: Invalid, Detail: items} }

// Field builds a FieldError.
func Field(msg, typ string, loc ...any) FieldError { return FieldError{Loc: loc, Msg: msg, Type: typ} }

// MaxListed is how many problems a refusal lists (web.Fields, and a use case that collects
// its own): the rest are counted in one last item, Unlisted.
const MaxListed = 100

// Unlisted is the last item of a refusal that lists only some of its problems: n more of what
// ("problems", "rejected readings") at loc, not listed, so that what a request costs to
// answer is bounded however many problems it holds.
func Unlisted(n int, what string, loc ...any) FieldError {
	return FieldError{Loc: loc, Msg: fmt.Sprintf("%d more %s, not listed", n, what), Type: "too_many_errors"}
}

// As finds the use case's refusal in err (nil when err is none: an internal failure).
func As(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return nil
}

// ErrSiteNotFound answers a site that does not exist for this caller.
var ErrSiteNotFound = Fail(NotFound, "Site not found or not authorized")

// ErrAssetNotFound answers an asset that does not exist for this caller.
var ErrAssetNotFound = Fail(NotFound, "Asset not found or not authorized")

// ErrTooManyChanges answers a request that kept losing races for maxAttempts attempts.
var ErrTooManyChanges = &Error{Kind: Unavailable, Detail: "Too many concurrent changes to this site; retry", RetryAfter: "1"}

// AssetConflict is the detail of a conflict over an external id: the asset is registered
// to another site.
type AssetConflict struct {
	ExistingAssetID string `json:"existing_asset_id"`
	ExternalID      string `json:"external_id"`
	Message         string `json:"message"`
}

// assetConflict refuses an asset whose external id is registered to another site.
func assetConflict(externalID, existingAssetID string) error {
	return &Error{Kind: Conflict, Detail: AssetConflict{ExistingAssetID: existingAssetID, ExternalID: externalID,
		Message: fmt.Sprintf("Asset with external_id %q is already registered to a different site", externalID)}}
}

// Refusal is the detail of a refused enrolment: its code, the household's rule in words, and
// the site's eligibility as the decision saw it.
type Refusal struct {
	Code        string              `json:"code"`
	Eligibility *record.Eligibility `json:"eligibility"`
	Message     string              `json:"message"`
}

// refusedEnrolment refuses an enrolment with a code and the eligibility record.
func refusedEnrolment(code, message string, eligibility *record.Eligibility) error {
	return &Error{Kind: Refused, Detail: Refusal{Code: code, Eligibility: eligibility, Message: message}, Code: code}
}

// outcome is the outcome label of an onboard or enrol request that answered status or err:
// the status, the refusal code, or invalid / error (a bounded set either way).
func outcome(status string, err error) string {
	e := As(err)
	switch {
	case err == nil:
		return status
	case e == nil || e.Kind == Internal || e.Kind == Unavailable:
		return metrics.OutcomeError
	case e.Code != "":
		return e.Code
	default:
		return metrics.OutcomeInvalid
	}
}

// CountOnboard counts an onboard request a door refused before the use case ran (its input
// was invalid), as the use case counts the others.
func CountOnboard(err error) { metrics.Onboards.WithLabelValues(outcome("", err)).Inc() }

// CountEnrolment counts an enrolment request a door refused before the use case ran.
func CountEnrolment(err error) { metrics.Enrolments.WithLabelValues(outcome("", err)).Inc() }
