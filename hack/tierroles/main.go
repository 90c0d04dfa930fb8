// Command tierroles writes the RBAC of each tier (docs/scale.md, "Two tiers") from the
// +kubebuilder:rbac markers, as controller-gen writes the whole manager's (config/rbac/role.yaml):
// the controller tier gets the markers of the per-site reconcilers (and of what every tier
// runs), the API tier every other marker. `make manifests` runs it; it writes
// config/rbac/api_tier_role.yaml and config/rbac/controller_tier_role.yaml.
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// perSite are the files of the per-site reconcilers: the controller tier's work only.
var perSite = []string{
	"controllers/site_controller.go",
	"controllers/asset_controller.go",
	"controllers/enrolment_controller.go",
	"controllers/deviceconnection_controller.go",
	"controllers/rewardledger_controller.go",
}

// everyTier are files whose markers both tiers need: the per-site reconcilers' notifications,
// and the metrics endpoint's authentication.
var everyTier = []string{
	"controllers/notifications.go",
	"internal/metrics/server.go",
}

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "tierroles:", err)
		os.Exit(1)
	}
}

func run(root string) error {
	markers, err := readMarkers(root)
	if err != nil {
		return err
	}
	var api, ctl []marker
	for _, m := range markers {
		switch {
		case slices.Contains(everyTier, m.file):
			api, ctl = append(api, m), append(ctl, m)
		case slices.Contains(perSite, m.file):
			ctl = append(ctl, m)
		default:
			api = append(api, m)
		}
	}
	for name, ms := range map[string][]marker{"api-tier-role": api, "controller-tier-role": ctl} {
		out, err := render(name, ms)
		if err != nil {
			return err
		}
		file := filepath.Join(root, "config", "rbac", strings.ReplaceAll(strings.TrimSuffix(name, "-role"), "-", "_")+"_role.yaml")
		if err := os.WriteFile(file, out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// marker is one +kubebuilder:rbac marker.
type marker struct {
	file                                    string
	groups, resources, verbs, resourceNames []string
	namespace                               string
}

const prefix = "// +kubebuilder:rbac:"

// readMarkers reads the markers of the module's Go files (not its tests, nor the test module).
func readMarkers(root string) ([]marker, error) {
	var out []marker
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || rel == "test" || rel == "bin" || rel == "dist" || rel == "hack") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			m := marker{file: filepath.ToSlash(rel)}
			for _, field := range strings.Split(strings.TrimPrefix(line, prefix), ",") {
				key, value, _ := strings.Cut(field, "=")
				values := strings.Split(value, ";")
				switch key {
				case "groups":
					for i, g := range values {
						values[i] = strings.Trim(g, `"`)
					}
					m.groups = values
				case "resources":
					m.resources = values
				case "verbs":
					m.verbs = values
				case "resourceNames":
					m.resourceNames = values
				case "namespace":
					m.namespace = value
				default:
					return fmt.Errorf("%s: marker field %q", rel, key)
				}
			}
			out = append(out, m)
		}
		return sc.Err()
	})
	return out, err
}

// render writes a ClusterRole of the markers without a namespace, and a Role per namespace.
func render(name string, ms []marker) ([]byte, error) {
	byNamespace := map[string][]marker{}
	for _, m := range ms {
		byNamespace[m.namespace] = append(byNamespace[m.namespace], m)
	}
	namespaces := make([]string, 0, len(byNamespace))
	for ns := range byNamespace {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	var buf bytes.Buffer
	for _, ns := range namespaces {
		obj := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1"}
		meta := metav1.ObjectMeta{Name: name, Namespace: ns}
		if ns == "" {
			obj["kind"] = "ClusterRole"
		} else {
			obj["kind"] = "Role"
		}
		obj["metadata"] = meta
		obj["rules"] = rules(byNamespace[ns])
		data, err := yaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		buf.WriteString("---\n")
		buf.Write(bytes.ReplaceAll(data, []byte("  creationTimestamp: null\n"), nil))
	}
	return buf.Bytes(), nil
}

// rules merges the markers' grants: one rule per group, resource names and verbs, listing
// every resource granted exactly those (as controller-gen groups them).
func rules(ms []marker) []rbacv1.PolicyRule {
	type key struct{ group, resource, names string }
	verbs := map[key][]string{}
	for _, m := range ms {
		for _, g := range m.groups {
			for _, r := range m.resources {
				k := key{g, r, strings.Join(m.resourceNames, ";")}
				for _, v := range m.verbs {
					if !slices.Contains(verbs[k], v) {
						verbs[k] = append(verbs[k], v)
					}
				}
			}
		}
	}
	type rule struct{ group, names, verbs string }
	resources := map[rule][]string{}
	for k, vs := range verbs {
		slices.Sort(vs)
		r := rule{k.group, k.names, strings.Join(vs, ";")}
		resources[r] = append(resources[r], k.resource)
	}
	out := make([]rbacv1.PolicyRule, 0, len(resources))
	for r, rs := range resources {
		slices.Sort(rs)
		pr := rbacv1.PolicyRule{APIGroups: []string{r.group}, Resources: rs, Verbs: strings.Split(r.verbs, ";")}
		if r.names != "" {
			pr.ResourceNames = strings.Split(r.names, ";")
		}
		out = append(out, pr)
	}
	slices.SortFunc(out, func(a, b rbacv1.PolicyRule) int {
		return strings.Compare(a.APIGroups[0]+"/"+strings.Join(a.Resources, ","), b.APIGroups[0]+"/"+strings.Join(b.Resources, ","))
	})
	return out
}
