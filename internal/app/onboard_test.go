package app_test

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/identity"
)

// An onboard creates the site, its assets and the enrolment in four writes, each child with
// the Site as its controller; the enrolment is made active by its controller, which decides
// as the use case did. The same onboard again writes nothing and says so.
func TestOnboard(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	in := householdOf(m)

	out, err := counted.Onboard(ctx, p, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Site).To(And(HaveField("SiteCreated", true), HaveField("FieldsUpdated", BeEmpty()),
		HaveField("SiteID", MatchRegexp(`^[0-9a-f-]{36}$`))))
	g.Expect(out.Assets).To(HaveLen(2))
	for i, a := range out.Assets {
		g.Expect(a).To(And(HaveField("ExternalID", in.Assets[i].ExternalID), HaveField("AssetCreated", true),
			HaveField("AssetID", MatchRegexp(`^[0-9a-f-]{36}$`))))
	}
	g.Expect(out.Enrolment).To(Equal(app.EnrolResult{SiteID: out.Site.SiteID, Status: app.StatusEnrolled}))
	g.Expect(writes.of(p.Namespace)).To(ConsistOf(
		"create *v1alpha1.Site "+identity.SiteNameForMPAN(m),
		"create *v1alpha1.Asset "+identity.AssetName("charger-"+m),
		"create *v1alpha1.Asset "+identity.AssetName("battery-"+m),
		"create *v1alpha1.Enrolment "+identity.EnrolmentName(identity.SiteNameForMPAN(m), flexv1.PropositionLimitedPause),
	))

	site := stored(g, ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.SiteNameForMPAN(m)}})
	g.Expect(site.Labels[flexv1.IDLabel]).To(Equal(out.Site.SiteID))
	g.Expect(site.Spec).To(And(HaveField("MPAN", m), HaveField("Postcode", "SW1A 1AA"), HaveField("Email", "resident@example.com"),
		HaveField("BoundaryMeterConsentAt", HaveField("Time", BeTemporally("==", consent)))))
	enrolment := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
		Name: identity.EnrolmentName(site.Name, flexv1.PropositionLimitedPause)}}
	for _, child := range []metav1.Object{
		stored(g, ctx, &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.AssetName("charger-" + m)}}),
		stored(g, ctx, &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.AssetName("battery-" + m)}}),
		stored(g, ctx, enrolment),
	} {
		owner := metav1.GetControllerOf(child)
		g.Expect(owner).NotTo(BeNil(), "%s has no controller", child.GetName())
		g.Expect(owner.Kind).To(Equal("Site"))
		g.Expect(owner.UID).To(Equal(site.UID))
	}
	eventually(g, func(g Gomega) {
		g.Expect(stored(g, ctx, enrolment).Status.Phase).To(Equal(flexv1.EnrolmentActive))
	}).Should(Succeed(), "the Enrolment controller decides as the use case did")

	before := len(writes.of(p.Namespace))
	again, err := counted.Onboard(ctx, p, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Site).To(And(HaveField("SiteID", out.Site.SiteID), HaveField("SiteCreated", false),
		HaveField("FieldsUpdated", BeEmpty())))
	for i, a := range again.Assets {
		g.Expect(a).To(And(HaveField("AssetID", out.Assets[i].AssetID), HaveField("AssetCreated", false),
			HaveField("FieldsUpdated", BeEmpty())))
	}
	g.Expect(again.Enrolment.Status).To(Equal(app.StatusAlreadyEnrolled))
	g.Expect(writes.of(p.Namespace)[before:]).To(BeEmpty(), "the same onboard again writes nothing")

	// A change is merged in, naming exactly the fields it changed.
	changed := householdOf(m)
	changed.Site.Email = ptr.To("new@example.com")
	changed.Site.Consent = nil // not sent: kept
	changed.Assets[1].Model = ptr.To("givenergy_all_in_one")
	merged, err := svc.Onboard(ctx, p, changed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(merged.Site.FieldsUpdated).To(ConsistOf("email"))
	g.Expect(merged.Assets[0].FieldsUpdated).To(BeEmpty())
	g.Expect(merged.Assets[1].FieldsUpdated).To(ConsistOf("asset_model"))
	site = stored(g, ctx, site)
	g.Expect(site.Spec.Email).To(Equal("new@example.com"))
	g.Expect(site.Spec.BoundaryMeterConsentAt).NotTo(BeNil(), "a field not sent keeps its stored value")

	// The other use-case packages read the site by its id: the cache first, or the cache alone.
	read, err := svc.SiteToRead(ctx, p, out.Site.SiteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read.Name).To(Equal(site.Name))
	read, err = svc.SiteInCache(ctx, p, out.Site.SiteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read.Name).To(Equal(site.Name))
	theirs := org(t)
	_, err = svc.SiteToRead(ctx, theirs, out.Site.SiteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.SiteInCache(ctx, theirs, out.Site.SiteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
}

// Every refusal of an onboard leaves the organisation's objects as they were.
func TestOnboardRefusals(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	held := mpan()
	_, err := svc.Onboard(ctx, p, householdOf(held))
	g.Expect(err).NotTo(HaveOccurred())
	before := objects(g, ctx, p.Namespace)

	m := mpan()
	for _, c := range []struct {
		name  string
		in    func() app.OnboardInput
		kind  app.Kind
		code  string
		check func(g *WithT, e *app.Error)
	}{
		{name: "an asset registered to another site", kind: app.Conflict, in: func() app.OnboardInput {
			in := householdOf(m)
			in.Assets[0].ExternalID = "charger-" + held
			return in
		}, check: func(g *WithT, e *app.Error) {
			g.Expect(e.Detail).To(And(HaveField("ExternalID", "charger-"+held),
				HaveField("ExistingAssetID", MatchRegexp(`^[0-9a-f-]{36}$`)), HaveField("Message", ContainSubstring("different site"))))
		}},
		{name: "an asset of another type than stored", kind: app.Conflict, in: func() app.OnboardInput {
			in := householdOf(held)
			in.Assets[0].Type = flexv1.AssetTypeBattery
			return in
		}},
		{name: "a site eligible for nothing", kind: app.Refused, code: "prerequisites_not_met", in: func() app.OnboardInput {
			return app.OnboardInput{UpsertInput: bareBattery(m), Proposition: flexv1.PropositionLimitedPause}
		}, check: func(g *WithT, e *app.Error) {
			refusal, ok := e.Detail.(app.Refusal)
			g.Expect(ok).To(BeTrue(), "%T", e.Detail)
			g.Expect(refusal.Message).To(ContainSubstring("asset_model_not_set"))
			g.Expect(refusal.Eligibility.EligiblePropositions).To(BeEmpty())
			g.Expect(refusal.Eligibility.Assets).To(HaveLen(1))
		}},
		{name: "no consent where the proposition needs it", kind: app.BadRequest, code: "consent_required", in: func() app.OnboardInput {
			in := householdOf(m)
			in.Site.Consent = nil
			in.Proposition = flexv1.PropositionFullAssetScheduleControl
			return in
		}},
		{name: "a proposition not offered", kind: app.Refused, code: "proposition_not_offered", in: func() app.OnboardInput {
			in := householdOf(m)
			in.Proposition = "free_money"
			return in
		}},
		{name: "an unknown asset model", kind: app.NotFound, in: func() app.OnboardInput {
			in := householdOf(m)
			in.Assets[0].Model = ptr.To("no-such-model")
			return in
		}},
		{name: "an invalid email", kind: app.BadRequest, in: func() app.OnboardInput {
			in := householdOf(m)
			in.Site.Email = ptr.To("not an email")
			return in
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := svc.Onboard(ctx, p, c.in())
			var e *app.Error
			g.Expect(errors.As(err, &e)).To(BeTrue(), "%v", err)
			g.Expect(e.Kind).To(Equal(c.kind), "%v", err)
			g.Expect(e.Code).To(Equal(c.code))
			if c.check != nil {
				c.check(g, e)
			}
			g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before), "nothing written")
		})
	}
}

// A household that withdrew from a proposition is refused an onboard into it, unless the
// request overrides the withdrawal.
func TestOnboardAfterWithdrawal(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	out, err := svc.Onboard(ctx, p, householdOf(m))
	g.Expect(err).NotTo(HaveOccurred())
	un, err := svc.Unenrol(ctx, p, out.Site.SiteID, flexv1.PropositionLimitedPause)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(un.Status).To(Equal(app.StatusUnenrolled))
	enrolment := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace,
		Name: identity.EnrolmentName(identity.SiteNameForMPAN(m), flexv1.PropositionLimitedPause)}}
	eventually(g, gone(ctx, enrolment)).Should(BeTrue(), "its finalizer lets the enrolment go")
	before := objects(g, ctx, p.Namespace)

	_, err = svc.Onboard(ctx, p, householdOf(m))
	g.Expect(kindOf(err)).To(Equal(app.Refused), "%v", err)
	g.Expect(codeOf(err)).To(Equal("previously_withdrew"))
	g.Expect(app.As(err).Detail).To(HaveField("Eligibility.SiteID", out.Site.SiteID))
	g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before))

	override := householdOf(m)
	override.Override = true
	again, err := svc.Onboard(ctx, p, override)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Enrolment.Status).To(Equal(app.StatusEnrolled))
	g.Expect(stored(g, ctx, enrolment).Spec.OverrideWithdrawal).To(BeTrue())
}

// Initialise stores the site and its assets, answers their eligibility and enrols nothing.
func TestInitialise(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	out, err := svc.Initialise(ctx, p, householdOf(m).UpsertInput)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Site.SiteCreated).To(BeTrue())
	g.Expect(out.Assets).To(HaveLen(2))
	g.Expect(out.Eligibility).To(And(HaveField("SiteID", out.Site.SiteID),
		HaveField("EligiblePropositions", ContainElement(flexv1.PropositionLimitedPause))))
	enrolments := &flexv1.EnrolmentList{}
	g.Expect(env.Client.List(ctx, enrolments, client.InNamespace(p.Namespace))).To(Succeed())
	g.Expect(enrolments.Items).To(BeEmpty(), "initialise enrols nothing")
}
