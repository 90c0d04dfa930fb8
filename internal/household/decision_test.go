package household

import (
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

const lp = flexv1.PropositionLimitedPause

var (
	t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	// withdrewAt is when the test household withdrew from limited_pause.
	withdrewAt = metav1.NewTime(t0)
)

func at(t time.Time) *metav1.Time { m := metav1.NewTime(t); return &m }

func testRules(requireConsent bool) eligibility.Rules {
	return eligibility.NewRules([]flexv1.Proposition{{Spec: flexv1.PropositionSpec{Proposition: lp,
		RequiresBoundaryMeterConsent: requireConsent}}}, nil)
}

func testSite(mutate ...func(*flexv1.Site)) *flexv1.Site {
	s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "home"}}
	for _, m := range mutate {
		m(s)
	}
	return s
}

func withdrawn(s *flexv1.Site) {
	s.Status.EnrolmentHistory = []flexv1.EnrolmentPeriod{{Proposition: lp, EnrolledAt: at(t0.Add(-time.Hour)), WithdrawnAt: withdrewAt}}
}

func consented(s *flexv1.Site) { s.Spec.BoundaryMeterConsentAt = at(t0) }

func deleting(s *flexv1.Site) { s.DeletionTimestamp = at(t0) }

var (
	eligibleResult = &eligibility.Result{EligiblePropositions: []flexv1.PropositionName{lp}}
	noAssetsResult = &eligibility.Result{}
	issuesResult   = &eligibility.Result{Assets: []flexv1.AssetEligibility{{Name: "a", Propositions: []flexv1.PropositionEligibility{
		{Proposition: lp, Issues: []flexv1.EligibilityIssue{flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet}}}}}}
)

func enrolment(mutate ...func(*flexv1.Enrolment)) *flexv1.Enrolment {
	e := &flexv1.Enrolment{Spec: flexv1.EnrolmentSpec{SiteName: "home", Proposition: lp}}
	for _, m := range mutate {
		m(e)
	}
	return e
}

// TestDecideEnrolment covers every verdict and the order in which the rules apply.
func TestDecideEnrolment(t *testing.T) {
	overriding := func(e *flexv1.Enrolment) { e.Spec.OverrideWithdrawal = true }
	activeAfterWithdrawal := func(e *flexv1.Enrolment) { e.Status.EnrolledAt = at(t0.Add(time.Minute)) }
	activeBeforeWithdrawal := func(e *flexv1.Enrolment) { e.Status.EnrolledAt = at(t0.Add(-time.Minute)) }
	activeAtWithdrawal := func(e *flexv1.Enrolment) { e.Status.EnrolledAt = at(t0) }

	cases := []struct {
		name        string
		site        *flexv1.Site
		override    bool
		enrolment   *flexv1.Enrolment
		eligibility *eligibility.Result
		rules       eligibility.Rules
		want        Verdict
		wantReason  string
		wantIssues  []flexv1.EligibilityIssue
	}{
		{name: "eligible, not enrolled", site: testSite(), eligibility: eligibleResult, rules: testRules(false),
			want: Allowed, wantReason: flexv1.ReasonEnrolled},
		{name: "eligible, enrolled", site: testSite(), enrolment: enrolment(), eligibility: eligibleResult, rules: testRules(false),
			want: AlreadyEnrolled, wantReason: flexv1.ReasonEnrolled},
		{name: "no site", site: nil, eligibility: eligibleResult, rules: testRules(false),
			want: SitePending, wantReason: flexv1.ReasonSiteNotFound},
		{name: "site going away", site: testSite(deleting), eligibility: eligibleResult, rules: testRules(false),
			want: SitePending, wantReason: flexv1.ReasonSiteDeleting},
		{name: "eligibility not computed", site: testSite(), rules: testRules(false),
			want: SitePending, wantReason: flexv1.ReasonEligibilityPending},
		{name: "withdrew", site: testSite(withdrawn), eligibility: eligibleResult, rules: testRules(false),
			want: PreviouslyWithdrew, wantReason: flexv1.ReasonPreviouslyWithdrew},
		{name: "withdrew, the request overrides", site: testSite(withdrawn), override: true, eligibility: eligibleResult,
			rules: testRules(false), want: Allowed},
		{name: "withdrew, the enrolment met overrides", site: testSite(withdrawn), enrolment: enrolment(overriding),
			eligibility: eligibleResult, rules: testRules(false), want: AlreadyEnrolled},
		{name: "withdrew, then an enrolment became active later: superseded", site: testSite(withdrawn),
			enrolment: enrolment(activeAfterWithdrawal), eligibility: eligibleResult, rules: testRules(false), want: AlreadyEnrolled},
		{name: "withdrew after the enrolment became active", site: testSite(withdrawn),
			enrolment: enrolment(activeBeforeWithdrawal), eligibility: eligibleResult, rules: testRules(false), want: PreviouslyWithdrew},
		{name: "withdrew in the second the enrolment became active: the withdrawal is the later act",
			site: testSite(withdrawn), enrolment: enrolment(activeAtWithdrawal), eligibility: eligibleResult,
			rules: testRules(false), want: PreviouslyWithdrew},
		{name: "withdrawal outranks the rest", site: testSite(withdrawn), eligibility: issuesResult, rules: eligibility.Rules{},
			want: PreviouslyWithdrew},
		{name: "not offered", site: testSite(), eligibility: eligibleResult, rules: eligibility.Rules{},
			want: NotOffered, wantReason: flexv1.ReasonPropositionNotOffered},
		{name: "consent required", site: testSite(), eligibility: eligibleResult, rules: testRules(true),
			want: ConsentRequired, wantReason: flexv1.ReasonConsentRequired},
		{name: "consent given", site: testSite(consented), eligibility: eligibleResult, rules: testRules(true), want: Allowed},
		{name: "consent is checked before eligibility is awaited", site: testSite(), rules: testRules(true), want: ConsentRequired},
		{name: "not eligible, with the issues", site: testSite(), eligibility: issuesResult, rules: testRules(false),
			want: NotEligible, wantReason: flexv1.ReasonNotEligible,
			wantIssues: []flexv1.EligibilityIssue{flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet}},
		{name: "not eligible: no assets", site: testSite(), eligibility: noAssetsResult, rules: testRules(false), want: NotEligible},
		{name: "enrolled but no longer eligible", site: testSite(), enrolment: enrolment(), eligibility: issuesResult,
			rules: testRules(false), want: NotEligible},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideEnrolment(EnrolmentRequest{Site: tc.site, Proposition: lp, Override: tc.override,
				Enrolment: tc.enrolment, Eligibility: tc.eligibility, Rules: tc.rules})
			if d.Verdict != tc.want {
				t.Fatalf("verdict %s (%s), want %s", d.Verdict, d.Message, tc.want)
			}
			if tc.wantReason != "" && d.Reason != tc.wantReason {
				t.Errorf("reason %s, want %s", d.Reason, tc.wantReason)
			}
			if tc.wantIssues != nil && !slices.Equal(d.Issues, tc.wantIssues) {
				t.Errorf("issues %v, want %v", d.Issues, tc.wantIssues)
			}
			if d.Message == "" {
				t.Error("no message")
			}
			if got := d.Refused(); got != (tc.want != Allowed && tc.want != AlreadyEnrolled) {
				t.Errorf("Refused() = %v", got)
			}
		})
	}
}

func TestDecisionMessages(t *testing.T) {
	d := DecideEnrolment(EnrolmentRequest{Site: testSite(withdrawn), Proposition: lp, Rules: testRules(false)})
	if want := "The household withdrew from limited_pause at 2026-03-01T10:00:00Z"; d.Message != want {
		t.Errorf("message %q, want %q", d.Message, want)
	}
	d = DecideEnrolment(EnrolmentRequest{Site: testSite(), Proposition: lp, Eligibility: issuesResult, Rules: testRules(false)})
	if want := "The site is not eligible for limited_pause: asset_model_not_set, asset_installation_date_not_set"; d.Message != want {
		t.Errorf("message %q, want %q", d.Message, want)
	}
	d = DecideEnrolment(EnrolmentRequest{Proposition: lp, Enrolment: enrolment(), Rules: testRules(false)})
	if want := `Site "home" does not exist (yet)`; d.Message != want {
		t.Errorf("message %q, want %q", d.Message, want)
	}
}
