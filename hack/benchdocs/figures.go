package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// benchFigure is a figure the bench can write, read from its source: every call of the
// report's add (4 arguments) and addTarget (5) in cmd/flexsite-bench. A name built from
// constants, literals, loops over literal lists and one-line helpers is exact; what the
// source cannot tell (a field, a parameter) is a "*", so a pattern matches every name the
// call may produce.
type benchFigure struct {
	Pattern string // scenario.key, with * where the source cannot tell
	Target  bool   // written by addTarget
	Bound   string // the target as the source writes it ("<= 2"), when it can tell
	Pos     string // file:line of the call
}

// maxPatterns bounds the names one expression may expand to before it becomes "*".
const maxPatterns = 64

// benchFigures parses and type-checks the bench's package in dir (its imports stubbed: only
// its own constants, variables and functions matter here) and returns the figures it writes.
func benchFigures(dir string) ([]benchFigure, error) {
	fset := token.NewFileSet()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	e := &evaluator{
		info:  &types.Info{Types: map[ast.Expr]types.TypeAndValue{}, Defs: map[*ast.Ident]types.Object{}, Uses: map[*ast.Ident]types.Object{}},
		decls: map[types.Object]decl{},
	}
	conf := types.Config{Importer: stubImporter{}, Error: func(error) {}}
	_, _ = conf.Check("main", fset, files, e.info) // errors: what the stubbed imports leave undefined
	for _, f := range files {
		e.collect(f)
	}
	var out []benchFigure
	for _, f := range files {
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			stack = append(stack, n)
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			target := sel.Sel.Name == "addTarget" && len(call.Args) == 5
			if !target && (sel.Sel.Name != "add" || len(call.Args) != 4) {
				return true
			}
			pos := fset.Position(call.Pos())
			bound := ""
			if target {
				bound = e.target(call.Args[4])
			}
			e.env = e.narrowed(stack, call)
			for _, s := range e.eval(call.Args[0], 0) {
				for _, k := range e.eval(call.Args[1], 0) {
					out = append(out, benchFigure{Pattern: squeeze(s + "." + k), Target: target, Bound: bound,
						Pos: filepath.Base(pos.Filename) + ":" + strconv.Itoa(pos.Line)})
				}
			}
			e.env = nil
			return true
		})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Pattern != out[j].Pattern {
			return out[i].Pattern < out[j].Pattern
		}
		return out[i].Pos < out[j].Pos
	})
	return out, nil
}

// stubImporter answers every import with an empty package: the bench's own declarations
// type-check, what it uses of its imports does not, and that is never a figure's name.
type stubImporter struct{}

func (stubImporter) Import(path string) (*types.Package, error) {
	p := types.NewPackage(path, filepath.Base(path))
	p.MarkComplete()
	return p, nil
}

// decl is where a variable or function gets its value: an expression, a range over a list,
// or a one-line helper's body.
type decl struct {
	value  ast.Expr      // x := value, var x = value
	ranged ast.Expr      // for _, x := range ranged
	fn     *ast.FuncDecl // a function
}

// evaluator turns a string expression of the bench's source into the names it may have.
type evaluator struct {
	info  *types.Info
	decls map[types.Object]decl
	// env binds variables to names while a call is read: a one-line helper's parameters to
	// its arguments, a variable an enclosing if fixes.
	env map[types.Object][]string
}

// collect records every declaration of f that gives a variable or function its value.
func (e *evaluator) collect(f *ast.File) {
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.FuncDecl:
			if obj := e.info.Defs[n.Name]; obj != nil && n.Recv == nil {
				e.decls[obj] = decl{fn: n}
			}
		case *ast.ValueSpec:
			for i, id := range n.Names {
				if obj := e.info.Defs[id]; obj != nil && i < len(n.Values) && len(n.Names) == len(n.Values) {
					e.decls[obj] = decl{value: n.Values[i]}
				}
			}
		case *ast.AssignStmt:
			if n.Tok != token.DEFINE || len(n.Lhs) != len(n.Rhs) {
				return true
			}
			for i, l := range n.Lhs {
				if id, ok := l.(*ast.Ident); ok && e.info.Defs[id] != nil {
					e.decls[e.info.Defs[id]] = decl{value: n.Rhs[i]}
				}
			}
		case *ast.RangeStmt:
			if id, ok := n.Value.(*ast.Ident); ok && n.Tok == token.DEFINE && e.info.Defs[id] != nil {
				e.decls[e.info.Defs[id]] = decl{ranged: n.X}
			}
		}
		return true
	})
}

// object answers what an identifier names.
func (e *evaluator) object(id *ast.Ident) types.Object {
	if obj := e.info.Uses[id]; obj != nil {
		return obj
	}
	return e.info.Defs[id]
}

const depthLimit = 8

// eval returns every name x may have ("*" where it cannot tell).
func (e *evaluator) eval(x ast.Expr, depth int) []string {
	if depth > depthLimit {
		return []string{"*"}
	}
	if tv, ok := e.info.Types[x]; ok && tv.Value != nil && tv.Value.Kind() == constant.String {
		return []string{constant.StringVal(tv.Value)}
	}
	switch x := x.(type) {
	case *ast.ParenExpr:
		return e.eval(x.X, depth+1)
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			return product(e.eval(x.X, depth+1), e.eval(x.Y, depth+1))
		}
	case *ast.Ident:
		obj := e.object(x)
		if obj == nil {
			break
		}
		if v, ok := e.env[obj]; ok {
			return v
		}
		if d, ok := e.decls[obj]; ok {
			switch {
			case d.value != nil:
				return e.eval(d.value, depth+1)
			case d.ranged != nil:
				return e.list(d.ranged, depth+1)
			}
		}
	case *ast.CallExpr:
		return e.inline(x, depth)
	}
	return []string{"*"}
}

// list returns the names of a range expression: a literal list, or a variable holding one.
func (e *evaluator) list(x ast.Expr, depth int) []string {
	if id, ok := x.(*ast.Ident); ok {
		if d, ok := e.decls[e.object(id)]; ok && d.value != nil {
			x = d.value
		}
	}
	lit, ok := x.(*ast.CompositeLit)
	if !ok {
		return []string{"*"}
	}
	if _, isMap := lit.Type.(*ast.MapType); isMap {
		return []string{"*"}
	}
	var out []string
	for _, el := range lit.Elts {
		if _, kv := el.(*ast.KeyValueExpr); kv {
			return []string{"*"}
		}
		out = append(out, e.eval(el, depth+1)...)
	}
	if len(out) == 0 || len(out) > maxPatterns {
		return []string{"*"}
	}
	return out
}

// inline evaluates a call of a package-level helper whose body is one return of a string
// expression (sameSizeName(name): "trivial_" + name + "_size").
func (e *evaluator) inline(call *ast.CallExpr, depth int) []string {
	id, ok := call.Fun.(*ast.Ident)
	if !ok {
		return []string{"*"}
	}
	fn := e.decls[e.object(id)].fn
	if fn == nil || fn.Body == nil || len(fn.Body.List) != 1 {
		return []string{"*"}
	}
	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return []string{"*"}
	}
	env := map[types.Object][]string{}
	for k, v := range e.env {
		env[k] = v
	}
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if i >= len(call.Args) {
				return []string{"*"}
			}
			env[e.info.Defs[n]] = e.eval(call.Args[i], depth+1)
			i++
		}
	}
	saved := e.env
	e.env = env
	defer func() { e.env = saved }()
	return e.eval(ret.Results[0], depth+1)
}

// narrowed binds the variables the call's enclosing ifs fix: inside `if name == X { … }`, name
// is X (the bench writes a target for one of a loop's names, and a plain figure for the rest).
func (e *evaluator) narrowed(stack []ast.Node, call *ast.CallExpr) map[types.Object][]string {
	env := map[types.Object][]string{}
	for _, n := range stack {
		ifs, ok := n.(*ast.IfStmt)
		if !ok || call.Pos() < ifs.Body.Pos() || call.End() > ifs.Body.End() {
			continue
		}
		cond, ok := ifs.Cond.(*ast.BinaryExpr)
		if !ok || cond.Op != token.EQL {
			continue
		}
		id, ok := cond.X.(*ast.Ident)
		if !ok || e.object(id) == nil {
			continue
		}
		if v := e.eval(cond.Y, 0); !strings.Contains(strings.Join(v, ""), "*") {
			env[e.object(id)] = v
		}
	}
	return env
}

// target reads a target{op, bound} literal: "<= 2", or "" when the source cannot tell.
func (e *evaluator) target(x ast.Expr) string {
	lit, ok := x.(*ast.CompositeLit)
	if !ok || len(lit.Elts) != 2 {
		return ""
	}
	op, bound := lit.Elts[0], lit.Elts[1]
	for _, el := range lit.Elts {
		if kv, ok := el.(*ast.KeyValueExpr); ok {
			switch k, _ := kv.Key.(*ast.Ident); {
			case k != nil && k.Name == "Op":
				op = kv.Value
			case k != nil && k.Name == "Bound":
				bound = kv.Value
			}
		}
	}
	ops := e.eval(op, 0)
	tv, ok := e.info.Types[bound]
	if len(ops) != 1 || strings.Contains(ops[0], "*") || !ok || tv.Value == nil {
		return ""
	}
	v, exact := constant.Float64Val(constant.ToFloat(tv.Value))
	if !exact && v == 0 {
		return ""
	}
	return ops[0] + " " + strconv.FormatFloat(v, 'f', -1, 64)
}

// squeeze folds runs of "*" into one.
func squeeze(s string) string {
	for strings.Contains(s, "**") {
		s = strings.ReplaceAll(s, "**", "*")
	}
	return s
}

func product(a, b []string) []string {
	if len(a)*len(b) > maxPatterns {
		return []string{"*"}
	}
	out := make([]string, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			out = append(out, x+y)
		}
	}
	return out
}
