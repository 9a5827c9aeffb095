package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/trace"
)

var minimizeCmd = &command{
	name:    "minimize",
	args:    "PATH [-o PATH] [--overwrite] [--json]",
	summary: "cut a failed run down to the part that leads to its failure",
	description: `
Minimize makes the smallest prefix of a failed run that still ends in the
recorded failure: a fork just after the failure's run-level error (the error
the manifest's failure names), followed by the run's run_end, so the result
is still a failed run with the same failure. Everything the agent did after
the failure is cut and listed. The failure's causal chain (the error, the
earlier errors of the same type, and the calls they came from) is printed.

This is the static part of minimization: it needs no agent. Shrinking the
run further by re-running the agent is sftest.Minimize's job.

The result is saved to -o PATH, by default {stem}-minimized.sftrace beside the
original. A run that did not fail exits 2.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &minimizeOptions{}
		fs.StringVar(&o.output, "output", "", "save the result to `PATH` (default {stem}-minimized.sftrace)")
		aliasFlag(fs, "o", "output")
		fs.BoolVar(&o.overwrite, "overwrite", false, "replace an existing bundle at the output path")
		fs.BoolVar(&o.json, "json", false, "print the result as JSON")
		return func(e *env, args []string) int { return o.run(e, args[0]) }
	},
}

type minimizeOptions struct {
	output          string
	overwrite, json bool
}

// failureEvent finds the event the run failed at: the error event at the
// manifest's failure step, else the first run-level error (an error whose
// parent is the run_start or nothing), else the first error event.
func failureEvent(tr *trace.Trace) (int, bool) {
	if f := tr.Failure; f != nil {
		for i, ev := range tr.Events {
			if ev.Type == trace.ErrorEvent && ev.Step == f.Step {
				return i, true
			}
		}
	}
	start := ""
	for _, ev := range tr.Events {
		if ev.Type == trace.RunStart {
			start = ev.ID
			break
		}
	}
	for i, ev := range tr.Events {
		if ev.Type == trace.ErrorEvent && (ev.ParentID == "" || ev.ParentID == start) {
			return i, true
		}
	}
	for i, ev := range tr.Events {
		if ev.Type == trace.ErrorEvent {
			return i, true
		}
	}
	return -1, false
}

// causalChain returns the indexes of the events that explain the failure at
// index f, in order: the failure, the earlier error events of the same type,
// and every ancestor (by parent_id) of those.
func causalChain(tr *trace.Trace, f int) []int {
	index := map[string]int{}
	for i, ev := range tr.Events[:f+1] {
		if _, dup := index[ev.ID]; !dup {
			index[ev.ID] = i
		}
	}
	in := map[int]bool{}
	var add func(i int)
	add = func(i int) {
		for i >= 0 && !in[i] {
			in[i] = true
			p, ok := index[tr.Events[i].ParentID]
			if !ok || p >= i {
				return
			}
			i = p
		}
	}
	add(f)
	for i, ev := range tr.Events[:f] {
		if ev.Type == trace.ErrorEvent && ev.ErrorType == tr.Events[f].ErrorType {
			add(i)
		}
	}
	var out []int
	for i := range tr.Events[:f+1] {
		if in[i] && tr.Events[i].Type != trace.RunStart {
			out = append(out, i)
		}
	}
	return out
}

func (o *minimizeOptions) run(e *env, path string) int {
	fail := func(code int, title, msg string) int {
		if o.json {
			e.writeJSON(errorJSON(map[int]string{exitInput: "not_minimizable", exitDifferent: "save_failed"}[code], msg))
		} else {
			fmt.Fprintln(e.stderr, e.paint(styleRed, title))
			fmt.Fprintln(e.stderr, clean(msg))
		}
		return code
	}
	tr, err := trace.Load(path)
	if err != nil {
		return fail(exitInput, "Unable to read trace.", err.Error())
	}
	f, ok := failureEvent(tr)
	if !ok {
		return fail(exitInput, "Nothing to minimize.", fmt.Sprintf("%s did not fail: it has no error event (status %s).", path, tr.Status))
	}
	dest := o.output
	if dest == "" {
		dest = filepath.Join(filepath.Dir(path), bundleStem(path)+"-minimized.sftrace")
	}
	if _, err := os.Stat(dest); err == nil && !o.overwrite {
		return fail(exitDifferent, "Not saved.", dest+" already exists; pass --overwrite to replace it")
	}

	failEv := tr.Events[f]
	prefix, err := fork.Trace(tr, fork.ThroughEvent(failEv.ID))
	if err != nil {
		return fail(exitInput, "Unable to minimize.", err.Error())
	}
	forked, info := prefix.Trace, prefix.Info
	// The run_end (the last one after the failure) closes the prefix, so the
	// result is still a failed run with the recorded failure.
	var cut []int
	runEnd := -1
	for i := f + 1; i < len(tr.Events); i++ {
		if tr.Events[i].Type == trace.RunEnd {
			runEnd = i
		}
	}
	for i := f + 1; i < len(tr.Events); i++ {
		if i != runEnd {
			cut = append(cut, i)
		}
	}
	if runEnd >= 0 {
		end := tr.Events[runEnd].Clone()
		end.RunID = forked.RunID
		if end.ParentID != "" && !slices.ContainsFunc(forked.Events, func(ev trace.Event) bool { return ev.ID == end.ParentID }) {
			end.ParentID = ""
		}
		forked.Events = append(forked.Events, end)
	}
	forked.Status = trace.RunFailed
	forked.Failure = &trace.Failure{Type: failEv.ErrorType, Message: failEv.Message, Step: failEv.Step}
	if tr.Failure != nil {
		forked.Failure = &trace.Failure{Type: tr.Failure.Type, Message: tr.Failure.Message, Step: tr.Failure.Step}
	}
	forked.Totals.Events = len(forked.Events)
	if rep := trace.Validate(context.Background(), forked); !rep.Valid() {
		return fail(exitDifferent, "Unable to minimize.", rep.Err().Error())
	}
	var opts []trace.SaveOption
	if o.overwrite {
		opts = append(opts, trace.Overwrite())
	}
	if err := forked.Save(dest, opts...); err != nil {
		return fail(exitDifferent, "Not saved.", err.Error())
	}
	chain := causalChain(tr, f)

	if o.json {
		cutItems := make([][]byte, len(cut))
		for i, c := range cut {
			cutItems[i] = eventRefJSON(&tr.Events[c])
		}
		chainItems := make([][]byte, len(chain))
		for i, c := range chain {
			chainItems[i] = eventRefJSON(&tr.Events[c])
		}
		e.writeJSON(newObject().str("path", dest).str("run_id", forked.RunID).str("parent_run_id", info.ParentRunID).
			int("original_events", int64(len(tr.Events))).int("minimized_events", int64(len(forked.Events))).
			raw("failure", failureJSON(forked.Failure)).raw("cut", array(cutItems)).raw("causal_chain", array(chainItems)).bytes())
		return exitOK
	}
	e.println(e.paint(styleBold, "Stepfork Minimize"))
	e.println("")
	e.printf("Original trace:  %s\n", clean(path))
	e.printf("Failure:         %s at step %d: %s\n", clean(forked.Failure.Type), forked.Failure.Step, clean(clip.Head(forked.Failure.Message, 120)))
	e.println("")
	e.println("Causal chain:")
	for _, c := range chain {
		e.printf("  %s\n", eventLine(&tr.Events[c]))
	}
	e.println("")
	if len(cut) == 0 {
		e.println("Cut: nothing; the run ends right after its failure.")
	} else {
		e.printf("Cut %d events after the failure:\n", len(cut))
		const show = 20
		for j, c := range cut {
			if j == show {
				e.printf("  … and %d more\n", len(cut)-show)
				break
			}
			e.printf("  %s\n", e.paint(styleDim, eventLine(&tr.Events[c])))
		}
	}
	e.println("")
	writeBox(e, "Minimize Report", [][2]string{
		{"Original Events", strconv.Itoa(len(tr.Events))},
		{"Minimized Events", strconv.Itoa(len(forked.Events))},
		{"Events Cut", strconv.Itoa(len(cut))},
		{"Failure Step", strconv.Itoa(forked.Failure.Step)},
		{"Failure Event", clean(failEv.ID)},
	})
	e.println("")
	e.printf("%s Minimized trace saved to: %s\n", e.paint(styleGreen, "✓"), clean(dest))
	return exitOK
}

// eventLine is "step 11  tool_result  book_flight  (error)".
func eventLine(ev *trace.Event) string {
	s := fmt.Sprintf("step %-3d %-12s %s", ev.Step, ev.Type, clean(ev.Label()))
	if ev.Status == trace.StatusError && ev.Type != trace.ErrorEvent {
		s += "  (error)"
	}
	return strings.TrimRight(s, " ")
}

func eventRefJSON(ev *trace.Event) []byte {
	return newObject().int("step", int64(ev.Step)).str("event_id", ev.ID).str("type", string(ev.Type)).
		str("label", redact(ev.Label())).str("status", string(ev.Status)).bytes()
}
