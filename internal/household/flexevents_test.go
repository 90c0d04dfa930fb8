package household

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestTakesPartIn(t *testing.T) {
	start := time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { v := metav1.NewTime(start.Add(d)); return &v }
	enrolment := func(p flexv1.PropositionName, phase flexv1.EnrolmentPhase, enrolledAt *metav1.Time) *flexv1.Enrolment {
		e := &flexv1.Enrolment{}
		e.Spec.Proposition = p
		e.Status.Phase = phase
		e.Status.EnrolledAt = enrolledAt
		return e
	}
	for _, tc := range []struct {
		name string
		e    *flexv1.Enrolment
		want bool
	}{
		{"active since the day before", enrolment("limited_pause", flexv1.EnrolmentActive, at(-24*time.Hour)), true},
		{"active since the very start", enrolment("limited_pause", flexv1.EnrolmentActive, at(0)), true},
		{"enrolled after the start", enrolment("limited_pause", flexv1.EnrolmentActive, at(time.Minute)), false},
		{"another proposition", enrolment("price_curve", flexv1.EnrolmentActive, at(-time.Hour)), false},
		{"not active", enrolment("limited_pause", flexv1.EnrolmentPending, at(-time.Hour)), false},
		{"active, no enrolment time", enrolment("limited_pause", flexv1.EnrolmentActive, nil), false},
	} {
		if got := TakesPartIn(tc.e, "limited_pause", start); got != tc.want {
			t.Errorf("%s: TakesPartIn = %v, want %v", tc.name, got, tc.want)
		}
	}
}
