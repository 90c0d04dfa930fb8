package household

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A household's withdrawals are kept in its Site's status.enrolmentHistory: one entry per
// enrolment that ended by the household's choice, with when it had become active and when it
// ended. A withdrawal binds until an enrolment made after it supersedes it (one asked with an
// override, or one that became active later): only a withdrawal later than the site's last
// enrolment refuses a new one.

// MaxHistory is how many ended enrolments a site's status keeps (the CRD's bound).
const MaxHistory = 32

// LastWithdrawal returns the household's latest withdrawal from p, or nil.
func LastWithdrawal(site *flexv1.Site, p flexv1.PropositionName) *flexv1.EnrolmentPeriod {
	var last *flexv1.EnrolmentPeriod
	for i := range site.Status.EnrolmentHistory {
		w := &site.Status.EnrolmentHistory[i]
		if w.Proposition == p && (last == nil || !w.WithdrawnAt.Before(&last.WithdrawnAt)) {
			last = w
		}
	}
	return last
}

// BindingWithdrawal returns the withdrawal that keeps the site out of p, or nil when none
// does: there is none, the request overrides it, or the site's enrolment supersedes it (it
// was made with an override, or became active after the withdrawal).
func BindingWithdrawal(site *flexv1.Site, p flexv1.PropositionName, enr *flexv1.Enrolment, override bool) *flexv1.EnrolmentPeriod {
	w := LastWithdrawal(site, p)
	if w == nil || override {
		return nil
	}
	if enr != nil && (enr.Spec.OverrideWithdrawal || (enr.Status.EnrolledAt != nil && enr.Status.EnrolledAt.After(w.WithdrawnAt.Time))) {
		return nil
	}
	return w
}

// DeletionIsWithdrawal reports whether deleting enr is the household withdrawing: the
// enrolment was active, its site stays, and the deletion is not a failed request undoing
// itself. (An explicit unenrol is a withdrawal whatever the enrolment's phase.)
func DeletionIsWithdrawal(enr *flexv1.Enrolment, site *flexv1.Site) bool {
	_, undone := enr.Annotations[flexv1.NoWithdrawalAnnotation]
	return enr.Status.EnrolledAt != nil && site != nil && site.DeletionTimestamp.IsZero() && !undone
}

// WithdrawalFrom is the history entry for the household withdrawing from enr at at.
func WithdrawalFrom(enr *flexv1.Enrolment, at time.Time) flexv1.EnrolmentPeriod {
	return flexv1.EnrolmentPeriod{Proposition: enr.Spec.Proposition, EnrolmentUID: string(enr.UID),
		EnrolledAt: enr.Status.EnrolledAt, WithdrawnAt: metav1.NewTime(at.UTC().Truncate(time.Second))}
}

// Recorded reports whether the history already holds the withdrawal of w's enrolment.
func Recorded(site *flexv1.Site, w flexv1.EnrolmentPeriod) bool {
	return w.EnrolmentUID != "" && slices.ContainsFunc(site.Status.EnrolmentHistory,
		func(h flexv1.EnrolmentPeriod) bool { return h.EnrolmentUID == w.EnrolmentUID })
}

// WithHistory returns the history with w appended, oldest dropped past MaxHistory.
func WithHistory(history []flexv1.EnrolmentPeriod, w flexv1.EnrolmentPeriod) []flexv1.EnrolmentPeriod {
	out := append(append(make([]flexv1.EnrolmentPeriod, 0, len(history)+1), history...), w)
	if len(out) > MaxHistory {
		out = out[len(out)-MaxHistory:]
	}
	return out
}
