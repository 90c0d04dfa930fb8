package app_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
)

// Offboard answers the site and its first asset and removes the household: the site, its
// assets and its enrolment, without recording a withdrawal. Its MPAN is free again: the same
// household onboards afresh as a new site.
func TestOffboard(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	onboarded, err := svc.Onboard(ctx, p, householdOf(m))
	g.Expect(err).NotTo(HaveOccurred())
	siteID := onboarded.Site.SiteID

	// Another organisation's caller finds nothing to offboard, and changes nothing.
	_, err = svc.Offboard(ctx, org(t), siteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))

	out, err := svc.Offboard(ctx, p, siteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Site).To(And(HaveField("ID", siteID), HaveField("MPAN", m)))
	g.Expect(out.Asset).NotTo(BeNil())
	g.Expect(out.Asset.ID).To(BeElementOf(onboarded.Assets[0].AssetID, onboarded.Assets[1].AssetID))
	g.Expect(out.Asset.SiteID).To(Equal(siteID))

	// The household reads as gone at once.
	_, err = svc.GetSite(ctx, p, siteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	for _, a := range onboarded.Assets {
		_, err = svc.GetAsset(ctx, p, a.AssetID)
		g.Expect(err).To(MatchError(app.ErrAssetNotFound))
	}
	_, err = svc.Enrol(ctx, p, siteID, app.EnrolInput{Proposition: flexv1.PropositionLimitedPause})
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	// And is removed, its finalizers done.
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.SiteNameForMPAN(m)}}
	eventually(g, func(g Gomega) {
		g.Expect(objects(g, ctx, p.Namespace)).To(BeEmpty())
	}).Should(Succeed())
	g.Expect(gone(ctx, site)(g)).To(BeTrue())
	_, err = svc.Offboard(ctx, p, siteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))

	again, err := svc.Onboard(ctx, p, householdOf(m))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.Site.SiteCreated).To(BeTrue())
	g.Expect(again.Site.SiteID).NotTo(Equal(siteID))
	g.Expect(again.Enrolment.Status).To(Equal(app.StatusEnrolled), "an offboard is no withdrawal")
	g.Expect(household.LastWithdrawal(stored(g, ctx, site), flexv1.PropositionLimitedPause)).To(BeNil())
}

// An MPAN is held by one site of an organisation at a time: a change of a site to the MPAN
// another holds is refused, and once that site moves to another meter point (holding it by a
// claim), a new site takes the MPAN by a claim too. An offboard releases the claim the site
// held; another organisation's sites never stand in the way.
func TestMPANClaims(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	x, y, z := mpan(), mpan(), mpan()
	first, err := svc.Onboard(ctx, p, householdOf(x))
	g.Expect(err).NotTo(HaveOccurred())
	second, err := svc.CreateSite(ctx, p, siteInput(y, "2 Other Street"))
	g.Expect(err).NotTo(HaveOccurred())

	before := objects(g, ctx, p.Namespace)
	_, err = svc.PatchSite(ctx, p, second.ID, app.SiteUpdate{MPAN: x})
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	g.Expect(app.As(err).Detail).To(ContainSubstring("belongs to another site of this organisation"))
	g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before), "nothing written")

	// Another organisation holds the same MPAN freely.
	theirs, err := svc.Onboard(ctx, org(t), householdOf(x))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(theirs.Site.SiteCreated).To(BeTrue())

	// The first site moves to z: it holds z by a claim, and x is free.
	moved, err := svc.PatchSite(ctx, p, first.Site.SiteID, app.SiteUpdate{MPAN: z})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved.MPAN).To(Equal(z))
	claimOfZ := &flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.MPANClaimName(z)}}
	g.Expect(stored(g, ctx, claimOfZ).Spec.SiteName).To(Equal(identity.SiteNameForMPAN(x)))

	// x's name is still the first site's: a new household of x is a new site holding x by a claim.
	newcomer := householdOf(x)
	for i := range newcomer.Assets {
		newcomer.Assets[i].ExternalID += "-newcomer"
	}
	renamed, err := svc.Onboard(ctx, p, newcomer)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(renamed.Site.SiteCreated).To(BeTrue())
	g.Expect(renamed.Site.SiteID).NotTo(Equal(first.Site.SiteID))
	claimOfX := &flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.MPANClaimName(x)}}
	g.Expect(stored(g, ctx, claimOfX).Spec.SiteName).NotTo(Equal(identity.SiteNameForMPAN(x)))

	// The first site offboarded, its claim of z goes with it: the second site may take z.
	_, err = svc.Offboard(ctx, p, first.Site.SiteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gone(ctx, claimOfZ)(g)).To(BeTrue(), "the offboard released the claim")
	taken, err := svc.PatchSite(ctx, p, second.ID, app.SiteUpdate{MPAN: z})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(taken.MPAN).To(Equal(z))
	claims := &flexv1.MPANClaimList{}
	g.Expect(env.Client.List(ctx, claims, client.InNamespace(p.Namespace))).To(Succeed())
	g.Expect(claims.Items).To(ContainElement(And(HaveField("Name", identity.MPANClaimName(z)),
		HaveField("Spec.SiteName", identity.SiteNameForMPAN(y)))))
}

// DeleteSite removes a site that holds nothing; one that holds assets or an enrolment is a bad
// request pointing at offboard, and stays as it was.
func TestDeleteSite(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	full, err := svc.Onboard(ctx, p, householdOf(mpan()))
	g.Expect(err).NotTo(HaveOccurred())
	empty, err := svc.CreateSite(ctx, p, siteInput(mpan(), "3 Empty Street"))
	g.Expect(err).NotTo(HaveOccurred())
	before := objects(g, ctx, p.Namespace)

	err = svc.DeleteSite(ctx, p, full.Site.SiteID)
	g.Expect(kindOf(err)).To(Equal(app.BadRequest), "%v", err)
	g.Expect(app.As(err).Detail).To(ContainSubstring("offboard"))
	g.Expect(svc.DeleteSite(ctx, org(t), empty.ID)).To(MatchError(app.ErrSiteNotFound))
	g.Expect(objects(g, ctx, p.Namespace)).To(Equal(before), "nothing deleted")

	g.Expect(svc.DeleteSite(ctx, p, empty.ID)).To(Succeed())
	_, err = svc.GetSite(ctx, p, empty.ID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	g.Expect(svc.DeleteSite(ctx, p, empty.ID)).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.GetSite(ctx, p, full.Site.SiteID)
	g.Expect(err).NotTo(HaveOccurred())
}
