package stepfork_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// misuses are calls that mean nothing where they are written. Each must be a
// compile error, and its message must say why; the lines of the snippet
// that are not misuses must compile.
var misuses = []struct {
	name, code, want string
}{
	{"a sweep option on Run", `fork.Run(ctx, base, nil, agent, fork.Samples(3))`,
		"cannot use fork.Samples(3) (value of interface type fork.EachOption) as fork.RunOption value"},
	{"Concurrency on Run", `fork.Run(ctx, base, nil, agent, fork.Concurrency(2))`,
		"as fork.RunOption value"},
	{"a sweep's directory on Run", `fork.Run(ctx, base, nil, agent, fork.SaveDir("out"))`,
		"as fork.RunOption value"},
	{"a bundle path on Each", `fork.Each(ctx, base, nil, agent, nil, fork.SaveTo("out.sftrace"))`,
		"cannot use fork.SaveTo(\"out.sftrace\") (value of interface type fork.FileOption) as fork.EachOption value"},
	{"a static override on Run", `fork.Run(ctx, base, nil, agent, fork.Override(fork.OnStep(5), 1))`,
		"as fork.RunOption value"},
	{"a change on the static fork", `fork.Trace(base, fork.ThroughStep(5), fork.Prompt("decide", "x"))`,
		"as fork.TraceOption value"},
	{"a counterfactual point as a static cut", `fork.Trace(base, fork.Step(5))`,
		"cannot use fork.Step(5) (value of interface type fork.At) as fork.Cut value"},
	{"a static cut as a counterfactual point", `fork.Run(ctx, base, fork.ThroughStep(5), agent)`,
		"cannot use fork.ThroughStep(5) (value of struct type fork.Cut) as fork.At value"},
	{"a target built by hand", `fork.ToolResult(fork.Target{Step: 5}, 1)`,
		"unknown field Step in struct literal of type fork.Target"},
	{"a trace as a counterfactual", `assert.Diverged(t, base)`,
		".Trace does not satisfy assert.Counterfactual"},
	{"a diff where a fork's record is needed", `assert.NoSuppressedEffects(t, d)`,
		"diff\".Result) as *fork.Variant value in argument to assert.NoSuppressedEffects"},
	{"a node name as a step", `assert.DivergesAtStep(t, v, "decide")`,
		"cannot use \"decide\" (untyped string constant) as int value"},
}

// TestMisuseDoesNotCompile builds a module that uses this one (through a
// replace directive) and holds every misuse, and checks that the compiler
// refuses each on its own line with the expected message, and nothing else.
func TestMisuseDoesNotCompile(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check that misuses do not compile: %v", err)
	}
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var src strings.Builder
	src.WriteString(`package misuse

import (
	"context"
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
	"github.com/stepfork/stepfork/trace/diff"
)

func uses(ctx context.Context, t *testing.T, base *trace.Trace, agent replay.Agent, v *fork.Variant, d *diff.Result) {
	// What is right compiles.
	fork.Run(ctx, base, fork.Failure(), agent, fork.Prompt("decide", "x"), fork.Memoize(), fork.SaveTo("v.sftrace"))
	fork.Each(ctx, base, nil, agent, nil, fork.Samples(3), fork.Concurrency(2), fork.SaveDir("out"), fork.Memoize())
	fork.Trace(base, fork.ThroughStep(5), fork.Override(fork.OnStep(5), 1), fork.SaveTo("f.sftrace", trace.Overwrite()))
	assert.Diverged(t, v)
	assert.Diverged(t, d)
	assert.DivergesAtStep(t, d, 6)
	assert.DivergesInNode(t, v, "decide")
	assert.NoSuppressedEffects(t, v)
`)
	lines := map[int]int{} // snippet line → index in misuses
	for i, m := range misuses {
		src.WriteString("\t" + m.code + " // " + m.name + "\n")
		lines[strings.Count(src.String(), "\n")] = i
	}
	src.WriteString("}\n")
	gomod := fmt.Sprintf("module misuse\n\ngo 1.26\n\nrequire github.com/stepfork/stepfork v0.0.0\n\nreplace github.com/stepfork/stepfork => %s\n", root)
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"go.mod": []byte(gomod), "go.sum": sum, "misuse.go": []byte(src.String())} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "build", "-mod=mod", "-gcflags=-e", ".")
	cmd.Dir = dir
	// Offline: every module is in the cache already, since this module's
	// own tests are running.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOWORK=off", "GOFLAGS=-buildvcs=false")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatalf("the misuses compiled:\n%s", src.String())
	}
	got := map[int][]string{}
	errLine := regexp.MustCompile(`(?m)^\./misuse\.go:(\d+):\d+: (.*)$`)
	for _, m := range errLine.FindAllStringSubmatch(out.String(), -1) {
		n, _ := strconv.Atoi(m[1])
		got[n] = append(got[n], m[2])
	}
	if len(got) == 0 {
		t.Fatalf("go build failed without a compile error of misuse.go:\n%s", out.String())
	}
	for n, i := range lines {
		m := misuses[i]
		msgs := got[n]
		if len(msgs) == 0 {
			t.Errorf("%s: %s compiles", m.name, m.code)
			continue
		}
		if !strings.Contains(strings.Join(msgs, "\n"), m.want) {
			t.Errorf("%s: %s fails with\n  %s\nwant a message containing\n  %s", m.name, m.code, strings.Join(msgs, "\n  "), m.want)
		}
		delete(got, n)
	}
	for n, msgs := range got {
		t.Errorf("misuse.go:%d, which should compile, does not: %s", n, strings.Join(msgs, "; "))
	}
}
