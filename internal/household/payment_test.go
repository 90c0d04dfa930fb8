package household

import (
	"errors"
	"strings"
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Every pair of statuses (and two that are none): the steps the machine allows, and no other.
func TestPaymentChange(t *testing.T) {
	allowed := map[[2]flexv1.PaymentStatus]bool{
		{"pending_approval", "approved"}:  true,
		{"pending_approval", "rejected"}:  true,
		{"pending_approval", "cancelled"}: true,
		{"approved", "processing"}:        true,
		{"approved", "cancelled"}:         true,
		{"processing", "posted"}:          true,
		{"processing", "failed"}:          true,
		{"posted", "returned"}:            true,
	}
	all := append([]flexv1.PaymentStatus{"", "paid"}, PaymentStatuses...)
	for _, from := range all {
		for _, to := range all {
			err := PaymentChange(from, to)
			want := allowed[[2]flexv1.PaymentStatus{from, to}]
			if (err == nil) != want {
				t.Errorf("PaymentChange(%q, %q) = %v, want allowed %v", from, to, err, want)
			}
			var refused *PaymentChangeRefused
			if err != nil && (!errors.As(err, &refused) || refused.From != from || refused.To != to) {
				t.Errorf("PaymentChange(%q, %q) = %#v, want a *PaymentChangeRefused naming both", from, to, err)
			}
		}
	}
}

func TestPaymentFinal(t *testing.T) {
	for s, final := range map[flexv1.PaymentStatus]bool{
		"pending_approval": false, "approved": false, "processing": false, "posted": false,
		"failed": true, "rejected": true, "cancelled": true, "returned": true,
	} {
		if PaymentFinal(s) != final {
			t.Errorf("PaymentFinal(%q) = %v, want %v", s, !final, final)
		}
		// The money comes back exactly once: only in a final status.
		if PaymentUndone(s) && !PaymentFinal(s) {
			t.Errorf("%q returns the money but is not final: it could be paid out again", s)
		}
	}
	if got := PaymentNext("processing"); len(got) != 2 || got[0] != "posted" || got[1] != "failed" {
		t.Errorf("PaymentNext(processing) = %v", got)
	}
	if len(PaymentTargets) != 7 || PaymentTargets[0] != "approved" {
		t.Errorf("PaymentTargets = %v: every status but pending_approval", PaymentTargets)
	}
}

func TestPaymentChangeRefusedSays(t *testing.T) {
	for _, c := range []struct {
		from, to flexv1.PaymentStatus
		want     string
	}{
		{"failed", "posted", "cannot move from failed to posted: failed is final"},
		{"approved", "approved", "is approved already"},
		{"pending_approval", "posted", "from pending_approval it may move to approved, rejected or cancelled"},
		{"posted", "failed", "from posted it may move to returned"},
	} {
		if err := PaymentChange(c.from, c.to); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PaymentChange(%s, %s) = %v, want it to say %q", c.from, c.to, err, c.want)
		}
	}
}

// The attack: a payment fails (the money is the household's again: PaymentUndone), the
// household withdraws it again, then the first is set to posted. Walking only the machine's
// steps, the first withdrawal cannot be set to posted. (The balance along the way is the
// database's sum: rewardstore's TestPaymentStatusChanges walks the same steps.)
func TestDoublePaymentCannotHappen(t *testing.T) {
	first := PaymentPendingApproval
	for _, step := range []flexv1.PaymentStatus{"approved", "processing", "failed"} {
		if err := PaymentChange(first, step); err != nil {
			t.Fatal(err)
		}
		first = step
	}
	if !PaymentUndone(first) {
		t.Fatalf("a failed payment still counts against the balance")
	}
	if err := PaymentChange(first, PaymentPosted); err == nil {
		t.Fatal("a failed payment was allowed to be posted: the household would be paid twice")
	}
}
