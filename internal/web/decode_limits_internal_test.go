package web

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// crdMaxLength reads a field's maxLength ("Site.spec.email") from the CRDs themselves, not
// from the generated validation.CRDMaxLength, so that a stale generation fails here too.
func crdMaxLength(t *testing.T, field string) (int, bool) {
	t.Helper()
	kind, path, _ := strings.Cut(field, ".")
	files, err := filepath.Glob("../../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs under config/crd/bases: %v", err)
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd map[string]any
		if err := yaml.Unmarshal(data, &crd); err != nil {
			t.Fatal(err)
		}
		spec := crd["spec"].(map[string]any)
		if spec["names"].(map[string]any)["kind"] != kind {
			continue
		}
		node := spec["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)
		for _, step := range strings.Split(path, ".") {
			name, items := strings.CutSuffix(step, "[*]")
			next, ok := node["properties"].(map[string]any)[name].(map[string]any)
			if !ok {
				return 0, false
			}
			if items {
				next = next["items"].(map[string]any)
			}
			node = next
		}
		n, ok := node["maxLength"].(float64)
		return int(n), ok
	}
	return 0, false
}

func TestRESTFieldsStoredInAnObjectHaveTheirCRDFieldsLimit(t *testing.T) {
	if len(storedAs) == 0 {
		t.Fatal("no REST field is stored in an object")
	}
	for key, field := range storedAs {
		want, ok := crdMaxLength(t, field)
		if !ok {
			t.Errorf("%s is stored in %s, which has no maxLength", key, field)
			continue
		}
		if got := maxLengths[key]; got != want {
			t.Errorf("%s is bounded at %d characters, its CRD field %s at %d", key, got, field, want)
		}
		if _, twice := ownMaxLengths[key]; twice {
			t.Errorf("%s has a bound of its own and its CRD field's", key)
		}
	}
}
