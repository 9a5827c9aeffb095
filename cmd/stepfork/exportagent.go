package main

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// agentDecl is what export --go-test found of the function --agent names,
// read from its source when the source is at hand: the directory of the
// generated test for FUNC, the current module's directory of IMPORT for
// IMPORT.FUNC.
type agentDecl struct {
	pkg   string // the package of the file declaring it ("booking_test" for one in a _test.go file)
	typed bool   // a typed func(context.Context, In) (Out, error): the test adapts it with replay.Typed
}

// findAgent looks for the declaration of fn in dir: a package-level
// function or variable (test files included when tests is set). found is
// false when none is there (the source is elsewhere: nothing is checked);
// err says why a function found is no agent.
func findAgent(dir, fn string, tests bool) (d agentDecl, found bool, err error) {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	fset := token.NewFileSet()
	for _, m := range matches {
		if !tests && strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, perr := parser.ParseFile(fset, m, nil, parser.SkipObjectResolution)
		if perr != nil {
			continue
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv != nil || decl.Name.Name != fn {
					continue
				}
				typed, ok := agentShape(decl.Type)
				if !ok {
					var sig bytes.Buffer
					printer.Fprint(&sig, fset, decl.Type)
					pos := fset.Position(decl.Pos())
					return agentDecl{}, true, fmt.Errorf("%s (%s:%d) is %s, not an agent: the test passes it to sftest.Replay, which takes a replay.Agent, func(context.Context, trace.Value) (any, error), or a typed func(context.Context, In) (Out, error) that the test adapts with replay.Typed. Name such a function, or a package-level variable holding the agent a constructor returns (var agent = %s(…))",
						fn, filepath.Base(pos.Filename), pos.Line, clean(sig.String()), fn)
				}
				return agentDecl{pkg: f.Name.Name, typed: typed}, true, nil
			case *ast.GenDecl:
				if decl.Tok != token.VAR {
					continue
				}
				for _, spec := range decl.Specs {
					for _, name := range spec.(*ast.ValueSpec).Names {
						if name.Name == fn {
							return agentDecl{pkg: f.Name.Name}, true, nil
						}
					}
				}
			}
		}
	}
	return agentDecl{}, false, nil
}

// agentShape reports whether a function type is that of an agent: two
// parameters and two results, the last an error. typed is false for a
// replay.Agent itself (its input a trace.Value).
func agentShape(ft *ast.FuncType) (typed, ok bool) {
	fields := func(l *ast.FieldList) []ast.Expr {
		var out []ast.Expr
		if l == nil {
			return nil
		}
		for _, f := range l.List {
			for range max(len(f.Names), 1) {
				out = append(out, f.Type)
			}
		}
		return out
	}
	params, results := fields(ft.Params), fields(ft.Results)
	if ft.TypeParams != nil || len(params) != 2 || len(results) != 2 {
		return false, false
	}
	if e, ok := results[1].(*ast.Ident); !ok || e.Name != "error" {
		return false, false
	}
	if sel, ok := params[0].(*ast.SelectorExpr); !ok || sel.Sel.Name != "Context" {
		return false, false
	}
	sel, isSel := params[1].(*ast.SelectorExpr)
	return !(isSel && sel.Sel.Name == "Value"), true
}

// moduleDir is the directory of importPath when it belongs to the module
// holding dir (found by its go.mod), or "".
func moduleDir(dir, importPath string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for d := abs; ; d = filepath.Dir(d) {
		if mod, ok := modulePath(filepath.Join(d, "go.mod")); ok {
			switch {
			case importPath == mod:
				return d
			case strings.HasPrefix(importPath, mod+"/"):
				return filepath.Join(d, filepath.FromSlash(strings.TrimPrefix(importPath, mod+"/")))
			}
			return ""
		}
		if filepath.Dir(d) == d {
			return ""
		}
	}
}

// modulePath reads the module line of a go.mod file.
func modulePath(gomod string) (string, bool) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), true
		}
	}
	return "", false
}
