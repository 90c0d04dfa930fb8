package v1alpha1

import (
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestSiteAssetsBound: the Site CRD's status.assets holds MaxSiteAssets items, no fewer. A
// smaller bound refuses the status of a site onboarded with more assets, and its eligibility
// is then never current (every read of it answers 503).
func TestSiteAssetsBound(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "flexsite.io_sites.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	type schema struct {
		MaxItems   *int64            `json:"maxItems"`
		Properties map[string]schema `json:"properties"`
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string `json:"name"`
				Schema struct {
					OpenAPIV3Schema schema `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Name != GroupVersion.Version {
			continue
		}
		assets := v.Schema.OpenAPIV3Schema.Properties["status"].Properties["assets"]
		if assets.MaxItems == nil || *assets.MaxItems != MaxSiteAssets {
			t.Fatalf("status.assets maxItems = %v, want MaxSiteAssets (%d)", ptrText(assets.MaxItems), MaxSiteAssets)
		}
		return
	}
	t.Fatalf("the Site CRD has no version %s", GroupVersion.Version)
}

func ptrText(n *int64) any {
	if n == nil {
		return "none"
	}
	return *n
}
