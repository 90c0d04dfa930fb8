package chart_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	configv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/config/v1alpha1"
	shardingv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/sharding/v1alpha1"
	"github.com/timebertt/kubernetes-controller-sharding/pkg/controller/controllerring"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/flexsite/flexsite/internal/shards"
)

// What the manager's --shard and the sharder agree on (issue 38's decisions): the ring's name
// and resources, and the sharder's release (go.mod's github.com/timebertt/kubernetes-controller-sharding).
const (
	controllerRing = "flexsite"
	sharderImage   = "ghcr.io/timebertt/kubernetes-controller-sharding/sharder:v0.11.0"
	sharder        = release + "-sharder"
	// webhookConfig is the MutatingWebhookConfiguration upstream's sharder applies for the ring.
	webhookConfig = "controllerring-" + controllerRing
	// controllersTier names the controller tier's Deployment and ServiceAccount.
	controllersTier = release + "-controllers"
)

// as converts a rendered object into its typed form (nil-safe: fails when it was not rendered).
func as[T any](obj *unstructured.Unstructured, kind, name string) *T {
	ExpectWithOffset(1, obj).NotTo(BeNil(), "%s %s is not rendered", kind, name)
	out := new(T)
	ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, out)).To(Succeed())
	return out
}

var _ = Describe("charts/flexsite with sharding.enabled", func() {
	It("renders no part of sharding with the default values", func(ctx SpecContext) {
		objs := render(ctx)
		Expect(kindsOf(objs)).NotTo(ContainElement("ControllerRing"))
		for _, o := range objs {
			Expect(o.GetName()).NotTo(HavePrefix(sharder), "%s %s", o.GetKind(), o.GetName())
		}
		manager := as[appsv1.Deployment](find(objs, "Deployment", release), "Deployment", release).Spec.Template.Spec.Containers[0]
		Expect(manager.Args).NotTo(ContainElement(HavePrefix("--shard")))
		Expect(manager.Args).NotTo(ContainElement(HavePrefix("--tier")), "one workload: the default tier, all")
		Expect(manager.Env).NotTo(ContainElement(HaveField("Name", "POD_NAME")))
		Expect(find(objs, "Deployment", controllersTier)).To(BeNil(), "no controller tier")
	})

	It("renders the ControllerRing, the sharder at upstream's release and the manager's --shard, wired to each other", func(ctx SpecContext) {
		objs := render(ctx, "ci/sharding-values.yaml")

		By("the ControllerRing flexsite is internal/shards' Ring: Sites and the objects each controls, in organisation namespaces")
		ring := as[shardingv1alpha1.ControllerRing](find(objs, "ControllerRing", controllerRing), "ControllerRing", controllerRing)
		Expect(ring.Name).To(Equal(shards.RingName))
		Expect(ring.Spec).To(Equal(shards.Ring().Spec))
		Expect(ring.Spec.NamespaceSelector).NotTo(BeNil())

		By("the release's Deployment is the API tier, leader-elected; the controller tier's shards are named after their pods")
		manager := as[appsv1.Deployment](find(objs, "Deployment", release), "Deployment", release)
		Expect(manager.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--tier=api", "--leader-elect",
			"--controllers-service-account="+controllersTier))
		Expect(manager.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--shard")))
		shardsDeploy := as[appsv1.Deployment](find(objs, "Deployment", controllersTier), "Deployment", controllersTier)
		Expect(shardsDeploy.Spec.Template.Spec.Containers[0].Args).To(ContainElements("--tier=controllers", "--leader-elect"))
		Expect(shardsDeploy.Spec.Template.Spec.Containers[0].Args).NotTo(ContainElement(HavePrefix("--sharder")))
		Expect(shardsDeploy.Spec.Template.Spec.Containers[0].Env).To(ContainElement(And(HaveField("Name", "POD_NAME"),
			HaveField("ValueFrom.FieldRef.FieldPath", "metadata.name"))))
		leases := as[rbacv1.Role](find(objs, "Role", release+"-leader-election"), "Role", release+"-leader-election")
		Expect(leases.Rules).To(ContainElement(And(HaveField("Resources", ContainElement("leases")),
			HaveField("Verbs", ContainElements("get", "create", "update")))), "the shard Lease")

		By("the sharder is upstream's image, leader-elected, with its config and webhook certificate mounted")
		deploy := as[appsv1.Deployment](find(objs, "Deployment", sharder), "Deployment", sharder)
		Expect(deploy.Spec.Replicas).To(HaveValue(BeEquivalentTo(2)))
		pod := deploy.Spec.Template.Spec
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.Image).To(Equal(sharderImage))
		Expect(c.Args).To(ConsistOf("--config=/config.yaml"))
		Expect(c.VolumeMounts).To(ContainElements(
			And(HaveField("MountPath", "/config.yaml"), HaveField("SubPath", "config")),
			HaveField("MountPath", "/tmp/k8s-webhook-server/serving-certs")))
		volumes := map[string]corev1.Volume{}
		for _, v := range pod.Volumes {
			volumes[v.Name] = v
		}
		configMap := as[corev1.ConfigMap](find(objs, "ConfigMap", sharder+"-config"), "ConfigMap", sharder+"-config")
		Expect(volumes).To(HaveKeyWithValue("config", HaveField("ConfigMap.Name", configMap.Name)))
		Expect(pod.ServiceAccountName).To(Equal(sharder))
		Expect(find(objs, "ServiceAccount", sharder)).NotTo(BeNil())

		By("its SharderConfig points the leader Lease and the webhook at the release namespace, and cert-manager at its certificate")
		// Upstream's own type, strictly: a field the sharder would not know fails here.
		var cfg configv1alpha1.SharderConfig
		Expect(yaml.UnmarshalStrict([]byte(configMap.Data["config"]), &cfg)).To(Succeed(), configMap.Data["config"])
		Expect(cfg.APIVersion).To(Equal("config.sharding.timebertt.dev/v1alpha1"))
		Expect(cfg.Kind).To(Equal("SharderConfig"))
		Expect(cfg.LeaderElection.LeaderElect).To(HaveValue(BeTrue()))
		Expect(cfg.LeaderElection.ResourceNamespace).To(Equal(namespace))
		Expect(cfg.Controller.Sharder.SyncPeriod.Duration).To(Equal(5 * time.Minute))
		Expect(cfg.ClientConnection.QPS).To(BeNumerically("==", 100), "the sharder's request rate, which bounds a hand-over")
		service := as[corev1.Service](find(objs, "Service", sharder), "Service", sharder)
		Expect(cfg.Webhook.Config.ClientConfig.Service.Name).To(Equal(service.Name))
		Expect(cfg.Webhook.Config.ClientConfig.Service.Namespace).To(Equal(namespace))
		Expect(service.Spec.Ports).To(ContainElement(And(HaveField("Name", "webhook"),
			HaveField("Port", *cfg.Webhook.Config.ClientConfig.Service.Port))))
		cert := find(objs, "Certificate", sharder+"-webhook-cert")
		Expect(cert).NotTo(BeNil())
		Expect(cfg.Webhook.Config.Annotations).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/"+cert.GetName()))
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		Expect(dnsNames).To(ContainElement(service.Name + "." + namespace + ".svc"))
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")
		Expect(volumes).To(ContainElement(HaveField("Secret.SecretName", secretName)))
		issuer, _, _ := unstructured.NestedString(cert.Object, "spec", "issuerRef", "name")
		Expect(find(objs, "Issuer", issuer)).NotTo(BeNil(), "the self-signed Issuer the chart makes")

		By("the sharder's Service selects its pods and targets ports they have; no object of the manager selects them")
		sharderPods := labels.Set(deploy.Spec.Template.Labels)
		Expect(labels.SelectorFromSet(service.Spec.Selector).Matches(sharderPods)).To(BeTrue())
		ports := map[string]bool{}
		for _, p := range c.Ports {
			ports[p.Name] = true
		}
		for _, p := range service.Spec.Ports {
			Expect(ports).To(HaveKey(p.TargetPort.StrVal))
		}
		managerPods := labels.Set(manager.Spec.Template.Labels)
		for _, name := range []string{release + "-api", release + "-webhook", release + "-metrics"} {
			svc := as[corev1.Service](find(objs, "Service", name), "Service", name)
			Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(sharderPods)).To(BeFalse(), "Service %s selects the sharder", name)
		}
		selects := func(selector *metav1.LabelSelector, pods labels.Set) bool {
			s, err := metav1.LabelSelectorAsSelector(selector)
			ExpectWithOffset(1, err).NotTo(HaveOccurred())
			return s.Matches(pods)
		}
		managerPDB := as[policyv1.PodDisruptionBudget](find(objs, "PodDisruptionBudget", release), "PodDisruptionBudget", release)
		Expect(selects(managerPDB.Spec.Selector, sharderPods)).To(BeFalse())
		sharderPDB := as[policyv1.PodDisruptionBudget](find(objs, "PodDisruptionBudget", sharder), "PodDisruptionBudget", sharder)
		Expect(selects(sharderPDB.Spec.Selector, sharderPods)).To(BeTrue())
		Expect(selects(sharderPDB.Spec.Selector, managerPods)).To(BeFalse())

		By("the sharder may list and patch the ring's objects (their shard and drain labels), and nothing more on them")
		ringRole := as[rbacv1.ClusterRole](find(objs, "ClusterRole", sharder+"-controllerring"), "ClusterRole", sharder+"-controllerring")
		Expect(ringRole.Rules).To(ConsistOf(And(HaveField("APIGroups", ConsistOf("flexsite.io")),
			HaveField("Resources", ConsistOf("sites", "assets", "enrolments", "deviceconnections", "rewardledgers")),
			HaveField("Verbs", ConsistOf("list", "patch")))))
		for _, binding := range []string{sharder + "-controllerring", sharder, sharder + "-metrics-auth"} {
			b := as[rbacv1.ClusterRoleBinding](find(objs, "ClusterRoleBinding", binding), "ClusterRoleBinding", binding)
			Expect(b.RoleRef.Name).To(Equal(binding))
			Expect(b.Subjects).To(ConsistOf(And(HaveField("Kind", "ServiceAccount"), HaveField("Name", sharder),
				HaveField("Namespace", namespace))))
		}
		sharderRole := as[rbacv1.ClusterRole](find(objs, "ClusterRole", sharder), "ClusterRole", sharder)
		Expect(sharderRole.Rules).To(ContainElements(
			And(HaveField("Resources", ConsistOf("mutatingwebhookconfigurations")), HaveField("Verbs", ConsistOf("patch")),
				HaveField("ResourceNames", ConsistOf(webhookConfig))),
			And(HaveField("Resources", ConsistOf("leases")), HaveField("Verbs", ConsistOf("list", "watch"))),
			And(HaveField("Resources", ConsistOf("controllerrings/status")), HaveField("Verbs", ContainElement("patch")))))
		Expect(find(objs, "MutatingWebhookConfiguration", webhookConfig)).NotTo(BeNil(), "the ring's webhook configuration, made by the chart")
		leaderRole := as[rbacv1.Role](find(objs, "Role", sharder+"-leader-election"), "Role", sharder+"-leader-election")
		Expect(leaderRole.Rules).To(ContainElement(And(HaveField("Resources", ConsistOf("leases")),
			HaveField("Verbs", ConsistOf("get", "create", "update")))))

		By("the NetworkPolicy lets the API server reach the sharder's webhook, and the sharder reach the API server only")
		np := as[networkingv1.NetworkPolicy](find(objs, "NetworkPolicy", sharder), "NetworkPolicy", sharder)
		Expect(selects(&np.Spec.PodSelector, sharderPods)).To(BeTrue())
		Expect(selects(&np.Spec.PodSelector, managerPods)).To(BeFalse())
		Expect(np.Spec.Ingress).To(ContainElement(HaveField("Ports", ContainElement(HaveField("Port.StrVal", "webhook")))))
		Expect(np.Spec.Egress).To(ConsistOf(HaveField("Ports", ConsistOf(HaveField("Port.IntVal", int32(6443))))))
		managerNP := as[networkingv1.NetworkPolicy](find(objs, "NetworkPolicy", release), "NetworkPolicy", release)
		Expect(selects(&managerNP.Spec.PodSelector, sharderPods)).To(BeFalse())

		By("the API server's PodSecurity admission admits the sharder's pod where the restricted level is enforced")
		restricted := fmt.Sprintf("restricted-sharder-%d", time.Now().UnixNano()%1_000_000)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})).To(Succeed())
		spec := *pod.DeepCopy()
		spec.ServiceAccountName = "" // the chart's ServiceAccount is not created here
		Expect(k8s.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "sharder", Namespace: restricted}, Spec: spec},
			client.DryRunAll)).To(Succeed())
	})

	It("lets the sharder's ServiceAccount do what one ring needs and no more (SubjectAccessReviews; upstream's ControllerRing reconcile run as it)", func(ctx SpecContext) {
		objs := render(ctx, "ci/sharding-values.yaml")
		By("the chart's RBAC, its ControllerRing and the ring's webhook configuration, created for real")
		for _, kind := range []string{"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ControllerRing", "MutatingWebhookConfiguration"} {
			for _, o := range objs {
				if o.GetKind() != kind || (kind == "MutatingWebhookConfiguration" && o.GetName() != webhookConfig) {
					continue
				}
				if kind == "Role" || kind == "RoleBinding" {
					if o.GetNamespace() == "" {
						o.SetNamespace(namespace)
					}
				}
				Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("helm"),
					client.ForceOwnership)).To(Succeed(),
					"%s %s", kind, o.GetName())
			}
		}
		organisation := fmt.Sprintf("org-%d", time.Now().UnixNano()%1_000_000)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: organisation,
			Labels: map[string]string{"flexsite.io/organisation": organisation}}})).To(Succeed())

		user := "system:serviceaccount:" + namespace + ":" + sharder
		may := func(verb, group, resource, subresource, ns, name string) bool {
			GinkgoHelper()
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: group, Resource: resource,
					Subresource: subresource, Namespace: ns, Name: name}}}
			Expect(k8s.Create(ctx, review)).To(Succeed())
			return review.Status.Allowed
		}
		type access struct{ verb, group, resource, subresource, ns, name string }
		// Polled: the authorizer sees new RBAC objects once its informers have them.
		Eventually(func(g Gomega) {
			for _, a := range []access{
				{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", webhookConfig},
				{"list", "coordination.k8s.io", "leases", "", "", ""},
				{"watch", "coordination.k8s.io", "leases", "", "", ""},
				{"update", "coordination.k8s.io", "leases", "", namespace, "flexsite-abc12"},
				{"patch", "coordination.k8s.io", "leases", "", namespace, "flexsite-abc12"},
				{"delete", "coordination.k8s.io", "leases", "", namespace, "flexsite-abc12"},
				{"list", "", "namespaces", "", "", ""},
				{"get", "sharding.timebertt.dev", "controllerrings", "", "", controllerRing},
				{"update", "sharding.timebertt.dev", "controllerrings", "status", "", controllerRing},
				{"list", "flexsite.io", "sites", "", "", ""},
				{"patch", "flexsite.io", "sites", "", organisation, "site-1"},
				{"patch", "flexsite.io", "rewardledgers", "", organisation, "ledger-1"},
				{"create", "", "events", "", "default", ""},
			} {
				g.Expect(may(a.verb, a.group, a.resource, a.subresource, a.ns, a.name)).To(BeTrue(), "%+v", a)
			}
		}).Should(Succeed())
		for _, a := range []access{
			{"create", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "controllerring-other"},
			{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", "controllerring-other"},
			{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", release + "-mutating-webhook-configuration"},
			{"delete", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "", webhookConfig},
			{"patch", "admissionregistration.k8s.io", "validatingwebhookconfigurations", "", "", ""},
			{"update", "coordination.k8s.io", "leases", "", "kube-system", "kube-controller-manager"},
			{"patch", "coordination.k8s.io", "leases", "", "kube-system", "kube-scheduler"},
			{"delete", "coordination.k8s.io", "leases", "", organisation, "anything"},
			{"create", "coordination.k8s.io", "leases", "", "kube-system", ""},
			{"get", "", "secrets", "", namespace, "flexsite-token-keys"},
			{"patch", "", "secrets", "", organisation, "anything"},
			{"list", "", "secrets", "", "", ""},
			{"patch", "", "configmaps", "", namespace, ""},
			{"update", "flexsite.io", "sites", "", organisation, "site-1"},
			{"delete", "flexsite.io", "sites", "", organisation, "site-1"},
			{"create", "flexsite.io", "sites", "", organisation, ""},
			{"patch", "flexsite.io", "organisations", "", "", ""},
			{"create", "", "events", "", "kube-system", ""},
			{"delete", "sharding.timebertt.dev", "controllerrings", "", "", controllerRing},
		} {
			Expect(may(a.verb, a.group, a.resource, a.subresource, a.ns, a.name)).To(BeFalse(), "%+v", a)
		}

		By("upstream's ControllerRing reconcile, as the sharder: it fills in the chart's webhook configuration and the ring's status")
		cfg := rest.CopyConfig(apiServer.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
			Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
		scheme := runtime.NewScheme()
		Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
		Expect(shardingv1alpha1.AddToScheme(scheme)).To(Succeed())
		asSharder, err := client.New(cfg, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		configMap := as[corev1.ConfigMap](find(objs, "ConfigMap", sharder+"-config"), "ConfigMap", sharder+"-config")
		var sharderConfig configv1alpha1.SharderConfig
		Expect(yaml.UnmarshalStrict([]byte(configMap.Data["config"]), &sharderConfig)).To(Succeed())
		reconciler := &controllerring.Reconciler{Client: client.WithFieldOwner(asSharder, "controllerring-controller"),
			Recorder: record.NewFakeRecorder(10), Clock: clock.RealClock{}, Config: &sharderConfig}
		Eventually(func(g Gomega) {
			_, err := reconciler.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: controllerRing}})
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		hooks := &admissionregistrationv1.MutatingWebhookConfiguration{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: webhookConfig}, hooks)).To(Succeed())
		Expect(hooks.Webhooks).To(HaveLen(1))
		Expect(hooks.Webhooks[0].NamespaceSelector).To(Equal(shards.Ring().Spec.NamespaceSelector),
			"the webhook labels new objects of organisation namespaces only")
		Expect(hooks.Webhooks[0].ClientConfig.Service).To(HaveField("Name", sharder))
		applied := controllerring.WebhookConfigForControllerRing(shards.Ring(), sharderConfig.Webhook.Config)
		Expect(find(objs, "MutatingWebhookConfiguration", webhookConfig).GetLabels()).To(
			And(HaveKeyWithValue(shardingv1alpha1.LabelControllerRing, controllerRing), HaveKeyWithValue("app.kubernetes.io/name", "controller-sharding")))
		for k, v := range applied.Labels {
			Expect(hooks.Labels).To(HaveKeyWithValue(k, v), "the chart's labels and the sharder's agree")
		}

		By("of the ring's objects it may change the ring's shard and drain labels, and nothing else (the chart's ValidatingAdmissionPolicy)")
		for _, kind := range []string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
			o := find(objs, kind, sharder+"-ring-labels-only")
			Expect(o).NotTo(BeNil(), kind)
			Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(o.DeepCopy()), client.FieldOwner("helm"),
				client.ForceOwnership)).To(Succeed(), kind)
		}
		site := &unstructured.Unstructured{}
		site.SetAPIVersion("flexsite.io/v1alpha1")
		site.SetKind("Site")
		site.SetNamespace(organisation)
		site.SetName("site-1")
		site.SetLabels(map[string]string{"flexsite.io/household": "h1"})
		Expect(unstructured.SetNestedField(site.Object, "12 High Street", "spec", "streetAddress")).To(Succeed())
		Expect(k8s.Create(ctx, site)).To(Succeed())
		patchAsSharder := func(patch string) error {
			return asSharder.Patch(ctx, site.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch)))
		}
		// Each try changes the spec anew: a try that got in before the policy was in force
		// leaves the spec as it patched it, and the same patch again would change nothing.
		tries := 0
		Eventually(func(g Gomega) {
			tries++
			err := patchAsSharder(fmt.Sprintf(`{"spec":{"streetAddress":"%d High Street"}}`, 100+tries))
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring("the sharder may not change the spec"))
		}).WithTimeout(30*time.Second).Should(Succeed(), "the policy is in force once the API server has it")
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(site), site)).To(Succeed())
		spec, _, _ := unstructured.NestedMap(site.Object, "spec")
		for patch, refusal := range map[string]string{
			`{"metadata":{"labels":{"flexsite.io/household":"h2"}}}`:                   "only the ring's shard and drain labels",
			`{"metadata":{"labels":{"flexsite.io/household":null}}}`:                   "only the ring's shard and drain labels",
			`{"metadata":{"labels":{"shard.alpha.sharding.timebertt.dev/other":"x"}}}`: "only the ring's shard and drain labels",
			`{"metadata":{"annotations":{"note":"x"}}}`:                                "annotations, finalizers or owners",
			`{"metadata":{"finalizers":["example.com/hold"]}}`:                         "annotations, finalizers or owners",
		} {
			err := patchAsSharder(patch)
			Expect(err).To(HaveOccurred(), patch)
			Expect(err.Error()).To(ContainSubstring(refusal), patch)
			Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: a 422, %v", patch, err)
		}
		Expect(patchAsSharder(fmt.Sprintf(`{"metadata":{"labels":{%q:"flexsite-abc12"}}}`, shards.ShardLabel))).To(Succeed())
		Expect(patchAsSharder(fmt.Sprintf(`{"metadata":{"labels":{%q:"true"}}}`, shards.DrainLabel))).To(Succeed())
		Expect(patchAsSharder(fmt.Sprintf(`{"metadata":{"labels":{%q:null,%q:null}}}`, shards.ShardLabel, shards.DrainLabel))).To(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(site), site)).To(Succeed())
		Expect(site.GetLabels()).To(Equal(map[string]string{"flexsite.io/household": "h1"}))
		Expect(site.Object["spec"]).To(Equal(spec))

		By("the same apply of a webhook configuration of another name is refused: it would be a create")
		other := controllerring.WebhookConfigForControllerRing(&shardingv1alpha1.ControllerRing{
			ObjectMeta: metav1.ObjectMeta{Name: "other"}}, sharderConfig.Webhook.Config)
		//nolint:staticcheck // the very call upstream's sharder (v0.11.0) makes
		err = client.WithFieldOwner(asSharder, "controllerring-controller").Patch(ctx, other, client.Apply)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
	})

	It("gives the sharder's webhook the CA of one's own certificate without cert-manager, and refuses to render without its Secret", func(ctx SpecContext) {
		objs := render(ctx, "ci/sharding-own-cert-values.yaml")
		configMap := as[corev1.ConfigMap](find(objs, "ConfigMap", sharder+"-config"), "ConfigMap", sharder+"-config")
		var cfg configv1alpha1.SharderConfig
		Expect(yaml.UnmarshalStrict([]byte(configMap.Data["config"]), &cfg)).To(Succeed(), configMap.Data["config"])
		Expect(cfg.Webhook.Config.Annotations).NotTo(HaveKey("cert-manager.io/inject-ca-from"))
		values := map[string]any{}
		Expect(yaml.Unmarshal(readChartFile("ci/sharding-own-cert-values.yaml"), &values)).To(Succeed())
		caBundle, _, _ := unstructured.NestedString(values, "webhook", "caBundle")
		Expect(caBundle).NotTo(BeEmpty())
		Expect(base64.StdEncoding.EncodeToString(cfg.Webhook.Config.ClientConfig.CABundle)).To(Equal(caBundle),
			"webhook.caBundle, when sharding's own is empty")
		deploy := as[appsv1.Deployment](find(objs, "Deployment", sharder), "Deployment", sharder)
		Expect(deploy.Spec.Template.Spec.Volumes).To(ContainElement(HaveField("Secret.SecretName", "flexsite-sharder-webhook-tls")))

		out, err := templateWith(ctx, "ci/own-cert-values.yaml", "sharding.enabled=true")
		Expect(err).To(HaveOccurred(), "sharding without cert-manager and without the sharder's Secret renders:\n%s", out)
		Expect(out).To(ContainSubstring("sharding.sharder.webhook.secretName is required"))
	})
})

// readChartFile reads a file of the chart (relative to it).
func readChartFile(rel string) []byte {
	data, err := os.ReadFile(filepath.Join(chartDir, rel))
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return data
}

// templateWith runs helm template with a values file and --set pairs, and returns its output
// and error output together, for a render the chart must refuse.
func templateWith(ctx context.Context, valuesFile string, set ...string) (string, error) {
	args := make([]string, 0, 7+2*len(set))
	args = append(args, "template", release, chartDir, "--namespace", namespace, "--values", filepath.Join(chartDir, valuesFile))
	for _, kv := range set {
		args = append(args, "--set", kv)
	}
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
