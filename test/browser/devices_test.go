package browser_test

import (
	"context"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/test/browser/oauthprovider"
)

// The Connect step (docs/hosted-flow.md, "Connect") against a real OAuth 2.0
// authorisation server on loopback (test/browser/oauthprovider, in process), whose consent page the
// browser clicks through in the window the flow opens.

const deviceModel = "example_charger"

var (
	deviceProvider *oauthprovider.Provider
	providerDialer = deviceauth.Dialer{SecretNamespace: keysNamespace, Policy: events.AddressPolicy{
		Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}}
)

// startDeviceProvider runs the authorisation server (the REST API's callback registered, as a
// maker registers Flexsite's) and declares it, with an AssetModel whose assets it controls.
func startDeviceProvider(ctx context.Context) {
	var err error
	deviceProvider, err = oauthprovider.Start("127.0.0.1:0", oauthprovider.Options{ClientID: "flexsite",
		ClientSecret: "provider-secret", RedirectURIs: []string{serverURL + "/oauth/callback"},
		AccessTokenLifespan: 4 * time.Second, DisplayName: "Example Energy"})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(deviceProvider.Close)
	Expect(k8sClient.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: keysNamespace, Name: "example-provider"},
		StringData: map[string]string{"client-secret": "provider-secret"}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: "example"},
		Spec: flexv1.DeviceProviderSpec{DisplayName: "Example Energy", AuthorizationURL: deviceProvider.AuthorizationURL(),
			TokenURL: deviceProvider.TokenURL(), RevocationURL: deviceProvider.RevocationURL(), Scopes: []string{"devices"},
			ClientID: "flexsite", ClientSecretRef: flexv1.ProviderSecretRef{Name: "example-provider"}}})).To(Succeed())
	Expect(k8sClient.Create(ctx, &flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "example-charger"},
		Spec: flexv1.AssetModelSpec{ModelName: deviceModel, Manufacturer: "Example", AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger},
			CoP11Qualified: true, Provider: "example"}})).To(Succeed())
}

// consentInNewWindow clicks sel in the flow, waits for the window it opens, clicks Allow on the
// provider's consent page there, and answers the callback page's outcome heading.
func consentInNewWindow(ctx context.Context, f *flow, sel, screenshot string) string {
	GinkgoHelper()
	opened := chromedp.WaitNewTarget(ctx, func(i *target.Info) bool { return i.Type == "page" })
	f.do(Default, chromedp.Click(chromedp.CSS(sel), f.in()))
	var id target.ID
	Eventually(opened, step).Should(Receive(&id))
	popup, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	defer cancel()
	pctx, cancelStep := context.WithTimeout(popup, step)
	defer cancelStep()
	Expect(chromedp.Do(pctx, chromedp.WaitVisible(chromedp.CSS("#allow")))).To(Succeed())
	Expect(chromedp.Do(pctx, chromedp.Click(chromedp.CSS("#allow")))).To(Succeed())
	Expect(chromedp.Do(pctx, chromedp.WaitVisible(chromedp.CSS("#outcome")))).To(Succeed())
	outcome, err := chromedp.Run(pctx, chromedp.Text(chromedp.CSS("#outcome")))
	Expect(err).NotTo(HaveOccurred())
	if dir := screenshotDir(); dir != "" && screenshot != "" {
		var png []byte
		png, err = chromedp.Run(pctx, chromedp.FullScreenshot(100))
		Expect(err).NotTo(HaveOccurred())
		Expect(os.WriteFile(filepath.Join(dir, screenshot), png, 0o644)).To(Succeed())
	}
	return outcome
}

var _ = Describe("The Connect step in a real browser", func() {
	It("connects the household's maker account through the provider's consent page in a new window, learns it, and asks for a reconnection when it lapses", func(ctx SpecContext) {
		o := newOrg(ctx)
		orgToken := o.token()
		const user = "household-connect"
		siteID, token := o.componentToken(orgToken, user, embedder.Origin())
		status, body := call(Default, "POST", "/entities/site/initialise", orgToken, map[string]any{
			"site": map[string]any{"mpan": "1300000000016", "postcode": "SW1A 1AA", "external_user_id": user,
				"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
			"assets": []any{map[string]any{"external_id": "connect-charger", "type": "charger", "asset_model": deviceModel,
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}}})
		Expect(status).To(Equal(http.StatusOK), "%v", body)
		chargerID := body["assets"].([]any)[0].(map[string]any)["asset_id"].(string)

		b := newBrowser()
		f := embed(b, token, "")
		By("a household whose charger is controlled through Example Energy starts at the Connect step")
		f.atStep("connect")
		Eventually(func(g Gomega) string { return f.text(g, "#connect-list") }).Should(ContainSubstring("Connect your Example Energy account"))
		f.checkPage("3a-connect")

		By("the provider opens in a new window; the household allows; the flow learns it")
		Expect(consentInNewWindow(b.Ctx, f, "#connect-list button.connect", "3b-connect-callback-desktop.png")).
			To(Equal("Your Example Energy account is connected"))
		Eventually(func(g Gomega) string { return f.text(g, "#connect-list") }).Should(ContainSubstring("Example Energy: Connected"))
		Eventually(func(g Gomega) string { return f.text(g, "#connect-status") }).Should(ContainSubstring("is connected"))
		f.checkPage("3b-connected")
		status, conns := call(Default, "GET", "/entities/site/"+siteID+"/connections", orgToken, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(conns["connections"]).To(ConsistOf(HaveKeyWithValue("status", "connected")))

		By("the grant is withdrawn at the provider: the refresh is refused and the asset needs reauthorisation")
		deviceProvider.RevokeEverything()
		Eventually(func(g Gomega) any {
			_, asset := call(g, "GET", "/entities/asset/"+chargerID, orgToken, nil)
			return asset["needs_reauthorisation"]
		}, 20*time.Second).Should(BeTrue())

		By("the household comes back with a new token: it starts at Connect and is asked to reconnect")
		_, token = o.componentToken(orgToken, user, embedder.Origin())
		f = embed(b, token, "")
		f.atStep("connect")
		Eventually(func(g Gomega) string { return f.text(g, "#connect-list") }).
			Should(ContainSubstring("Reconnect your Example Energy account to keep earning rewards"))
		f.checkPage("3c-reconnect")
		Expect(consentInNewWindow(b.Ctx, f, "#connect-list button.connect", "")).
			To(Equal("Your Example Energy account is connected"))
		Eventually(func(g Gomega) string { return f.text(g, "#connect-list") }).Should(ContainSubstring("Example Energy: Connected"))
		Eventually(func(g Gomega) any {
			_, asset := call(g, "GET", "/entities/asset/"+chargerID, orgToken, nil)
			return asset["needs_reauthorisation"]
		}).Should(BeFalse())

		By("skipping is allowed: Continue goes on to eligibility")
		f.do(Default, chromedp.Click(chromedp.CSS("#form-connect button[type=submit]"), f.in()))
		f.atStep("eligibility")
	})
})
