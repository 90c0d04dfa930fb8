package household

import (
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// TakesPartIn reports whether an enrolment puts its site in a flex event of proposition p
// starting at start, when the event lists no sites: it is an active enrolment in p, enrolled
// at or before the start (docs/platform.md, "How a site is settled").
func TakesPartIn(e *flexv1.Enrolment, p flexv1.PropositionName, start time.Time) bool {
	return e.Spec.Proposition == p && e.Status.Phase == flexv1.EnrolmentActive && e.Status.EnrolledAt != nil &&
		!e.Status.EnrolledAt.After(start)
}
