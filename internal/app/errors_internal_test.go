package app

import (
	"errors"
	"testing"
)

// The onboard and enrol outcome labels stay a bounded set whatever the error says.
func TestOutcome(t *testing.T) {
	for _, tc := range []struct {
		status string
		err    error
		want   string
	}{
		{StatusEnrolled, nil, "enrolled"},
		{StatusAlreadyEnrolled, nil, "already_enrolled"},
		{"", refusedEnrolment("previously_withdrew", "withdrew 2026-01-01", nil), "previously_withdrew"},
		{"", &Error{Kind: BadRequest, Code: "consent_required", Detail: "x"}, "consent_required"},
		{"", InvalidFields(Field("bad MPAN 1234", "value_error", "body")), "invalid"},
		{"", ErrSiteNotFound, "invalid"},
		{"", Fail(Unavailable, "try again"), "error"},
		{"", errors.New("etcd exploded"), "error"},
	} {
		if got := outcome(tc.status, tc.err); got != tc.want {
			t.Errorf("outcome(%q, %v) = %q, want %q", tc.status, tc.err, got, tc.want)
		}
	}
}
