package replay_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

func echoBuildAgent(_ context.Context, in trace.Value) (any, error) { return in, nil }

// TestBuildRecorded: every run a session records says which code made it,
// in a build.json that integrity.json covers; replay.Build sets it
// explicitly, and a replay records the build of the code that replayed.
func TestBuildRecorded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := filepath.Join(t.TempDir(), "run.sftrace")
	rec, err := replay.Record(ctx, "echo", "hi", echoBuildAgent, replay.SaveTo(p))
	if err != nil {
		t.Fatal(err)
	}
	tr, err := trace.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	b, ok, err := tr.Build()
	if err != nil || !ok {
		t.Fatalf("the recording has no build: %v, %v", ok, err)
	}
	if b.Module != "github.com/stepfork/stepfork" || b.Go == "" {
		t.Errorf("build = %+v, want this module and a Go version", b)
	}
	if res := trace.VerifyIntegrity(p); res.Status != trace.IntegrityVerified || !strings.Contains(strings.Join(res.VerifiedFiles, ","), trace.BuildFile) {
		t.Errorf("integrity = %+v, want build.json verified", res)
	}
	if rec.Trace.Extras[trace.BuildFile] == nil {
		t.Error("Result.Trace has no build.json")
	}

	stamped := trace.Build{Module: "example.com/support", Version: "v1.4.0", Revision: "46b7ad0c4abd65b7e0efec1149cdb0d7ddcb7ecd",
		Time: time.Date(2026, 3, 14, 9, 30, 0, 0, time.UTC)}
	res, err := replay.Replay(ctx, tr, echoBuildAgent, replay.Build(stamped))
	if err != nil {
		t.Fatal(err)
	}
	if got, _, _ := res.Trace.Build(); got != stamped {
		t.Errorf("the replay's build = %+v, want the one given to replay.Build, %+v", got, stamped)
	}
}

func TestBuildRefused(t *testing.T) {
	t.Parallel()
	_, err := replay.Record(context.Background(), "echo", "hi", echoBuildAgent, replay.Build(trace.Build{Module: "m", Revision: "main"}))
	if !errors.Is(err, replay.ErrInvalidOptions) || !strings.Contains(err.Error(), "replay.Build: build.json: revision \"main\" is not a commit hash") {
		t.Errorf("err = %v, want replay.Build's refusal naming the revision", err)
	}
}
