package app_test

import (
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/household"
)

// A site created is read back and found by its MPAN; an asset added to it is read by its id and
// its external id, listed, and deleted.
func TestSitesAndAssets(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	site, err := svc.CreateSite(ctx, p, siteInput(m, "1 High Street"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(site.ID).NotTo(BeEmpty())
	g.Expect(site.MPAN).To(Equal(m))
	got, err := svc.GetSite(ctx, p, site.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.ID).To(Equal(site.ID))
	g.Expect(got.Postcode).To(Equal("SW1A 1AA"))
	page, err := svc.ListSites(ctx, p, app.SiteFilter{MPAN: m}, app.Paging{Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Sites).To(ConsistOf(HaveField("ID", site.ID)))

	// The same MPAN, or the same address, is the existing site's conflict.
	_, err = svc.CreateSite(ctx, p, siteInput(m, "2 High Street"))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	_, err = svc.CreateSite(ctx, p, siteInput(mpan(), "1 High Street"))
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)

	a, err := svc.CreateAsset(ctx, p, site.ID, app.AssetInput{ExternalID: "ext-1", Type: flexv1.AssetTypeBattery,
		AssetFields: household.AssetFields{PowerKW: ptr.To(5.0), CapacityKWh: ptr.To(13.5)}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).To(And(HaveField("SiteID", site.ID), HaveField("ExternalID", "ext-1"),
		HaveField("Type", flexv1.AssetTypeBattery)))
	byID, err := svc.GetAsset(ctx, p, a.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byID).To(Equal(a))
	byExternal, err := svc.GetAssetByExternalID(ctx, p, "ext-1")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byExternal.ID).To(Equal(a.ID))
	// Read-only, it is the cached object itself: no copy a read.
	toRead, err := svc.AssetToRead(ctx, p, a.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(toRead.Labels).To(HaveKeyWithValue(flexv1.IDLabel, a.ID))
	g.Expect(toRead.Spec.ExternalID).To(Equal("ext-1"))
	again, err := svc.AssetToRead(ctx, p, a.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(toRead))
	assets, err := svc.ListAssets(ctx, p, app.Paging{Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(assets.Assets).To(ConsistOf(HaveField("ID", a.ID)))
	g.Expect(assets.TotalNumAssets).To(Equal(1))

	updated, err := svc.UpdateAsset(ctx, p, a.ID, household.AssetFields{PowerKW: ptr.To(3.6)})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(updated.Properties.PowerKW).To(Equal(ptr.To(3.6)))

	g.Expect(svc.DeleteAsset(ctx, p, a.ID)).To(Succeed())
	_, err = svc.GetAsset(ctx, p, a.ID)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = svc.AssetToRead(ctx, p, a.ID)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
}

// An input that breaks a rule the use case holds (the door has read and checked the rest) is
// refused, with nothing written.
func TestInvalidInput(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	in := siteInput(mpan(), "3 High Street")
	in.Email = ptr.To("not an address")
	_, err := svc.CreateSite(ctx, p, in)
	g.Expect(kindOf(err)).To(Equal(app.BadRequest), "%v", err)
	page, err := svc.ListSites(ctx, p, app.SiteFilter{}, app.Paging{Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Sites).To(BeEmpty())

	site, err := svc.CreateSite(ctx, p, siteInput(mpan(), "4 High Street"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = svc.CreateAsset(ctx, p, site.ID, app.AssetInput{ExternalID: "ext-neg", Type: flexv1.AssetTypeBattery,
		AssetFields: household.AssetFields{PowerKW: ptr.To(-5.0), CapacityKWh: ptr.To(13.5)}})
	// The door refuses it first (422); past it, the CRD's rule is the last guard: a refused change.
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	_, err = svc.GetAssetByExternalID(ctx, p, "ext-neg")
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
}

// Another organisation's sites and assets are not found, whatever is asked of them; a
// household's token reaches its own site only.
func TestAnotherOrganisationsAreNotFound(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	mine, theirs := org(t), org(t)
	m := mpan()
	site, err := svc.CreateSite(ctx, theirs, siteInput(m, "5 High Street"))
	g.Expect(err).NotTo(HaveOccurred())
	a, err := svc.CreateAsset(ctx, theirs, site.ID, app.AssetInput{ExternalID: "ext-theirs", Type: flexv1.AssetTypeCharger,
		AssetFields: household.AssetFields{PowerKW: ptr.To(7.4)}})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = svc.GetSite(ctx, mine, site.ID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.CreateAsset(ctx, mine, site.ID, app.AssetInput{ExternalID: "ext-mine", Type: flexv1.AssetTypeCharger,
		AssetFields: household.AssetFields{PowerKW: ptr.To(7.4)}})
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.GetAsset(ctx, mine, a.ID)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = svc.AssetToRead(ctx, mine, a.ID)
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = svc.GetAssetByExternalID(ctx, mine, "ext-theirs")
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	_, err = svc.UpdateAsset(ctx, mine, a.ID, household.AssetFields{PowerKW: ptr.To(1.0)})
	g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	g.Expect(svc.DeleteAsset(ctx, mine, a.ID)).To(MatchError(app.ErrAssetNotFound))
	page, err := svc.ListSites(ctx, mine, app.SiteFilter{MPAN: m}, app.Paging{Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Sites).To(BeEmpty())
	assets, err := svc.ListAssets(ctx, mine, app.Paging{Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(assets.Assets).To(BeEmpty())
	// The same MPAN is free in another organisation.
	_, err = svc.CreateSite(ctx, mine, siteInput(m, "5 High Street"))
	g.Expect(err).NotTo(HaveOccurred())

	// Theirs is untouched.
	got, err := svc.GetAsset(ctx, theirs, a.ID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Properties.PowerKW).To(Equal(ptr.To(7.4)))
}
