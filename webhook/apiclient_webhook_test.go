package admission_test

import (
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
)

func apiClient(ns, name, username string) *flexv1.APIClient {
	return &flexv1.APIClient{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.APIClientSpec{Username: username,
			PasswordHashSecretRef: flexv1.SecretKeyRef{Name: name + "-credentials"},
			Roles:                 []flexv1.Role{flexv1.RoleEntityRead}}}
}

// storedWithUsername lists, from the API server, the API clients of every namespace that
// have username.
func storedWithUsername(ctx SpecContext, username string) []flexv1.APIClient {
	GinkgoHelper()
	list := &flexv1.APIClientList{}
	Expect(k8sClient.List(ctx, list, client.MatchingFields{index.Username: username})).To(Succeed())
	return list.Items
}

var _ = Describe("APIClient webhook", func() {
	var ns, other string
	BeforeEach(func(ctx SpecContext) {
		var err error
		ns, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
		other, err = env.Namespace(ctx)
		Expect(err).NotTo(HaveOccurred())
	})

	It("refuses a username another organisation's client holds, without naming that organisation", func(ctx SpecContext) {
		username := "app-" + strings.TrimPrefix(ns, "org-") // a username that does not spell the namespace
		Expect(k8sClient.Create(ctx, apiClient(ns, "app", username))).To(Succeed())

		msg := refusal(Default, ctx, apiClient(other, "impostor", username))
		Expect(msg).To(ContainSubstring(`admission webhook "vapiclient.flexsite.io" denied the request: ` +
			`APIClient.flexsite.io "impostor" is invalid: spec.username: Invalid value: "` + username + `": ` +
			`username is already used by another API client (usernames are unique across organisations)`))
		Expect(msg).NotTo(ContainSubstring(ns), "another organisation's namespace is not told")

		By("naming the holder within the organisation")
		Expect(refusal(Default, ctx, apiClient(ns, "second", username))).To(ContainSubstring(
			`spec.username: Invalid value: "` + username + `": username is already used by APIClient "app"`))

		By("refusing a change to the username, and not an update that keeps it")
		mine := apiClient(other, "mine", "mine-"+other)
		Expect(k8sClient.Create(ctx, mine)).To(Succeed())
		mine.Spec.Username = username
		err := k8sClient.Update(ctx, mine)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		held := &flexv1.APIClient{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, held)).To(Succeed())
		held.Spec.Disabled = true
		Expect(k8sClient.Update(ctx, held)).To(Succeed())

		Expect(storedWithUsername(ctx, username)).To(HaveLen(1))
		claim := &flexv1.UsernameClaim{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: identity.UsernameClaimName(username)}, claim)).To(Succeed())
		Expect(claim.Spec).To(Equal(flexv1.UsernameClaimSpec{Username: username, APIClientNamespace: ns, APIClientName: "app"}))
	})

	It("takes registered redirect URIs that are https, loopback http, or of a scheme the client declares", func(ctx SpecContext) {
		c := apiClient(ns, "mobile", "mobile-"+ns)
		c.Spec.RedirectURIs = []string{"https://app.example.com/done", "com.example.app:/oauth", "http://app.example.com/x"}
		msg := refusal(Default, ctx, c)
		Expect(msg).To(ContainSubstring(`spec.redirectURIs[1]: Invalid value: "com.example.app:/oauth": ` +
			`redirect_uri's scheme "com.example.app" is not one of the API client's redirectSchemes`))
		Expect(msg).To(ContainSubstring(`spec.redirectURIs[2]: Invalid value: "http://app.example.com/x": redirect_uri must use https`))

		By("taking the app's URI once its scheme is declared")
		c.Spec.RedirectURIs = c.Spec.RedirectURIs[:2]
		c.Spec.RedirectSchemes = []string{"com.example.app"}
		Expect(k8sClient.Create(ctx, c)).To(Succeed())

		By("refusing a scheme that is not a reverse domain name (the CRD's pattern)")
		c.Spec.RedirectSchemes = []string{"myapp"}
		err := k8sClient.Update(ctx, c)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.redirectSchemes[0]"))

		By("refusing to withdraw a scheme a registered URI still uses")
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		c.Spec.RedirectSchemes = nil
		err = k8sClient.Update(ctx, c)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.redirectURIs[1]"))
	})

	// The cache of the webhook's manager cannot see a client stored a millisecond earlier, and
	// a List of the API server cannot see one being admitted at the same moment: the claim's
	// name is what the API server serialises.
	It("stores exactly one of several clients created at the same moment with one username", func(ctx SpecContext) {
		const racers = 4
		for round := range 3 {
			username := "race-" + ns + "-" + string(rune('a'+round))
			namespaces := make([]string, racers)
			for i := range namespaces {
				var err error
				namespaces[i], err = env.Namespace(ctx)
				Expect(err).NotTo(HaveOccurred())
			}
			errs := make([]error, racers)
			var start, done sync.WaitGroup
			start.Add(1)
			for i := range racers {
				done.Go(func() {
					start.Wait()
					errs[i] = k8sClient.Create(ctx, apiClient(namespaces[i], "app", username))
				})
			}
			start.Done()
			done.Wait()

			stored := 0
			for _, err := range errs {
				if err == nil {
					stored++
				} else {
					Expect(apierrors.IsInvalid(err)).To(BeTrue(), "a loser is refused as Invalid, not failed: %v", err)
				}
			}
			Expect(stored).To(Equal(1), "round %d: %v", round, errs)
			Expect(storedWithUsername(ctx, username)).To(HaveLen(1))
		}
	})

	It("checks a server-side dry run without claiming anything", func(ctx SpecContext) {
		username := "dry-" + ns
		Expect(k8sClient.Create(ctx, apiClient(ns, "app", username), client.DryRunAll)).To(Succeed())
		Expect(k8sClient.Get(ctx, client.ObjectKey{Name: identity.UsernameClaimName(username)}, &flexv1.UsernameClaim{})).
			To(WithTransform(apierrors.IsNotFound, BeTrue()))

		Expect(k8sClient.Create(ctx, apiClient(other, "app", username))).To(Succeed())
		err := k8sClient.Create(ctx, apiClient(ns, "app", username), client.DryRunAll)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "the dry run meets the holder: %v", err)
	})
})
