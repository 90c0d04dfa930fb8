package household

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// LoadRules reuses the rules it built while the catalogue is unchanged, and sees every
// change (update, create, delete) at once.
func TestLoadRulesFollowsTheCatalogue(t *testing.T) {
	ctx := context.Background()
	scheme := runtime.NewScheme()
	if err := flexv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	model := func(name, modelName string, uid types.UID) *flexv1.AssetModel {
		return &flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid},
			Spec: flexv1.AssetModelSpec{ModelName: modelName}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(model("a", "zappi", "uid-a")).Build()
	has := func(step, modelName string, want bool) {
		t.Helper()
		rules, err := LoadRules(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := rules.Model(modelName); ok != want {
			t.Fatalf("%s: model %q known = %v, want %v", step, modelName, ok, want)
		}
	}
	has("initial", "zappi", true)
	first := lastRules.Load()
	has("unchanged", "zappi", true)
	if lastRules.Load() != first {
		t.Fatal("rules rebuilt although the catalogue did not change")
	}

	m := &flexv1.AssetModel{}
	if err := c.Get(ctx, types.NamespacedName{Name: "a"}, m); err != nil {
		t.Fatal(err)
	}
	m.Spec.ModelName = "eddi"
	if err := c.Update(ctx, m); err != nil {
		t.Fatal(err)
	}
	has("updated", "zappi", false)
	has("updated", "eddi", true)

	if err := c.Create(ctx, model("b", "zappi", "uid-b")); err != nil {
		t.Fatal(err)
	}
	has("created", "zappi", true)

	if err := c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	has("deleted", "eddi", false)
	has("deleted", "zappi", true)

	// Objects without identity (not read from an API server) are never cached.
	bare := fake.NewClientBuilder().WithScheme(scheme).WithObjects(model("c", "ohme", "")).Build()
	before := lastRules.Load()
	if rules, err := LoadRules(ctx, bare); err != nil {
		t.Fatal(err)
	} else if _, ok := rules.Model("ohme"); !ok {
		t.Fatal("model of an uncached catalogue unknown")
	}
	if lastRules.Load() != before {
		t.Fatal("rules cached for objects without a UID")
	}
}
