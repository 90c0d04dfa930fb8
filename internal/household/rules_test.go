package household

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// LoadRules reuses the rules it built while the listed catalogue is unchanged, and sees every
// change (update, create, delete) at once. (A REST API spec follows an AssetModel change through
// the real API server; here the listings are given.)
func TestRulesForFollowsTheCatalogue(t *testing.T) {
	model := func(modelName string, uid types.UID, rv string) flexv1.AssetModel {
		return flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: string(uid), UID: uid, ResourceVersion: rv},
			Spec: flexv1.AssetModelSpec{ModelName: modelName}}
	}
	steps := []struct {
		name    string
		models  []flexv1.AssetModel
		known   map[string]bool
		rebuilt bool
	}{
		{"initial", []flexv1.AssetModel{model("zappi", "a", "1")}, map[string]bool{"zappi": true}, true},
		{"unchanged", []flexv1.AssetModel{model("zappi", "a", "1")}, map[string]bool{"zappi": true}, false},
		{"updated", []flexv1.AssetModel{model("eddi", "a", "2")}, map[string]bool{"zappi": false, "eddi": true}, true},
		{"created", []flexv1.AssetModel{model("eddi", "a", "2"), model("zappi", "b", "3")},
			map[string]bool{"zappi": true, "eddi": true}, true},
		{"deleted", []flexv1.AssetModel{model("zappi", "b", "3")}, map[string]bool{"zappi": true, "eddi": false}, true},
		{"replaced by another model", []flexv1.AssetModel{model("ohme", "c", "3")},
			map[string]bool{"zappi": false, "ohme": true}, true},
	}
	for _, step := range steps {
		before := lastRules.Load()
		rules := RulesFor(nil, step.models)
		for name, want := range step.known {
			if _, ok := rules.Model(name); ok != want {
				t.Fatalf("%s: model %q known = %v, want %v", step.name, name, ok, want)
			}
		}
		if rebuilt := lastRules.Load() != before; rebuilt != step.rebuilt {
			t.Fatalf("%s: rebuilt = %v, want %v", step.name, rebuilt, step.rebuilt)
		}
	}

	// Objects without identity (not read from an API server) are never cached.
	before := lastRules.Load()
	if _, ok := RulesFor(nil, []flexv1.AssetModel{model("ohme", "", "")}).Model("ohme"); !ok {
		t.Fatal("model of an uncached catalogue unknown")
	}
	if lastRules.Load() != before {
		t.Fatal("rules cached for objects without a UID")
	}
}
