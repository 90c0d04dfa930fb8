package app_test

import (
	"context"
	"errors"
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

// errConnection is a write that failed without saying whether it was made.
var errConnection = errors.New("connection reset by peer")

// failEnrolments fails every enrolment a request creates, as a dropped connection would.
func failEnrolments(verb string, obj client.Object) error {
	if _, ok := obj.(*flexv1.Enrolment); ok && verb == "create" {
		return errConnection
	}
	return nil
}

// A write that fails half-way through an onboard undoes the request's other writes: a new
// household leaves nothing behind, and an existing one is put back as it was (its changed
// site restored, its new asset deleted).
func TestFailedOnboardIsUndone(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	_, err := svc.Onboard(ctx, p, householdOf(m))
	g.Expect(err).NotTo(HaveOccurred())
	before := objects(g, ctx, p.Namespace)
	writes.failing(t, failEnrolments)

	_, err = counted.Onboard(ctx, p, householdOf(mpan()))
	g.Expect(err).To(MatchError(errConnection))
	g.Expect(kindOf(err)).To(Equal(app.Internal))

	changed := householdOf(m)
	changed.Site.Email = ptr.To("changed@example.com")
	changed.Assets = append(changed.Assets, app.AssetInput{ExternalID: "second-charger-" + m, Type: flexv1.AssetTypeCharger,
		AssetFields: household.AssetFields{Model: ptr.To("zappi"), InstallationDate: ptr.To("2025-06-15"), PowerKW: ptr.To(7.4)}})
	changed.Proposition = flexv1.PropositionPriceCurve
	_, err = counted.Onboard(ctx, p, changed)
	g.Expect(err).To(MatchError(errConnection))
	g.Expect(writes.of(p.Namespace)).To(ContainElements(
		"patch *v1alpha1.Site "+identity.SiteNameForMPAN(m),
		"create *v1alpha1.Asset "+identity.AssetName("second-charger-"+m)), "the request wrote before its enrolment failed")

	eventually(g, func(g Gomega) {
		g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before))
	}).Should(Succeed(), "every write undone")
}

// The deprecated onboard creates one site and one asset, records the dispatch consent (and
// the capacity market's), and enrols the site in the propositions among the methods; it is no
// upsert: the same request again, an existing site with a new asset, or an asset used
// elsewhere is a conflict that changes nothing.
func TestLegacyOnboard(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	legacy := func(m, externalID string) app.LegacyOnboardInput {
		site := siteInput(m, "1 Legacy Lane")
		site.Email = ptr.To("legacy@example.com")
		return app.LegacyOnboardInput{Site: site,
			Asset: app.AssetInput{ExternalID: externalID, Type: flexv1.AssetTypeCharger,
				AssetFields: household.AssetFields{PowerKW: ptr.To(7.0), CapacityKWh: ptr.To(0.5)}},
			DispatchMethods: []flexv1.DispatchMethod{"limited_pause", "cm_infrequent_dispatch", "limited_pause"}}
	}

	out, err := svc.LegacyOnboard(ctx, p, legacy(m, "legacy-1-"+m))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Site.ID).To(MatchRegexp(`^[0-9a-f-]{36}$`))
	g.Expect(out.Site).To(And(HaveField("MPAN", m), HaveField("Address", "1 Legacy Lane"),
		HaveField("AssetIDs", Equal([]string{out.Asset.ID})), HaveField("Markets", Equal([]flexv1.Market{"cm"})),
		HaveField("DispatchMethods", ConsistOf(flexv1.DispatchMethod("cm_infrequent_dispatch"), flexv1.DispatchMethod("limited_pause"))),
		HaveField("BoundaryMeterConsentAt", BeNil())))
	g.Expect(out.Asset).To(And(HaveField("ExternalID", "legacy-1-"+m), HaveField("Type", flexv1.AssetTypeCharger),
		HaveField("SiteID", out.Site.ID), HaveField("Properties.PowerKW", HaveValue(Equal(7.0))),
		HaveField("Properties.CapacityKWh", HaveValue(Equal(0.5)))))
	enrolments := &flexv1.EnrolmentList{}
	g.Expect(env.Client.List(ctx, enrolments, client.InNamespace(p.Namespace))).To(Succeed())
	g.Expect(enrolments.Items).To(ConsistOf(HaveField("Spec", flexv1.EnrolmentSpec{SiteName: identity.SiteNameForMPAN(m),
		Proposition: flexv1.PropositionLimitedPause})))

	before := objects(g, ctx, p.Namespace)
	for name, in := range map[string]app.LegacyOnboardInput{
		"the same request":                legacy(m, "legacy-1-"+m),
		"an existing site, a new asset":   legacy(m, "legacy-2-"+m),
		"a new site, an asset used there": legacy(mpan(), "legacy-1-"+m),
	} {
		_, err := svc.LegacyOnboard(ctx, p, in)
		g.Expect(kindOf(err)).To(Equal(app.Conflict), "%s: %v", name, err)
	}
	bad := legacy(mpan(), "legacy-3-"+m)
	bad.Site.Email = ptr.To("not an email")
	_, err = svc.LegacyOnboard(ctx, p, bad)
	g.Expect(kindOf(err)).To(Equal(app.BadRequest), "%v", err)
	g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before), "nothing written")
}

// A site's boundary meter consent and its dispatch consent are changed by their own use
// cases, which answer the site record; another organisation's site is not found.
func TestConsents(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	site, err := svc.CreateSite(ctx, p, siteInput(m, "4 Consent Close"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(site.BoundaryMeterConsentAt).To(BeNil())
	storedSite := func(g Gomega) *flexv1.Site {
		return stored(g, ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.SiteNameForMPAN(m)}})
	}

	given := time.Date(2026, 2, 1, 9, 0, 0, 0, time.UTC)
	rec, err := svc.MeterConsent(ctx, p, site.ID, given)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.BoundaryMeterConsentAt).To(HaveValue(Equal("2026-02-01T09:00:00Z")))
	g.Expect(storedSite(g).Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", given))

	rec, err = svc.ChangeDispatch(ctx, p, site.ID, household.ConsentDispatch,
		[]flexv1.DispatchMethod{"limited_pause", "cm_infrequent_dispatch"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.DispatchMethods).To(Equal([]flexv1.DispatchMethod{"limited_pause", "cm_infrequent_dispatch"}))
	rec, err = svc.ChangeDispatch(ctx, p, site.ID, household.DeconsentDispatch, []flexv1.DispatchMethod{"limited_pause"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.DispatchMethods).To(Equal([]flexv1.DispatchMethod{"cm_infrequent_dispatch"}))
	g.Expect(storedSite(g).Spec.DispatchMethods).To(Equal([]flexv1.DispatchMethod{"cm_infrequent_dispatch"}))

	theirs := org(t)
	_, err = svc.MeterConsent(ctx, theirs, site.ID, given)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.ChangeDispatch(ctx, theirs, site.ID, household.ConsentDispatch, []flexv1.DispatchMethod{"limited_pause"})
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.PatchSite(ctx, theirs, site.ID, app.SiteUpdate{Fields: household.SiteFields{Email: ptr.To("x@example.com")}})
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	g.Expect(storedSite(g).Spec.Email).To(BeEmpty())
}

// An onboard cut off half-way (its enrolment and its undoing both failing, as when the
// process dies) leaves a site marked as still being written: deleting it is refused while the
// marker binds, even once its assets are deleted (each released from the marker first, so
// that the Site controller does not wait for them); offboard removes it all.
func TestInterruptedOnboard(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	writes.failing(t, func(verb string, obj client.Object) error {
		if verb == "delete" || verb == "patch" {
			return errConnection
		}
		return failEnrolments(verb, obj)
	})
	_, err := counted.Onboard(ctx, p, householdOf(m))
	g.Expect(err).To(MatchError(errConnection))
	site := stored(g, ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.SiteNameForMPAN(m)}})
	g.Expect(site.Annotations).To(HaveKey(flexv1.InFlightAnnotation), "the site is marked as being written")
	siteID := site.Labels[flexv1.IDLabel]

	// The Site controller publishes nothing about a half-written site: a read of its
	// eligibility waits, and past its wait (here the caller's, a second) is told to come back.
	waiting, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err = svc.Eligibility(waiting, p, siteID)
	g.Expect(err).To(MatchError(app.ErrEligibilityPending))
	g.Expect(app.As(err)).To(And(HaveField("Kind", app.Unavailable), HaveField("RetryAfter", Not(BeEmpty()))))

	for _, externalID := range []string{"charger-" + m, "battery-" + m} {
		asset, err := svc.GetAssetByExternalID(ctx, p, externalID)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(svc.DeleteAsset(ctx, p, asset.ID)).To(Succeed())
		marker := stored(g, ctx, site.DeepCopy()).Annotations[flexv1.InFlightAnnotation]
		g.Expect(marker).NotTo(ContainSubstring(identity.AssetName(externalID)), "released from the marker")
	}
	err = svc.DeleteSite(ctx, p, siteID)
	g.Expect(kindOf(err)).To(Equal(app.BadRequest), "%v", err)
	g.Expect(app.As(err).Detail).To(ContainSubstring("an onboarding still in progress"))

	_, err = svc.Offboard(ctx, p, siteID)
	g.Expect(err).NotTo(HaveOccurred())
	eventually(g, func(g Gomega) {
		g.Expect(objects(g, ctx, p.Namespace)).To(BeEmpty())
	}).Should(Succeed())
}
