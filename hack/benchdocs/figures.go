package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
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

// benchFigures parses the bench's package in dir and returns the figures it writes.
func benchFigures(dir string) ([]benchFigure, error) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	e := &evaluator{consts: map[string]ast.Expr{}, vars: map[string]ast.Expr{}, funcs: map[string]*ast.FuncDecl{}}
	var parsed []*ast.File
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, f)
		e.collect(f)
	}
	if len(parsed) == 0 {
		return nil, fmt.Errorf("no Go files in %s", dir)
	}
	var out []benchFigure
	for _, f := range parsed {
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
	sort.Slice(out, func(i, j int) bool { return out[i].Pattern < out[j].Pattern })
	return out, nil
}

// narrowed binds the variables the call's enclosing ifs fix: inside `if name == X { … }`, name
// is X (the bench writes a target for one of a loop's names, and a plain figure for the rest).
func (e *evaluator) narrowed(stack []ast.Node, call *ast.CallExpr) map[*ast.Object][]string {
	env := map[*ast.Object][]string{}
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
		if !ok || id.Obj == nil {
			continue
		}
		if v := e.eval(cond.Y, 0); !strings.Contains(strings.Join(v, ""), "*") {
			env[id.Obj] = v
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
	var op, bound ast.Expr = lit.Elts[0], lit.Elts[1]
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
	v, ok := e.number(bound, 0)
	if len(ops) != 1 || strings.Contains(ops[0], "*") || !ok {
		return ""
	}
	return ops[0] + " " + strconv.FormatFloat(v, 'f', -1, 64)
}

// number evaluates a numeric constant expression of the bench's source.
func (e *evaluator) number(x ast.Expr, depth int) (float64, bool) {
	if depth > depthLimit {
		return 0, false
	}
	switch x := x.(type) {
	case *ast.BasicLit:
		if x.Kind == token.INT || x.Kind == token.FLOAT {
			v, err := strconv.ParseFloat(x.Value, 64)
			return v, err == nil
		}
	case *ast.ParenExpr:
		return e.number(x.X, depth+1)
	case *ast.Ident:
		if vs, ok := declOf(x).(*ast.ValueSpec); ok {
			for i, n := range vs.Names {
				if n.Name == x.Name && i < len(vs.Values) {
					return e.number(vs.Values[i], depth+1)
				}
			}
		}
		if v, ok := e.consts[x.Name]; ok && x.Obj == nil {
			return e.number(v, depth+1)
		}
	case *ast.BinaryExpr:
		a, ok1 := e.number(x.X, depth+1)
		b, ok2 := e.number(x.Y, depth+1)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch x.Op {
		case token.ADD:
			return a + b, true
		case token.SUB:
			return a - b, true
		case token.MUL:
			return a * b, true
		case token.QUO:
			if b != 0 {
				return a / b, true
			}
		}
	}
	return 0, false
}

// squeeze folds runs of "*" into one.
func squeeze(s string) string {
	for strings.Contains(s, "**") {
		s = strings.ReplaceAll(s, "**", "*")
	}
	return s
}

// evaluator turns a string expression of the bench's source into the names it may have.
type evaluator struct {
	consts map[string]ast.Expr      // package-level constants (string-valued or not)
	vars   map[string]ast.Expr      // package-level variables with a value
	funcs  map[string]*ast.FuncDecl // package-level functions
	// env binds a one-line helper's parameters to its arguments' names while it is inlined.
	env map[*ast.Object][]string
}

func (e *evaluator) collect(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				e.funcs[d.Name.Name] = d
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok {
					continue
				}
				for i, n := range vs.Names {
					if i >= len(vs.Values) {
						continue
					}
					if d.Tok == token.CONST {
						e.consts[n.Name] = vs.Values[i]
					} else {
						e.vars[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
}

const depthLimit = 8

// eval returns every name x may have ("*" where it cannot tell).
func (e *evaluator) eval(x ast.Expr, depth int) []string {
	if depth > depthLimit {
		return []string{"*"}
	}
	switch x := x.(type) {
	case *ast.BasicLit:
		if x.Kind == token.STRING {
			if s, err := strconv.Unquote(x.Value); err == nil {
				return []string{s}
			}
		}
	case *ast.ParenExpr:
		return e.eval(x.X, depth+1)
	case *ast.BinaryExpr:
		if x.Op == token.ADD {
			return product(e.eval(x.X, depth+1), e.eval(x.Y, depth+1))
		}
	case *ast.Ident:
		return e.ident(x, depth)
	case *ast.CallExpr:
		return e.inline(x, depth)
	}
	return []string{"*"}
}

func (e *evaluator) ident(x *ast.Ident, depth int) []string {
	if x.Obj == nil { // declared at package level, in this file or another
		if v, ok := e.consts[x.Name]; ok {
			return e.eval(v, depth+1)
		}
		return []string{"*"}
	}
	if v, ok := e.env[x.Obj]; ok {
		return v
	}
	switch d := x.Obj.Decl.(type) {
	case *ast.ValueSpec: // a local const or var
		for i, n := range d.Names {
			if n.Name == x.Name && i < len(d.Values) {
				return e.eval(d.Values[i], depth+1)
			}
		}
	case *ast.AssignStmt:
		i := slicesIndex(d.Lhs, x.Name)
		if i < 0 {
			break
		}
		if len(d.Rhs) == 1 {
			if u, ok := d.Rhs[0].(*ast.UnaryExpr); ok && u.Op == token.RANGE {
				if i == 1 { // the value of a range over a list of strings
					return e.list(u.X, depth+1)
				}
				break
			}
		}
		if len(d.Rhs) == len(d.Lhs) {
			return e.eval(d.Rhs[i], depth+1)
		}
	}
	return []string{"*"}
}

// list returns the names of a range expression: a literal list, or a package-level variable
// holding one.
func (e *evaluator) list(x ast.Expr, depth int) []string {
	if id, ok := x.(*ast.Ident); ok {
		if vs, ok := declOf(id).(*ast.ValueSpec); ok {
			for i, n := range vs.Names {
				if n.Name == id.Name && i < len(vs.Values) {
					x = vs.Values[i]
				}
			}
		} else if v, ok := e.vars[id.Name]; ok && id.Obj == nil {
			x = v
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
	fn, ok := e.funcs[id.Name]
	if !ok || fn.Body == nil || len(fn.Body.List) != 1 {
		return []string{"*"}
	}
	ret, ok := fn.Body.List[0].(*ast.ReturnStmt)
	if !ok || len(ret.Results) != 1 {
		return []string{"*"}
	}
	env := map[*ast.Object][]string{}
	i := 0
	for _, field := range fn.Type.Params.List {
		for _, n := range field.Names {
			if i >= len(call.Args) {
				return []string{"*"}
			}
			env[n.Obj] = e.eval(call.Args[i], depth+1)
			i++
		}
	}
	saved := e.env
	merged := map[*ast.Object][]string{}
	for k, v := range saved {
		merged[k] = v
	}
	for k, v := range env {
		merged[k] = v
	}
	e.env = merged
	defer func() { e.env = saved }()
	return e.eval(ret.Results[0], depth+1)
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

func declOf(id *ast.Ident) any {
	if id.Obj == nil {
		return nil
	}
	return id.Obj.Decl
}

func slicesIndex(lhs []ast.Expr, name string) int {
	for i, l := range lhs {
		if id, ok := l.(*ast.Ident); ok && id.Name == name {
			return i
		}
	}
	return -1
}
