package fork

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

func TestResolvePoints(t *testing.T) {
	t.Parallel()
	_, research := caseNamed(t, "research")
	_, refund := caseNamed(t, "refund")
	tests := []struct {
		name  string
		tr    *trace.Trace
		at    At
		step  int
		desc  string
		node  string
		error string
	}{
		{name: "start", tr: research, at: Start(), step: 1, desc: "from the start"},
		{name: "step at a call", tr: research, at: Step(15), step: 15, desc: "before model 'fake/fake-1' call 1", node: "write"},
		{name: "event", tr: research, at: Event(research.Events[15].ID), step: 15, desc: "before model 'fake/fake-1' call 1", node: "write"},
		{name: "before node", tr: research, at: BeforeNode("write", 1), step: 14, desc: "before 'write' execution 1", node: "write"},
		{name: "before node last", tr: research, at: BeforeNode("write", Last), step: 20, desc: "before 'write' execution 2", node: "write"},
		{name: "after node", tr: research, at: AfterNode("write", 1), step: 18, desc: "after 'write' execution 1", node: "write"},
		{name: "before call", tr: research, at: BeforeCall(replay.KindTool, "search", 2), step: 6, desc: "before tool 'search' call 2", node: "research"},
		{name: "before call by model", tr: research, at: BeforeCall(replay.KindLLM, "fake-1", 2), step: 21, desc: "before model 'fake-1' call 2", node: "write"},
		{name: "first write in node", tr: research, at: BeforeFirstWriteOf("draft"), step: 14, desc: "before 'write' first wrote 'draft'", node: "write"},
		{name: "first write at top", tr: research, at: BeforeFirstWriteOf("status"), step: 29, desc: "before the first write of 'status'"},
		{name: "decision", tr: research, at: BeforeDecision("route"), step: 19, desc: "before decision 'route'"},
		{name: "where", tr: research, at: Where(func(e trace.Event) bool { return e.Type == trace.ToolCall && e.Name == "publish" }), step: 27, desc: "before tool 'publish' call 1"},
		{name: "failure", tr: refund, at: Failure(), step: 6, desc: "before the failing node ('decide', execution 1)", node: "decide"},
		{name: "default on failed", tr: refund, at: nil, step: 6, desc: "before the failing node ('decide', execution 1)", node: "decide"},

		{name: "inside a call", tr: research, at: Step(16),
			error: "Step(16): step 16 is a 'llm_response' event inside the call to model 'fake/fake-1' (step 15); a fork must not split a call. Fork before the call (fork.Step(15)) or after it (fork.Step(17))."},
		{name: "run start", tr: research, at: Step(0),
			error: "Step(0): step 0 is the run's run_start, which every run records; fork.Start() forks right after it"},
		{name: "no such step", tr: research, at: Step(99), error: "Step(99): no event at step 99 in this run (steps 0..30)"},
		{name: "no such event", tr: research, at: Event("evt_nope"), error: "Event(\"evt_nope\"): no event 'evt_nope' in this run"},
		{name: "unknown node", tr: research, at: BeforeNode("x", 1),
			error: "BeforeNode(\"x\", 1): node 'x' never executed in this run. Nodes that did: research, title, write."},
		{name: "occurrence out of range", tr: research, at: BeforeNode("write", 3),
			error: "BeforeNode(\"write\", 3): node 'write' executed 2 time(s), so occurrence 3 does not exist."},
		{name: "occurrence zero", tr: research, at: AfterNode("write", 0),
			error: "AfterNode(\"write\", 0): node 'write' executed 2 time(s), so occurrence 0 does not exist."},
		{name: "unknown tool", tr: research, at: BeforeCall(replay.KindTool, "nope", 1),
			error: "BeforeCall(tool, \"nope\", 1): tool 'nope' was never called in this run. Tools that were: search, publish."},
		{name: "call occurrence", tr: research, at: BeforeCall(replay.KindTool, "publish", 2),
			error: "BeforeCall(tool, \"publish\", 2): tool 'publish' was called 1 time(s), so occurrence 2 does not exist."},
		{name: "unknown key", tr: research, at: BeforeFirstWriteOf("nope"),
			error: "BeforeFirstWriteOf(\"nope\"): no state write of 'nope' in this run. Keys written: draft, status."},
		{name: "unknown decision", tr: research, at: BeforeDecision("nope"),
			error: "BeforeDecision(\"nope\"): no decision 'nope' in this run. Decisions made: route, publish."},
		{name: "where inside a call", tr: research, at: Where(func(e trace.Event) bool { return e.Type == trace.ToolResult }),
			error: "Where(…): the predicate matched step 5, a 'tool_result' event inside the call to tool 'search' (step 4); a fork must not split a call — match the call itself, or a node marker, instead."},
		{name: "where nothing", tr: research, at: Where(func(trace.Event) bool { return false }),
			error: "Where(…): the predicate matched no event of this run after its run_start"},
		{name: "failure on completed", tr: research, at: Failure(),
			error: "Failure(): this run completed, so there is no failure to fork before. Name a point explicitly — fork.Points lists them."},
		{name: "default on completed", tr: research, at: nil,
			error: "nil fork point: this run completed, so there is no obvious fork point. Pass one — fork.Points lists what is addressable."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			at := tt.at
			if at == nil {
				at = defaultAt()
			}
			r, err := at.resolve(newIndex(tt.tr))
			if tt.error != "" {
				require.Error(t, err)
				assert.Equal(t, tt.error, err.Error())
				assert.True(t, errors.Is(err, ErrUnresolved))
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.step, r.Step)
			assert.Equal(t, tt.desc, r.Description)
			assert.Equal(t, tt.node, r.Node)
			assert.Equal(t, tt.tr.Events[tt.step].ID, r.EventID)
		})
	}
}

func TestPointsListEveryBoundary(t *testing.T) {
	t.Parallel()
	_, research := caseNamed(t, "research")
	points := Points(research)
	ix := newIndex(research)
	listed := map[int]PointInfo{}
	for _, p := range points {
		listed[p.Step] = p
		r, err := p.At().resolve(ix)
		require.NoError(t, err, p.Description)
		assert.Equal(t, p.Description, r.Description)
	}
	for i := 1; i < len(research.Events); i++ {
		_, ok := listed[research.Events[i].Step]
		assert.Equal(t, ix.boundary(i) == nil, ok, "step %d", i)
	}
	assert.Equal(t, PointInfo{Step: 20, EventID: research.Events[20].ID, Kind: "node_enter", Name: "write", Occurrence: 2,
		Description: "before 'write' execution 2"}, listed[20])
	assert.Equal(t, "tool_call", listed[6].Kind)
	assert.Equal(t, 2, listed[6].Occurrence)
	assert.Equal(t, "research", listed[6].Node)
	assert.Nil(t, Points(nil))
}
