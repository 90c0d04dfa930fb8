package architecture

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// projectResource is one resource of kubebuilder's PROJECT file (config version 3).
type projectResource struct {
	API *struct {
		CRDVersion string `json:"crdVersion"`
		Namespaced bool   `json:"namespaced"`
	} `json:"api"`
	Controller bool   `json:"controller"`
	Domain     string `json:"domain"`
	Group      string `json:"group"`
	Kind       string `json:"kind"`
	Path       string `json:"path"`
	Version    string `json:"version"`
	Webhooks   *struct {
		Defaulting     bool   `json:"defaulting"`
		Validation     bool   `json:"validation"`
		WebhookVersion string `json:"webhookVersion"`
	} `json:"webhooks"`
}

// kindFacts is what the tree says of a kind: from api/v1alpha1's markers, the controllers'
// For(...) and webhook/'s +kubebuilder:webhook markers.
type kindFacts struct {
	namespaced, controller, defaulting, validation bool
}

var (
	typeLine      = regexp.MustCompile(`^type (\w+) struct`)
	forLine       = regexp.MustCompile(`For\(&(\w+)\.(\w+)\{\}`)
	webhookMarker = regexp.MustCompile(`^// \+kubebuilder:webhook:.*\bmutating=(true|false)\b.*\bresources=(\w+)`)
)

// scanLines calls f with each line of every non-test Go file in dir.
func scanLines(t *testing.T, dir string, f func(line string)) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(file)
		for s.Scan() {
			f(strings.TrimSpace(s.Text()))
		}
		_ = file.Close()
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// treeKinds reads every kind the tree defines and what serves it.
func treeKinds(t *testing.T, root string) map[string]*kindFacts {
	t.Helper()
	kinds := map[string]*kindFacts{}
	var markers []string
	scanLines(t, filepath.Join(root, "api/v1alpha1"), func(line string) {
		switch m := typeLine.FindStringSubmatch(line); {
		case strings.HasPrefix(line, "//"):
			markers = append(markers, line)
		case line == "":
		case m != nil && slices.Contains(markers, "// +kubebuilder:object:root=true") && !strings.HasSuffix(m[1], "List"):
			kinds[m[1]] = &kindFacts{namespaced: !slices.ContainsFunc(markers, func(l string) bool {
				return strings.HasPrefix(l, "// +kubebuilder:resource:") && strings.Contains(l, "scope=Cluster")
			})}
			markers = nil
		default:
			markers = nil
		}
	})
	plural := map[string]string{}
	for kind := range kinds {
		plural[strings.ToLower(kind)+"s"] = kind
	}
	// The controllers' packages: controllers/ and those below it (controllers/organisation).
	controllerDirs := []string{filepath.Join(root, "controllers")}
	entries, _ := os.ReadDir(controllerDirs[0])
	for _, e := range entries {
		if e.IsDir() {
			controllerDirs = append(controllerDirs, filepath.Join(controllerDirs[0], e.Name()))
		}
	}
	forEachLine := func(f func(string)) {
		for _, dir := range controllerDirs {
			scanLines(t, dir, f)
		}
	}
	forEachLine(func(line string) {
		if m := forLine.FindStringSubmatch(line); m != nil {
			key := m[2]
			if m[1] != "flexv1" {
				key = m[1] + "/" + m[2] // a kind of another group, e.g. corev1/Namespace
			}
			if kinds[key] == nil {
				kinds[key] = &kindFacts{}
			}
			kinds[key].controller = true
		}
	})
	scanLines(t, filepath.Join(root, "webhook"), func(line string) {
		if m := webhookMarker.FindStringSubmatch(line); m != nil {
			k := kinds[plural[m[2]]]
			if k == nil {
				t.Errorf("webhook/ serves %s, which is no kind of api/v1alpha1", m[2])
				return
			}
			if m[1] == "true" {
				k.defaulting = true
			} else {
				k.validation = true
			}
		}
	})
	return kinds
}

// PROJECT is what kubebuilder reads before it scaffolds: a kind missing from it is one that
// `kubebuilder create api` would scaffold again beside the one we have. It describes every
// kind, with its scope, controller and webhooks, as the tree has them.
func TestProjectFile(t *testing.T) {
	root, _ := filepath.Abs("../..")
	data, err := os.ReadFile(filepath.Join(root, "PROJECT"))
	if err != nil {
		t.Fatal(err)
	}
	var project struct {
		Domain      string            `json:"domain"`
		Layout      []string          `json:"layout"`
		ProjectName string            `json:"projectName"`
		Repo        string            `json:"repo"`
		Resources   []projectResource `json:"resources"`
		Version     string            `json:"version"`
	}
	if err := yaml.UnmarshalStrict(data, &project); err != nil {
		t.Fatalf("PROJECT: %v", err)
	}
	if project.Version != "3" || project.Repo != strings.TrimSuffix(module, "/") || project.Domain != "io" {
		t.Errorf("PROJECT: version %q, repo %q, domain %q", project.Version, project.Repo, project.Domain)
	}
	tree := treeKinds(t, root)
	if len(tree) < 13 {
		t.Fatalf("found %d kinds in the tree: is the test run from test/architecture?", len(tree))
	}
	described := map[string]bool{}
	for _, r := range project.Resources {
		key := r.Kind
		if r.Group == "core" {
			key = "corev1/" + r.Kind
		} else if r.Group != "flexsite" || r.Domain != "io" || r.Version != "v1alpha1" || r.Path != module+"api/v1alpha1" {
			t.Errorf("PROJECT: %s is %s.%s/%s at %s, not the flexsite.io/v1alpha1 of api/v1alpha1", r.Kind, r.Group, r.Domain, r.Version, r.Path)
		}
		described[key] = true
		want := tree[key]
		if want == nil {
			t.Errorf("PROJECT describes %s, which the tree does not have", key)
			continue
		}
		if r.Controller != want.controller {
			t.Errorf("PROJECT: %s controller: %v, the tree: %v", key, r.Controller, want.controller)
		}
		if r.Group == "core" {
			continue
		}
		if r.API == nil || r.API.CRDVersion != "v1" || r.API.Namespaced != want.namespaced {
			t.Errorf("PROJECT: %s api: %+v, the tree: namespaced %v", key, r.API, want.namespaced)
		}
		var defaulting, validation bool
		if r.Webhooks != nil {
			defaulting, validation = r.Webhooks.Defaulting, r.Webhooks.Validation
			if r.Webhooks.WebhookVersion != "v1" {
				t.Errorf("PROJECT: %s webhookVersion %q", key, r.Webhooks.WebhookVersion)
			}
		}
		if defaulting != want.defaulting || validation != want.validation {
			t.Errorf("PROJECT: %s webhooks defaulting %v validation %v, webhook/: %v %v",
				key, defaulting, validation, want.defaulting, want.validation)
		}
	}
	for key := range tree {
		if !described[key] {
			t.Errorf("PROJECT does not describe %s: kubebuilder create api would scaffold it again", key)
		}
	}
}

// The manager's module carries no test-only dependency: the browser suite's chromedp and the
// OAuth provider's fosite belong to the test module (test/browser/go.mod). go mod tidy
// writes every module the build needs into go.mod, so one listed there is one the manager's
// module graph holds.
func TestManagerModuleHasNoTestOnlyDependencies(t *testing.T) {
	root, _ := filepath.Abs("../..")
	data, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []string{"github.com/ory/fosite", "github.com/chromedp/", "github.com/ory/"} {
		if strings.Contains(string(data), m) {
			t.Errorf("go.mod requires %s: it belongs to the test module (test/browser/go.mod)", m)
		}
	}
}
