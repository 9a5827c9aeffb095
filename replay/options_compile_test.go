package replay_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayOptionsDoNotCompileForRecord proves that the option types are
// sealed per entry point: a program passing a replay-only option to
// replay.Record is refused by the compiler, while the same program with
// options each entry point accepts builds.
func TestReplayOptionsDoNotCompileForRecord(t *testing.T) {
	t.Parallel()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to check what compiles: %v", err)
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	const program = `package main

import (
	"context"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

func agent(context.Context, trace.Value) (any, error) { return nil, nil }

func main() {
	ctx := context.Background()
	rec, _ := replay.Record(ctx, "a", nil, agent, replay.SaveTo(""), replay.StrictContext())
	_, _ = replay.Replay(ctx, rec.Trace, agent, replay.SaveTo(""), replay.Hybrid("m"), replay.Live(), replay.WithDirector(nil), replay.StrictContext())
	_, _ = replay.Prepare(rec.Trace).Replay(ctx, agent, replay.Hybrid("m"))
	//MISUSE
}
`
	build := func(t *testing.T, misuse string) (string, error) {
		dir := t.TempDir()
		gomod := "module misuse\n\ngo 1.26\n\nrequire github.com/stepfork/stepfork v0.0.0\n\nreplace github.com/stepfork/stepfork => " + root + "\n"
		files := map[string]string{
			"go.mod":  gomod,
			"go.sum":  string(sum),
			"main.go": strings.Replace(program, "//MISUSE", misuse, 1),
		}
		for name, text := range files {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		cmd := exec.Command(goTool, "build", "-o", os.DevNull, ".")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	t.Run("accepted options build", func(t *testing.T) {
		t.Parallel()
		if out, err := build(t, ""); err != nil {
			t.Fatalf("the program with valid options does not build: %v\n%s", err, out)
		}
	})
	for _, tc := range []struct{ name, misuse, option string }{
		{"Hybrid", `_, _ = replay.Record(ctx, "a", nil, agent, replay.Hybrid("m"))`, `replay.Hybrid("m")`},
		{"Live", `_, _ = replay.Record(ctx, "a", nil, agent, replay.Live())`, `replay.Live()`},
		{"WithDirector", `_, _ = replay.Record(ctx, "a", nil, agent, replay.WithDirector(nil))`, `replay.WithDirector(nil)`},
	} {
		t.Run(tc.name+" passed to Record", func(t *testing.T) {
			t.Parallel()
			out, err := build(t, tc.misuse)
			if err == nil {
				t.Fatalf("passing %s to replay.Record compiled", tc.option)
			}
			want := "cannot use " + tc.option + " (value of interface type replay.ReplayOption) as replay.RecordOption value in argument to replay.Record: replay.ReplayOption does not implement replay.RecordOption (missing method applyRecord)"
			if !strings.Contains(out, want) {
				t.Fatalf("the compiler refused the program, but not with\n\t%s\nit said:\n%s", want, out)
			}
		})
	}
	t.Run("StrictContext passed to Transport", func(t *testing.T) {
		t.Parallel()
		out, err := build(t, `_ = replay.Transport(nil, replay.StrictContext())`)
		if err == nil {
			t.Fatal("passing replay.StrictContext() to replay.Transport compiled: a transport has no run to be strict about")
		}
		want := "replay.Option does not implement replay.TransportOption (missing method applyTransport)"
		if !strings.Contains(out, want) {
			t.Fatalf("the compiler refused the program, but not with\n\t%s\nit said:\n%s", want, out)
		}
	})
}
