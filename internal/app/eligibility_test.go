package app_test

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/household"
)

// The eligibility read answers the Site controller's evaluation once it is current: straight
// after a write it waits for the controller's next status rather than answer the old one. An
// ineligible site is answered with its reasons; a change of an asset is answered by the very
// next read; the encoded answer is the record's encoding, kept for the next read.
func TestEligibility(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	m := mpan()
	init, err := svc.Initialise(ctx, p, bareBattery(m))
	g.Expect(err).NotTo(HaveOccurred())
	siteID := init.Site.SiteID

	rec, err := svc.Eligibility(ctx, p, siteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.SiteID).To(Equal(siteID))
	g.Expect(rec.SiteProperties).To(Equal(app.SitePropertiesRecord{HasMeterConsent: true}))
	g.Expect(rec.EligiblePropositions).To(BeEmpty())
	g.Expect(rec.Assets).To(HaveLen(1))
	asset := rec.Assets[0]
	g.Expect(asset.ExternalID).To(Equal("bare-" + m))
	g.Expect(asset.Propositions).To(HaveLen(len(flexv1.AllPropositions)))
	for _, pe := range asset.Propositions {
		g.Expect(pe.IsEligible).To(BeFalse())
		g.Expect(pe.Issues).To(ContainElement(flexv1.EligibilityIssue("asset_model_not_set")), "%s", pe.Proposition)
	}
	g.Expect(init.Eligibility).To(Equal(rec), "initialise's answer and the controller's evaluation agree")

	// The asset given a qualified model and its installation date: the next read answers it.
	_, err = svc.UpdateAsset(ctx, p, asset.AssetID, household.AssetFields{Model: ptr.To("givenergy_all_in_one"),
		InstallationDate: ptr.To("2025-06-15")})
	g.Expect(err).NotTo(HaveOccurred())
	rec, err = svc.Eligibility(ctx, p, siteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rec.EligiblePropositions).To(ContainElement(flexv1.PropositionLimitedPause))

	body, err := svc.EligibilityJSON(ctx, p, siteID)
	g.Expect(err).NotTo(HaveOccurred())
	want, err := json.Marshal(rec)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).To(MatchJSON(want))
	kept, err := svc.EligibilityJSON(ctx, p, siteID)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(kept).To(Equal(body))

	// A site of another organisation, or none, is not found.
	_, err = svc.Eligibility(ctx, org(t), siteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.EligibilityJSON(ctx, org(t), siteID)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.Eligibility(ctx, p, "00000000-0000-4000-8000-000000000000")
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
}

// check-eligibility answers what a prospective site would be eligible for, storing nothing;
// an unknown model is not found.
func TestCheckEligibility(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	out, err := svc.CheckEligibility(ctx, p, mpan(), "zappi")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.IsHalfHourlySettled).To(BeFalse())
	g.Expect(out.Propositions).To(HaveLen(len(flexv1.AllPropositions)))
	g.Expect(out.Propositions).To(ContainElement(And(HaveField("Proposition", flexv1.PropositionLimitedPause),
		HaveField("IsEligible", true))))
	_, err = svc.CheckEligibility(ctx, p, mpan(), "no-such-model")
	g.Expect(kindOf(err)).To(Equal(app.NotFound), "%v", err)
	page, err := svc.ListSites(ctx, p, app.SiteFilter{}, app.Paging{Limit: 10})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(page.Sites).To(BeEmpty(), "nothing stored")
}
