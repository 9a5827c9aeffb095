package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/readlimit"
	"github.com/stepfork/stepfork/trace"
)

var forkCmd = &command{
	name:    "fork",
	args:    "PATH (--at-step N | --at-event ID) [-o PATH] [--overwrite] [--override STEP_OR_EVENT=JSON]... [--override-file FILE] [--json]",
	summary: "keep a run up to a step, optionally with changed outputs",
	description: `
Fork creates a new trace that keeps every event of PATH up to and including
the fork point (--at-step N, 0-based, or --at-event ID; exactly one), with a
new run id, the event ids kept, and its provenance in fork.json. The result
passes strict validation.

--override replaces the recorded output of a tool_result or llm_response
event before the fork is saved: STEP_OR_EVENT is a step number or an event
id, JSON the new output ('--override 4={"flights":[]}'). It may be repeated.
A call is made at one step and answered at the next: the diff, inspect and
the pages name it by both ("tool book_flight steps 10–11"); --override
takes the second, the result's, and --at-step keeps the result only when
the cut is at or after it.
--override-file reads a JSON array of {"step": N, "output": …} or
{"event_id": "…", "output": …} objects. An event-id override beats a step
override of the same event.

The fork is saved to -o PATH, by default {stem}-forked.sftrace beside the
original; an existing bundle is replaced only with --overwrite.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &forkOptions{step: -1}
		fs.Func("at-step", "fork at step `N` (0-based)", func(s string) error {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return errors.New("want a step number ≥ 0")
			}
			o.step = n
			return nil
		})
		fs.StringVar(&o.event, "at-event", "", "fork at the event with this `ID`")
		fs.StringVar(&o.output, "output", "", "save the fork to `PATH` (default {stem}-forked.sftrace)")
		aliasFlag(fs, "o", "output")
		fs.BoolVar(&o.overwrite, "overwrite", false, "replace an existing bundle at the output path")
		fs.Var(&o.overrides, "override", "replace an output: `STEP_OR_EVENT=JSON` (repeatable)")
		fs.StringVar(&o.overrideFile, "override-file", "", "read overrides from a JSON `FILE`")
		fs.BoolVar(&o.json, "json", false, "print the fork result as JSON")
		return func(e *env, args []string) int { return o.run(e, args[0]) }
	},
}

type forkOptions struct {
	step                 int // -1: not given
	event                string
	output, overrideFile string
	overwrite, json      bool
	overrides            repeated
}

func (o *forkOptions) run(e *env, path string) int {
	var cut fork.Cut
	switch {
	case o.step >= 0 && o.event != "":
		return usageError(e, "fork", "pass either --at-step or --at-event, not both")
	case o.step >= 0:
		cut = fork.ThroughStep(o.step)
	case o.event != "":
		cut = fork.ThroughEvent(o.event)
	default:
		return usageError(e, "fork", "pass --at-step N or --at-event ID")
	}
	overrides, err := parseOverrides(o.overrides)
	if err != nil {
		return usageError(e, "fork", "%v", err)
	}
	if o.overrideFile != "" {
		more, err := readOverrideFile(o.overrideFile)
		if err != nil {
			return usageError(e, "fork", "--override-file %s: %v", o.overrideFile, err)
		}
		overrides = append(overrides, more...)
	}
	fail := func(code int, title string, err error) int {
		if o.json {
			e.writeJSON(newObject().bool("success", false).str("error", map[int]string{exitInput: "fork_failed", exitDifferent: "save_failed"}[code]).
				str("message", redact(err.Error())).bytes())
		} else {
			fmt.Fprintln(e.stderr, e.paint(styleRed, title))
			fmt.Fprintln(e.stderr, clean(err.Error()))
		}
		return code
	}

	r, err := trace.Open(path)
	if err != nil {
		return fail(exitInput, "Unable to read trace.", err)
	}
	m := r.Manifest()
	r.Close()

	dest := o.output
	if dest == "" {
		dest = fork.DefaultOutputPath(path)
	}
	if _, err := os.Stat(dest); err == nil && !o.overwrite {
		return fail(exitDifferent, "Fork not saved.", fmt.Errorf("%s already exists; pass --overwrite to replace it", dest))
	}
	if !o.json {
		e.println(e.paint(styleBold, "Stepfork Fork"))
		e.println("")
		e.printf("Original trace:  %s\n", clean(path))
		e.printf("Agent:           %s\n", clean(m.AgentName))
		e.printf("Events:          %d\n", m.Totals.Events)
		if o.event == "" {
			e.printf("Fork at step:    %d\n", o.step)
		} else {
			e.printf("Fork at event:   %s\n", clean(o.event))
		}
		if len(overrides) > 0 {
			e.printf("Overrides:       %d\n", len(overrides))
		}
		e.println("")
		e.println("Forking trace...")
		e.println("")
	}

	var save []trace.SaveOption
	if o.overwrite {
		save = append(save, trace.Overwrite())
	}
	p := e.startProgress("Forking "+clean(path), bundleSize(path))
	// A fork of a path streams its events: the report needs only counts.
	res, err := fork.Trace(path, cut, append(overrides, fork.SaveTo(dest, save...))...)
	p.stop()
	if err != nil {
		return fail(exitInput, "Fork failed.", err)
	}
	if o.json {
		e.writeJSON(forkResultJSON(res))
		return exitOK
	}
	rows := [][2]string{
		{"Original Events", strconv.Itoa(res.OriginalEventCount)},
		{"Forked Events", strconv.Itoa(res.ForkedEventCount)},
		{"Fork Point Step", strconv.Itoa(res.Info.ForkPointStep)},
		{"Fork Point Event", clean(res.Info.ForkPointEventID)},
		{"Events Excluded", strconv.Itoa(res.OriginalEventCount - res.ForkedEventCount)},
	}
	if len(overrides) > 0 {
		rows = append(rows, [2]string{"Overrides Applied", strconv.Itoa(res.Info.OverridesApplied)})
	}
	writeBox(e, "Fork Report", rows)
	e.println("")
	e.printf("%s Forked trace saved to: %s\n", e.paint(styleGreen, "✓"), clean(res.Path))
	return exitOK
}

// forkResultJSON is the fork-at-step spec's ForkResult of a fork that was
// made, field for field (a failed fork prints the error object instead),
// then the fork's run id and the number of events left out.
func forkResultJSON(res *fork.Result) []byte {
	return newObject().bool("success", true).
		optStr("forked_trace_path", res.Path).
		int("original_event_count", int64(res.OriginalEventCount)).
		int("forked_event_count", int64(res.ForkedEventCount)).
		int("fork_point_step", int64(res.Info.ForkPointStep)).
		str("fork_point_event_id", res.Info.ForkPointEventID).
		int("overrides_applied", int64(res.Info.OverridesApplied)).
		optStr("error_message", "").
		int("events_excluded", int64(res.OriginalEventCount-res.ForkedEventCount)).
		str("run_id", res.Info.RunID).str("parent_run_id", res.Info.ParentRunID).
		bytes()
}

// writeBox draws a titled box of label/value rows, like the Fork Report of
// the fork-at-step spec: 44 columns inside, wider when a value needs it.
func writeBox(e *env, title string, rows [][2]string) {
	const labelWidth, minInner = 20, 44
	inner := minInner
	for _, r := range rows {
		inner = max(inner, 3+labelWidth+utf8.RuneCountInString(r[1])+1)
	}
	t := " " + title + " "
	dashes := inner - utf8.RuneCountInString(t)
	left := dashes / 2
	e.println("╭" + strings.Repeat("─", left) + e.paint(styleBold, t) + strings.Repeat("─", dashes-left) + "╮")
	for _, r := range rows {
		cell := "   " + fmt.Sprintf("%-*s", labelWidth, r[0]) + r[1]
		e.println("│" + cell + strings.Repeat(" ", inner-utf8.RuneCountInString(cell)) + "│")
	}
	e.println("╰" + strings.Repeat("─", inner) + "╯")
}

// parseOverrides reads --override STEP_OR_EVENT=JSON flags: a target made
// only of digits is a step, anything else an event id.
func parseOverrides(flags []string) ([]fork.TraceOption, error) {
	var out []fork.TraceOption
	for _, f := range flags {
		target, text, ok := strings.Cut(f, "=")
		if !ok || target == "" {
			return nil, fmt.Errorf("--override %q: want STEP_OR_EVENT=JSON, for example --override 4='{\"price\":99}'", f)
		}
		v, err := trace.ParseValue([]byte(text))
		if err != nil {
			return nil, fmt.Errorf("--override %s: the output is not valid JSON: %v", target, err)
		}
		if n, err := strconv.Atoi(target); err == nil && n >= 0 && strings.Trim(target, "0123456789") == "" {
			out = append(out, fork.Override(fork.OnStep(n), v))
		} else {
			out = append(out, fork.Override(fork.OnEvent(target), v))
		}
	}
	return out, nil
}

// readOverrideFile reads a JSON array of {"step": N, "output": …} or
// {"event_id": "…", "output": …} objects, refusing unknown keys.
func readOverrideFile(name string) ([]fork.TraceOption, error) {
	data, err := readlimit.ReadFile(name, 64<<20) // never a FIFO, never a gigabyte
	if err != nil {
		return nil, err
	}
	var items []json.RawMessage
	if err := json.Unmarshal(data, &items); err != nil {
		return nil, fmt.Errorf("want a JSON array of overrides: %v", err)
	}
	var out []fork.TraceOption
	for i, raw := range items {
		var spec struct {
			Step    *int            `json:"step"`
			EventID *string         `json:"event_id"`
			Output  json.RawMessage `json:"output"`
		}
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return nil, fmt.Errorf("override %d: %v", i, err)
		}
		if (spec.Step == nil) == (spec.EventID == nil) {
			return nil, fmt.Errorf("override %d: give exactly one of \"step\" and \"event_id\"", i)
		}
		if spec.Output == nil {
			return nil, fmt.Errorf("override %d: \"output\" is missing", i)
		}
		v, err := trace.ParseValue(spec.Output)
		if err != nil {
			return nil, fmt.Errorf("override %d: output: %v", i, err)
		}
		if spec.Step != nil {
			if *spec.Step < 0 {
				return nil, fmt.Errorf("override %d: step %d is negative", i, *spec.Step)
			}
			out = append(out, fork.Override(fork.OnStep(*spec.Step), v))
		} else {
			out = append(out, fork.Override(fork.OnEvent(*spec.EventID), v))
		}
	}
	return out, nil
}
