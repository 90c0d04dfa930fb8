package failover_test

import (
	"net/http"
	"net/netip"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/deviceauth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/testing/oauthprovider"
)

// A device connection across a failover: the leader dies (no lease release) while it keeps a
// connection's token fresh; the new leader takes over the refreshes. A rotated refresh token
// used twice would be invalid_grant at the provider (and revoke the grant): it never is.

var providerDialer = deviceauth.Dialer{SecretNamespace: managerNamespace, Policy: events.AddressPolicy{
	Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}

var _ = Describe("Device connections across a failover", Ordered, func() {
	It("keeps refreshing with rotation when the leader dies, and never uses a refresh token twice", func(ctx SpecContext) {
		provider, err := oauthprovider.Start("127.0.0.1:0", oauthprovider.Options{ClientID: "flexsite", ClientSecret: "s",
			RedirectURIs: []string{"http://127.0.0.1/oauth/callback"}, AccessTokenLifespan: 3 * time.Second})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(provider.Close)
		Expect(env.Client.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "failover-provider"},
			StringData: map[string]string{"client-secret": "s"}})).To(Succeed())
		Expect(env.Client.Create(ctx, &flexv1.DeviceProvider{ObjectMeta: metav1.ObjectMeta{Name: "failover"},
			Spec: flexv1.DeviceProviderSpec{DisplayName: "Failover Energy", AuthorizationURL: provider.AuthorizationURL(),
				TokenURL: provider.TokenURL(), RevocationURL: provider.RevocationURL(), ClientID: "flexsite",
				ClientSecretRef: flexv1.ProviderSecretRef{Name: "failover-provider"}}})).To(Succeed())
		Expect(env.Client.Create(ctx, &flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: "failover-charger"},
			Spec: flexv1.AssetModelSpec{ModelName: "failover_charger", AssetTypes: []flexv1.AssetType{flexv1.AssetTypeCharger},
				CoP11Qualified: true, Provider: "failover"}})).To(Succeed())

		// a crashes (keeps the lease until it expires), b would hand it over: whichever leads dies.
		a := startReplica(ctx, "devices-a", false)
		b := startReplica(ctx, "devices-b", true)
		var leader, follower *replica
		Eventually(func() bool {
			switch {
			case a.leading():
				leader, follower = a, b
			case b.leading():
				leader, follower = b, a
			}
			return leader != nil
		}).Should(BeTrue())

		ns, err := env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		Expect(bootstrap.EnsureOrganisation(ctx, env.Client, bootstrap.Organisation{Namespace: ns, Username: "devices-" + ns,
			Password: "pw-" + ns, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}})).To(Succeed())
		var token string
		Eventually(func(g Gomega) {
			status, body := follower.call(g, "POST", "/auth/token-form", "", url.Values{"username": {"devices-" + ns},
				"password": {"pw-" + ns}, "grant_type": {"password"}})
			g.Expect(status).To(Equal(http.StatusOK))
			token = body["access_token"].(string)
		}).Should(Succeed())
		body := household("1300000000016")
		body["assets"].([]any)[0].(map[string]any)["asset_model"] = "failover_charger"
		status, answer := follower.call(Default, "POST", "/entities/site/onboard", token, body)
		Expect(status).To(Equal(http.StatusOK), "%v", answer)
		siteID := answer["site"].(map[string]any)["site_id"].(string)

		status, answer = follower.call(Default, "GET", "/entities/site/"+siteID+"/oauth/failover/initiate", token, nil)
		Expect(status).To(Equal(http.StatusOK), "%v", answer)
		callback, err := oauthprovider.Consent(answer["authorization_url"].(string), true)
		Expect(err).NotTo(HaveOccurred())
		resp, err := http.Get(callback)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.StatusCode).To(Equal(http.StatusOK))

		key := client.ObjectKey{Namespace: ns, Name: identity.DeviceConnectionName(identity.SiteNameForMPAN("1300000000016"), "failover")}
		seen := map[string]bool{}
		rotations := func(n int) func(Gomega) {
			return func(g Gomega) {
				conn := &flexv1.DeviceConnection{}
				g.Expect(env.Client.Get(ctx, key, conn)).To(Succeed())
				g.Expect(conn.Status.Phase).To(Equal(flexv1.ConnectionConnected))
				sec := &corev1.Secret{}
				g.Expect(env.Client.Get(ctx, deviceauth.SecretKey(conn), sec)).To(Succeed())
				seen[deviceauth.Read(sec).RefreshToken] = true
				g.Expect(len(seen)).To(BeNumerically(">=", n))
			}
		}
		Eventually(rotations(2), 20*time.Second, 100*time.Millisecond).Should(Succeed())

		By("the leader dies; the other replica takes over the refreshes")
		leader.stop()
		Eventually(follower.leading, 20*time.Second).Should(BeTrue())
		Eventually(rotations(len(seen)+3), 40*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(provider.Refused()).To(BeZero(), "a refresh token was used twice (invalid_grant)")
		follower.failedEarly()
	})
})
