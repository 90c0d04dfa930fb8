package household

import (
	"fmt"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// Verdict is the household's answer to "may this site be enrolled in this proposition?".
type Verdict string

const (
	// Allowed: every prerequisite holds and the site has no enrolment in the proposition yet.
	Allowed Verdict = "Allowed"
	// AlreadyEnrolled: every prerequisite holds and the site is already enrolled.
	AlreadyEnrolled Verdict = "AlreadyEnrolled"
	// PreviouslyWithdrew: the household withdrew from the proposition after its last
	// enrolment, and the request does not override that.
	PreviouslyWithdrew Verdict = "PreviouslyWithdrew"
	// NotOffered: no Proposition object offers the proposition.
	NotOffered Verdict = "NotOffered"
	// ConsentRequired: the proposition needs the household's boundary meter consent.
	ConsentRequired Verdict = "ConsentRequired"
	// NotEligible: no asset of the site qualifies for the proposition.
	NotEligible Verdict = "NotEligible"
	// SitePending: the site does not exist, is going away, or its eligibility has not been
	// computed from its current spec yet; the answer will come without anyone's help.
	SitePending Verdict = "SitePending"
)

// Decision is a verdict with what a door needs to explain it.
type Decision struct {
	Verdict Verdict
	// Reason is the API's condition reason for the verdict (flexv1.Reason*).
	Reason string
	// Message explains the verdict in a sentence a person can act on.
	Message string
	// Issues are the eligibility issue codes behind NotEligible.
	Issues []flexv1.EligibilityIssue
}

// Refused reports whether the verdict keeps the site from being enrolled.
func (d Decision) Refused() bool { return d.Verdict != Allowed && d.Verdict != AlreadyEnrolled }

// EnrolmentRequest is what the enrolment decision weighs.
type EnrolmentRequest struct {
	// Site as it is (or, for a request that also writes it, will be) stored; nil when it
	// does not exist.
	Site        *flexv1.Site
	Proposition flexv1.PropositionName
	// Override asks to re-enrol a household that withdrew (override_withdrawal,
	// spec.overrideWithdrawal).
	Override bool
	// Enrolment is the site's live Enrolment in the proposition, if any: the one being
	// decided about (controller) or the one a new request would meet (REST, admission).
	Enrolment *flexv1.Enrolment
	// Eligibility of the site; nil when not computed yet.
	Eligibility *eligibility.Result
	Rules       eligibility.Rules
}

// DecideEnrolment is the enrolment decision. Its order is the order a household meets the
// rules in: a site to enrol, the household's own past choice, what is offered, what the
// proposition needs, and what the site qualifies for.
func DecideEnrolment(req EnrolmentRequest) Decision {
	p, site := req.Proposition, req.Site
	switch {
	case site == nil:
		msg := "The site does not exist (yet)"
		if req.Enrolment != nil {
			msg = fmt.Sprintf("Site %q does not exist (yet)", req.Enrolment.Spec.SiteName)
		}
		return Decision{Verdict: SitePending, Reason: flexv1.ReasonSiteNotFound, Message: msg}
	case !site.DeletionTimestamp.IsZero():
		return Decision{Verdict: SitePending, Reason: flexv1.ReasonSiteDeleting,
			Message: fmt.Sprintf("Site %q is being deleted", site.Name)}
	}
	if w := BindingWithdrawal(site, p, req.Enrolment, req.Override); w != nil {
		return Decision{Verdict: PreviouslyWithdrew, Reason: flexv1.ReasonPreviouslyWithdrew,
			Message: fmt.Sprintf("The household withdrew from %s at %s",
				p, w.WithdrawnAt.UTC().Format("2006-01-02T15:04:05Z"))}
	}
	rule, offered := req.Rules.Proposition(p)
	if !offered {
		return Decision{Verdict: NotOffered, Reason: flexv1.ReasonPropositionNotOffered,
			Message: fmt.Sprintf("Proposition %s is not offered", p)}
	}
	if rule.RequiresBoundaryMeterConsent && site.Spec.BoundaryMeterConsentAt == nil {
		return Decision{Verdict: ConsentRequired, Reason: flexv1.ReasonConsentRequired,
			Message: fmt.Sprintf("Proposition %s needs the household's boundary meter consent", p)}
	}
	if req.Eligibility == nil {
		return Decision{Verdict: SitePending, Reason: flexv1.ReasonEligibilityPending,
			Message: "Waiting for the site's eligibility to be computed"}
	}
	if !req.Eligibility.IsEligible(p) {
		issues := req.Eligibility.Issues(p)
		msg := fmt.Sprintf("The site is not eligible for %s", p)
		switch {
		case len(issues) > 0:
			names := make([]string, len(issues))
			for i, issue := range issues {
				names[i] = string(issue)
			}
			msg += ": " + strings.Join(names, ", ")
		case len(req.Eligibility.Assets) == 0:
			msg += ": the site has no assets"
		}
		return Decision{Verdict: NotEligible, Reason: flexv1.ReasonNotEligible, Message: msg, Issues: issues}
	}
	if req.Enrolment != nil {
		return Decision{Verdict: AlreadyEnrolled, Reason: flexv1.ReasonEnrolled,
			Message: fmt.Sprintf("The site is enrolled in %s", p)}
	}
	return Decision{Verdict: Allowed, Reason: flexv1.ReasonEnrolled, Message: fmt.Sprintf("The site may enrol in %s", p)}
}
