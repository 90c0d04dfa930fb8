package bootstrap_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/testenv"
)

// kubectl records what it applied as the object's JSON without the annotation, an empty
// annotations map left where the file had none, and a newline (k8s.io/kubectl's
// GetModifiedConfiguration with the unstructured JSON encoder).
func TestSetLastAppliedAsKubectlRecordsIt(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "demo", "labels": map[string]any{"flexsite.io/organisation": "demo"}},
	}}
	if err := bootstrap.SetLastApplied(obj); err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{},"labels":{"flexsite.io/organisation":"demo"},"name":"demo"}}` + "\n"
	if got := obj.GetAnnotations()[corev1.LastAppliedConfigAnnotation]; got != want {
		t.Errorf("last-applied:\n got %q\nwant %q", got, want)
	}

	// An object's own annotations are kept, and recorded; setting it again changes nothing.
	obj.SetAnnotations(map[string]string{"a": "b", corev1.LastAppliedConfigAnnotation: "stale"})
	if err := bootstrap.SetLastApplied(obj); err != nil {
		t.Fatal(err)
	}
	first := obj.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
	want = `{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{"a":"b"},"labels":{"flexsite.io/organisation":"demo"},"name":"demo"}}` + "\n"
	if first != want || obj.GetAnnotations()["a"] != "b" {
		t.Errorf("last-applied with an annotation: got %q, annotations %v", first, obj.GetAnnotations())
	}
	if err := bootstrap.SetLastApplied(obj); err != nil || obj.GetAnnotations()[corev1.LastAppliedConfigAnnotation] != first {
		t.Errorf("setting it again changed it: %v %q", err, obj.GetAnnotations()[corev1.LastAppliedConfigAnnotation])
	}
}

// env is the API server the tests share (envtest); nil when KUBEBUILDER_ASSETS is unset, and
// then the tests that need it skip (`make test` sets it).
var env *testenv.Env

func TestMain(m *testing.M) {
	os.Exit(testenv.RunShared(m, &env))
}

// newClient is a client of the real API server, or skips the test without one.
func newClient(t *testing.T) client.Client {
	t.Helper()
	if env == nil {
		t.Skip("KUBEBUILDER_ASSETS is not set: run `make test`")
	}
	return env.Client
}

// The default rules are created as `kubectl apply -f config/rules/` would create them, so the
// samples' copies of them (config/samples/01_propositions.yaml, 02_assetmodels.yaml) apply
// without a warning and unchanged; existing objects are left alone.
func TestApplyDefaultsRecordsTheAppliedConfiguration(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	// envtest installs the default rules itself: start from a cluster without them.
	for _, obj := range []client.Object{&flexv1.Proposition{}, &flexv1.AssetModel{}} {
		if err := c.DeleteAllOf(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join("..", "..", "config", "rules")
	n, err := bootstrap.ApplyDefaults(ctx, c, dir)
	if err != nil {
		t.Fatal(err)
	}
	if n != 8 {
		t.Errorf("created %d objects, want the 3 propositions and 5 asset models", n)
	}
	p := &flexv1.Proposition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "price-curve"}, p); err != nil {
		t.Fatal(err)
	}
	var recorded map[string]any
	if err := json.Unmarshal([]byte(p.Annotations[corev1.LastAppliedConfigAnnotation]), &recorded); err != nil {
		t.Fatalf("last-applied of price-curve: %v (%q)", err, p.Annotations)
	}
	if spec, _ := recorded["spec"].(map[string]any); spec["proposition"] != "price_curve" || recorded["kind"] != "Proposition" {
		t.Errorf("last-applied of price-curve: %v", recorded)
	}

	// A platform team's edit survives a restart.
	p.Spec.Description = "edited"
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	if n, err := bootstrap.ApplyDefaults(ctx, c, dir); err != nil || n != 0 {
		t.Fatalf("second ApplyDefaults: created %d, %v", n, err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: "price-curve"}, p); err != nil || p.Spec.Description != "edited" {
		t.Errorf("the edit was undone: %v %q", err, p.Spec.Description)
	}
}

// The samples repeat the default rules, so that `kubectl apply -f config/samples/` on a
// cluster without them (e.g. a chart with defaultRules.enabled=false) has what its households
// need; the copies must stay identical to config/rules, or make run's apply would change them.
func TestSamplesRepeatTheDefaultRules(t *testing.T) {
	for sample, rules := range map[string]string{
		"01_propositions.yaml": "propositions.yaml",
		"02_assetmodels.yaml":  "assetmodels.yaml",
	} {
		a, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", sample))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("..", "..", "config", "rules", rules))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("config/samples/%s differs from config/rules/%s", sample, rules)
		}
	}
}

// The demo organisation's namespace is created as applying config/samples/00_organisation.yaml
// would create it.
func TestDemoNamespaceAsTheSampleDeclaresIt(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	if err := bootstrap.EnsureOrganisation(ctx, c, bootstrap.DemoOrganisation("pw")); err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, client.ObjectKey{Name: bootstrap.DemoNamespace}, ns); err != nil {
		t.Fatal(err)
	}
	want := `{"apiVersion":"v1","kind":"Namespace","metadata":{"annotations":{},"labels":{"flexsite.io/organisation":"demo"},"name":"demo"}}` + "\n"
	if got := ns.Annotations[corev1.LastAppliedConfigAnnotation]; got != want {
		t.Errorf("demo namespace's last-applied: %q, want %q", got, want)
	}
}

// An API client may hold every role: the demo organisation's does. The CRD once bounded roles
// at 7 when prices_write made them 8, and the API server refused the demo's client.
func TestAnAPIClientHoldsEveryRole(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	org := bootstrap.DemoOrganisation("every-role-password")
	org.Namespace, org.Username = "every-role", "every-role"
	if err := bootstrap.EnsureOrganisation(ctx, c, org); err != nil {
		t.Fatalf("an API client with all %d roles: %v", len(flexv1.Roles), err)
	}
}
