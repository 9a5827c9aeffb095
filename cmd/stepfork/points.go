package main

import (
	"flag"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
)

var pointsCmd = &command{
	name:    "points",
	args:    "PATH [--json]",
	summary: "list the points a run can be forked at",
	description: `
Points lists every point a run can be forked at, one per event: its step and
event id (for fork --at-step and --at-event), what happens there (a model or
tool call and its result, a state change, an error, a named phase entered or
left, a decision, a parameter read), its name, which occurrence of that name
it is (1-based: the 2nd call of search_flights), and the named phase it is
in.

Every step is a point for fork --at-step, which keeps the events up to and
including it. The points between calls are also where a counterfactual fork
(fork.Run in Go) can re-execute the agent from; for those the last column
says which point it is ("before 'write' execution 1"), as fork.Points names
them.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &pointsOptions{}
		fs.BoolVar(&o.json, "json", false, "print the points as JSON")
		return func(e *env, args []string) int { return o.run(e, args[0]) }
	},
}

type pointsOptions struct{ json bool }

// forkPoint is one place a run can be forked at.
type forkPoint struct {
	step       int
	eventID    string
	kind       string // llm_request, tool_call, …, node_enter, node_exit, decision, approval, param, …
	name       string
	occurrence int    // 1-based, per kind and name
	node       string // innermost named phase the event is in, "" at top level
	before     string // the counterfactual fork point at this event, "" if it is not one
}

// forkPoints lists the fork points of a run: every event (a static fork
// point), with runtime markers read as what they are, and for the events that
// are counterfactual fork points (fork.Points) their description.
func forkPoints(tr *trace.Trace) []forkPoint {
	before := map[string]string{}
	for _, p := range fork.Points(tr) {
		before[p.EventID] = p.Description
	}
	seen := map[string]int{}
	var nodes []string
	out := make([]forkPoint, 0, len(tr.Events))
	for i := range tr.Events {
		ev := &tr.Events[i]
		p := forkPoint{step: ev.Step, eventID: ev.ID, kind: string(ev.Type), name: ev.Label(), before: before[ev.ID]}
		switch ev.Type {
		case trace.LLMRequest, trace.LLMResponse:
			if ev.Type == trace.LLMRequest || ev.Model != "" {
				p.name = trace.LLMLabel(ev.Provider, ev.Model)
			}
		}
		if len(nodes) > 0 {
			p.node = nodes[len(nodes)-1]
		}
		if m, ok := ev.Marker(); ok {
			p.kind, p.name = strings.TrimPrefix(m.Key, "@"), m.Name
			switch {
			case m.Key == trace.MarkerNode && m.Phase == trace.PhaseEnter:
				p.kind = "node_enter"
				nodes = append(nodes, m.Name)
			case m.Key == trace.MarkerNode && m.Phase == trace.PhaseExit:
				p.kind = "node_exit"
				if j := lastIndex(nodes, m.Name); j >= 0 {
					nodes = append(nodes[:j], nodes[j+1:]...)
				}
			case m.Key == trace.MarkerDecision && m.Kind == trace.KindApproval:
				p.kind = "approval"
			}
		}
		key := p.kind + "\x00" + p.name
		seen[key]++
		p.occurrence = seen[key]
		out = append(out, p)
	}
	return out
}

func lastIndex(s []string, v string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == v {
			return i
		}
	}
	return -1
}

func (o *pointsOptions) run(e *env, path string) int {
	tr, err := trace.Load(path)
	if err != nil {
		if o.json {
			e.writeJSON(errorJSON("unreadable_trace", err.Error()))
		} else {
			e.println(e.paint(styleRed, "Unable to read trace."))
			e.println(clean(err.Error()))
		}
		return exitInput
	}
	points := forkPoints(tr)
	if o.json {
		items := make([][]byte, len(points))
		for i, p := range points {
			items[i] = newObject().int("step", int64(p.step)).str("event_id", p.eventID).str("kind", p.kind).
				str("name", redact(p.name)).int("occurrence", int64(p.occurrence)).optStr("node", redact(p.node)).
				optStr("counterfactual", redact(p.before)).bytes()
		}
		e.writeJSON(newObject().str("path", path).str("run_id", tr.RunID).str("agent_name", redact(tr.AgentName)).
			int("events", int64(len(tr.Events))).raw("points", array(items)).bytes())
		return exitOK
	}
	e.println(e.paint(styleBold, "Stepfork Fork Points"))
	e.println("")
	e.printf("Trace:   %s\n", clean(path))
	e.printf("Agent:   %s\n", clean(tr.AgentName))
	e.printf("Events:  %d\n", len(tr.Events))
	e.println("")
	t := &table{header: []string{"Step", "Event", "Kind", "Name", "#", "Node", "Counterfactual point"}}
	for _, p := range points {
		t.add(strconv.Itoa(p.step), clean(p.eventID), p.kind, clean(p.name), strconv.Itoa(p.occurrence), clean(p.node), clean(p.before))
	}
	t.write(e)
	e.println("")
	e.printf("Fork at one: stepfork fork %s --at-step N (or --at-event ID)\n", shellQuote(clean(path)))
	e.println("In Go, re-execute from a counterfactual point with fork.Run(ctx, base, fork.Step(N), agent, changes...).")
	return exitOK
}
