package admission_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

func site(ns, name, mpan string) *flexv1.Site {
	return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.SiteSpec{MPAN: mpan, Postcode: "SW1A 1AA"}}
}

func asset(ns, siteName, externalID string) *flexv1.Asset {
	return &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.AssetName(externalID)},
		Spec: flexv1.AssetSpec{SiteName: siteName, ExternalID: externalID, Type: flexv1.AssetTypeCharger, PowerW: ptr.To[int64](7000)}}
}

func enrolment(ns, siteName string) *flexv1.Enrolment {
	return &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "enrol-"},
		Spec: flexv1.EnrolmentSpec{SiteName: siteName, Proposition: flexv1.PropositionLimitedPause}}
}

// refusal returns the API server's message for creating obj, which must be refused as Invalid.
func refusal(g Gomega, ctx SpecContext, obj client.Object) string {
	err := k8sClient.Create(ctx, obj)
	g.ExpectWithOffset(1, apierrors.IsInvalid(err)).To(BeTrue(), "want Invalid, got %v", err)
	return err.Error()
}

var _ = Describe("Site webhook", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses an MPAN whose check digit is wrong, naming the field", func(ctx SpecContext) {
		Expect(refusal(Default, ctx, site(ns, "s1", "1234567890123"))).To(ContainSubstring(
			`admission webhook "vsite.flexsite.io" denied the request: Site.flexsite.io "s1" is invalid: ` +
				`spec.mpan: Invalid value: "1234567890123": MPAN check digit is invalid`))
	})

	It("refuses an invalid email", func(ctx SpecContext) {
		s := site(ns, "s2", "1200000000011")
		s.Spec.Email = "not an email"
		Expect(refusal(Default, ctx, s)).To(ContainSubstring(`spec.email: Invalid value: "not an email": email is not a valid email address`))
	})

	It("normalises a postcode and an MPAN typed with spaces", func(ctx SpecContext) {
		s := site(ns, "s3", "1200 0000 00011")
		s.Spec.Postcode = "sw1a1aa"
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		Expect(s.Spec.Postcode).To(Equal("SW1A 1AA"))
		Expect(s.Spec.MPAN).To(Equal("1200000000011"))
	})

	It("lets an MPAN change only with the MPANClaim for it, as PATCH /entities/site makes it", func(ctx SpecContext) {
		s := site(ns, "mpan-1200000000011", "1200000000011")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		// The Site controller writes the new site too (its finalizer): a conflict is retried.
		change := func(mpan string) error {
			return retry.RetryOnConflict(retry.DefaultRetry, func() error {
				current := &flexv1.Site{}
				Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), current)).To(Succeed())
				current.Spec.MPAN = mpan
				return k8sClient.Update(ctx, current)
			})
		}
		err := change("2301234567894")
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.mpan: Forbidden: changing a site's MPAN needs the MPANClaim mpan-2301234567894"))

		By("refusing the change to an MPAN another site claimed")
		Expect(k8sClient.Create(ctx, &flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpan-2301234567894"},
			Spec: flexv1.MPANClaimSpec{MPAN: "2301234567894", SiteName: "someone-else"}})).To(Succeed())
		err = change("2301234567894")
		Expect(err).To(MatchError(ContainSubstring(`MPAN is claimed by Site "someone-else"`)))

		By("allowing it with the site's own claim")
		Expect(k8sClient.Create(ctx, &flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "mpan-1012345678903"},
			Spec: flexv1.MPANClaimSpec{MPAN: "1012345678903", SiteName: s.Name}})).To(Succeed())
		Expect(change("1012345678903")).To(Succeed())

		By("allowing the way back to the MPAN its name holds, as a failed change is undone")
		Expect(change("1200000000011")).To(Succeed())
	})

	It("refuses control characters in the street address and the external user id", func(ctx SpecContext) {
		s := site(ns, "ctl", "1200000000011")
		s.Spec.StreetAddress = "1 Test\u0000\u0007\u001b[31mStreet"
		s.Spec.ExternalUserID = "cu\x00x"
		Expect(refusal(Default, ctx, s)).To(SatisfyAll(
			ContainSubstring(`spec.streetAddress: Invalid value: "1 Test\x00\a\x1b[31mStreet": `+
				`String should not contain control characters, found U+0000 at character 7`),
			ContainSubstring(`spec.externalUserID: Invalid value: "cu\x00x": `+
				`String should not contain control characters, found U+0000 at character 3`)))

		By("on an update too, while text already stored is left alone")
		s = site(ns, "ctl", "1200000000011")
		s.Spec.StreetAddress = "1 Test Street"
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			current := &flexv1.Site{}
			Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(s), current)).To(Succeed())
			current.Spec.StreetAddress = "1 Test\u2028Street"
			return k8sClient.Update(ctx, current)
		})
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("found U+2028 at character 7"))
	})

	It("refuses a boundary meter consent given in the future", func(ctx SpecContext) {
		s := site(ns, "consent", "1200000000011")
		s.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)}
		Expect(refusal(Default, ctx, s)).To(ContainSubstring(
			`spec.boundaryMeterConsentAt: Invalid value: "9999-12-31T23:59:59Z": Consent time must not be in the future`))
		s = site(ns, "consent", "1200000000011")
		s.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: time.Now().Add(-time.Minute)}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
	})

	It("refuses a boundary meter consent before the supported range, as the REST API does", func(ctx SpecContext) {
		s := site(ns, "consent-old", "1200000000011")
		s.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: time.Date(1, 1, 1, 0, 0, 1, 0, time.UTC)}
		Expect(refusal(Default, ctx, s)).To(ContainSubstring(`spec.boundaryMeterConsentAt: Invalid value: "0001-01-01T00:00:01Z": ` +
			`Input should be greater than or equal to 1900-01-01T00:00:00Z`))
		s = site(ns, "consent-old", "1200000000011")
		s.Spec.BoundaryMeterConsentAt = &metav1.Time{Time: time.Date(1900, 1, 1, 0, 0, 0, 0, time.UTC)}
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
	})

	It("refuses a second site with the same MPAN in the organisation", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "first", "2301234567894"))).To(Succeed())
		Eventually(func(g Gomega) string { return refusal(g, ctx, site(ns, "second", "2301234567894")) }).Should(ContainSubstring(
			`spec.mpan: Invalid value: "2301234567894": MPAN is already registered in this organisation by Site "first"`))

		By("allowing the same MPAN in another organisation")
		other, err := env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(k8sClient.Create(ctx, site(other, "first", "2301234567894"))).To(Succeed())
	})
})

var _ = Describe("Asset webhook", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses an asset whose site does not exist", func(ctx SpecContext) {
		Expect(refusal(Default, ctx, asset(ns, "nowhere", "a1"))).To(ContainSubstring(`spec.siteName: Not found: "nowhere"`))
	})

	It("accepts an asset created right after its site, as kubectl apply of one file does", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1012345678903"))).To(Succeed())
		Expect(k8sClient.Create(ctx, asset(ns, "home", "a2"))).To(Succeed())
	})

	It("refuses an installation date in the future and a reused external id, all at once", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1012345678903"))).To(Succeed())
		Expect(k8sClient.Create(ctx, asset(ns, "home", "dup"))).To(Succeed())
		again := asset(ns, "home", "dup")
		again.Name = "another-name"
		again.Spec.InstallationDate = time.Now().AddDate(1, 0, 0).Format(time.DateOnly)
		Eventually(func(g Gomega) string { return refusal(g, ctx, again) }).Should(SatisfyAll(
			ContainSubstring(`spec.installationDate: Invalid value: "`+again.Spec.InstallationDate+`": Date must not be in the future`),
			ContainSubstring(`spec.externalID: Invalid value: "dup": external ID is already used in this organisation by Asset "`+
				identity.AssetName("dup")+`"`)))
	})

	It("refuses control characters in the external id, the model and the serial number", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1012345678903"))).To(Succeed())
		a := asset(ns, "home", "ext\x1b[31m")
		a.Spec.Model = "zappi\u0085"
		a.Spec.SerialNumber = "SN\x7f1"
		Eventually(func(g Gomega) string { return refusal(g, ctx, a) }).Should(SatisfyAll(
			ContainSubstring(`spec.externalID: Invalid value: "ext\x1b[31m": String should not contain control characters, found U+001B at character 4`),
			ContainSubstring(`spec.model: Invalid value: "zappi\u0085": String should not contain control characters, found U+0085 at character 6`),
			ContainSubstring(`spec.serialNumber: Invalid value: "SN\x7f1": String should not contain control characters, found U+007F at character 3`)))
	})

	It("refuses an asset past what its site's status holds, and takes one again once another goes", func(ctx SpecContext) {
		// One more would make the site's status too long to write: the site never evaluated
		// again, its eligibility reads waiting for ever.
		Expect(k8sClient.Create(ctx, site(ns, "home", "1012345678903"))).To(Succeed())
		for i := range flexv1.MaxSiteAssets {
			Expect(k8sClient.Create(ctx, asset(ns, "home", fmt.Sprintf("full-%03d", i)))).To(Succeed())
		}
		extra := asset(ns, "home", "one-too-many")
		Eventually(func() error { return k8sClient.Create(ctx, extra.DeepCopy(), client.DryRunAll) }).Should(MatchError(ContainSubstring(
			fmt.Sprintf("spec.siteName: Forbidden: A site holds at most %d assets", flexv1.MaxSiteAssets))))
		Expect(refusal(Default, ctx, extra.DeepCopy())).To(ContainSubstring("holds at most"))

		Expect(k8sClient.Delete(ctx, asset(ns, "home", "full-000"))).To(Succeed())
		Eventually(func() error { return k8sClient.Create(ctx, extra.DeepCopy(), client.DryRunAll) }).Should(Succeed())
	})

	It("warns about, but stores, an asset model the catalogue does not know", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1012345678903"))).To(Succeed())
		a := asset(ns, "home", "unknown-model")
		a.Spec.Model = "mystery-9000"
		Expect(k8sClient.Create(ctx, a)).To(Succeed())
	})
})

var _ = Describe("Enrolment webhook", func() {
	var ns string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses to enrol a household that withdrew, unless the enrolment overrides the withdrawal", func(ctx SpecContext) {
		s := site(ns, "home", "1234567890126")
		Expect(k8sClient.Create(ctx, s)).To(Succeed())
		withdrawnAt := metav1.NewTime(time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC))
		base := s.DeepCopy()
		s.Status.EnrolmentHistory = []flexv1.EnrolmentPeriod{{Proposition: flexv1.PropositionLimitedPause, WithdrawnAt: withdrawnAt}}
		Expect(k8sClient.Status().Patch(ctx, s, client.MergeFrom(base))).To(Succeed())

		Expect(refusal(Default, ctx, enrolment(ns, "home"))).To(ContainSubstring(
			`spec.overrideWithdrawal: Forbidden: The household withdrew from limited_pause at 2026-03-01T10:00:00Z (Site "home"); ` +
				`set spec.overrideWithdrawal: true to re-enrol it`))

		override := enrolment(ns, "home")
		override.Spec.OverrideWithdrawal = true
		Expect(k8sClient.Create(ctx, override)).To(Succeed())
	})

	It("accepts, with a warning naming the verdict, an enrolment that cannot be active yet", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1234567890126"))).To(Succeed())
		warned := warningClient()
		e := enrolment(ns, "home")
		e.Spec.Proposition = flexv1.PropositionFullAssetScheduleControl
		Eventually(func() error { return warned.Create(ctx, e) }).Should(Succeed())
		Expect(warned.warnings()).To(ContainElement(
			`spec.siteName: Site "home": Proposition full_asset_schedule_control needs the household's boundary meter consent; ` +
				`the enrolment stays inactive until that changes`))
	})

	It("refuses a second enrolment of a site in the same proposition", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1234567890126"))).To(Succeed())
		first := enrolment(ns, "home")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		Expect(refusal(Default, ctx, enrolment(ns, "home"))).To(ContainSubstring(
			`spec.proposition: Invalid value: "limited_pause": Site "home" is already enrolled in it by Enrolment "` + first.Name + `"`))
	})

	It("admits an enrolment under a name of its own with its site's claim, refuses another a moment after it by the claim, and claims nothing on a dry run", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1234567890126"))).To(Succeed())
		first := enrolment(ns, "home")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		claimKey := client.ObjectKey{Namespace: ns, Name: identity.EnrolmentClaimName("home", flexv1.PropositionLimitedPause)}
		claim := &flexv1.EnrolmentClaim{}
		Expect(k8sClient.Get(ctx, claimKey, claim)).To(Succeed())
		Expect(claim.Spec.EnrolmentName).To(Equal(first.Name))
		// Straight after, whatever the webhook's cache has seen of the first.
		Expect(refusal(Default, ctx, enrolment(ns, "home"))).To(ContainSubstring(
			`Site "home" is already enrolled in it by Enrolment "` + first.Name + `"`))

		Expect(k8sClient.Create(ctx, site(ns, "cottage", "1012345678903"))).To(Succeed())
		Expect(k8sClient.Create(ctx, enrolment(ns, "cottage"), client.DryRunAll)).To(Succeed())
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.EnrolmentClaimName("cottage", flexv1.PropositionLimitedPause)},
			&flexv1.EnrolmentClaim{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a dry run's claim: %v", err)
	})

	It("admits an enrolment named after its site and proposition with no claim, and refuses one under another name after it by that name", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1234567890126"))).To(Succeed())
		named := &flexv1.Enrolment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.EnrolmentName("home", flexv1.PropositionLimitedPause)},
			Spec:       flexv1.EnrolmentSpec{SiteName: "home", Proposition: flexv1.PropositionLimitedPause},
		}
		Expect(k8sClient.Create(ctx, named.DeepCopy(), client.DryRunAll)).To(Succeed())
		Expect(k8sClient.Create(ctx, named)).To(Succeed())
		claimKey := client.ObjectKey{Namespace: ns, Name: identity.EnrolmentClaimName("home", flexv1.PropositionLimitedPause)}
		err := k8sClient.Get(ctx, claimKey, &flexv1.EnrolmentClaim{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the named enrolment's claim: %v", err)

		// Straight after, whatever the webhook's cache has seen of the named one; a dry run too.
		Expect(refusal(Default, ctx, enrolment(ns, "home"))).To(ContainSubstring(
			`Site "home" is already enrolled in it by Enrolment "` + named.Name + `"`))
		err = k8sClient.Create(ctx, enrolment(ns, "home"), client.DryRunAll)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a dry run: %v", err)
		err = k8sClient.Get(ctx, claimKey, &flexv1.EnrolmentClaim{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the refused enrolment's claim, withdrawn: %v", err)
	})

	It("refuses an enrolment named after its site and proposition while another's claim binds", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1234567890126"))).To(Succeed())
		first := enrolment(ns, "home")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		named := &flexv1.Enrolment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: identity.EnrolmentName("home", flexv1.PropositionLimitedPause)},
			Spec:       flexv1.EnrolmentSpec{SiteName: "home", Proposition: flexv1.PropositionLimitedPause},
		}
		Expect(refusal(Default, ctx, named)).To(ContainSubstring(
			`Site "home" is already enrolled in it by Enrolment "` + first.Name + `"`))
	})

	It("deletes an enrolment's claim with it, so that another enrolment may follow", func(ctx SpecContext) {
		Expect(k8sClient.Create(ctx, site(ns, "home", "1234567890126"))).To(Succeed())
		first := enrolment(ns, "home")
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		// Its finalizer (the controller's) deletes the claim before the enrolment goes.
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(first), first)).To(Succeed())
			g.Expect(first.Finalizers).To(ContainElement(flexv1.Finalizer))
		}).Should(Succeed())
		Expect(k8sClient.Delete(ctx, first)).To(Succeed())
		Eventually(func() error { return k8sClient.Get(ctx, client.ObjectKeyFromObject(first), &flexv1.Enrolment{}) }).
			Should(Satisfy(apierrors.IsNotFound))
		claimKey := client.ObjectKey{Namespace: ns, Name: identity.EnrolmentClaimName("home", flexv1.PropositionLimitedPause)}
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, claimKey, &flexv1.EnrolmentClaim{}))).To(BeTrue())

		next := enrolment(ns, "home")
		next.Spec.OverrideWithdrawal = true // deleting the first may have been a withdrawal
		Expect(k8sClient.Create(ctx, next)).To(Succeed())
		claim := &flexv1.EnrolmentClaim{}
		Expect(k8sClient.Get(ctx, claimKey, claim)).To(Succeed())
		Expect(claim.Spec.EnrolmentName).To(Equal(next.Name))
	})

	It("accepts an enrolment for a site that does not exist yet (GitOps may apply it first)", func(ctx SpecContext) {
		warned := warningClient()
		Expect(warned.Create(ctx, enrolment(ns, "later"))).To(Succeed())
		Expect(warned.warnings()).To(ContainElement(ContainSubstring(`Site "later" does not exist (yet)`)))
	})
})

// recordingClient is a client that keeps the API server's admission warnings.
type recordingClient struct {
	client.Client
	handler *warningRecorder
}

func (c recordingClient) warnings() []string {
	c.handler.mu.Lock()
	defer c.handler.mu.Unlock()
	return slices.Clone(c.handler.seen)
}

type warningRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

func warningClient() recordingClient {
	cfg := rest.CopyConfig(env.Config)
	handler := &warningRecorder{}
	cfg.WarningHandlerWithContext = handler
	c, err := client.New(cfg, client.Options{Scheme: k8sClient.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	return recordingClient{Client: c, handler: handler}
}
