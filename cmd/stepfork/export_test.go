package main

import (
	"encoding/hex"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// exportWorkspace is a temporary directory holding testdata/NAME (a copy of
// src) and an agent/ package, so generated paths are stable.
func exportWorkspace(t *testing.T, src, name string) string {
	t.Helper()
	dir := t.TempDir()
	copyBundle(t, src, filepath.Join(dir, "testdata", name))
	if err := os.MkdirAll(filepath.Join(dir, "agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent", "agent.go"), []byte("package booking\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestExportGoTestGolden(t *testing.T) {
	t.Parallel()
	dir := exportWorkspace(t, booking, "booking-agent.sftrace")
	tests := []struct {
		golden, path string
		args         []string
	}{
		// The test package is read from agent/*.go ("booking") even though
		// the import path ends in "agent".
		{"export/imported_test.go.txt", "../testdata/booking-agent.sftrace", []string{"export", "testdata/booking-agent.sftrace", "--go-test", "--agent", "example.com/app/agent.Run", "-o", "agent/imported_test.go"}},
		{"export/local_test.go.txt", "../testdata/booking-agent.sftrace", []string{"export", "--go-test", "--agent=Run", "--output", "agent/local_test.go", "testdata/booking-agent.sftrace"}},
		{"export/default_test.go.txt", "testdata/booking-agent.sftrace", []string{"export", "testdata/booking-agent.sftrace", "--go-test", "--agent", "example.com/go-app/v2.Agent"}},
	}
	for _, tt := range tests {
		r := stepfork(t, dir, nil, tt.args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d: %s", tt.args, r.code, r.stderr)
		}
		out := strings.TrimPrefix(strings.SplitN(r.stdout, "\n", 2)[0], "Wrote ")
		src, err := os.ReadFile(filepath.Join(dir, out))
		if err != nil {
			t.Fatal(err)
		}
		golden(t, tt.golden, string(src))
		checkGeneratedTest(t, string(src), tt.path)
	}
	if _, err := os.Stat(filepath.Join(dir, "booking_agent_regression_test.go")); err != nil {
		t.Errorf("default output: %v", err)
	}
}

// checkGeneratedTest parses a generated test and checks that it holds
// exactly one test function, which loads the trace from wantPath, a string
// literal, and replays it: nothing from the outside became code.
func checkGeneratedTest(t *testing.T, src, wantPath string) {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "gen_test.go", src, parser.ParseComments)
	if err != nil {
		t.Fatalf("generated test does not parse: %v\n%s", err, src)
	}
	var funcs int
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.GenDecl:
			if d.Tok != token.IMPORT {
				t.Errorf("generated file declares a %s", d.Tok)
			}
		case *ast.FuncDecl:
			funcs++
			if len(d.Body.List) != 2 {
				t.Fatalf("test body has %d statements, want 2", len(d.Body.List))
			}
			load := d.Body.List[0].(*ast.AssignStmt).Rhs[0].(*ast.CallExpr)
			lit, ok := load.Args[1].(*ast.BasicLit)
			if !ok {
				t.Fatalf("the trace path is not a literal:\n%s", src)
			}
			if got, err := strconv.Unquote(lit.Value); err != nil || got != wantPath {
				t.Errorf("trace path = %s (%v), want %q", lit.Value, err, wantPath)
			}
		}
	}
	if funcs != 1 || len(f.Decls) != 2 {
		t.Errorf("generated file has %d decls (%d func), want import+func:\n%s", len(f.Decls), funcs, src)
	}
	if !strings.Contains(src, "tr := sftest.Load(t, ") || !strings.Contains(src, "sftest.Replay(t, tr, ") {
		t.Errorf("generated test does not load and replay:\n%s", src)
	}
}

// TestExportGoTestHostileNames: a bundle whose name holds quotes, newlines
// and comment markers cannot inject code into the generated test.
func TestExportGoTestHostileNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"evil\"; func init() { panic(1) }; var _ = \".sftrace",
		"evil\n\nfunc init() { panic(1) }\n//.sftrace",
		"evil`\\x00*/ /*.sftrace",
		"café ☃ trace.sftrace",
	} {
		dir := exportWorkspace(t, booking, name)
		out := "agent/hostile_test.go"
		r := stepfork(t, dir, nil, "export", filepath.Join("testdata", name), "--go-test", "--agent", "example.com/app/agent.Run", "-o", out)
		if r.code != 0 {
			t.Fatalf("%q: exit %d: %s", name, r.code, r.stderr)
		}
		src, err := os.ReadFile(filepath.Join(dir, out))
		if err != nil {
			t.Fatal(err)
		}
		checkGeneratedTest(t, string(src), filepath.ToSlash(filepath.Join("../testdata", name)))
		if strings.Contains(string(src), "func init") && !strings.Contains(string(src), "// Regression test generated") {
			t.Errorf("%q: suspicious output:\n%s", name, src)
		}
	}
}

func TestExportGoTestErrors(t *testing.T) {
	t.Parallel()
	dir := exportWorkspace(t, booking, "b.sftrace")
	if err := os.Mkdir(filepath.Join(dir, "adir_test.go"), 0o755); err != nil {
		t.Fatal(err)
	}
	partial, err := filepath.Abs(vectors + "partial_run.sftrace") // fails strict validation
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"export", "testdata/b.sftrace", "--go-test"}, 2, "A replayable regression test needs --agent IMPORT.FUNC"},
		{[]string{"export", "testdata/b.sftrace", "--go-test", "--agent", `x"; os.Exit(1) //.Run`}, 2, "invalid import path"},
		{[]string{"export", "testdata/b.sftrace", "--go-test", "--agent", "example.com/app/agent.run"}, 2, "run is not exported"},
		{[]string{"export", "testdata/b.sftrace", "--go-test", "--agent", "example.com/app/agent"}, 2, "names no function"},
		{[]string{"export", "testdata/b.sftrace", "--go-test", "--agent", "Run"}, 2, "cannot tell the package of . for --agent Run; pass --package NAME"},
		{[]string{"export", "testdata/b.sftrace", "--go-test", "--agent", "Run", "--package", "a-b"}, 2, `--package "a-b" is not a Go package name.`},
		{[]string{"export", "nope.sftrace", "--go-test", "--agent", "Run", "--package", "p"}, 2, "Unable to read trace."},
		{[]string{"export", partial, "--go-test", "--agent", "Run", "--package", "p"}, 2, "Trace failed validation.\n  run_start_count: Strict validation requires exactly one run_start; found 0.\n"},
		{[]string{"export", "testdata/b.sftrace", "--go-test", "--agent", "Run", "--package", "p", "-o", "adir_test.go"}, 1, "Export failed: adir_test.go is a directory, not a file"},
		{[]string{"export", "testdata/b.sftrace", "--otlp", "--agent", "Run"}, 2, "--agent and --package apply to --go-test only"},
	}
	for _, tt := range tests {
		r := stepfork(t, dir, nil, tt.args...)
		if r.code != tt.code || !strings.Contains(r.stderr, tt.stderr) {
			t.Errorf("%q: exit %d stderr %q; want exit %d and %q", tt.args, r.code, r.stderr, tt.code, tt.stderr)
		}
	}
	// An existing file is replaced only with --overwrite.
	args := []string{"export", "testdata/b.sftrace", "--go-test", "--agent", "Run", "--package", "p", "-o", "x_test.go"}
	if r := stepfork(t, dir, nil, args...); r.code != 0 {
		t.Fatalf("first export: %d %s", r.code, r.stderr)
	}
	if r := stepfork(t, dir, nil, args...); r.code != 1 || r.stderr != "x_test.go already exists; pass --overwrite to replace it.\n" {
		t.Errorf("second export: %d %q", r.code, r.stderr)
	}
	if r := stepfork(t, dir, nil, append(args, "--overwrite")...); r.code != 0 {
		t.Errorf("--overwrite: %d %s", r.code, r.stderr)
	}
}

func TestExportOTLPGolden(t *testing.T) {
	t.Parallel()
	runGoldenCases(t, []goldenCase{
		{"export/booking.otlp.jsonl", []string{"export", booking, "--otlp"}, 0},
		{"export/failed_tool_run.otlp.jsonl", []string{"export", vectors + "failed_tool_run.sftrace", "--otlp", "--content"}, 0},
	})
}

// otlpFile mirrors the OTLP JSON TracesData shape, for checking it.
type otlpFile struct {
	ResourceSpans []struct {
		Resource struct {
			Attributes []otlpKV `json:"attributes"`
		} `json:"resource"`
		ScopeSpans []struct {
			Scope struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"scope"`
			Spans []struct {
				TraceID      string   `json:"traceId"`
				SpanID       string   `json:"spanId"`
				ParentSpanID string   `json:"parentSpanId"`
				Name         string   `json:"name"`
				Kind         int      `json:"kind"`
				Start        string   `json:"startTimeUnixNano"`
				End          string   `json:"endTimeUnixNano"`
				Attributes   []otlpKV `json:"attributes"`
				Events       []struct {
					Time       string   `json:"timeUnixNano"`
					Name       string   `json:"name"`
					Attributes []otlpKV `json:"attributes"`
				} `json:"events"`
				Status *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"spans"`
		} `json:"scopeSpans"`
	} `json:"resourceSpans"`
}

type otlpKV struct {
	Key   string         `json:"key"`
	Value map[string]any `json:"value"`
}

// TestExportOTLPShape checks every rule of OTLP JSON the collector's file
// receiver relies on: one TracesData per line, hex ids of the right length,
// parents that exist, unix-nano strings, GenAI span names and attributes;
// and that the ids are deterministic.
func TestExportOTLPShape(t *testing.T) {
	t.Parallel()
	r := stepfork(t, "", nil, "export", booking, "--otlp")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	if again := stepfork(t, "", nil, "export", booking, "--otlp"); again.stdout != r.stdout {
		t.Error("two exports of the same run differ")
	}
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	ids := map[string]bool{}
	var parents []string
	names := map[string]int{}
	for _, line := range lines {
		var f otlpFile
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&f); err != nil {
			t.Fatalf("line is not OTLP TracesData: %v\n%s", err, line)
		}
		for _, rs := range f.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					if b, err := hex.DecodeString(s.TraceID); err != nil || len(b) != 16 {
						t.Errorf("traceId %q", s.TraceID)
					}
					if b, err := hex.DecodeString(s.SpanID); err != nil || len(b) != 8 {
						t.Errorf("spanId %q", s.SpanID)
					}
					start, err1 := strconv.ParseInt(s.Start, 10, 64)
					end, err2 := strconv.ParseInt(s.End, 10, 64)
					if err1 != nil || err2 != nil || end < start || start < time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano() {
						t.Errorf("span %s times %q..%q", s.Name, s.Start, s.End)
					}
					ids[s.SpanID] = true
					if s.ParentSpanID != "" {
						parents = append(parents, s.ParentSpanID)
					}
					op := ""
					for _, a := range s.Attributes {
						if a.Key == "gen_ai.operation.name" {
							op, _ = a.Value["stringValue"].(string)
						}
					}
					if !strings.HasPrefix(s.Name, op+" ") {
						t.Errorf("span %q has gen_ai.operation.name %q", s.Name, op)
					}
					names[strings.Fields(s.Name)[0]]++
				}
			}
		}
	}
	for _, p := range parents {
		if !ids[p] {
			t.Errorf("parentSpanId %s is not a span of the export", p)
		}
	}
	if names["invoke_agent"] != 1 || names["execute_tool"] == 0 || names["chat"] == 0 {
		t.Errorf("span kinds %v: want one invoke_agent root and chat and execute_tool spans", names)
	}
}

// TestExportGoTestCompiles: tests exported from two bundles into one
// package compile side by side (a package-level tracePath was declared
// twice), in the _test package that declares the agent when --agent names
// a bare function (the default was the package under test, which cannot
// see it), a typed agent adapted with replay.Typed; a constructor named as
// the agent is refused with what to name instead, rather than written as
// code that does not compile.
func TestExportGoTestCompiles(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command")
	}
	repo, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyBundle(t, booking, filepath.Join(dir, "testdata", "first.sftrace"))
	copyBundle(t, booking, filepath.Join(dir, "testdata", "second.sftrace"))
	sum, err := os.ReadFile(filepath.Join(repo, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	// The app requires every module stepfork's build list holds, as a tidy
	// go.mod would: with GOPROXY=off the go command then reads no go.mod
	// outside that list (a clean module cache, filled by this module's own
	// build, holds none; go-isatty's go 1.15 go.mod would otherwise pull in
	// the requirements of its requirements).
	mod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	_, requires, ok := strings.Cut(string(mod), "\nrequire")
	if !ok {
		t.Fatalf("%s/go.mod holds no require", repo)
	}
	files := map[string]string{
		"go.mod":              "module example.com/app\n\ngo 1.26\n\nrequire github.com/stepfork/stepfork v0.0.0\n\nrequire" + requires + "\nreplace github.com/stepfork/stepfork => " + strconv.Quote(repo) + "\n",
		"go.sum":              string(sum),
		"agent/agent.go":      "package agent\n\nimport \"context\"\n\nfunc New() func(context.Context, int) (int, error) { return nil }\n",
		"agent/agent_test.go": "package agent_test\n\nimport \"context\"\n\nfunc Run(ctx context.Context, input map[string]any) (string, error) { return \"\", nil }\n",
	}
	for name, text := range files {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	agentDir := filepath.Join(dir, "agent")
	for _, b := range []string{"first", "second"} {
		if r := stepfork(t, agentDir, nil, "export", "../testdata/"+b+".sftrace", "--go-test", "--agent", "Run"); r.code != 0 {
			t.Fatalf("export %s: exit %d: %s", b, r.code, r.stderr)
		}
	}
	src, err := os.ReadFile(filepath.Join(agentDir, "first_regression_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"\npackage agent_test\n", `sftest.Load(t, "../testdata/first.sftrace")`, "sftest.Replay(t, tr, replay.Typed(Run))"} {
		if !strings.Contains(string(src), want) {
			t.Errorf("the generated test does not hold %q:\n%s", want, src)
		}
	}
	vet := exec.Command(goBin, "vet", ".")
	vet.Dir = agentDir
	vet.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := vet.CombinedOutput(); err != nil {
		t.Errorf("the two generated tests do not compile together: %v\n%s", err, out)
	}

	// A constructor, here and in a package of the module.
	for _, agent := range []string{"New", "example.com/app/agent.New"} {
		r := stepfork(t, dir, nil, "export", "testdata/first.sftrace", "--go-test", "--agent", agent, "-o", "agent/new_test.go")
		want := "New (agent.go:5) is func() func(context.Context, int) (int, error), not an agent"
		if r.code != exitInput || !strings.Contains(r.stderr, want) || !strings.Contains(r.stderr, "var agent = New(…)") {
			t.Errorf("--agent %s: exit %d, stderr %q; want exit 2 and %q", agent, r.code, r.stderr, want)
		}
	}
}
