package replay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stepfork/stepfork/replay"
)

// logObserver writes what it is told, one line per hook, and passes a
// context value down so the test sees which context the agent and the
// bodies run in.
type logObserver struct {
	mu    sync.Mutex
	lines []string
}

type depthKey struct{}

func depth(ctx context.Context) int { d, _ := ctx.Value(depthKey{}).(int); return d }

func (o *logObserver) add(format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lines = append(o.lines, fmt.Sprintf(format, args...))
}

func (o *logObserver) StartRun(ctx context.Context, r *replay.RunInfo) context.Context {
	o.add("start run %s base=%t mode=%q directed=%t", r.AgentName, r.BaseRunID != "", r.Mode, r.Directed)
	return context.WithValue(ctx, depthKey{}, 1)
}

func (o *logObserver) EndRun(ctx context.Context, r *replay.RunInfo, res *replay.Result) {
	o.add("end run depth=%d id-matches=%t err=%v", depth(ctx), res.Trace.RunID == r.RunID, res.Err)
}

func (o *logObserver) StartCall(ctx context.Context, c *replay.CallInfo) context.Context {
	o.add("start %s %s %s depth=%d", c.Outcome, c.Kind, c.Label, depth(ctx))
	return context.WithValue(ctx, depthKey{}, depth(ctx)+1)
}

func (o *logObserver) EndCall(ctx context.Context, c *replay.CallInfo) {
	o.add("end %s %s err=%v tokens=%d", c.Kind, c.Label, c.Err, c.Usage.TotalTokens)
}

func TestObserver(t *testing.T) {
	t.Parallel()
	var bodyDepth []int
	inner := replay.Tool("inner", func(ctx context.Context, n int) (int, error) {
		bodyDepth = append(bodyDepth, depth(ctx))
		return n + 1, nil
	})
	outer := replay.Tool("outer", func(ctx context.Context, n int) (int, error) {
		return inner(ctx, n)
	})
	broken := replay.Tool("broken", func(ctx context.Context, _ int) (int, error) {
		return 0, errors.New("disk full")
	})
	agent := replay.Typed(func(ctx context.Context, n int) (int, error) {
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "m"}, func(context.Context, replay.Request) (replay.Response, error) {
			return replay.Response{Content: "ok", Usage: replay.Usage{PromptTokens: 3, CompletionTokens: 2, TotalTokens: 5}}, nil
		})
		if err != nil {
			return 0, err
		}
		_ = resp
		if _, err := broken(ctx, 0); err == nil {
			return 0, errors.New("broken did not fail")
		}
		return outer(ctx, n)
	})

	o := &logObserver{}
	ctx := replay.WithObserver(context.Background(), o)
	rec, err := replay.Record(ctx, "obs", 1, agent)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`start run obs base=false mode="" directed=false`,
		`start executed llm fake/m depth=1`,
		`end llm fake/m err=<nil> tokens=5`,
		`start executed tool broken depth=1`,
		`end tool broken err=disk full tokens=0`,
		`start executed tool outer depth=1`,
		`start executed tool inner depth=2`,
		`end tool inner err=<nil> tokens=0`,
		`end tool outer err=<nil> tokens=0`,
		`end run depth=1 id-matches=true err=<nil>`,
	}
	if got := strings.Join(o.lines, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("recording observed:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if len(bodyDepth) != 1 || bodyDepth[0] != 3 {
		t.Errorf("the nested body ran at depth %v, want [3]: bodies run in the context StartCall returns", bodyDepth)
	}

	o2 := &logObserver{}
	if _, err := replay.Replay(replay.WithObserver(context.Background(), o2), rec.Trace, agent); err != nil {
		t.Fatal(err)
	}
	want = []string{
		`start run obs base=true mode="frozen" directed=false`,
		`start served llm fake/m depth=1`,
		`end llm fake/m err=<nil> tokens=0`,
		`start served tool broken depth=1`,
		`end tool broken err=disk full tokens=0`,
		`start served tool outer depth=1`,
		`end tool outer err=<nil> tokens=0`,
		`end run depth=1 id-matches=true err=<nil>`,
	}
	if got := strings.Join(o2.lines, "\n"); got != strings.Join(want, "\n") {
		t.Errorf("frozen replay observed:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}

	// A nil observer removes one; nothing is reported.
	o3 := &logObserver{}
	ctx = replay.WithObserver(replay.WithObserver(context.Background(), o3), nil)
	if _, err := replay.Replay(ctx, rec.Trace, agent); err != nil {
		t.Fatal(err)
	}
	if len(o3.lines) != 0 {
		t.Errorf("a removed observer was told %q", o3.lines)
	}
}

// countCalls is an Observer that counts the calls of a run by outcome.
type countCalls struct {
	mu sync.Mutex
	n  map[replay.Outcome]int
}

func (c *countCalls) StartRun(ctx context.Context, _ *replay.RunInfo) context.Context { return ctx }
func (c *countCalls) EndRun(context.Context, *replay.RunInfo, *replay.Result)         {}
func (c *countCalls) StartCall(ctx context.Context, _ *replay.CallInfo) context.Context {
	return ctx
}
func (c *countCalls) EndCall(_ context.Context, ci *replay.CallInfo) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[ci.Outcome]++
}

// An Observer installed in the context sees every call of the sessions run
// with it: executed while recording, served on replay.
func ExampleWithObserver() {
	lookup := replay.Tool("lookup", func(ctx context.Context, id string) (string, error) { return "order " + id, nil })
	agent := replay.Typed(func(ctx context.Context, id string) (string, error) { return lookup(ctx, id) })

	obs := &countCalls{n: map[replay.Outcome]int{}}
	ctx := replay.WithObserver(context.Background(), obs)
	rec, _ := replay.Record(ctx, "orders", "A1", agent)
	replay.Replay(ctx, rec.Trace, agent)
	fmt.Println(obs.n[replay.Executed], "executed,", obs.n[replay.Served], "served")
	// Output: 1 executed, 1 served
}
