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
// a moment ago under another name. An Enrolment named after its site and proposition holds
// its place by its name, at no cost (EnrolmentHeldByName): the API server refuses a second
// object of the name. An Enrolment under another name holds it through an EnrolmentClaim of that name
// (identity.EnrolmentClaimName), made by the Enrolment admission webhook before the
// Enrolment is stored: two such claimants race for one object name, so exactly one wins. Each
// kind looks for the other by GET at admission: the named one for a claim that binds, the
// claimant, once its claim is made, for the named one. An enrolment stored before the other
// is admitted is always found; two admitted within the moment between one's admission and its
// store may both pass (docs/platform.md, "One enrolment per site and proposition").
//
// A claim binds while its Enrolment is stored, live, for the claim's site and proposition.
// For EnrolmentClaimGrace after it was made it is pending (its Enrolment is being admitted
// and stored, which takes milliseconds); after that it is stale (the Enrolment was refused
// after its claim was made, or deleted without its finalizer): anyone may then replace it.
// Enrolments stored before claims existed hold their place without one: the cache has long
// seen them, and the webhook and the REST API find them there.

// EnrolmentHeldByName reports whether enr holds its site's enrolment in its proposition by
// its name (the name the REST API gives it, NewEnrolment), so that it makes no claim.
func EnrolmentHeldByName(enr *flexv1.Enrolment) bool {
	return enr.Name == identity.EnrolmentName(enr.Spec.SiteName, enr.Spec.Proposition)
}

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
