package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/trace"
)

var exportCmd = &command{
	name:    "export",
	args:    "PATH (--go-test [--agent IMPORT.FUNC] [--package NAME] | --otlp) [-o FILE] [--overwrite] [--json]",
	summary: "write a Go regression test, or OpenTelemetry spans, from a run",
	description: `
Export --go-test writes a _test.go file that loads the trace and replays it
through the agent with sftest: every tool and model call is served from the
recording, and the test fails at the first divergence. The trace is referenced
by its path (relative to the test's directory); trace payloads never become
code. --agent names the agent function: an import path and a function
(example.com/app/agent.Run), or a bare function (Run) of the test's own
package. The default output is ./<stem>_regression_test.go.

Export --otlp writes the run as OpenTelemetry spans in OTLP JSON lines, the
format of the collector's file exporter and receiver: an invoke_agent root
span, a "chat {model}" span per model call and an "execute_tool {tool}" span
per tool call, with gen_ai.* attributes and parent links from the trace.
State changes, markers and errors become span events. The default output is
stdout.

The trace must pass strict validation ("Trace failed validation.", exit 2).
An existing output file is replaced only with --overwrite (exit 1 otherwise).`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &exportOptions{}
		fs.BoolVar(&o.goTest, "go-test", false, "write a Go regression test")
		fs.BoolVar(&o.otlp, "otlp", false, "write OTLP JSON lines (OpenTelemetry GenAI spans)")
		fs.StringVar(&o.agent, "agent", "", "the agent function, `IMPORT.FUNC` or FUNC (--go-test)")
		fs.StringVar(&o.pkg, "package", "", "package `NAME` of the generated test (default: from the output directory)")
		fs.StringVar(&o.output, "output", "", "write to `FILE`")
		aliasFlag(fs, "o", "output")
		fs.BoolVar(&o.overwrite, "overwrite", false, "replace an existing output file")
		fs.BoolVar(&o.content, "content", false, "include tool arguments and results in OTLP spans (opt-in, redacted)")
		fs.BoolVar(&o.json, "json", false, "print the result as JSON")
		return func(e *env, args []string) int { return o.run(e, args[0]) }
	},
}

type exportOptions struct {
	goTest, otlp       bool
	agent, pkg, output string
	overwrite, content bool
	json               bool
}

func (o *exportOptions) run(e *env, path string) int {
	switch {
	case o.goTest == o.otlp:
		return usageError(e, "export", "pass exactly one of --go-test and --otlp")
	case o.otlp && (o.agent != "" || o.pkg != ""):
		return usageError(e, "export", "--agent and --package apply to --go-test only")
	case o.goTest && o.content:
		return usageError(e, "export", "--content applies to --otlp only")
	}
	fail := func(code int, lines ...string) int {
		if o.json {
			e.writeJSON(errorJSON(map[int]string{exitDifferent: "export_failed", exitInput: "invalid_input"}[code], strings.Join(lines, " ")))
		} else {
			for i, l := range lines {
				if i == 0 {
					l = e.paint(styleRed, l)
				}
				fmt.Fprintln(e.stderr, l)
			}
		}
		return code
	}
	if o.goTest {
		if o.agent == "" {
			return fail(exitInput, "A replayable regression test needs --agent IMPORT.FUNC (for example example.com/app/agent.Run), or FUNC for a function of the test's own package.")
		}
		if _, _, err := parseAgent(o.agent); err != nil {
			return fail(exitInput, err.Error())
		}
		if o.pkg != "" && !token.IsIdentifier(o.pkg) {
			return fail(exitInput, fmt.Sprintf("--package %q is not a Go package name.", o.pkg))
		}
	}
	if rep := trace.ValidateBundle(context.Background(), path); !rep.Valid() {
		if _, err := os.Stat(path); err != nil {
			return fail(exitInput, "Unable to read trace.", redact(err.Error()))
		}
		lines := []string{"Trace failed validation."}
		for _, is := range rep.Errors() {
			lines = append(lines, fmt.Sprintf("  %s: %s", is.Code, clean(is.Message)))
		}
		return fail(exitInput, lines...)
	}
	tr, err := trace.Load(path)
	if err != nil {
		return fail(exitInput, "Unable to read trace.", redact(err.Error()))
	}
	if o.otlp {
		data, err := otlpLines(tr, o.content)
		if err != nil {
			return fail(exitInput, "Unable to export trace.", redact(err.Error()))
		}
		data = clip.InertJSON(data) // printed or written, nothing in it acts on a terminal
		if o.output == "" {
			e.stdout.Write(data)
			return exitOK
		}
		if code, msg := writeOutput("Export", o.output, data, o.overwrite); code != exitOK {
			return fail(code, msg)
		}
		return o.report(e, "otlp", tr, "", "")
	}
	dest := o.output
	if dest == "" {
		dest = "." + string(filepath.Separator) + goIdentifierSnake(bundleStem(path)) + "_regression_test.go"
	}
	src, testName, err := generateGoTest(goTestSpec{
		bundle: path, dest: dest, agent: o.agent, pkg: o.pkg, version: buildVersion(),
		command: exportCommandLine(path, o.agent, o.output),
	})
	if err != nil {
		return fail(exitInput, "Unable to generate the test.", err.Error())
	}
	if code, msg := writeOutput("Export", dest, src, o.overwrite); code != exitOK {
		return fail(code, msg)
	}
	o.output = dest
	return o.report(e, "go-test", tr, testName, o.agent)
}

func (o *exportOptions) report(e *env, kind string, tr *trace.Trace, testName, agent string) int {
	if o.json {
		j := newObject().str("format", kind).str("output", o.output).str("run_id", tr.RunID).int("events", int64(len(tr.Events)))
		if kind == "go-test" {
			j.str("test", testName).str("agent", agent)
		}
		e.writeJSON(j.bytes())
		return exitOK
	}
	e.printf("Wrote %s\n", clean(o.output))
	if kind == "go-test" {
		e.printf("Agent:  %s\n", clean(agent))
		e.printf("Test:   %s\n", testName)
		e.println("Run it with: go test -run " + testName)
	} else {
		e.printf("Spans:  %d events of run %s\n", len(tr.Events), clean(tr.RunID))
	}
	return exitOK
}

// writeOutput writes data to dest through a temporary sibling renamed into
// place, refusing to replace an existing file without overwrite and never
// replacing a directory.
func writeOutput(what, dest string, data []byte, overwrite bool) (int, string) {
	data = redactBytes(data) // the last pass, as for what is printed
	if fi, err := os.Stat(dest); err == nil {
		if fi.IsDir() {
			return exitDifferent, fmt.Sprintf("%s failed: %s is a directory, not a file", what, dest)
		}
		if !overwrite {
			return exitDifferent, fmt.Sprintf("%s already exists; pass --overwrite to replace it.", dest)
		}
	}
	tmp, err := os.CreateTemp(filepath.Dir(dest), "."+filepath.Base(dest)+".tmp-*")
	if err != nil {
		return exitDifferent, what + " failed: " + err.Error()
	}
	_, werr := tmp.Write(data)
	cerr := tmp.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp.Name())
		return exitDifferent, what + " failed: " + err.Error()
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		os.Remove(tmp.Name())
		return exitDifferent, what + " failed: " + err.Error()
	}
	if err := os.Rename(tmp.Name(), dest); err != nil {
		os.Remove(tmp.Name())
		return exitDifferent, what + " failed: " + err.Error()
	}
	return exitOK, ""
}

// bundleStem is the bundle's base name without ".sftrace".
func bundleStem(path string) string {
	base := filepath.Base(filepath.Clean(path))
	return strings.TrimSuffix(base, ".sftrace")
}

// parseAgent splits "example.com/app/agent.Run" into its import path and
// function name; a bare "Run" has no import path. Both parts are checked so
// that nothing but an import path and an identifier reaches the code.
func parseAgent(s string) (importPath, fn string, err error) {
	slash := strings.LastIndex(s, "/")
	dot := strings.Index(s[slash+1:], ".")
	if dot < 0 {
		if slash >= 0 {
			return "", "", fmt.Errorf("--agent %q names no function: write IMPORT.FUNC, for example example.com/app/agent.Run", s)
		}
		fn = s
	} else {
		importPath, fn = s[:slash+1+dot], s[slash+1+dot+1:]
	}
	if !token.IsIdentifier(fn) {
		return "", "", fmt.Errorf("--agent %q: %q is not a Go function name", s, fn)
	}
	if importPath != "" {
		if !token.IsExported(fn) {
			return "", "", fmt.Errorf("--agent %q: %s is not exported, so a test in another package cannot call it", s, fn)
		}
		if err := checkImportPath(importPath); err != nil {
			return "", "", fmt.Errorf("--agent %q: %v", s, err)
		}
	}
	return importPath, fn, nil
}

// checkImportPath accepts the import paths the go command accepts (letters,
// digits and -._~+ in non-empty elements, no "." or ".." elements).
func checkImportPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") {
		return fmt.Errorf("invalid import path %q", p)
	}
	for elem := range strings.SplitSeq(p, "/") {
		if elem == "" || elem == "." || elem == ".." || strings.HasPrefix(elem, ".") {
			return fmt.Errorf("invalid import path %q", p)
		}
		for _, r := range elem {
			if !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-._~+", r))) {
				return fmt.Errorf("invalid character %q in import path %q", r, p)
			}
		}
	}
	return nil
}

// goTestSpec is what the generated test is made from.
type goTestSpec struct {
	bundle, dest   string // as given on the command line
	agent, pkg     string
	version        string
	command        string                          // the export command, for the regeneration comment
	packageFromDir func(dir string) (string, bool) // nil: packageOfDir
}

// generateGoTest renders the regression test. Every piece of text from the
// outside is either validated (identifiers, import paths), quoted with
// strconv.Quote (paths), or flattened to one inert comment line (names), and
// the result must parse and format as Go.
func generateGoTest(s goTestSpec) (src []byte, testName string, err error) {
	importPath, fn, err := parseAgent(s.agent)
	if err != nil {
		return nil, "", err
	}
	rel, err := traceLiteralPath(s.bundle, s.dest)
	if err != nil {
		return nil, "", err
	}
	// The agent's declaration, where its source is at hand: a function
	// that is no agent (a constructor) is refused here rather than left to
	// fail to compile, a typed one is adapted, and a bare FUNC declared in
	// a _test.go file gives the test that file's package.
	srcDir := filepath.Dir(s.dest)
	if importPath != "" {
		srcDir = moduleDir(srcDir, importPath)
	}
	var decl agentDecl
	if srcDir != "" {
		var found bool
		if decl, found, err = findAgent(srcDir, fn, importPath == ""); err != nil {
			return nil, "", fmt.Errorf("--agent %s: %w", s.agent, err)
		}
		if !found || importPath != "" {
			decl.pkg = ""
		}
	}
	pkg := s.pkg
	if pkg == "" {
		pkg = decl.pkg
	}
	if pkg == "" {
		from := s.packageFromDir
		if from == nil {
			from = packageOfDir
		}
		dirPkg, ok := from(filepath.Dir(s.dest))
		switch {
		case ok && importPath != "":
			pkg = dirPkg + "_test"
		case ok:
			pkg = dirPkg
		case importPath != "":
			alias, _ := packageAlias(importPath)
			pkg = alias + "_test"
		default:
			return nil, "", fmt.Errorf("cannot tell the package of %s for --agent %s; pass --package NAME", filepath.Dir(s.dest), s.agent)
		}
	}
	stem := bundleStem(s.bundle)
	testName = "TestStepforkRegression" + goIdentifierCamel(stem)
	call := fn
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Regression test generated by stepfork %s from the trace bundle %s.\n", commentSafe(s.version), commentSafe(filepath.Base(s.bundle)))
	b.WriteString("//\n")
	b.WriteString("// It replays the recorded run through the agent: every tool and model call is\n")
	b.WriteString("// served from the recording, nothing real is touched, and the test fails at the\n")
	b.WriteString("// first call the agent makes differently. Regenerate it with:\n")
	b.WriteString("//\n")
	fmt.Fprintf(&b, "//\t%s\n\n", commentSafe(s.command))
	fmt.Fprintf(&b, "package %s\n\n", pkg)
	b.WriteString("import (\n\t\"testing\"\n\n")
	if decl.typed {
		b.WriteString("\t\"github.com/stepfork/stepfork/replay\"\n")
	}
	b.WriteString("\t\"github.com/stepfork/stepfork/sftest\"\n")
	if importPath != "" {
		alias, last := packageAlias(importPath)
		if alias == last {
			fmt.Fprintf(&b, "\n\t%s\n", strconv.Quote(importPath))
		} else {
			fmt.Fprintf(&b, "\n\t%s %s\n", alias, strconv.Quote(importPath))
		}
		call = alias + "." + fn
	}
	b.WriteString(")\n\n")
	if decl.typed {
		call = "replay.Typed(" + call + ")"
	}
	// The path is the test's own, not a package-level name: tests exported
	// from several bundles live side by side in one package.
	fmt.Fprintf(&b, "func %s(t *testing.T) {\n", testName)
	b.WriteString("\t// The recorded run, relative to this package's directory (go test\n")
	b.WriteString("\t// runs a package's tests in its directory).\n")
	fmt.Fprintf(&b, "\ttr := sftest.Load(t, %s)\n", strconv.Quote(rel))
	fmt.Fprintf(&b, "\tsftest.Replay(t, tr, %s)\n", call)
	b.WriteString("}\n")
	out, err := format.Source(b.Bytes())
	if err != nil {
		return nil, "", fmt.Errorf("generated code does not format: %w", err)
	}
	return out, testName, nil
}

// packageAlias is the identifier the generated test imports importPath
// as: its last element (or the one before a major version suffix such as
// /v2) made a valid identifier. last is the import path's last element; the
// import needs an explicit alias when the two differ.
func packageAlias(importPath string) (alias, last string) {
	elems := strings.Split(importPath, "/")
	last = elems[len(elems)-1]
	base := last
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		base = elems[len(elems)-2]
	}
	return goIdentifierSnake(base), last
}

// traceLiteralPath is the bundle's path relative to the test file's
// directory, with forward slashes; absolute when it would climb more than
// three directories.
func traceLiteralPath(bundle, dest string) (string, error) {
	absBundle, err := filepath.Abs(bundle)
	if err != nil {
		return "", err
	}
	absDir, err := filepath.Abs(filepath.Dir(dest))
	if err != nil {
		return "", err
	}
	rel, err := filepath.Rel(absDir, absBundle)
	if err != nil || strings.Count(filepath.ToSlash(rel)+"/", "../") > 3 {
		return filepath.ToSlash(absBundle), nil
	}
	return filepath.ToSlash(rel), nil
}

// packageOfDir returns the package name of the non-test Go files in dir.
func packageOfDir(dir string) (string, bool) {
	matches, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	for _, m := range matches {
		if strings.HasSuffix(m, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), m, nil, parser.PackageClauseOnly)
		if err == nil && f.Name.Name != "main" {
			return f.Name.Name, true
		}
	}
	return "", false
}

// commentSafe flattens s to one inert line of a // comment: redacted,
// control characters (newlines included) escaped, at most 200 characters.
func commentSafe(s string) string {
	return clip.Head(clean(s), 200)
}

// goIdentifierCamel turns "booking-agent.v2" into "BookingAgentV2": ASCII
// letters and digits only, each run capitalized.
func goIdentifierCamel(s string) string {
	var b strings.Builder
	up := true
	for _, r := range s {
		switch {
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if up {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
			up = false
		default:
			up = true
		}
	}
	return b.String()
}

// goIdentifierSnake turns "booking-agent" into "booking_agent", a valid
// lower-case identifier ("trace" when nothing is left).
func goIdentifierSnake(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)) {
			b.WriteRune(r)
		} else if b.Len() > 0 && !strings.HasSuffix(b.String(), "_") {
			b.WriteByte('_')
		}
	}
	out := strings.Trim(b.String(), "_")
	if out == "" || !unicode.IsLetter(rune(out[0])) || token.Lookup(out).IsKeyword() {
		out = "trace_" + out
		out = strings.TrimSuffix(out, "_")
	}
	return out
}

// exportCommandLine is the command that regenerates the test, with every
// argument that needs it shell-quoted.
func exportCommandLine(bundle, agent, output string) string {
	args := []string{"stepfork", "export", shellQuote(bundle), "--go-test", "--agent", shellQuote(agent)}
	if output != "" {
		args = append(args, "-o", shellQuote(output))
	}
	return strings.Join(args, " ")
}

func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("-_./=+:@,", r)))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
