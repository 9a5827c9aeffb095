package explore

import (
	"bytes"
	"errors"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode"
)

// Site is where a test handed sftest the base run and the agent: the call
// (sftest.Fork, Sweep, Replay, ForkCheck, Minimize or Record) as the test
// wrote it, and the statements of the test before it, so that the code of
// a run names the base and the agent as the test does and a test file
// written for it sets them up the same way.
type Site struct {
	File   string // the test's source file
	Line   int
	Helper string // the sftest function called
	Test   string // the name of the test function that holds the call

	pkg        string
	fset       *token.FileSet
	file       *ast.File
	src        []byte
	tparam     string // the *testing.T the call was given: "t"
	base       string // the base run as the test wrote it: "base"
	agent      string // the agent as the test wrote it: "w.agent.Run"
	candidates []ast.Stmt
	locals     map[string]bool // names the test declares before the call
	blocked    map[string]string
	err        error // why no test file can be written
}

// argIndex is, for each sftest function that is given a base and an
// agent, where they are among its arguments (-1: the base is what it
// returns).
var argIndex = map[string][2]int{
	"Fork": {1, 3}, "Sweep": {1, 3}, "Replay": {1, 2}, "ForkCheck": {1, 2}, "Minimize": {1, 2}, "Record": {-1, 2},
}

// Locate reads the call of sftest's helper at file:line. The Site it
// returns always names the base and the agent (as "base" and "agent" when
// the source cannot be read); its Err says why no test file can be
// written for a run, when none can.
func Locate(file string, line int, helper string) *Site {
	s := &Site{File: file, Line: line, Helper: helper, tparam: "t", base: "base", agent: "agent"}
	s.err = s.locate()
	return s
}

// Err is why no test file can be written from this site, or nil.
func (s *Site) Err() error { return s.err }

func (s *Site) locate() error {
	idx, ok := argIndex[s.Helper]
	if !ok {
		return fmt.Errorf("sftest.%s is not given a base and an agent", s.Helper)
	}
	src, err := os.ReadFile(s.File)
	if err != nil {
		return fmt.Errorf("the test's source cannot be read: %v", err)
	}
	s.src, s.fset = src, token.NewFileSet()
	s.file, err = parser.ParseFile(s.fset, s.File, src, parser.SkipObjectResolution)
	if err != nil {
		return fmt.Errorf("the test's source does not parse: %v", err)
	}
	s.pkg = s.file.Name.Name
	// The call: the first call of Helper on the line, and the nodes that
	// enclose it.
	var call *ast.CallExpr
	var path, stack []ast.Node
	ast.Inspect(s.file, func(n ast.Node) bool {
		if call != nil {
			return false
		}
		if n == nil {
			stack = stack[:len(stack)-1]
			return true
		}
		stack = append(stack, n)
		if c, ok := n.(*ast.CallExpr); ok && s.fset.Position(c.Pos()).Line <= s.Line && s.Line <= s.fset.Position(c.End()).Line && calls(c, s.Helper) {
			if s.fset.Position(c.Fun.End()).Line == s.Line || s.fset.Position(c.Pos()).Line == s.Line {
				call = c
				path = slices.Clone(stack)
			}
		}
		return true
	})
	if call == nil {
		return fmt.Errorf("no call of sftest.%s at %s:%d", s.Helper, filepath.Base(s.File), s.Line)
	}
	if len(call.Args) > 0 {
		s.tparam = s.text(call.Args[0])
	}
	if idx[1] < len(call.Args) {
		s.agent = s.text(call.Args[idx[1]])
	}
	if idx[0] >= 0 && idx[0] < len(call.Args) {
		s.base = s.text(call.Args[idx[0]])
	} else {
		s.base = s.text(call)
	}
	var fn *ast.FuncDecl
	for _, n := range path {
		if f, ok := n.(*ast.FuncDecl); ok {
			fn = f
		}
	}
	if fn == nil || fn.Body == nil {
		return errors.New("the call is not in a function")
	}
	s.Test = fn.Name.Name
	// The statements before the call, at every level of blocks around it;
	// the names other constructs on the way declare (loop variables, the
	// parameters of a function literal) cannot be set up by them.
	s.locals, s.blocked = map[string]bool{}, map[string]string{}
	declare := func(fl *ast.FieldList, what string) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, n := range f.Names {
				if n.Name != s.tparam {
					s.blocked[n.Name] = what
				}
			}
		}
	}
	declare(fn.Type.Params, "a parameter of "+fn.Name.Name)
	for i, n := range path {
		var list []ast.Stmt
		switch b := n.(type) {
		case *ast.BlockStmt:
			list = b.List
		case *ast.CaseClause:
			list = b.Body
		case *ast.CommClause:
			list = b.Body
		case *ast.FuncLit:
			if i > 0 {
				declare(b.Type.Params, "a parameter of the function literal around the call")
			}
			continue
		case *ast.RangeStmt:
			for _, e := range []ast.Expr{b.Key, b.Value} {
				if id, ok := e.(*ast.Ident); ok && b.Tok == token.DEFINE {
					s.blocked[id.Name] = "the range loop around the call"
				}
			}
			continue
		case *ast.ForStmt, *ast.IfStmt, *ast.SwitchStmt, *ast.TypeSwitchStmt:
			for name := range defs(initOf(n)) {
				s.blocked[name] = "the statement around the call"
			}
			continue
		default:
			continue
		}
		if i+1 >= len(path) {
			continue
		}
		next := path[i+1]
		for _, st := range list {
			if st == next {
				if s.Helper == "Record" && idx[0] < 0 && st.Pos() <= call.Pos() && call.End() <= st.End() && isAssignOf(st, call) {
					s.candidates = append(s.candidates, st)
					s.base = assignedName(st)
				}
				break
			}
			s.candidates = append(s.candidates, st)
		}
	}
	for _, st := range s.candidates {
		for name := range defs(st) {
			s.locals[name] = true
			delete(s.blocked, name)
		}
	}
	return nil
}

// calls reports whether c calls a function named helper (sftest.Fork, or
// Fork under a dot import).
func calls(c *ast.CallExpr, helper string) bool {
	switch f := c.Fun.(type) {
	case *ast.SelectorExpr:
		return f.Sel.Name == helper
	case *ast.Ident:
		return f.Name == helper
	}
	return false
}

// isAssignOf reports whether st assigns the result of call to one name.
func isAssignOf(st ast.Stmt, call *ast.CallExpr) bool {
	a, ok := st.(*ast.AssignStmt)
	return ok && len(a.Lhs) == 1 && len(a.Rhs) == 1 && a.Rhs[0] == call && assignedName(st) != ""
}

func assignedName(st ast.Stmt) string {
	if a, ok := st.(*ast.AssignStmt); ok && len(a.Lhs) == 1 {
		if id, ok := a.Lhs[0].(*ast.Ident); ok && id.Name != "_" {
			return id.Name
		}
	}
	return ""
}

func initOf(n ast.Node) ast.Stmt {
	switch x := n.(type) {
	case *ast.ForStmt:
		return x.Init
	case *ast.IfStmt:
		return x.Init
	case *ast.SwitchStmt:
		return x.Init
	case *ast.TypeSwitchStmt:
		return x.Init
	}
	return nil
}

// text is the source of a node as the test wrote it.
func (s *Site) text(n ast.Node) string {
	start, end := s.fset.Position(n.Pos()).Offset, s.fset.Position(n.End()).Offset
	if start < 0 || end > len(s.src) || start > end {
		return "?"
	}
	return string(s.src[start:end])
}

// defs are the names a statement declares in its block.
func defs(st ast.Stmt) map[string]bool {
	out := map[string]bool{}
	switch x := st.(type) {
	case *ast.AssignStmt:
		if x.Tok == token.DEFINE {
			for _, l := range x.Lhs {
				if id, ok := l.(*ast.Ident); ok && id.Name != "_" {
					out[id.Name] = true
				}
			}
		}
	case *ast.DeclStmt:
		if g, ok := x.Decl.(*ast.GenDecl); ok {
			for _, sp := range g.Specs {
				switch sp := sp.(type) {
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						if n.Name != "_" {
							out[n.Name] = true
						}
					}
				case *ast.TypeSpec:
					out[sp.Name.Name] = true
				}
			}
		}
	}
	return out
}

// uses are the identifiers a node refers to (not the selected names of
// selectors).
func uses(n ast.Node) map[string]bool {
	out := map[string]bool{}
	if n == nil {
		return out
	}
	ast.Inspect(n, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.SelectorExpr:
			ast.Inspect(x.X, func(n ast.Node) bool {
				if id, ok := n.(*ast.Ident); ok {
					out[id.Name] = true
				}
				return true
			})
			return false
		case *ast.Ident:
			out[x.Name] = true
		}
		return true
	})
	return out
}

// exprUses are the identifiers of Go expressions given as text.
func exprUses(exprs ...string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, e := range exprs {
		x, err := parser.ParseExpr(e)
		if err != nil {
			return nil, fmt.Errorf("%q does not parse: %v", e, err)
		}
		for k := range uses(x) {
			out[k] = true
		}
	}
	return out, nil
}

// setup is the statements of the test before the call that the code
// needs: those declaring what it uses, and, repeatedly, what those use, and
// the statements that use only what is kept (t.Parallel(), a check of an
// error just declared). A declared name that nothing kept uses is renamed
// _, so that the file compiles.
func (s *Site) setup(used map[string]bool) ([]ast.Stmt, error) {
	need := map[string]bool{}
	for k := range used {
		if s.locals[k] {
			need[k] = true
		}
		if what, ok := s.blocked[k]; ok {
			return nil, fmt.Errorf("the code uses %s, declared by %s: write the test by hand from the snippet", k, what)
		}
	}
	kept := make([]bool, len(s.candidates))
	defined := map[string]bool{s.tparam: true}
	for changed := true; changed; {
		changed = false
		for i, st := range s.candidates {
			if kept[i] {
				continue
			}
			d, u := defs(st), uses(st)
			var local []string
			for k := range u {
				if s.locals[k] || k == s.tparam {
					local = append(local, k)
				}
			}
			keep := intersects(d, need)
			if !keep && len(d) == 0 && len(local) > 0 {
				keep = true
				for _, k := range local {
					if !defined[k] {
						keep = false
					}
				}
			}
			if !keep {
				continue
			}
			for k := range u {
				if what, ok := s.blocked[k]; ok {
					return nil, fmt.Errorf("the code needs %s, which uses %s, declared by %s: write the test by hand from the snippet", s.text(st), k, what)
				}
			}
			kept[i], changed = true, true
			for k := range d {
				defined[k] = true
			}
			for _, k := range local {
				need[k] = true
			}
		}
	}
	var out []ast.Stmt
	for i, st := range s.candidates {
		if kept[i] {
			out = append(out, st)
		}
	}
	// A name declared by a kept statement and used by nothing kept after
	// it, nor by the code, becomes _.
	for i, st := range out {
		a, ok := st.(*ast.AssignStmt)
		if !ok || a.Tok != token.DEFINE {
			continue
		}
		later := maps(used)
		for _, st2 := range out[i+1:] {
			for k := range uses(st2) {
				later[k] = true
			}
		}
		lhs := make([]ast.Expr, len(a.Lhs))
		blank := 0
		for j, l := range a.Lhs {
			lhs[j] = l
			if id, ok := l.(*ast.Ident); ok && (id.Name == "_" || !later[id.Name]) {
				lhs[j] = ast.NewIdent("_")
				blank++
			}
		}
		if blank == 0 {
			continue
		}
		c := *a
		c.Lhs = lhs
		if blank == len(lhs) {
			c.Tok = token.ASSIGN
		}
		out[i] = &c
	}
	return out, nil
}

func intersects(a, b map[string]bool) bool {
	for k := range a {
		if b[k] {
			return true
		}
	}
	return false
}

func maps(m map[string]bool) map[string]bool {
	out := make(map[string]bool, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// testFile is a whole test file for run r: package clause, imports, and a
// test function holding the setup the snippet needs and the snippet.
// name is the function's name.
func (s *Site) testFile(name, doc, body string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	x, err := parser.ParseFile(token.NewFileSet(), "", "package p\nfunc _() {\n"+body+"\n}\n", parser.SkipObjectResolution)
	if err != nil {
		return "", fmt.Errorf("the code does not parse: %v", err)
	}
	used := uses(x.Decls[0].(*ast.FuncDecl).Body)
	stmts, err := s.setup(used)
	if err != nil {
		return "", err
	}
	var setup bytes.Buffer
	for _, st := range stmts {
		if err := printer.Fprint(&setup, s.fset, st); err != nil {
			return "", err
		}
		setup.WriteByte('\n')
		for k := range uses(st) {
			used[k] = true
		}
	}
	// Imports: those of the test's file that the function refers to, and
	// the packages of the code.
	var imports []string
	have := map[string]bool{}
	for _, im := range s.file.Imports {
		p, err := strconv.Unquote(im.Path.Value)
		if err != nil {
			continue
		}
		local := packageName(p)
		spec := strconv.Quote(p)
		if im.Name != nil {
			local = im.Name.Name
			spec = im.Name.Name + " " + spec
		}
		if used[local] && !s.locals[local] && !have[local] {
			have[local] = true
			imports = append(imports, spec)
		}
	}
	for name, p := range importPaths {
		if used[name] && !have[name] {
			have[name] = true
			imports = append(imports, strconv.Quote(p))
		}
	}
	if !have["testing"] {
		imports = append(imports, strconv.Quote("testing"))
	}
	// The standard library first, then the others, as goimports groups them.
	var std, other []string
	for _, im := range imports {
		p := im[strings.IndexByte(im, '"'):]
		if first, _, _ := strings.Cut(strings.Trim(p, `"`), "/"); strings.Contains(first, ".") {
			other = append(other, im)
		} else {
			std = append(std, im)
		}
	}
	byPath := func(a, b string) int {
		return strings.Compare(a[strings.IndexByte(a, '"'):], b[strings.IndexByte(b, '"'):])
	}
	slices.SortFunc(std, byPath)
	slices.SortFunc(other, byPath)
	var b strings.Builder
	fmt.Fprintf(&b, "package %s\n\nimport (\n", s.pkg)
	for i, group := range [][]string{std, other} {
		if i > 0 && len(std) > 0 && len(other) > 0 {
			b.WriteString("\n")
		}
		for _, im := range group {
			b.WriteString("\t" + im + "\n")
		}
	}
	b.WriteString(")\n\n")
	for _, l := range strings.Split(strings.TrimSpace(doc), "\n") {
		b.WriteString("// " + l + "\n")
	}
	fmt.Fprintf(&b, "func %s(%s *testing.T) {\n%s\n%s}\n", name, s.tparam, setup.String(), body)
	out, err := format.Source([]byte(b.String()))
	if err != nil {
		return "", fmt.Errorf("the test file does not format: %v", err)
	}
	return string(out), nil
}

// packageName guesses the name of the package at import path p (without
// type information): its last element without a major version suffix,
// "go-" or "-go", and without what an identifier cannot hold.
func packageName(p string) string {
	base := path.Base(p)
	if len(base) > 1 && base[0] == 'v' && strings.Trim(base[1:], "0123456789") == "" && path.Dir(p) != "." {
		base = path.Base(path.Dir(p))
	}
	if i := strings.Index(base, ".v"); i > 0 {
		base = base[:i]
	}
	base = strings.TrimPrefix(strings.TrimSuffix(base, "-go"), "go-")
	return strings.Map(func(r rune) rune {
		if unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' {
			return r
		}
		return -1
	}, base)
}

// freeName is a test function name and a file name, next to the test's
// file, that no file of its directory uses: TestXExplore1 in
// x_explore1_test.go, or 2, 3, ….
func (s *Site) freeName(n int) (fn, file string, err error) {
	dir := filepath.Dir(s.File)
	taken := map[string]bool{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return "", "", err
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, e.Name()), nil, parser.SkipObjectResolution)
		if err != nil {
			continue
		}
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
				taken[fd.Name.Name] = true
			}
		}
	}
	stem := snake(strings.TrimPrefix(s.Test, "Test"))
	for ; ; n++ {
		fn = fmt.Sprintf("%sExplore%d", s.Test, n)
		file = filepath.Join(dir, fmt.Sprintf("%s_explore%d_test.go", stem, n))
		if _, err := os.Lstat(file); err == nil || taken[fn] {
			continue
		}
		return fn, file, nil
	}
}

// snake is RefundNeedsApproval as refund_needs_approval.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) && i > 0 && (unicode.IsLower(rs[i-1]) || i+1 < len(rs) && unicode.IsLower(rs[i+1])) {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	out := strings.Trim(b.String(), "_")
	if out == "" {
		out = "test"
	}
	return out
}

// writeNew writes data to path atomically and never over a file: into a
// temporary file beside it, linked to path only if path does not exist.
func writeNew(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".explore-*.tmp")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err != nil {
		return err
	}
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s already exists and is never overwritten: %w", path, fs.ErrExist)
		}
		return err
	}
	return nil
}
