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

// What the package map says of imports from outside: the use cases speak no HTTP, the
// household's verdicts take no client. Which of our packages each may import is
// packageMap's (mayimport_test.go).
func TestPackageMap(t *testing.T) {
	all := imports(t)
	if len(all["internal/app"]) == 0 {
		t.Fatal("found no imports of internal/app: is the test run from test/architecture?")
	}
	for dir, imps := range all {
		for _, imp := range imps {
			switch {
			case under(dir, "internal/app") && imp == "net/http":
				t.Errorf("%s imports net/http: the use cases speak no HTTP", dir)
			case under(dir, "internal/household") && (strings.Contains(imp, "controller-runtime") ||
				strings.Contains(imp, "k8s.io/client-go") || imp == "net/http"):
				t.Errorf("%s imports %s: the household's verdicts are pure (internal/householdstore talks to the API server)", dir, imp)
			}
		}
	}
}

// The pure rules import no client, database or HTTP (which of ours they may import is their
// row of packageMap).
func TestPureRules(t *testing.T) {
	isPure := func(dir string) bool {
		return slices.ContainsFunc(pureRules, func(p string) bool { return under(dir, p) })
	}
	all := imports(t)
	if len(all["internal/settlement"]) == 0 {
		t.Fatal("found no imports of internal/settlement: is the test run from test/architecture?")
	}
	for dir, imps := range all {
		if !isPure(dir) {
			continue
		}
		for _, imp := range imps {
			if !strings.HasPrefix(imp, module) && impure(imp) {
				t.Errorf("%s imports %s: the pure rules take their data as arguments", dir, imp)
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
