package mcp_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stepfork/stepfork/assert"
	sfmcp "github.com/stepfork/stepfork/contrib/mcp"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
)

// raceEnabled is set under -race, so that the server is built with the
// flags the test binary was, and reuses its compiled packages.
var raceEnabled bool

// buildServer builds cmd/fakemcp into a temporary directory.
func buildServer(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fakemcp")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./internal/fakeserver/cmd/fakemcp")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// serverLog is what the stdio servers started by a test wrote: one "start"
// line per process, one line per request answered.
func serverLog(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

func count(lines []string, s string) int {
	n := 0
	for _, l := range lines {
		if l == s {
			n++
		}
	}
	return n
}

func TestStdioServer(t *testing.T) {
	t.Parallel()
	bin := buildServer(t)
	logPath := filepath.Join(t.TempDir(), "server.log")
	model := newFakeModel(t)
	agent := triageAgent(model, func() *sfmcp.Client {
		cmd := exec.Command(bin)
		cmd.Env = append(os.Environ(), "FAKEMCP_LOG="+logPath)
		return sfmcp.New("tracker", mcp.NewClient(&mcp.Implementation{Name: "triage"}, nil), &mcp.CommandTransport{Command: cmd})
	})
	ctx := context.Background()

	rec, err := replay.Record(ctx, "triage", report, agent)
	if err != nil {
		t.Fatal(err)
	}
	recorded := serverLog(t, logPath)
	if count(recorded, "start") != 1 || count(recorded, "add_label") != 1 {
		t.Fatalf("recording: server log %q, want one start and one add_label", recorded)
	}
	assert.Trajectory(t, rec.Trace, []string{"tracker/tools/list", "tracker/resources/read",
		"tracker/search_issues", "tracker/add_label", "tracker/assign"}, assert.Strict)

	if _, err := replay.Replay(ctx, rec.Trace, agent); err != nil {
		t.Fatalf("frozen replay: %v", err)
	}
	v, err := fork.Run(ctx, rec.Trace, fork.BeforeCall(replay.KindTool, "tracker/add_label", 1), agent, fork.Memoize())
	if err != nil {
		t.Fatal(err)
	}
	assert.Equivalent(t, v)
	if got := serverLog(t, logPath); len(got) != len(recorded) {
		t.Errorf("a frozen replay and a memoized null fork started the server: log %q after the recording's %q", got, recorded)
	}

	// A tail that needs the server starts it, once, and only then.
	v, err = fork.Run(ctx, rec.Trace, fork.BeforeCall(replay.KindLLM, "openai/gpt-4o-mini", 2), agent,
		fork.Prompt(fork.All, "Close duplicates."), fork.Allow("tracker/close_issue"))
	if err != nil {
		t.Fatal(err)
	}
	assert.Completed(t, v)
	got := serverLog(t, logPath)[len(recorded):]
	if count(got, "start") != 1 || count(got, "close_issue") != 1 || count(got, "tools/list") != 0 {
		t.Errorf("live tail: server log %q, want one start, close_issue, and tools/list served from the recording", got)
	}
}

// Two servers with the same tool names: the server names keep their calls apart.
func TestSeveralServers(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	w2 := newWorld(t)
	client := func(name string, w *world) *sfmcp.Client {
		return sfmcp.New(name, mcp.NewClient(&mcp.Implementation{Name: "t"}, nil), inMemory{calls: w.calls, starts: &w.starts})
	}
	agent := replay.Typed(func(ctx context.Context, _ any) (string, error) {
		a, b := client("tracker", w), client("mirror", w2)
		defer a.Close()
		defer b.Close()
		var out string
		for _, c := range []*sfmcp.Client{a, b} {
			res, err := c.CallTool(ctx, &mcp.CallToolParams{Name: "add_label", Arguments: map[string]any{"issue": 1, "label": "bug"}})
			if err != nil {
				return "", err
			}
			out += res.Content[0].(*mcp.TextContent).Text + ";"
		}
		return out, nil
	})
	rec, err := replay.Record(context.Background(), "two", nil, agent)
	if err != nil {
		t.Fatal(err)
	}
	assert.Trajectory(t, rec.Trace, []string{"tracker/add_label", "mirror/add_label"}, assert.Strict)
	if _, err := replay.Replay(context.Background(), rec.Trace, agent); err != nil {
		t.Fatal(err)
	}
	if w.starts.Load() != 1 || w2.starts.Load() != 1 {
		t.Errorf("starts %d and %d, want the recording's 1 each", w.starts.Load(), w2.starts.Load())
	}
}
