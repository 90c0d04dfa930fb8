package architecture

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// pollers are Gomega's polling assertions: the function each is handed runs again until it
// passes, so a failure inside it must be the attempt's (the Gomega the function is handed), not
// the spec's.
var pollers = map[string]bool{"Eventually": true, "Consistently": true, "EventuallyWithOffset": true,
	"ConsistentlyWithOffset": true}

// globalAsserts are the dot-imported assertions that fail the whole spec at once.
var globalAsserts = map[string]bool{"Expect": true, "ExpectWithOffset": true, "Ω": true}

// TestPolledFunctionsUseTheirGomega: inside a function handed to Eventually or Consistently,
// an assertion through the global Expect ends the spec on the first transient error instead
// of trying again (docs/development.md, "Flakes"). Every polled function asserts through the
// Gomega it is handed (func(g Gomega)), in every test of both modules.
func TestPolledFunctionsUseTheirGomega(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	// The test files, by package directory: a helper of the package that asserts through the
	// global Expect (call, mustCall...) is as wrong inside a polled function as Expect itself.
	files := map[string][]*ast.File{}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "bin", "node_modules", "vendor", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files[filepath.Dir(path)] = append(files[filepath.Dir(path)], file)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, pkg := range files {
		asserting := assertingHelpers(pkg)
		for _, file := range pkg {
			checked++
			ast.Inspect(file, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok || !pollers[calleeName(call.Fun)] {
					return true
				}
				for _, arg := range call.Args {
					if lit, ok := arg.(*ast.FuncLit); ok {
						reportGlobalAsserts(t, fset, root, lit.Body, asserting)
					}
				}
				return true
			})
		}
	}
	if checked < 50 {
		t.Fatalf("only %d test files read: is the walk rooted at the repository?", checked)
	}
}

// assertingHelpers are the package's functions and methods whose own bodies assert through
// the global Expect (outside any polled function of theirs).
func assertingHelpers(pkg []*ast.File) map[string]bool {
	out := map[string]bool{}
	for _, file := range pkg {
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if usesGlobalAssert(fn.Body) {
				out[fn.Name.Name] = true
			}
		}
	}
	return out
}

// usesGlobalAssert tells whether body calls a global assertion itself.
func usesGlobalAssert(body ast.Node) bool {
	found := false
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.CallExpr:
			if pollers[calleeName(n.Fun)] {
				return false // its own polled function is judged where it is
			}
			if id, ok := n.Fun.(*ast.Ident); ok && globalAsserts[id.Name] {
				found = true
			}
		case *ast.Ident:
			// Gomega's Default is the global Gomega: a helper that hands it on asserts
			// through the global Expect.
			found = found || n.Name == "Default"
		}
		return !found
	})
	return found
}

// reportGlobalAsserts reports each global assertion, and each call of an asserting helper, in
// a polled function's body.
func reportGlobalAsserts(t *testing.T, fset *token.FileSet, root string, body ast.Node, asserting map[string]bool) {
	t.Helper()
	ast.Inspect(body, func(n ast.Node) bool {
		inner, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		pos := fset.Position(inner.Pos())
		rel, _ := filepath.Rel(root, pos.Filename)
		switch f := inner.Fun.(type) {
		case *ast.Ident:
			if globalAsserts[f.Name] {
				t.Errorf("%s:%d: the global %s inside a polled function: assert through the Gomega it is handed",
					rel, pos.Line, f.Name)
			} else if asserting[f.Name] {
				t.Errorf("%s:%d: %s asserts through the global Expect, inside a polled function: "+
					"call a form that takes the Gomega the function is handed", rel, pos.Line, f.Name)
			}
		case *ast.SelectorExpr:
			if _, isPkg := f.X.(*ast.Ident); isPkg && asserting[f.Sel.Name] {
				t.Errorf("%s:%d: %s asserts through the global Expect, inside a polled function: "+
					"call a form that takes the Gomega the function is handed", rel, pos.Line, f.Sel.Name)
			}
		}
		return true
	})
}

// calleeName is the name a call is made by: f for f(...) and x.f(...).
func calleeName(fun ast.Expr) string {
	switch f := fun.(type) {
	case *ast.Ident:
		return f.Name
	case *ast.SelectorExpr:
		return f.Sel.Name
	case *ast.IndexExpr:
		return calleeName(f.X)
	}
	return ""
}
