package chart_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	"github.com/flexsite/flexsite/internal/testenv"
)

// The chart suite renders charts/flexsite with helm and server-side applies every object it
// renders, as a dry run, to a real kube-apiserver (envtest) that has the chart's own CRDs
// installed for real: a misspelt field, a wrong type or a default rule its CRD refuses fails
// here, not in someone's cluster. It renders the default values and each ci/*-values.yaml
// (every toggle on; a certificate without cert-manager).

const (
	release   = "flexsite"
	namespace = "flexsite-system"
)

var (
	helm      string
	chartDir  = filepath.Join(testenv.RepoRoot(), "charts", "flexsite")
	apiServer *envtest.Environment
	k8s       client.Client
)

// helmBinary finds helm: $HELM (make test sets it from hack/ensure-helm.sh), bin/helm (where
// hack/ensure-helm.sh links it), then $PATH.
func helmBinary() string {
	if h := os.Getenv("HELM"); h != "" {
		return h
	}
	if p := filepath.Join(testenv.RepoRoot(), "bin", "helm"); isExecutable(p) {
		return p
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	return ""
}

// readChart reads every file of the chart, so that go test's cache sees them as the test's
// inputs: helm reads them in a child process, which the cache does not watch, and a changed
// chart would otherwise pass on a cached result.
func readChart(t *testing.T) {
	err := filepath.WalkDir(chartDir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		_, err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

func TestChart(t *testing.T) {
	if helm = helmBinary(); helm == "" {
		msg := "helm not found ($HELM, bin/helm, PATH); hack/ensure-helm.sh installs it"
		if os.Getenv("CI") != "" {
			t.Fatalf("%s: CI runs the chart's dry run, so it needs helm", msg)
		}
		t.Skipf("%s: skipping the chart's server-side dry run (CI does not skip it)", msg)
	}
	readChart(t)
	RegisterFailHandler(Fail)
	RunSpecs(t, "Helm chart suite (helm template + server-side dry run against envtest)")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	Expect(os.Getenv("KUBEBUILDER_ASSETS")).NotTo(BeEmpty(),
		"KUBEBUILDER_ASSETS is not set: run `make test`, or export KUBEBUILDER_ASSETS=$(hack/ensure-k8s-binaries.sh)")
	apiServer = &envtest.Environment{
		CRDDirectoryPaths: []string{
			filepath.Join(chartDir, "crds"), // what `helm install` installs before the templates
			filepath.Join("testdata", "crds"),
		},
		ErrorIfCRDPathMissing: true,
	}
	cfg, err := apiServer.Start()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(apiServer.Stop)
	k8s, err = client.New(cfg, client.Options{Scheme: testenv.Scheme})
	Expect(err).NotTo(HaveOccurred())
	// helm install --create-namespace makes the release namespace before anything else.
	Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})).To(Succeed())
}, NodeTimeout(2*time.Minute))

// render runs helm template on the chart with the given values files (relative to the chart).
func render(ctx context.Context, valuesFiles ...string) []*unstructured.Unstructured {
	args := make([]string, 0, 5+2*len(valuesFiles))
	args = append(args, "template", release, chartDir, "--namespace", namespace)
	for _, v := range valuesFiles {
		args = append(args, "--values", filepath.Join(chartDir, v))
	}
	cmd := exec.CommandContext(ctx, helm, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	ExpectWithOffset(1, cmd.Run()).To(Succeed(), "helm %s\n%s", strings.Join(args, " "), stderr.String())

	var objs []*unstructured.Unstructured
	reader := utilyaml.NewYAMLReader(bufio.NewReader(&stdout))
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs
		}
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		data, err := yaml.YAMLToJSON(doc)
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "%s", doc)
		if string(data) == "null" {
			continue // a document of comments only
		}
		// Decoded as the API machinery does: integers as int64, not float64.
		obj := &unstructured.Unstructured{}
		ExpectWithOffset(1, obj.UnmarshalJSON(data)).To(Succeed(), "%s", doc)
		objs = append(objs, obj)
	}
}

// dryRunApply server-side applies obj as helm would place it (namespaced kinds in the release
// namespace), with every admission step and no write (dryRun=All).
func dryRunApply(ctx context.Context, obj *unstructured.Unstructured) error {
	gvk := obj.GroupVersionKind()
	mapping, err := k8s.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return err
	}
	obj = obj.DeepCopy()
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace && obj.GetNamespace() == "" {
		obj.SetNamespace(namespace)
	}
	return k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj),
		client.FieldOwner("helm"), client.ForceOwnership, client.DryRunAll)
}

func kindsOf(objs []*unstructured.Unstructured) []string {
	kinds := make([]string, len(objs))
	for i, o := range objs {
		kinds[i] = o.GetKind()
	}
	return kinds
}

// find returns the rendered object of that kind and name (nil when absent).
func find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

var _ = Describe("charts/flexsite", func() {
	DescribeTable("renders only objects the API server accepts (server-side apply, dry run)",
		func(ctx SpecContext, valuesFile string, present, absent []string) {
			var objs []*unstructured.Unstructured
			if valuesFile == "" {
				objs = render(ctx)
			} else {
				objs = render(ctx, valuesFile)
			}
			Expect(kindsOf(objs)).To(ContainElements(present))
			for _, kind := range absent {
				Expect(kindsOf(objs)).NotTo(ContainElement(kind))
			}
			var refused []string
			for _, obj := range objs {
				if err := dryRunApply(ctx, obj); err != nil {
					refused = append(refused, fmt.Sprintf("%s %s: %v", obj.GetKind(), obj.GetName(), err))
				}
			}
			Expect(refused).To(BeEmpty())
		},
		Entry("with the default values", "",
			[]string{"Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
				"Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Issuer", "Certificate",
				"PodDisruptionBudget", "Proposition", "AssetModel"},
			[]string{"Ingress", "NetworkPolicy", "ServiceMonitor", "PrometheusRule"}),
		Entry("with every toggle on (ci/all-on-values.yaml)", "ci/all-on-values.yaml",
			[]string{"Deployment", "Ingress", "NetworkPolicy", "ServiceMonitor", "PrometheusRule", "Certificate", "PodDisruptionBudget",
				"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "Proposition", "AssetModel"},
			[]string{"Issuer"}), // the certificate comes from the given ClusterIssuer
		Entry("with a certificate of one's own (ci/own-cert-values.yaml)", "ci/own-cert-values.yaml",
			[]string{"Deployment", "NetworkPolicy", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"},
			[]string{"Issuer", "Certificate", "PodDisruptionBudget", "ServiceMonitor", "Proposition"}),
		Entry("with sharding on (ci/sharding-values.yaml)", "ci/sharding-values.yaml",
			[]string{"ControllerRing", "Deployment", "ConfigMap", "Service", "Certificate", "Issuer", "PodDisruptionBudget",
				"NetworkPolicy", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "ServiceAccount"},
			[]string{"ServiceMonitor"}),
		Entry("with sharding on and certificates of one's own (ci/sharding-own-cert-values.yaml)", "ci/sharding-own-cert-values.yaml",
			[]string{"ControllerRing", "Deployment", "ConfigMap", "PodDisruptionBudget"},
			[]string{"Issuer", "Certificate"}),
	)

	It("refuses a misspelt field, so the dry run has teeth", func(ctx SpecContext) {
		deploy := find(render(ctx), "Deployment", release)
		Expect(deploy).NotTo(BeNil())
		Expect(unstructured.SetNestedField(deploy.Object, int64(2), "spec", "replicaz")).To(Succeed())
		err := dryRunApply(ctx, deploy)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(".spec.replicaz: field not declared in schema"))
	})

	It("wires the webhooks, the Ingress and the ServiceMonitor to what it renders", func(ctx SpecContext) {
		objs := render(ctx, "ci/all-on-values.yaml")
		service := func(name string) *corev1.Service {
			obj := find(objs, "Service", name)
			ExpectWithOffset(1, obj).NotTo(BeNil(), "Service %s is not rendered", name)
			svc := &corev1.Service{}
			ExpectWithOffset(1, runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, svc)).To(Succeed())
			return svc
		}
		ports := func(svc *corev1.Service) map[string]int32 {
			m := map[string]int32{}
			for _, p := range svc.Spec.Ports {
				m[p.Name] = p.Port
			}
			return m
		}

		By("the webhook configurations call the webhook Service on 443, whose certificate names it")
		webhookSvc := service(release + "-webhook")
		for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
			var cfg *unstructured.Unstructured
			for _, o := range objs {
				if o.GetKind() == kind {
					cfg = o
				}
			}
			Expect(cfg).NotTo(BeNil())
			Expect(cfg.GetAnnotations()).To(HaveKeyWithValue("cert-manager.io/inject-ca-from", namespace+"/"+release+"-webhook-cert"))
			hooks, _, _ := unstructured.NestedSlice(cfg.Object, "webhooks")
			Expect(hooks).NotTo(BeEmpty())
			for _, h := range hooks {
				svc, _, _ := unstructured.NestedMap(h.(map[string]any), "clientConfig", "service")
				Expect(svc).To(HaveKeyWithValue("name", webhookSvc.Name))
				Expect(svc).To(HaveKeyWithValue("namespace", namespace))
				Expect(svc).To(HaveKeyWithValue("port", int64(443)))
			}
		}
		Expect(ports(webhookSvc)).To(HaveKeyWithValue("webhook", int32(443)))
		cert := find(objs, "Certificate", release+"-webhook-cert")
		Expect(cert).NotTo(BeNil())
		dnsNames, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		Expect(dnsNames).To(ContainElement(webhookSvc.Name + "." + namespace + ".svc"))
		secretName, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName")

		By("the manager mounts the certificate's Secret and has every port the Services target")
		deploy := find(objs, "Deployment", release)
		volumes, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "volumes")
		Expect(volumes).To(ContainElement(HaveKeyWithValue("secret", HaveKeyWithValue("secretName", secretName))))
		containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
		containerPorts := map[string]bool{}
		for _, p := range containers[0].(map[string]any)["ports"].([]any) {
			containerPorts[p.(map[string]any)["name"].(string)] = true
		}
		for _, name := range []string{release + "-api", release + "-webhook", release + "-metrics"} {
			for _, p := range service(name).Spec.Ports {
				Expect(containerPorts).To(HaveKey(p.TargetPort.StrVal), "Service %s targets port %q", name, p.TargetPort.StrVal)
			}
		}

		By("the Ingress routes to the API Service's port, the ServiceMonitor scrapes the metrics Service")
		ingress := find(objs, "Ingress", release+"-api")
		Expect(ingress).NotTo(BeNil())
		rules, _, _ := unstructured.NestedSlice(ingress.Object, "spec", "rules")
		for _, r := range rules {
			paths, _, _ := unstructured.NestedSlice(r.(map[string]any), "http", "paths")
			for _, p := range paths {
				backend, _, _ := unstructured.NestedMap(p.(map[string]any), "backend", "service")
				Expect(backend).To(HaveKeyWithValue("name", release+"-api"))
				portName, _, _ := unstructured.NestedString(backend, "port", "name")
				Expect(ports(service(release + "-api"))).To(HaveKey(portName))
			}
		}
		monitor := find(objs, "ServiceMonitor", release)
		Expect(monitor).NotTo(BeNil())
		selector, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
		metricsSvc := service(release + "-metrics")
		for k, v := range selector {
			Expect(metricsSvc.Labels).To(HaveKeyWithValue(k, v))
		}
		Expect(service(release+"-api").Labels).NotTo(HaveKeyWithValue("app.kubernetes.io/component", "metrics"),
			"the ServiceMonitor must select the metrics Service only")
		endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
		Expect(endpoints).To(ConsistOf(HaveKeyWithValue("port", "metrics")))
		Expect(ports(metricsSvc)).To(HaveKey("metrics"))

		By("the metrics endpoint is HTTPS for authorized scrapers, and the ServiceMonitor scrapes it so")
		Expect(endpoints[0]).To(And(HaveKeyWithValue("scheme", "https"),
			HaveKeyWithValue("bearerTokenFile", "/var/run/secrets/kubernetes.io/serviceaccount/token"),
			HaveKeyWithValue("tlsConfig", HaveKeyWithValue("serverName", "flexsite-metrics.flexsite-system.svc"))))
		args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
		Expect(args).To(ContainElements("--metrics-bind-address=:8443", "--metrics-secure=true",
			"--metrics-cert-dir=/tmp/k8s-metrics-server/metrics-certs"))
		Expect(volumes).To(ContainElement(HaveKeyWithValue("secret", HaveKeyWithValue("secretName", "flexsite-metrics-tls"))))
		reader := find(objs, "ClusterRole", release+"-metrics-reader")
		Expect(reader).NotTo(BeNil())
		rules, _, _ = unstructured.NestedSlice(reader.Object, "rules")
		Expect(rules).To(ConsistOf(And(HaveKeyWithValue("nonResourceURLs", ConsistOf("/metrics")),
			HaveKeyWithValue("verbs", ConsistOf("get")))))
	})

	It("gives the manager no verb on Secrets outside its namespace, and bind on the organisation Secrets ClusterRole only", func(ctx SpecContext) {
		objs := render(ctx)
		rulesOf := func(kind, name string) []any {
			obj := find(objs, kind, name)
			ExpectWithOffset(1, obj).NotTo(BeNil(), "%s %s is not rendered", kind, name)
			rules, _, _ := unstructured.NestedSlice(obj.Object, "rules")
			return rules
		}
		manager := rulesOf("ClusterRole", release+"-manager")
		Expect(manager).NotTo(ContainElement(HaveKeyWithValue("resources", ContainElement("secrets"))))
		Expect(manager).To(ContainElement(And(HaveKeyWithValue("resources", ConsistOf("clusterroles")),
			HaveKeyWithValue("verbs", ConsistOf("bind")), HaveKeyWithValue("resourceNames", ConsistOf("flexsite-organisation-secrets")))))
		Expect(rulesOf("ClusterRole", "flexsite-organisation-secrets")).To(ConsistOf(And(
			HaveKeyWithValue("resources", ConsistOf("secrets")), HaveKeyWithValue("verbs", ConsistOf("get", "create", "update", "delete")))))
		Expect(rulesOf("Role", release+"-manager")).To(ContainElement(And(HaveKeyWithValue("resources", ConsistOf("secrets")),
			HaveKeyWithValue("verbs", Not(ContainElements("list", "watch"))))))
		deploy := find(objs, "Deployment", release)
		containers, _, _ := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
		env, _, _ := unstructured.NestedSlice(containers[0].(map[string]any), "env")
		Expect(env).To(ContainElement(And(HaveKeyWithValue("name", "POD_SERVICE_ACCOUNT"),
			HaveKeyWithValue("valueFrom", HaveKeyWithValue("fieldRef", HaveKeyWithValue("fieldPath", "spec.serviceAccountName"))))))
	})

	It("has the ServiceMonitor skip verifying the self-signed certificate when given no TLS settings", func(ctx SpecContext) {
		objs := render(ctx, "ci/servicemonitor-values.yaml")
		monitor := find(objs, "ServiceMonitor", release)
		Expect(monitor).NotTo(BeNil())
		endpoints, _, _ := unstructured.NestedSlice(monitor.Object, "spec", "endpoints")
		Expect(endpoints).To(ConsistOf(And(HaveKeyWithValue("scheme", "https"),
			HaveKeyWithValue("tlsConfig", HaveKeyWithValue("insecureSkipVerify", true)))))
	})

	It("runs as the image's non-root user with bounded ephemeral storage, within the restricted Pod Security Standard", func(ctx SpecContext) {
		obj := find(render(ctx), "Deployment", release)
		Expect(obj).NotTo(BeNil())
		deploy := &appsv1.Deployment{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, deploy)).To(Succeed())
		pod := deploy.Spec.Template.Spec

		By("the user and group are the Dockerfile's USER, explicit, and above 10000 (kube-score)")
		dockerfile, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "Dockerfile"))
		Expect(err).NotTo(HaveOccurred())
		user := regexp.MustCompile(`(?m)^USER (\d+):(\d+)\s*$`).FindStringSubmatch(string(dockerfile))
		Expect(user).NotTo(BeNil(), "the Dockerfile's USER uid:gid")
		uid, _ := strconv.ParseInt(user[1], 10, 64)
		gid, _ := strconv.ParseInt(user[2], 10, 64)
		Expect(uid).To(BeNumerically(">", 10000))
		Expect(gid).To(BeNumerically(">", 10000))
		Expect(pod.SecurityContext).NotTo(BeNil())
		Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(pod.SecurityContext.RunAsUser).To(HaveValue(Equal(uid)))
		Expect(pod.SecurityContext.RunAsGroup).To(HaveValue(Equal(gid)))
		Expect(pod.Containers).To(HaveLen(1))
		c := pod.Containers[0]
		Expect(c.SecurityContext).NotTo(BeNil())
		Expect(c.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		Expect(c.SecurityContext.RunAsUser).To(HaveValue(Equal(uid)))
		Expect(c.SecurityContext.RunAsGroup).To(HaveValue(Equal(gid)))
		Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))

		By("ephemeral storage is requested and limited, beside CPU and memory")
		Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceEphemeralStorage))
		Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceEphemeralStorage))
		Expect(c.Resources.Requests.StorageEphemeral().Cmp(*c.Resources.Limits.StorageEphemeral())).To(BeNumerically("<=", 0))
		Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceCPU))
		Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory))

		By("the API server's PodSecurity admission admits its pod where the restricted level is enforced")
		restricted := fmt.Sprintf("restricted-%d", time.Now().UnixNano()%1_000_000)
		Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: restricted,
			Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}})).To(Succeed())
		admit := func(spec corev1.PodSpec) error {
			spec.ServiceAccountName = "" // the chart's ServiceAccount is not created here
			return k8s.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "manager", Namespace: restricted}, Spec: spec},
				client.DryRunAll)
		}
		Expect(admit(*pod.DeepCopy())).To(Succeed())
		// ... and refuses one that runs as root, so the check has teeth.
		root := pod.DeepCopy()
		root.Containers[0].SecurityContext.RunAsUser = ptr.To[int64](0)
		err = admit(*root)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring(`violates PodSecurity "restricted:latest"`))
	})

	It("lets the NetworkPolicy allow egress to PostgreSQL, and more (DNS, receivers, SMTP) when asked", func(ctx SpecContext) {
		obj := find(render(ctx, "ci/all-on-values.yaml"), "NetworkPolicy", release)
		Expect(obj).NotTo(BeNil())
		np := &networkingv1.NetworkPolicy{}
		Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, np)).To(Succeed())
		ports := map[int32]bool{}
		for _, rule := range np.Spec.Egress {
			for _, p := range rule.Ports {
				ports[p.Port.IntVal] = true
			}
		}
		Expect(ports).To(And(HaveKey(int32(6443)), HaveKey(int32(5432)), HaveKey(int32(53)), HaveKey(int32(443)), HaveKey(int32(587))))
		Expect(np.Spec.Egress).To(HaveLen(4)) // API server, PostgreSQL, and the two extra rules
	})

	It("passes api.publicURL as --public-url, and refuses an ingress without one", func(ctx SpecContext) {
		template := func(set ...string) (string, error) {
			args := make([]string, 0, 7+2*len(set))
			args = append(args, "template", release, chartDir, "--namespace", namespace, "--show-only", "templates/deployment.yaml")
			for _, kv := range set {
				args = append(args, "--set", kv)
			}
			var stdout, stderr bytes.Buffer
			cmd := exec.CommandContext(ctx, helm, args...)
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			return stdout.String() + stderr.String(), err
		}
		out, err := template("api.ingress.enabled=true")
		Expect(err).To(HaveOccurred(), "an ingress without api.publicURL renders:\n%s", out)
		Expect(out).To(ContainSubstring("api.publicURL is required when api.ingress.enabled"))
		out, err = template("api.ingress.enabled=true", "api.publicURL=http://flexsite.example.com/path")
		Expect(err).To(HaveOccurred(), "a public URL with a path renders:\n%s", out)
		Expect(out).To(ContainSubstring("must be a scheme and a host only"))

		args := func(objs []*unstructured.Unstructured) []string {
			obj := find(objs, "Deployment", release)
			Expect(obj).NotTo(BeNil())
			d := &appsv1.Deployment{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d)).To(Succeed())
			return d.Spec.Template.Spec.Containers[0].Args
		}
		Expect(args(render(ctx, "ci/all-on-values.yaml"))).To(ContainElement("--public-url=https://flexsite.example.com"))
		for _, a := range args(render(ctx)) {
			Expect(a).NotTo(HavePrefix("--public-url"), "no ingress, no public URL: the request's host")
		}
		out, err = template("api.ingress.enabled=true", "api.publicURL=https://flexsite.example.com/")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("- --public-url=https://flexsite.example.com\n"))
	})

	It("reads the database URL from the Secret database.existingSecret names (CloudNativePG's <cluster>-app)", func(ctx SpecContext) {
		for values, secret := range map[string]string{"": "flexsite-database", "ci/cloudnativepg-values.yaml": "flexsite-db-app"} {
			var objs []*unstructured.Unstructured
			if values == "" {
				objs = render(ctx)
			} else {
				objs = render(ctx, values)
			}
			obj := find(objs, "Deployment", release)
			Expect(obj).NotTo(BeNil())
			d := &appsv1.Deployment{}
			Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, d)).To(Succeed())
			var ref *corev1.SecretKeySelector
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				if e.Name == "FLEXSITE_DATABASE_URL" && e.ValueFrom != nil {
					ref = e.ValueFrom.SecretKeyRef
				}
			}
			Expect(ref).NotTo(BeNil(), values)
			Expect(ref.Name).To(Equal(secret), values)
			Expect(ref.Key).To(Equal("uri"), values)
		}
	})
})
