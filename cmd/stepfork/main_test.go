package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stepfork/stepfork/internal/hostile"
)

// updateGolden rewrites the golden files under testdata/ instead of
// comparing against them: go test ./cmd/stepfork -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite cmd/stepfork/testdata golden files")

// binary is the stepfork command built once for the test process.
var binary string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "stepfork-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "stepfork")
	out, err := exec.Command("go", "build", "-buildvcs=false", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	removeBenchBundles()
	hostile.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Paths of the shipped bundles, relative to this package's directory, as
// they appear in golden outputs.
const (
	booking = "../../testdata/booking-agent.sftrace"
	vectors = "../../testdata/vectors/stepfork/"
)

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// stepfork runs the built binary in dir ("" is this package's directory)
// with a clean environment: no color, no NO_COLOR unless env adds it.
func stepfork(t *testing.T, dir string, env []string, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NO_COLOR=") && !strings.HasPrefix(kv, "CLICOLOR_FORCE=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			t.Fatalf("stepfork %v: %v", args, err)
		}
		code = ee.ExitCode()
	}
	return result{stdout.String(), stderr.String(), code}
}

// golden compares got with testdata/name, or rewrites it with -update-golden.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (create it with: go test ./cmd/stepfork -update-golden)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got):\n%s\nIf the change is intended: go test ./cmd/stepfork -update-golden", path, diff)
	}
}

// copyBundle copies a bundle directory to dst.
func copyBundle(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// goldenCase is one command line whose stdout is compared with a golden file
// and whose exit code is checked literally.
type goldenCase struct {
	golden string
	args   []string
	code   int
}

func runGoldenCases(t *testing.T, cases []goldenCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.golden, func(t *testing.T) {
			t.Parallel()
			r := stepfork(t, "", nil, c.args...)
			if r.code != c.code {
				t.Errorf("stepfork %s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", strings.Join(c.args, " "), r.code, c.code, r.stdout, r.stderr)
			}
			golden(t, c.golden, r.stdout)
		})
	}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args       []string
		code       int
		stdoutHas  string
		stderrHas  string
		emptyOther bool
	}{
		{args: nil, code: 0, stdoutHas: "Commands:"},
		{args: []string{"--help"}, code: 0, stdoutHas: "Commands:"},
		{args: []string{"help"}, code: 0, stdoutHas: "Commands:"},
		{args: []string{"--version"}, code: 0, stdoutHas: "stepfork 0.1.0-dev\n"},
		{args: []string{"-V"}, code: 0, stdoutHas: "stepfork "},
		{args: []string{"help", "inspect"}, code: 0, stdoutHas: "Usage: stepfork inspect PATH"},
		{args: []string{"inspect", "--help"}, code: 0, stdoutHas: "--step N"},
		{args: []string{"help", "export"}, code: 0, stdoutHas: "-o, --output FILE"},
		{args: []string{"help", "nope"}, code: 2, stderrHas: `stepfork help: unknown command "nope"`},
		{args: []string{"nope"}, code: 2, stderrHas: `stepfork: unknown command "nope"`},
		{args: []string{"--frobnicate"}, code: 2, stderrHas: "stepfork: unknown flag --frobnicate"},
		{args: []string{"inspect"}, code: 2, stderrHas: "stepfork inspect: missing argument PATH\nRun 'stepfork help inspect' for usage."},
		{args: []string{"inspect", booking, "--frob"}, code: 2, stderrHas: "stepfork inspect: flag provided but not defined: -frob"},
		{args: []string{"inspect", booking, "--step", "x"}, code: 2, stderrHas: `invalid value "x" for flag -step`},
		{args: []string{"inspect", booking, "extra"}, code: 2, stderrHas: `stepfork inspect: unexpected argument "extra"`},
		{args: []string{"export", booking}, code: 2, stderrHas: "stepfork export: pass exactly one of --go-test and --otlp"},
	}
	for _, tt := range tests {
		r := stepfork(t, "", nil, tt.args...)
		if r.code != tt.code {
			t.Errorf("stepfork %q: exit %d, want %d (stderr %q)", tt.args, r.code, tt.code, r.stderr)
		}
		if !strings.Contains(r.stdout, tt.stdoutHas) {
			t.Errorf("stepfork %q: stdout %q does not contain %q", tt.args, r.stdout, tt.stdoutHas)
		}
		if !strings.Contains(r.stderr, tt.stderrHas) {
			t.Errorf("stepfork %q: stderr %q does not contain %q", tt.args, r.stderr, tt.stderrHas)
		}
	}
}

// The contract of stepfork's CLI (stepfork-format §8): with no command it
// prints its help on stdout and exits 0, as --help does; a usage error
// prints what is wrong on stderr, nothing on stdout, and exits 2.
func TestNoArgumentsAndUsageErrors(t *testing.T) {
	t.Parallel()
	help := stepfork(t, "", nil, "--help")
	none := stepfork(t, "", nil)
	if none.code != 0 || none.stderr != "" || none.stdout != help.stdout {
		t.Errorf("stepfork with no arguments: exit %d, stderr %q, stdout the help: %v; want 0, no stderr, the help", none.code, none.stderr, none.stdout == help.stdout)
	}
	for _, want := range []string{"Behavioral regression testing for AI agents.\n", "Turn failed AI-agent runs into reproducible regression tests", "\nUsage:\n", "\nCommands:\n"} {
		if !strings.Contains(none.stdout, want) {
			t.Errorf("the help lacks %q:\n%s", want, none.stdout)
		}
	}
	for _, args := range [][]string{
		{"nope"}, {"--frobnicate"}, {"diff", booking}, {"fork", booking}, {"view"}, {"inspect", booking, "--step", "x"},
		{"validate"}, {"points"}, {"minimize"}, {"export", booking}, {"pack"}, {"unpack"}, {"report"}, {"help", "nope"},
	} {
		r := stepfork(t, "", nil, args...)
		if r.code != 2 || r.stdout != "" || r.stderr == "" {
			t.Errorf("stepfork %q: exit %d, stdout %q, stderr %q; want exit 2, the problem on stderr only", args, r.code, r.stdout, r.stderr)
		}
	}
}

func TestEveryCommandHasHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands() {
		r := stepfork(t, "", nil, "help", c.name)
		if r.code != 0 || !strings.HasPrefix(r.stdout, "Usage: stepfork "+c.name+" ") {
			t.Errorf("help %s: exit %d, stdout %q", c.name, r.code, r.stdout)
		}
	}
}

func TestColor(t *testing.T) {
	t.Parallel()
	// A pipe gets no ANSI codes; CLICOLOR_FORCE turns color on; NO_COLOR
	// wins over it.
	tests := []struct {
		env  []string
		ansi bool
	}{
		{nil, false},
		{[]string{"CLICOLOR_FORCE=1"}, true},
		{[]string{"CLICOLOR_FORCE=1", "NO_COLOR=1"}, false},
	}
	for _, tt := range tests {
		r := stepfork(t, "", tt.env, "inspect", vectors+"failed_tool_run.sftrace")
		if got := strings.Contains(r.stdout, "\x1b["); got != tt.ansi {
			t.Errorf("env %q: ANSI in output = %v, want %v", tt.env, got, tt.ansi)
		}
	}
}
