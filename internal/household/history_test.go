package household

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestLastWithdrawal(t *testing.T) {
	site := testSite(func(s *flexv1.Site) {
		s.Status.EnrolmentHistory = []flexv1.EnrolmentPeriod{
			{Proposition: lp, WithdrawnAt: metav1.NewTime(t0)},
			{Proposition: flexv1.PropositionPriceCurve, WithdrawnAt: metav1.NewTime(t0.Add(2 * time.Hour))},
			{Proposition: lp, WithdrawnAt: metav1.NewTime(t0.Add(time.Hour))},
		}
	})
	if w := LastWithdrawal(site, lp); w == nil || !w.WithdrawnAt.Equal(at(t0.Add(time.Hour))) {
		t.Errorf("last withdrawal from limited_pause = %v, want the one at 11:00", w)
	}
	if w := LastWithdrawal(site, flexv1.PropositionFullAssetScheduleControl); w != nil {
		t.Errorf("a proposition never withdrawn from has %v", w)
	}
}

func TestDeletionIsWithdrawal(t *testing.T) {
	active := enrolment(func(e *flexv1.Enrolment) { e.Status.EnrolledAt = at(t0) })
	undone := enrolment(func(e *flexv1.Enrolment) {
		e.Status.EnrolledAt = at(t0)
		e.Annotations = map[string]string{flexv1.NoWithdrawalAnnotation: "rollback"}
	})
	cases := []struct {
		name string
		enr  *flexv1.Enrolment
		site *flexv1.Site
		want bool
	}{
		{"an active enrolment of a site that stays", active, testSite(), true},
		{"an enrolment that never became active", enrolment(), testSite(), false},
		{"the site is going: an offboard, not a withdrawal", active, testSite(deleting), false},
		{"the site is gone", active, nil, false},
		{"a failed request undoing its enrolment", undone, testSite(), false},
	}
	for _, tc := range cases {
		if got := DeletionIsWithdrawal(tc.enr, tc.site); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWithHistoryKeepsTheNewest(t *testing.T) {
	var history []flexv1.EnrolmentPeriod
	for i := range MaxHistory + 5 {
		history = WithHistory(history, flexv1.EnrolmentPeriod{Proposition: lp, EnrolmentUID: fmt.Sprint(i),
			WithdrawnAt: metav1.NewTime(t0.Add(time.Duration(i) * time.Hour))})
	}
	if len(history) != MaxHistory {
		t.Fatalf("%d entries kept, want %d", len(history), MaxHistory)
	}
	if history[0].EnrolmentUID != "5" || history[MaxHistory-1].EnrolmentUID != fmt.Sprint(MaxHistory+4) {
		t.Errorf("kept %s..%s, want the newest", history[0].EnrolmentUID, history[MaxHistory-1].EnrolmentUID)
	}
}

func TestWithdrawalRecordedOncePerEnrolment(t *testing.T) {
	enr := enrolment(func(e *flexv1.Enrolment) { e.UID = "uid-1"; e.Status.EnrolledAt = at(t0) })
	w := WithdrawalFrom(enr, t0.Add(90*time.Minute+500*time.Millisecond))
	if w.EnrolmentUID != "uid-1" || !w.EnrolledAt.Equal(at(t0)) || !w.WithdrawnAt.Equal(at(t0.Add(90*time.Minute))) {
		t.Errorf("withdrawal entry %+v", w)
	}
	site := testSite()
	if Recorded(site, w) {
		t.Error("recorded before it was")
	}
	site.Status.EnrolmentHistory = WithHistory(nil, w)
	if !Recorded(site, w) {
		t.Error("not recorded after it was")
	}
	other := WithdrawalFrom(enrolment(func(e *flexv1.Enrolment) { e.UID = "uid-2" }), t0.Add(90*time.Minute))
	if Recorded(site, other) {
		t.Error("another enrolment withdrawn in the same second counts as recorded")
	}
}
