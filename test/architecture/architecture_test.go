// Package architecture holds the package map to what docs/architecture.md says of it: which
// package may import which. It reads the imports of every non-test Go file, so a change that
// breaks the map fails here, not in a review.
package architecture

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/flexsite/flexsite/"

// The doors translate a use case's answer into their own language; no door imports another.
var doors = []string{"internal/restapi", "internal/hostedflow", "internal/rewardspage", "internal/devicecallback", "controllers",
	"webhook"}

// The pure rules: no client, no database, no HTTP, no files; of ours, only the API types and
// other pure rules. Each is a function of its arguments, so its table tests say everything.
var pure = []string{"internal/settlement", "internal/validation", "internal/units", "internal/claim",
	"internal/eligibility", "internal/identity"}

// impure reports whether a pure package may not import imp (a standard or third-party path).
func impure(imp string) bool {
	for _, p := range []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go", "net/http", "database/sql",
		"github.com/jackc/", "github.com/lib/pq", "os", "os/exec", "io/fs"} {
		if imp == p || strings.HasPrefix(imp, p+"/") || (strings.HasSuffix(p, "/") && strings.HasPrefix(imp, p)) {
			return true
		}
	}
	return false
}

// imports maps each package directory (relative to the module root) to what its non-test
// files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir := filepath.ToSlash(filepath.Dir(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if !slices.Contains(out[dir], p) {
				out[dir] = append(out[dir], p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// under reports whether package dir is pkg or below it.
func under(dir, pkg string) bool { return dir == pkg || strings.HasPrefix(dir, pkg+"/") }

func TestPackageMap(t *testing.T) {
	all := imports(t)
	if len(all["internal/app"]) == 0 {
		t.Fatal("found no imports of internal/app: is the test run from test/architecture?")
	}
	for dir, imps := range all {
		for _, imp := range imps {
			local := strings.TrimPrefix(imp, module)
			isLocal := local != imp
			switch {
			case under(dir, "internal/app") && imp == "net/http":
				t.Errorf("%s imports net/http: the use cases speak no HTTP", dir)
			case under(dir, "internal/app") && isLocal && slices.ContainsFunc(append(doors, "internal/web", "internal/server"),
				func(d string) bool { return under(local, d) }):
				t.Errorf("%s imports %s: the use cases know no door", dir, local)
			case under(dir, "internal/household") && (strings.Contains(imp, "controller-runtime") ||
				strings.Contains(imp, "k8s.io/client-go") || imp == "net/http"):
				t.Errorf("%s imports %s: the household's verdicts are pure (internal/householdstore talks to the API server)", dir, imp)
			case under(dir, "internal/web") && isLocal && slices.ContainsFunc(append(doors, "internal/server"),
				func(d string) bool { return under(local, d) }):
				t.Errorf("%s imports %s: the shared plumbing knows no door", dir, local)
			}
			for _, door := range doors {
				if !isLocal || !under(dir, door) {
					continue
				}
				for _, other := range append(doors, "internal/server") {
					if other != door && under(local, other) {
						t.Errorf("door %s imports %s: a door never imports another door", dir, local)
					}
				}
				if (door == "controllers" || door == "webhook") && (under(local, "internal/app") || under(local, "internal/web")) {
					t.Errorf("%s imports %s: controllers and admission webhooks apply the household's rules themselves", dir, local)
				}
			}
		}
	}
}

// The pure rules import no client, database or HTTP, and of ours only the API types and
// other pure rules.
func TestPureRules(t *testing.T) {
	isPure := func(dir string) bool { return slices.ContainsFunc(pure, func(p string) bool { return under(dir, p) }) }
	all := imports(t)
	if len(all["internal/settlement"]) == 0 {
		t.Fatal("found no imports of internal/settlement: is the test run from test/architecture?")
	}
	for dir, imps := range all {
		if !isPure(dir) {
			continue
		}
		for _, imp := range imps {
			local := strings.TrimPrefix(imp, module)
			switch {
			case local == imp && impure(imp):
				t.Errorf("%s imports %s: the pure rules take their data as arguments", dir, imp)
			case local != imp && local != "api/v1alpha1" && !isPure(local):
				t.Errorf("%s imports %s: a pure rule imports only the API types and other pure rules", dir, local)
			}
		}
	}
}

// No package of ours is above 3,000 hand-written lines: a package that grows past it holds
// more than one thing.
func TestPackageSize(t *testing.T) {
	root, _ := filepath.Abs("../..")
	sizes := map[string]int{}
	for _, top := range []string{"internal", "controllers", "webhook"} {
		_ = filepath.WalkDir(filepath.Join(root, top), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") ||
				strings.HasPrefix(d.Name(), "zz_generated") {
				return err
			}
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			sizes[filepath.ToSlash(rel)] += strings.Count(string(data), "\n")
			return nil
		})
	}
	for dir, n := range sizes {
		if n > 3000 {
			t.Errorf("%s has %d hand-written lines (more than 3,000): split it by what it holds", dir, n)
		}
	}
}
