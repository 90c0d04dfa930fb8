package facade

import (
	"errors"
	"net/http"
	"testing"
)

// The onboard and enrol outcome labels stay a bounded set whatever the error says.
func TestEnrolOutcome(t *testing.T) {
	for _, tc := range []struct {
		status string
		err    error
		want   string
	}{
		{statusEnrolled, nil, "enrolled"},
		{statusAlreadyEnrolled, nil, "already_enrolled"},
		{"", prerequisitesNotMet("previously_withdrew", "withdrew 2026-01-01", nil), "previously_withdrew"},
		{"", &apiError{status: http.StatusBadRequest, refusal: "consent_required", detail: "x"}, "consent_required"},
		{"", invalid(field("bad MPAN 1234", "value_error", "body")), "invalid"},
		{"", errSiteNotFound, "invalid"},
		{"", fail(http.StatusServiceUnavailable, "try again"), "error"},
		{"", errors.New("etcd exploded"), "error"},
	} {
		if got := enrolOutcome(tc.status, tc.err); got != tc.want {
			t.Errorf("enrolOutcome(%q, %v) = %q, want %q", tc.status, tc.err, got, tc.want)
		}
	}
}
