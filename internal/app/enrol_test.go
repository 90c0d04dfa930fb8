package app_test

import (
	"context"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
)

// Enrol enrols once (the enrolment is made active by its controller, which decides as the use
// case did) and says so when it is enrolled already; unenrol records the withdrawal on the site
// and the enrolment goes; a re-enrol is then refused unless it overrides the withdrawal.
func TestEnrolAndUnenrol(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	init, err := svc.Initialise(ctx, p, householdOf(m).UpsertInput)
	g.Expect(err).NotTo(HaveOccurred())
	siteID := init.Site.SiteID
	siteName := identity.SiteNameForMPAN(m)
	enrolment := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
		Name: identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)}}
	limitedPause := app.EnrolInput{Proposition: flexv1.PropositionLimitedPause}

	out, err := svc.Enrol(ctx, p, siteID, limitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(app.EnrolResult{SiteID: siteID, Status: app.StatusEnrolled}))
	g.Expect(stored(g, ctx, enrolment).Spec).To(Equal(flexv1.EnrolmentSpec{SiteName: siteName,
		Proposition: flexv1.PropositionLimitedPause}))
	eventually(g, func(g Gomega) {
		g.Expect(stored(g, ctx, enrolment).Status.Phase).To(Equal(flexv1.EnrolmentActive))
	}).Should(Succeed(), "decided once: the Enrolment controller agrees with the use case")

	out, err = svc.Enrol(ctx, p, siteID, limitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusAlreadyEnrolled))

	out, err = svc.Unenrol(ctx, p, siteID, flexv1.PropositionLimitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(app.EnrolResult{SiteID: siteID, Status: app.StatusUnenrolled}))
	site := stored(g, ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: siteName}})
	g.Expect(household.LastWithdrawal(site, flexv1.PropositionLimitedPause)).NotTo(BeNil(), "the withdrawal is on record")
	out, err = svc.Unenrol(ctx, p, siteID, flexv1.PropositionLimitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusAlreadyUnenrolled))

	// Straight after the unenrol answered: the withdrawal is already on record.
	_, err = svc.Enrol(ctx, p, siteID, limitedPause)
	g.Expect(kindOf(err)).To(Equal(app.Refused), "%v", err)
	g.Expect(codeOf(err)).To(Equal("previously_withdrew"))
	refusal := app.As(err).Detail.(app.Refusal)
	g.Expect(refusal.Eligibility.SiteID).To(Equal(siteID))
	g.Expect(refusal.Eligibility.EligiblePropositions).To(ContainElement(flexv1.PropositionLimitedPause))
	eventually(g, gone(ctx, enrolment)).Should(BeTrue())

	out, err = svc.Enrol(ctx, p, siteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause, Override: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusEnrolled))
	g.Expect(stored(g, ctx, enrolment).Spec.OverrideWithdrawal).To(BeTrue())
	eventually(g, func(g Gomega) {
		g.Expect(stored(g, ctx, enrolment).Status.Phase).To(Equal(flexv1.EnrolmentActive))
	}).Should(Succeed(), "the override is honoured by the controller too")
}

// An enrolment the household's rules do not allow is refused with its code, and nothing is
// written; consent sent with the enrolment is stored with it.
func TestEnrolRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	noConsent := householdOf(mpan()).UpsertInput
	noConsent.Site.Consent = nil
	eligible, err := svc.Initialise(ctx, p, noConsent)
	g.Expect(err).NotTo(HaveOccurred())
	ineligible, err := svc.Initialise(ctx, p, bareBattery(mpan()))
	g.Expect(err).NotTo(HaveOccurred())
	before := objects(g, ctx, p.Namespace)

	_, err = svc.Enrol(ctx, p, eligible.Site.SiteID, app.EnrolInput{Proposition: "free_money"})
	g.Expect(kindOf(err)).To(Equal(app.Refused), "%v", err)
	g.Expect(codeOf(err)).To(Equal("proposition_not_offered"))

	_, err = svc.Enrol(ctx, p, ineligible.Site.SiteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause})
	g.Expect(kindOf(err)).To(Equal(app.Refused), "%v", err)
	g.Expect(codeOf(err)).To(Equal("prerequisites_not_met"))
	refusal := app.As(err).Detail.(app.Refusal)
	g.Expect(refusal.Message).To(ContainSubstring("asset_model_not_set"))
	g.Expect(refusal.Eligibility).To(And(HaveField("SiteID", ineligible.Site.SiteID),
		HaveField("EligiblePropositions", BeEmpty()), HaveField("Assets", HaveLen(1))))

	full := app.EnrolInput{Proposition: flexv1.PropositionFullAssetScheduleControl}
	_, err = svc.Enrol(ctx, p, eligible.Site.SiteID, full)
	g.Expect(kindOf(err)).To(Equal(app.BadRequest), "%v", err)
	g.Expect(codeOf(err)).To(Equal("consent_required"))

	_, err = svc.Enrol(ctx, p, "00000000-0000-4000-8000-000000000000", app.EnrolInput{Proposition: flexv1.PropositionLimitedPause})
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.Unenrol(ctx, p, "00000000-0000-4000-8000-000000000000", flexv1.PropositionLimitedPause)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before), "nothing written")

	// The consent sent with the enrolment is stored with it.
	given := time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)
	full.Consent = ptr.To(given)
	out, err := svc.Enrol(ctx, p, eligible.Site.SiteID, full)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusEnrolled))
	site := stored(g, ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
		Name: identity.SiteNameForMPAN(noConsent.Site.MPAN)}})
	g.Expect(site.Spec.BoundaryMeterConsentAt).To(HaveField("Time", BeTemporally("==", given)))
}

// An enrolment declared outside the API (GitOps, under another name) is the site's
// enrolment: enrol answers already_enrolled without a second one, and unenrol removes it,
// recording the withdrawal on the site.
func TestEnrolmentDeclaredOutside(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	init, err := svc.Initialise(ctx, p, householdOf(m).UpsertInput)
	g.Expect(err).NotTo(HaveOccurred())
	declared := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: "declared-by-gitops"},
		Spec: flexv1.EnrolmentSpec{SiteName: identity.SiteNameForMPAN(m), Proposition: flexv1.PropositionLimitedPause}}
	g.Expect(env.Client.Create(ctx, declared)).To(Succeed())
	// The use case reads enrolments from the cache: the declared one must have reached it, as a
	// declaration made a moment ago has in production once its watch event arrives.
	eventually(g, func(g Gomega) {
		g.Expect(svc.Cache.Get(ctx, client.ObjectKeyFromObject(declared), &flexv1.Enrolment{})).To(Succeed())
	}).Should(Succeed())

	out, err := svc.Enrol(ctx, p, init.Site.SiteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusAlreadyEnrolled))
	list := &flexv1.EnrolmentList{}
	g.Expect(env.Client.List(ctx, list, client.InNamespace(p.Namespace))).To(Succeed())
	g.Expect(list.Items).To(ConsistOf(HaveField("Name", declared.Name)))

	out, err = svc.Unenrol(ctx, p, init.Site.SiteID, flexv1.PropositionLimitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusUnenrolled))
	site := stored(g, ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.SiteNameForMPAN(m)}})
	g.Expect(household.LastWithdrawal(site, flexv1.PropositionLimitedPause)).NotTo(BeNil(), "the withdrawal is on record")
	eventually(g, gone(ctx, declared)).Should(BeTrue())
}

// A re-enrol sent while the withdrawn enrolment is still on its way out (held by a finalizer
// of another tool, or a backlogged controller) is refused for the withdrawal on record at
// once, not answered "retry" for as long as the enrolment lingers; one that overrides the
// withdrawal waits for it to go (told to come back while it lingers), and then enrols anew.
func TestReenrolWhileTheWithdrawnEnrolmentLingers(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	out, err := svc.Onboard(ctx, p, householdOf(m))
	g.Expect(err).NotTo(HaveOccurred())
	siteID := out.Site.SiteID
	enrolment := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
		Name: identity.EnrolmentName(identity.SiteNameForMPAN(m), flexv1.PropositionLimitedPause)}}
	const hold = "example.com/hold"
	eventually(g, func(g Gomega) {
		e := stored(g, ctx, enrolment)
		g.Expect(e.Status.Phase).To(Equal(flexv1.EnrolmentActive))
		e.Finalizers = append(e.Finalizers, hold)
		g.Expect(env.Client.Update(ctx, e)).To(Succeed())
	}).Should(Succeed())
	release := func(ctx context.Context) error {
		e := enrolment.DeepCopy()
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(e), e); err != nil {
			return client.IgnoreNotFound(err)
		}
		e.Finalizers = slices.DeleteFunc(e.Finalizers, func(f string) bool { return f == hold })
		return env.Client.Update(ctx, e)
	}
	t.Cleanup(func() { _ = release(context.Background()) })

	un, err := svc.Unenrol(ctx, p, siteID, flexv1.PropositionLimitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(un.Status).To(Equal(app.StatusUnenrolled))
	eventually(g, func(g Gomega) {
		e := stored(g, ctx, enrolment.DeepCopy())
		g.Expect(e.DeletionTimestamp).NotTo(BeNil())
		g.Expect(e.Finalizers).To(Equal([]string{hold}), "the Enrolment controller has let it go; only the other tool holds it")
	}).Should(Succeed())

	_, err = svc.Enrol(ctx, p, siteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause})
	g.Expect(kindOf(err)).To(Equal(app.Refused), "%v", err)
	g.Expect(codeOf(err)).To(Equal("previously_withdrew"))
	_, err = svc.Onboard(ctx, p, householdOf(m))
	g.Expect(codeOf(err)).To(Equal("previously_withdrew"), "%v", err)
	// Overriding the withdrawal, the request waits for the old enrolment to go: here it
	// lingers past the request's retries, and the caller is told to come back.
	_, err = svc.Enrol(ctx, p, siteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause, Override: true})
	g.Expect(kindOf(err)).To(Equal(app.Unavailable), "%v", err)
	g.Expect(app.As(err).RetryAfter).NotTo(BeEmpty())

	eventually(g, func() error { return release(ctx) }).Should(Succeed())
	eventually(g, gone(ctx, enrolment.DeepCopy())).Should(BeTrue())
	again, err := svc.Enrol(ctx, p, siteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause, Override: true})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Status).To(Equal(app.StatusEnrolled))
}

// A claim left by a request that failed after the Enrolment webhook claimed its enrolment
// (pending for a minute: its enrolment is not stored) names the enrolment the API would make:
// the next enrol is not told to retry for that minute, it makes that enrolment, whose
// admission meets the claim as its own.
func TestEnrolPastALeftClaimOfItsOwnName(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	init, err := svc.Initialise(ctx, p, householdOf(m).UpsertInput)
	g.Expect(err).NotTo(HaveOccurred())
	siteName := identity.SiteNameForMPAN(m)
	g.Expect(env.Client.Create(ctx, &flexv1.EnrolmentClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.EnrolmentClaimName(siteName, flexv1.PropositionLimitedPause)},
		Spec:       flexv1.EnrolmentClaimSpec{EnrolmentName: identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)},
	})).To(Succeed())

	out, err := svc.Enrol(ctx, p, init.Site.SiteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Status).To(Equal(app.StatusEnrolled))
}
