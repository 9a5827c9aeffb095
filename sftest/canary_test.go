package sftest_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
)

// Two canary secrets: one under a sensitive key (redacted wherever it sits
// under api_key), one that is a credential by its shape (redacted in any
// string).
const (
	keyedCanary = "canary-keyed-3f9a71c2"
	shapeCanary = "sk-canary5f0d2c91e7ab"
)

// Credentials in the forms that once leaked (issue 21): glued to the word
// before them, after a line break that JSON escapes, as object keys. Each
// body is what must appear nowhere; they are put together at run time.
var (
	gluedBody = "R2d2C3poBb8Ewok5Yoda9LukeSkywalker01"
	awsBody   = "QYLPMN5HHHFPZAM2"
	jwtBody   = "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)

// secret is a payload holding every canary.
var secret = map[string]any{"api_key": keyedCanary, "note": "use " + shapeCanary,
	"glued": "x_ghp_" + gluedBody, "escaped": "line\n9AKIA" + awsBody,
	"zeyJ" + jwtBody: map[string]any{"k_ghp_" + gluedBody: "as keys"}}

// canaryAgent goes through every wrapper a change can act on: a tool, a
// model call inside a node, a parameter, a state read, a decision and an
// approval.
func canaryAgent() replay.Agent {
	lookup := replay.Tool("lookup", func(_ context.Context, id string) (map[string]any, error) {
		return map[string]any{"id": id, "amount": 80}, nil
	})
	model := func(_ context.Context, req replay.Request) (replay.Response, error) {
		return replay.Response{Model: req.Model, Content: "refund"}, nil
	}
	return replay.Typed(func(ctx context.Context, id string) (map[string]any, error) {
		out := map[string]any{}
		err := replay.Node(ctx, "plan", func(ctx context.Context) error {
			order, err := lookup(ctx, id)
			if err != nil {
				return err
			}
			out["order"] = order
			out["limit"] = replay.Param[any](ctx, "limit", 100)
			out["profile"] = replay.Read[any](ctx, "profile", "standard")
			resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "fake-1", System: "Decide.",
				Messages: []replay.Message{{Role: "user", Content: id}}}, model)
			if err != nil {
				return err
			}
			out["model"] = resp.Content
			out["action"] = replay.Decide[any](ctx, "action", resp.Content)
			out["approval"], err = replay.Approve(ctx, "refund", func(context.Context) (any, error) { return true, nil })
			return err
		})
		return out, err
	})
}

// No change of any kind lets a secret it carries reach a golden, an
// explanation, a diff, a saved bundle or a sweep's report: each canary is
// redacted first.
func TestCanarySecretsInChanges(t *testing.T) {
	t.Parallel()
	res, err := replay.Record(t.Context(), "canary", "o_1", canaryAgent())
	if err != nil || res.Err != nil {
		t.Fatalf("recording: %v, %v", err, res.Err)
	}
	base := res.Trace
	changes := []fork.Named{
		{Name: "tool_result", Changes: []fork.Change{fork.ToolResult(fork.OnCall("lookup", 1), secret)}},
		{Name: "llm_response", Changes: []fork.Change{fork.LLMResponse(fork.OnCall("fake/fake-1", 1),
			replay.Response{Model: "fake-1", Content: "refund " + shapeCanary, Extra: secret})}},
		{Name: "prompt", Changes: []fork.Change{fork.Prompt("plan", "Decide. Key: "+shapeCanary)}},
		{Name: "model", Changes: []fork.Change{fork.Model("plan", shapeCanary)}},
		{Name: "temperature", Changes: []fork.Change{fork.Temperature("plan", 0.5)}},
		{Name: "state", Changes: []fork.Change{fork.State{Set: map[string]any{"profile": secret}}}},
		{Name: "decision", Changes: []fork.Change{fork.Decision("action", secret)}},
		{Name: "param", Changes: []fork.Change{fork.Param("limit", secret)}},
		{Name: "human_response", Changes: []fork.Change{fork.HumanResponse("refund", secret)}},
		{Name: "function", Changes: []fork.Change{fork.ChangeFunc(func(fork.Resolved) fork.Change {
			return fork.ToolResult(fork.OnCall("lookup", 1), secret)
		})}},
	}
	for _, c := range changes {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			v := sftest.Fork(t, base, fork.Start(), canaryAgent(), append([]fork.RunOption{fork.Allow("lookup"),
				fork.SaveTo(filepath.Join(dir, "v.sftrace"))}, toOptions(c.Changes)...)...)
			if len(v.Changes) != 1 || v.Changes[0].Applied == 0 {
				t.Fatalf("the change was not applied: %+v", v.Changes)
			}
			golden, err := sftest.Render(v)
			if err != nil {
				t.Fatal(err)
			}
			outputs := map[string]string{
				"Render (the golden)":      golden,
				"Explain":                  v.Explain(),
				"the change's description": v.Changes[0].Description,
				"the diff's Explain":       v.Diff.Explain(),
				"the diff's JSON":          string(v.Diff.JSON()),
			}
			saved(t, dir, outputs)
			noCanary(t, outputs)
		})
	}
	t.Run("sweep", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		sw, err := fork.Each(t.Context(), base, fork.Start(), canaryAgent(), changes, fork.Allow("lookup"), fork.SaveDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		golden, err := sftest.Render(sw)
		if err != nil {
			t.Fatal(err)
		}
		outputs := map[string]string{"Render (the golden)": golden, "Explain": sw.Explain()}
		saved(t, dir, outputs)
		noCanary(t, outputs)
	})
}

func toOptions(cs []fork.Change) []fork.RunOption {
	out := make([]fork.RunOption, len(cs))
	for i, c := range cs {
		out[i] = c
	}
	return out
}

// saved adds every file under dir to outputs.
func saved(t *testing.T, dir string, outputs map[string]string) {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		outputs["the saved "+filepath.Base(filepath.Dir(p))+"/"+d.Name()] = string(b)
		n++
		return err
	})
	if err != nil || n == 0 {
		t.Fatalf("reading the saved bundles: %v (%d files)", err, n)
	}
}

func noCanary(t *testing.T, outputs map[string]string) {
	t.Helper()
	for what, text := range outputs {
		for _, c := range []string{keyedCanary, shapeCanary, gluedBody, awsBody, jwtBody[:24]} {
			if i := strings.Index(text, c); i >= 0 {
				t.Errorf("%s holds the secret %s: …%s…", what, c, text[max(0, i-80):min(len(text), i+len(c)+20)])
			}
		}
	}
}
