package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flexsite/flexsite/internal/testenv"
)

// The installer is what `make build-installer` renders into dist/install.yaml: config/default
// followed by config/rules. A server-side dry run of it against a real API server catches
// schema mistakes in the manifests (a misspelt field, a string where an integer belongs)
// before anyone installs them.

// manifestDoc is one object of a rendered manifest, with its original text.
type manifestDoc struct {
	Text string
	GVK  schema.GroupVersionKind
	Name string
}

// renderInstaller renders the installer as `make build-installer` does (with the kustomize
// built into kubectl rather than the kustomize binary: the same renderer).
func renderInstaller(ctx context.Context) string {
	root := testenv.RepoRoot()
	def := mustKubectl(Default, ctx, "kustomize", filepath.Join(root, "config", "default"))
	rules := mustKubectl(Default, ctx, "kustomize", filepath.Join(root, "config", "rules"))
	return def + "---\n" + rules
}

// splitManifest splits a multi-document YAML stream into its objects.
func splitManifest(stream string) []manifestDoc {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(stream)))
	var docs []manifestDoc
	for {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		ExpectWithOffset(1, err).NotTo(HaveOccurred())
		if len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		var obj metav1.PartialObjectMetadata
		ExpectWithOffset(1, utilyaml.Unmarshal(raw, &obj)).To(Succeed(), "%s", raw)
		if obj.Kind == "" {
			continue // a document of comments only
		}
		docs = append(docs, manifestDoc{Text: string(raw), GVK: obj.GroupVersionKind(), Name: obj.Name})
	}
}

func joinManifest(docs []manifestDoc) string {
	texts := make([]string, len(docs))
	for i, d := range docs {
		texts[i] = strings.TrimRight(d.Text, "\n") + "\n"
	}
	return strings.Join(texts, "---\n")
}

// dryRun server-side applies the manifest file as a dry run.
func dryRun(ctx context.Context, file string) run {
	return kubectl(ctx, "apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", file)
}

var _ = Describe("The installer (make build-installer)", func() {
	var docs []manifestDoc
	var dir string

	BeforeEach(func(ctx SpecContext) {
		dir = GinkgoT().TempDir()
		var kept []manifestDoc
		for _, d := range splitManifest(renderInstaller(ctx)) {
			// cert-manager is not installed in envtest: its Certificate and Issuer would be
			// refused as unknown kinds, so they are left out of the dry run.
			if d.GVK.Group == "cert-manager.io" {
				continue
			}
			kept = append(kept, d)
		}
		docs = kept
		// The rendered manager namespace already exists (BeforeSuite creates flexsite-system
		// for the token keys), so the dry run can place the namespaced objects in it.
		Expect(env.Client.Get(ctx, clientKey("", keysNamespace), &metav1.PartialObjectMetadata{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}})).To(Succeed())
	})

	kinds := func(docs []manifestDoc) []string {
		out := make([]string, len(docs))
		for i, d := range docs {
			out[i] = d.GVK.Kind
		}
		return out
	}

	It("is accepted by a server-side dry run", func(ctx SpecContext) {
		Expect(kinds(docs)).To(ContainElements("Namespace", "CustomResourceDefinition", "ClusterRole",
			"Deployment", "Service", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
			"Proposition", "AssetModel"))
		file := filepath.Join(dir, "install.yaml")
		Expect(os.WriteFile(file, []byte(joinManifest(docs)), 0o600)).To(Succeed())

		r := dryRun(ctx, file)
		Expect(r.Err).NotTo(HaveOccurred(), "%s", r)
		Expect(r.Stdout).To(ContainSubstring("deployment.apps/flexsite-controller-manager serverside-applied (server dry run)"))
		Expect(strings.Count(r.Stdout, "(server dry run)")).To(Equal(len(docs)), "%s", r)
	})

	It("refuses a broken copy, so the check has teeth", func(ctx SpecContext) {
		replicas := regexp.MustCompile(`(?m)^  replicas: [0-9]+$`)
		broken := false
		for i, d := range docs {
			if d.GVK.Kind == "Deployment" && replicas.MatchString(d.Text) {
				docs[i].Text = replicas.ReplaceAllString(d.Text, `  replicas: "two"`)
				broken = true
			}
		}
		Expect(broken).To(BeTrue(), "the installer's Deployment must set spec.replicas")
		file := filepath.Join(dir, "broken.yaml")
		Expect(os.WriteFile(file, []byte(joinManifest(docs)), 0o600)).To(Succeed())

		r := dryRun(ctx, file)
		Expect(r.Err).To(HaveOccurred(), "%s", r)
		Expect(r.Stderr).To(ContainSubstring("flexsite-controller-manager"))
		Expect(r.Stderr).To(ContainSubstring(".spec.replicas: expected numeric"))
	})
})
