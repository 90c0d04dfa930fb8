package app_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/identity"
)

// endUser is the principal of the end user whose household is the organisation's site
// siteName, as their token names them.
func endUser(g *WithT, t *testing.T, p *auth.Principal, siteName string) *auth.Principal {
	site := stored(g, t.Context(), &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: siteName}})
	return &auth.Principal{Kind: auth.KindEndUser, Namespace: p.Namespace, ClientName: p.ClientName, Username: p.Username,
		SiteName: site.Name, UserID: site.Annotations[flexv1.UserIDAnnotation]}
}

// An end user's token creates their household on the first call (with consent) and finds it
// on the next; the household onboarded by the organisation under the same external user id
// is the one the end user reads, with its assets, enrolments and eligibility.
func TestEndUser(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := org(t)
	g.Expect(env.Client.Create(ctx, &flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.ClientName},
		Spec: flexv1.APIClientSpec{Username: p.Username,
			PasswordHashSecretRef: flexv1.SecretKeyRef{Name: "client-password", Key: "hash"},
			RedirectSchemes:       []string{"com.example.app"}}})).To(Succeed())
	in := app.EndUserInput{ExternalUserID: "user-1", AllowedOrigin: "https://example.com"}

	// The API client reaches the cache a moment after its creation.
	eventually(g, func(g Gomega) {
		_, err := svc.IssueEndUserToken(ctx, p, in)
		g.Expect(kindOf(err)).To(Equal(app.Invalid), "a new end user without consent: %v", err)
		g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"body", "gave_boundary_meter_consent_at"})))
	}).Should(Succeed())

	in.Consent = ptr.To(consent)
	token, err := svc.IssueEndUserToken(ctx, p, in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(token.SiteID).To(MatchRegexp(`^[0-9a-f-]{36}$`))
	g.Expect(token.AccessToken).NotTo(BeEmpty())
	again, err := svc.IssueEndUserToken(ctx, p, app.EndUserInput{ExternalUserID: "user-1", AllowedOrigin: "https://example.com"})
	g.Expect(err).NotTo(HaveOccurred(), "a known end user needs no consent")
	g.Expect(again.SiteID).To(Equal(token.SiteID))

	siteName := identity.SiteNameForExternalUser("user-1")
	me := endUser(g, t, p, siteName)
	view, err := svc.Household(ctx, me)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(view.Site.Labels[flexv1.IDLabel]).To(Equal(token.SiteID))
	g.Expect(view.Site.Spec.MPAN).To(BeEmpty(), "no meter yet")
	g.Expect(view.Assets).To(BeEmpty())
	g.Expect(view.Enrolled).To(BeEmpty())
	g.Expect(view.Models).NotTo(BeEmpty())

	// The organisation onboards the end user's household with its meter and assets.
	m := mpan()
	onboard := householdOf(m)
	onboard.Site.ExternalUserID = "user-1"
	out, err := svc.Onboard(ctx, p, onboard)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.Site.SiteID).To(Equal(token.SiteID))
	g.Expect(out.Site.SiteCreated).To(BeFalse())
	g.Expect(out.Site.FieldsUpdated).To(ContainElement("mpan"))

	view, err = svc.Household(ctx, me)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(view.Site.Spec.MPAN).To(Equal(m))
	g.Expect(view.Assets).To(HaveLen(2))
	g.Expect(view.Enrolled).To(Equal([]flexv1.PropositionName{flexv1.PropositionLimitedPause}))
	view, rec, err := svc.HouseholdEligibility(ctx, me)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(view.Assets).To(HaveLen(2))
	g.Expect(rec.SiteID).To(Equal(token.SiteID))
	g.Expect(rec.EligiblePropositions).To(ContainElement(flexv1.PropositionLimitedPause))

	// The household's MPAN is its own: another end user's household may not take it, and
	// this one may not take another.
	other := householdOf(m)
	other.Site.ExternalUserID = "user-2"
	_, err = svc.Onboard(ctx, p, other)
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)
	moved := householdOf(mpan())
	moved.Site.ExternalUserID = "user-1"
	_, err = svc.Onboard(ctx, p, moved)
	g.Expect(kindOf(err)).To(Equal(app.Conflict), "%v", err)

	// Only this end user reaches the household: not another user id, not the organisation's
	// token, not the same site name in another organisation.
	stranger := *me
	stranger.UserID = "00000000-0000-4000-8000-000000000000"
	_, err = svc.Household(ctx, &stranger)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	_, err = svc.Household(ctx, p)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))
	elsewhere := *me
	elsewhere.Namespace = org(t).Namespace
	_, _, err = svc.HouseholdEligibility(ctx, &elsewhere)
	g.Expect(err).To(MatchError(app.ErrSiteNotFound))

	// The origin the token was issued for may call from a browser; no other may.
	g.Expect(svc.OriginAllowed(ctx, token.SiteID, "https://example.com", false)).To(BeTrue())
	g.Expect(svc.OriginAllowed(ctx, token.SiteID, "https://example.com", true)).To(BeTrue())
	g.Expect(svc.OriginAllowed(ctx, token.SiteID, "https://evil.example", true)).To(BeFalse())

	// The end user deletes an asset of their own household, and no other.
	theirs, err := svc.Onboard(ctx, p, householdOf(mpan()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(svc.DeleteAsset(ctx, me, theirs.Assets[0].AssetID)).To(MatchError(app.ErrAssetNotFound))
	g.Expect(svc.DeleteAsset(ctx, me, out.Assets[1].AssetID)).To(Succeed())
	view, err = svc.Household(ctx, me)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(view.Assets).To(ConsistOf(HaveField("Spec.ExternalID", onboard.Assets[0].ExternalID)))
	_, err = svc.GetAsset(ctx, p, theirs.Assets[0].AssetID)
	g.Expect(err).NotTo(HaveOccurred(), "the other household's asset stays")

	// A redirect URI is an https one, or of a private-use scheme the API client declares.
	uri, err := app.RedirectURI(ctx, svc.Cache, p, "com.example.app:/callback")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(uri).To(Equal("com.example.app:/callback"))
	_, err = app.RedirectURI(ctx, svc.Cache, p, "org.other.app:/callback")
	g.Expect(kindOf(err)).To(Equal(app.Invalid), "%v", err)
	g.Expect(app.As(err).Detail).To(ConsistOf(HaveField("Loc", []any{"query", "redirect_uri"})))
	_, err = app.RedirectURI(ctx, svc.Cache, p, "javascript:alert(1)")
	g.Expect(kindOf(err)).To(Equal(app.Invalid), "%v", err)

	// An organisation that does not exist issues no token.
	gone := *p
	gone.Namespace = "org-no-such"
	_, err = svc.IssueEndUserToken(ctx, &gone, in)
	g.Expect(kindOf(err)).To(Equal(app.NotFound), "%v", err)
}
