package index

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// plainIndexes are the index constants a field selector may name: plain field indexes of the
// cache that are selectable fields of the CRDs too (Register).
var plainIndexes = map[string]bool{"AssetModel": true, "Username": true}

// No field selector anywhere in the module selects by a bucketed key: the cache has no field
// index of their values, so such a List fails at run time (or, on a reader that wraps the
// cache, never finds anything). Outside this package a selector's field is a plain index
// constant (index.AssetModel, index.Username) or a literal naming no bucketed key; a test
// may spell one out for the API server's selectors. Every lookup by a bucketed key goes
// through a Lookup.
func TestNoFieldSelectorByBucketedKey(t *testing.T) {
	bucketed := map[string]bool{}
	for _, k := range bucketedIndexes {
		bucketed[k.field] = true
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	self := filepath.Join(root, "internal", "index")
	files := 0
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || rel == "bin" || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Dir(path) == self {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		isTest := strings.HasSuffix(path, "_test.go")
		check := func(key ast.Expr) {
			if why := badSelectorField(key, bucketed, isTest); why != "" {
				t.Errorf("%s: a field selector %s: find through an index.Lookup (or, on the API server, "+
					"index.NewAPIServerLookup and index.OfSiteOnAPIServer)", fset.Position(key.Pos()), why)
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CompositeLit:
				if isSelectorOf(n.Type, "MatchingFields") {
					for _, elt := range n.Elts {
						if kv, ok := elt.(*ast.KeyValueExpr); ok {
							check(kv.Key)
						}
					}
				}
			case *ast.CallExpr:
				// fields.OneTermEqualSelector(field, value), as in a MatchingFieldsSelector or
				// ListOptions.FieldSelector; and fields.Set{...} below.
				if isSelectorOf(n.Fun, "OneTermEqualSelector") && len(n.Args) > 0 {
					check(n.Args[0])
				}
			}
			if lit, ok := n.(*ast.CompositeLit); ok && isSelectorOf(lit.Type, "Set") && isPackage(lit.Type, "fields") {
				for _, elt := range lit.Elts {
					if kv, ok := elt.(*ast.KeyValueExpr); ok {
						check(kv.Key)
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: not the module", files, root)
	}
}

// badSelectorField says what is wrong with a field selector's field outside this package
// ("" when nothing).
func badSelectorField(key ast.Expr, bucketed map[string]bool, isTest bool) string {
	switch k := key.(type) {
	case *ast.SelectorExpr:
		if pkg, ok := k.X.(*ast.Ident); ok && pkg.Name == "index" {
			if plainIndexes[k.Sel.Name] {
				return ""
			}
			return "by index." + k.Sel.Name + ", which is no plain field index"
		}
		return "by " + exprString(key) + ", which is no index constant"
	case *ast.BasicLit:
		v, err := strconv.Unquote(k.Value)
		if err != nil || !bucketed[v] || isTest {
			return ""
		}
		return "by the bucketed key " + k.Value
	}
	return "by " + exprString(key) + ", which names no index"
}

// isSelectorOf reports whether e is x.name (client.MatchingFields, fields.OneTermEqualSelector).
func isSelectorOf(e ast.Expr, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	return ok && sel.Sel.Name == name
}

func isPackage(e ast.Expr, pkg string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == pkg
}

func exprString(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprString(e.X) + "." + e.Sel.Name
	}
	return "an expression"
}

// The bucketed indexes are the package's fixed table, not state that an init() fills: no
// package-level map, and no init().
func TestNoRegistry(t *testing.T) {
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, e.Name(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && d.Name.Name == "init" {
					t.Errorf("%s: an init()", fset.Position(d.Pos()))
				}
			case *ast.GenDecl:
				if d.Tok != token.VAR {
					continue
				}
				for _, spec := range d.Specs {
					vs := spec.(*ast.ValueSpec)
					for _, v := range vs.Values {
						if lit, ok := v.(*ast.CompositeLit); ok {
							if _, isMap := lit.Type.(*ast.MapType); isMap {
								t.Errorf("%s: a package-level map %s", fset.Position(vs.Pos()), vs.Names[0].Name)
							}
						}
					}
					if _, isMap := vs.Type.(*ast.MapType); isMap {
						t.Errorf("%s: a package-level map %s", fset.Position(vs.Pos()), vs.Names[0].Name)
					}
				}
			}
		}
	}
}
