package household

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/identity"
)

// Which Enrolment holds a site's enrolment in a proposition. A site has at most one enrolment
// per proposition, whichever door it comes through: the REST API names its enrolment after
// the site and the proposition (identity.EnrolmentName), kubectl and GitOps name theirs as
// they like, and a cache a moment behind the API server cannot tell a request about one made
// a moment ago under another name. So every Enrolment holds its place through an
// EnrolmentClaim named after the site and the proposition (identity.EnrolmentClaimName), made
// by the Enrolment admission webhook before the Enrolment is stored: two claimants race for
// one object name, so exactly one wins, and the other is refused.
//
// A claim binds while its Enrolment is stored, live, for the claim's site and proposition.
// For EnrolmentClaimGrace after it was made it is pending (its Enrolment is being admitted
// and stored, which takes milliseconds); after that it is stale (the Enrolment was refused
// after its claim was made, or deleted without its finalizer): anyone may then replace it.
// Enrolments stored before claims existed hold their place without one: the cache has long
// seen them, and the webhook and the REST API find them there.

// EnrolmentClaimGrace is how long a claim whose Enrolment is not stored (yet) is honoured:
// the request that made it is still being admitted and stored, which takes milliseconds, or at
// most the API server's request timeout.
const EnrolmentClaimGrace = time.Minute

// NewEnrolmentClaim is the claim of enr's site and proposition for enr.
func NewEnrolmentClaim(enr *flexv1.Enrolment) *flexv1.EnrolmentClaim {
	return &flexv1.EnrolmentClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: enr.Namespace,
			Name: identity.EnrolmentClaimName(enr.Spec.SiteName, enr.Spec.Proposition)},
		Spec: flexv1.EnrolmentClaimSpec{EnrolmentName: enr.Name},
	}
}

// HoldsClaim reports whether enr (stored, nil when not) holds c: it is live and of the
// site and proposition c is named after.
func HoldsClaim(c *flexv1.EnrolmentClaim, enr *flexv1.Enrolment) bool {
	return enr != nil && enr.Name == c.Spec.EnrolmentName && enr.DeletionTimestamp.IsZero() &&
		identity.EnrolmentClaimName(enr.Spec.SiteName, enr.Spec.Proposition) == c.Name
}

// EnrolmentClaimStanding judges c given its Enrolment as stored (nil when it does not exist).
func EnrolmentClaimStanding(c *flexv1.EnrolmentClaim, enr *flexv1.Enrolment, now time.Time) claimrule.Standing {
	return claimrule.Judge(HoldsClaim(c, enr), c.CreationTimestamp.Time, EnrolmentClaimGrace, now)
}

// AlreadyEnrolledError says another Enrolment holds the site's enrolment in the proposition,
// or is about to.
type AlreadyEnrolledError struct {
	SiteName    string
	Proposition flexv1.PropositionName
	// Holder is the Enrolment that holds it, or claimed it.
	Holder string
	// Pending: the holder claimed it a moment ago and is not stored yet (try again).
	Pending bool
}

func (e *AlreadyEnrolledError) Error() string {
	if e.Pending {
		return fmt.Sprintf("Site %q is being enrolled in %s by Enrolment %q at this moment; try again",
			e.SiteName, e.Proposition, e.Holder)
	}
	return fmt.Sprintf("Site %q is already enrolled in %s by Enrolment %q", e.SiteName, e.Proposition, e.Holder)
}
