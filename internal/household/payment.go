package household

import (
	"fmt"
	"slices"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A withdrawal's payment moves through a state machine, one step at a time:
//
//	pending_approval → approved | rejected | cancelled
//	approved         → processing | cancelled
//	processing       → posted | failed
//	posted           → returned
//
// and every other status is final. The money comes back to the balance only in failed,
// rejected, cancelled or returned (PaymentUndone), and since those are final it comes back
// exactly once: a failed payment cannot be set to posted after the household withdrew the
// money again. Every door that changes a payment status (the REST API, flexsite-admin, a
// RewardLedger's spec) asks PaymentChange, under the site's row lock (rewardstore).

// The payment statuses of a withdrawal (PaymentPendingApproval is its first).
const (
	PaymentApproved   flexv1.PaymentStatus = "approved"
	PaymentProcessing flexv1.PaymentStatus = "processing"
	PaymentPosted     flexv1.PaymentStatus = "posted"
	PaymentFailed     flexv1.PaymentStatus = "failed"
	PaymentRejected   flexv1.PaymentStatus = "rejected"
	PaymentCancelled  flexv1.PaymentStatus = "cancelled"
	PaymentReturned   flexv1.PaymentStatus = "returned"
)

// paymentSteps are the changes each status may make; a status absent here is final.
var paymentSteps = map[flexv1.PaymentStatus][]flexv1.PaymentStatus{
	PaymentPendingApproval: {PaymentApproved, PaymentRejected, PaymentCancelled},
	PaymentApproved:        {PaymentProcessing, PaymentCancelled},
	PaymentProcessing:      {PaymentPosted, PaymentFailed},
	PaymentPosted:          {PaymentReturned},
}

// PaymentStatuses are every payment status, in the order a payment meets them.
var PaymentStatuses = []flexv1.PaymentStatus{PaymentPendingApproval, PaymentApproved, PaymentProcessing, PaymentPosted,
	PaymentFailed, PaymentRejected, PaymentCancelled, PaymentReturned}

// PaymentTargets are the statuses a change may ask for (every status but the first): what a
// door accepts as input before the machine judges the step.
var PaymentTargets = PaymentStatuses[1:]

// PaymentNext are the statuses a payment in s may move to (none when s is final).
func PaymentNext(s flexv1.PaymentStatus) []flexv1.PaymentStatus { return slices.Clone(paymentSteps[s]) }

// PaymentFinal reports whether a payment in s can change no more.
func PaymentFinal(s flexv1.PaymentStatus) bool { return len(paymentSteps[s]) == 0 }

// PaymentChangeRefused is a payment status change the machine does not allow.
type PaymentChangeRefused struct {
	From, To flexv1.PaymentStatus
}

func (e *PaymentChangeRefused) Error() string {
	switch {
	case e.From == e.To:
		return fmt.Sprintf("the payment status is %s already", e.From)
	case PaymentFinal(e.From):
		return fmt.Sprintf("the payment status cannot move from %s to %s: %s is final", e.From, e.To, e.From)
	}
	return fmt.Sprintf("the payment status cannot move from %s to %s: from %s it may move to %s", e.From, e.To, e.From,
		joinStatuses(paymentSteps[e.From]))
}

func joinStatuses(ss []flexv1.PaymentStatus) string {
	out := ""
	for i, s := range ss {
		switch {
		case i == 0:
		case i == len(ss)-1:
			out += " or "
		default:
			out += ", "
		}
		out += string(s)
	}
	return out
}

// PaymentChange judges moving a withdrawal's payment from one status to another: nil when the
// machine allows the step, a *PaymentChangeRefused otherwise (the same status again included:
// a change that changes nothing is not a step).
func PaymentChange(from, to flexv1.PaymentStatus) error {
	if slices.Contains(paymentSteps[from], to) {
		return nil
	}
	return &PaymentChangeRefused{From: from, To: to}
}
