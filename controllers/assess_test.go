package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

func TestAssess(t *testing.T) {
	const p = flexv1.PropositionLimitedPause
	now := metav1.Now()
	current := func(mutate ...func(*flexv1.Site)) *flexv1.Site {
		s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "s", Generation: 2}}
		s.Status.ObservedGeneration = 2
		s.Status.Conditions = []metav1.Condition{{Type: flexv1.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: 2}}
		for _, m := range mutate {
			m(s)
		}
		return s
	}
	eligible := func(s *flexv1.Site) { s.Status.EligiblePropositions = []flexv1.PropositionName{p} }
	withdrawn := func(s *flexv1.Site) {
		s.Annotations = map[string]string{identity.WithdrawalAnnotation(p): "2026-01-01T00:00:00Z"}
	}
	offered := &flexv1.Proposition{Spec: flexv1.PropositionSpec{Proposition: p}}
	needsConsent := &flexv1.Proposition{Spec: flexv1.PropositionSpec{Proposition: p, RequiresBoundaryMeterConsent: true}}

	tests := []struct {
		name     string
		override bool
		site     *flexv1.Site
		prop     *flexv1.Proposition
		phase    flexv1.EnrolmentPhase
		reason   string
	}{
		{"no site", false, nil, offered, flexv1.EnrolmentPending, flexv1.ReasonSiteNotFound},
		{"site deleting", false, current(eligible, func(s *flexv1.Site) { s.DeletionTimestamp = &now }), offered,
			flexv1.EnrolmentPending, flexv1.ReasonSiteDeleting},
		{"withdrawn wins over eligibility", false, current(eligible, withdrawn), offered, flexv1.EnrolmentWithdrawn, flexv1.ReasonWithdrawn},
		{"override re-enrols", true, current(eligible, withdrawn), offered, flexv1.EnrolmentActive, flexv1.ReasonEnrolled},
		{"proposition not offered", false, current(eligible), nil, flexv1.EnrolmentNotEligible, "PropositionNotOffered"},
		{"consent required", false, current(eligible), needsConsent, flexv1.EnrolmentNotEligible, "BoundaryMeterConsentRequired"},
		{"consent given", false, current(eligible, func(s *flexv1.Site) { s.Spec.BoundaryMeterConsentAt = &now }), needsConsent,
			flexv1.EnrolmentActive, flexv1.ReasonEnrolled},
		{"stale eligibility waits", false, current(eligible, func(s *flexv1.Site) { s.Generation = 3 }), offered,
			flexv1.EnrolmentPending, "EligibilityPending"},
		{"not eligible", false, current(), offered, flexv1.EnrolmentNotEligible, flexv1.ReasonNotEligible},
		{"eligible", false, current(eligible), offered, flexv1.EnrolmentActive, flexv1.ReasonEnrolled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			enr := &flexv1.Enrolment{Spec: flexv1.EnrolmentSpec{SiteName: "s", Proposition: p, OverrideWithdrawal: tt.override}}
			got := assess(enr, tt.site, tt.prop)
			if got.phase != tt.phase || got.reason != tt.reason {
				t.Fatalf("assess = %s/%s (%s), want %s/%s", got.phase, got.reason, got.message, tt.phase, tt.reason)
			}
			if got.message == "" {
				t.Fatal("every assessment explains itself")
			}
		})
	}
}
