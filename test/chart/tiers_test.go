package chart_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/flexsite/flexsite/internal/testenv"
)

// generatedRules are the rules of kind in config/rbac/<file> (`make manifests` writes them from
// the RBAC markers: hack/tierroles).
func generatedRules(file, kind string) []rbacv1.PolicyRule {
	GinkgoHelper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "rbac", file))
	Expect(err).NotTo(HaveOccurred())
	for _, doc := range splitYAML(data) {
		var obj struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		Expect(yaml.Unmarshal(doc, &obj)).To(Succeed())
		if obj.Kind == kind {
			return obj.Rules
		}
	}
	Fail(fmt.Sprintf("%s: no %s", file, kind))
	return nil
}

func splitYAML(data []byte) [][]byte {
	parts := regexp.MustCompile(`(?m)^---\s*$`).Split(string(data), -1)
	docs := make([][]byte, len(parts))
	for i, d := range parts {
		docs[i] = []byte(d)
	}
	return docs
}

var _ = Describe("charts/flexsite's two tiers (sharding.enabled)", func() {
	It("renders the API tier and the controller tier, each with the RBAC its work needs and no more", func(ctx SpecContext) {
		objs := render(ctx, "ci/sharding-values.yaml")
		api := as[appsv1.Deployment](find(objs, "Deployment", release), "Deployment", release)
		ctl := as[appsv1.Deployment](find(objs, "Deployment", controllersTier), "Deployment", controllersTier)

		By("each tier runs as its own ServiceAccount; no Service, PodDisruptionBudget or NetworkPolicy of the API tier selects the shards")
		Expect(ctl.Spec.Template.Spec.ServiceAccountName).To(Equal(controllersTier))
		Expect(api.Spec.Template.Spec.ServiceAccountName).NotTo(Equal(controllersTier))
		Expect(find(objs, "ServiceAccount", controllersTier)).NotTo(BeNil())
		shardPods := labels.Set(ctl.Spec.Template.Labels)
		for _, o := range objs {
			if o.GetKind() != "Service" {
				continue
			}
			svc := as[corev1.Service](o, "Service", o.GetName())
			Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(shardPods)).To(BeFalse(), "Service %s selects the shards", o.GetName())
		}
		apiPDB := as[policyv1.PodDisruptionBudget](find(objs, "PodDisruptionBudget", release), "PodDisruptionBudget", release)
		sel, err := metav1.LabelSelectorAsSelector(apiPDB.Spec.Selector)
		Expect(err).NotTo(HaveOccurred())
		Expect(sel.Matches(shardPods)).To(BeFalse())
		apiNP := as[networkingv1.NetworkPolicy](find(objs, "NetworkPolicy", release), "NetworkPolicy", release)
		sel, err = metav1.LabelSelectorAsSelector(&apiNP.Spec.PodSelector)
		Expect(err).NotTo(HaveOccurred())
		Expect(sel.Matches(shardPods)).To(BeFalse())
		Expect(find(objs, "NetworkPolicy", controllersTier)).NotTo(BeNil(), "the shards' own NetworkPolicy")
		Expect(ctl.Spec.Template.Spec.Containers[0].Ports).NotTo(ContainElement(HaveField("Name", "http-api")), "the shards serve no API")

		By("the tiers' roles are the ones make manifests writes from the markers")
		apiRole := as[rbacv1.ClusterRole](find(objs, "ClusterRole", release+"-manager"), "ClusterRole", release+"-manager")
		Expect(apiRole.Rules).To(Equal(generatedRules("api_tier_role.yaml", "ClusterRole")))
		ctlRole := as[rbacv1.ClusterRole](find(objs, "ClusterRole", controllersTier), "ClusterRole", controllersTier)
		Expect(ctlRole.Rules).To(Equal(generatedRules("controller_tier_role.yaml", "ClusterRole")))

		By("the chart's RBAC, created for real")
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"} {
			for _, o := range objs {
				if o.GetKind() != kind {
					continue
				}
				if (kind == "Role" || kind == "RoleBinding") && o.GetNamespace() == "" {
					o.SetNamespace(namespace)
				}
				Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("helm"),
					client.ForceOwnership)).To(Succeed(), "%s %s", kind, o.GetName())
			}
		}
		organisation := fmt.Sprintf("org-tiers-%d", time.Now().UnixNano()%1_000_000)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: organisation,
			Labels: map[string]string{"flexsite.io/organisation": organisation}}})).To(Succeed())
		may := func(sa string, a access) bool {
			GinkgoHelper()
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   "system:serviceaccount:" + namespace + ":" + sa,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: a.verb, Group: a.group, Resource: a.resource,
					Subresource: a.subresource, Namespace: a.ns, Name: a.name}}}
			Expect(k8s.Create(ctx, review)).To(Succeed())
			return review.Status.Allowed
		}
		apiSA := api.Spec.Template.Spec.ServiceAccountName
		for _, c := range []struct {
			sa          string
			may, mayNot []access
		}{{
			sa: controllersTier,
			// The per-site reconcilers: their kinds' status and finalizers, adoption patches,
			// ledgers made for a history, claims made and released, abandoned sites deleted; the shard
			// Lease; the device providers' client secrets.
			may: []access{
				{"update", "flexsite.io", "sites", "status", organisation, "s"},
				{"update", "flexsite.io", "sites", "finalizers", organisation, "s"},
				{"delete", "flexsite.io", "sites", "", organisation, "s"},
				{"watch", "flexsite.io", "sites", "", "", ""},
				{"patch", "flexsite.io", "assets", "", organisation, "a"},
				{"update", "flexsite.io", "enrolments", "status", organisation, "e"},
				{"create", "flexsite.io", "rewardledgers", "", organisation, ""},
				{"update", "flexsite.io", "deviceconnections", "status", organisation, "d"},
				{"create", "flexsite.io", "mpanclaims", "", organisation, ""}, // a declared site's claim
				{"delete", "flexsite.io", "mpanclaims", "", organisation, "c"},
				{"delete", "flexsite.io", "enrolmentclaims", "", organisation, "c"}, // an enrolment's, by its finalizer
				{"list", "flexsite.io", "propositions", "", "", ""},
				{"list", "flexsite.io", "subscriptions", "", "", ""},
				{"create", "events.k8s.io", "events", "", organisation, ""},
				{"create", "coordination.k8s.io", "leases", "", namespace, ""},
				{"update", "coordination.k8s.io", "leases", "", namespace, "flexsite-controllers-abc12"},
				{"get", "", "secrets", "", namespace, "provider-client-secret"},
			},
			// The doors' and the organisation-wide work's: none of it.
			mayNot: []access{
				{"create", "flexsite.io", "sites", "", organisation, ""},
				{"create", "flexsite.io", "assets", "", organisation, ""},
				{"create", "flexsite.io", "enrolments", "", organisation, ""},
				{"create", "flexsite.io", "deviceconnections", "", organisation, ""},
				{"list", "flexsite.io", "apiclients", "", "", ""},
				{"create", "flexsite.io", "usernameclaims", "", "", ""},
				{"create", "flexsite.io", "enrolmentclaims", "", organisation, ""},
				{"get", "flexsite.io", "flexevents", "", organisation, ""},
				{"create", "flexsite.io", "subscriptions", "", organisation, ""},
				{"update", "flexsite.io", "subscriptions", "status", organisation, "s"},
				{"list", "", "namespaces", "", "", ""},
				{"create", "rbac.authorization.k8s.io", "rolebindings", "", organisation, ""},
				{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "flexsite-organisation-secrets"},
				{"create", "", "secrets", "", namespace, ""},
				{"update", "", "secrets", "", namespace, "flexsite-token-keys"},
				{"get", "", "secrets", "", organisation, "anything"},
				{"list", "", "secrets", "", "", ""},
			},
		}, {
			sa: apiSA,
			may: []access{
				{"create", "flexsite.io", "sites", "", organisation, ""},
				{"update", "flexsite.io", "sites", "status", organisation, "s"}, // a withdrawal in a site's history
				{"create", "flexsite.io", "deviceconnections", "", organisation, ""},
				{"patch", "flexsite.io", "rewardledgers", "", organisation, "l"}, // adoption
				{"create", "flexsite.io", "flexevents", "", organisation, ""},
				{"update", "flexsite.io", "flexevents", "status", organisation, "f"},
				{"update", "flexsite.io", "subscriptions", "status", organisation, "s"},
				{"create", "flexsite.io", "usernameclaims", "", "", ""},
				{"create", "flexsite.io", "enrolmentclaims", "", organisation, ""}, // the Enrolment webhook's
				{"list", "", "namespaces", "", "", ""},
				{"create", "rbac.authorization.k8s.io", "rolebindings", "", organisation, ""},
				{"bind", "rbac.authorization.k8s.io", "clusterroles", "", "", "flexsite-organisation-secrets"},
				{"create", "", "secrets", "", namespace, ""},
				{"create", "events.k8s.io", "events", "", organisation, ""},
				{"update", "coordination.k8s.io", "leases", "", namespace, "flexsite-manager.flexsite.io"},
			},
			// What only the per-site reconcilers do.
			mayNot: []access{
				{"update", "flexsite.io", "assets", "status", organisation, "a"},
				{"update", "flexsite.io", "enrolments", "status", organisation, "e"},
				{"update", "flexsite.io", "enrolments", "finalizers", organisation, "e"},
				{"update", "flexsite.io", "sites", "finalizers", organisation, "s"},
				{"create", "flexsite.io", "rewardledgers", "", organisation, ""},
				{"update", "flexsite.io", "rewardledgers", "status", organisation, "l"},
				{"get", "", "secrets", "", organisation, "anything"},
				{"list", "", "secrets", "", "", ""},
			},
		}} {
			// Polled: the authorizer sees new RBAC objects once its informers have them.
			Eventually(func(g Gomega) {
				for _, a := range c.may {
					g.Expect(may(c.sa, a)).To(BeTrue(), "%s may %+v", c.sa, a)
				}
			}).Should(Succeed())
			for _, a := range c.mayNot {
				Expect(may(c.sa, a)).To(BeFalse(), "%s may not %+v", c.sa, a)
			}
		}

		By("the API server's PodSecurity admission admits a shard's pod where the restricted level is enforced")
		restricted := fmt.Sprintf("restricted-shards-%d", time.Now().UnixNano()%1_000_000)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})).To(Succeed())
		spec := *ctl.Spec.Template.Spec.DeepCopy()
		spec.ServiceAccountName = "" // the chart's ServiceAccount is not created here
		Expect(k8s.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "shard", Namespace: restricted}, Spec: spec},
			client.DryRunAll)).To(Succeed())
	})
})

// access is one request a ServiceAccount may or may not make.
type access struct{ verb, group, resource, subresource, ns, name string }
