package main

import (
	"errors"
	"flag"
	"strings"

	"github.com/stepfork/stepfork/trace/diff"
)

var diffCmd = &command{
	name:    "diff",
	args:    "BASE VARIANT [--align lcs|position] [--json]",
	summary: "compare the behavior of two runs",
	description: `
Diff compares what two runs did: their tool calls, model calls, state changes,
errors and final status (ids, timestamps and durations are ignored).

--align lcs (the default) aligns the two runs by longest common subsequence,
so one inserted call shows as one added step rather than shifting every later
step, and prints the aligned path with the first divergence, per-step field
changes, state deltas and token and cost deltas.

--align position compares step i with step i, exactly like stepfork's diff;
with --json its output is byte for byte stepfork's DiffResult.

Exit codes: 0 equivalent, 1 different, 2 unreadable input.`,
	minArgs: 2, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &diffOptions{align: "lcs"}
		fs.Func("align", "alignment: `lcs` (default) or position (stepfork's)", func(s string) error {
			if s != "lcs" && s != "position" {
				return errors.New(`want "lcs" or "position"`)
			}
			o.align = s
			return nil
		})
		fs.BoolVar(&o.json, "json", false, "print the diff as JSON")
		return func(e *env, args []string) int { return o.run(e, args[0], args[1]) }
	},
}

type diffOptions struct {
	align string
	json  bool
}

func (o *diffOptions) run(e *env, basePath, variantPath string) int {
	opts := []diff.Option{diff.DisplayPaths(basePath, variantPath)}
	if o.align == "position" {
		opts = append(opts, diff.AlignPosition())
	}
	d, err := diff.Bundles(basePath, variantPath, opts...)
	if err != nil {
		if o.json {
			e.writeJSON(errorJSON("unreadable_trace", err.Error()))
		} else {
			e.println(e.paint(styleRed, "Unable to compare traces."))
			e.println(clean(err.Error()))
		}
		return exitInput
	}
	return o.print(e, d, basePath, variantPath)
}

// print prints the diff d of the bundles at basePath and variantPath and
// returns the exit code.
func (o *diffOptions) print(e *env, d *diff.Result, basePath, variantPath string) int {
	code := exitOK
	if !d.Equivalent() {
		code = exitDifferent
	}
	if o.json {
		e.writeJSON(d.JSON())
		return code
	}
	if o.align == "position" {
		printLines(e, d.StepforkText())
		return code
	}
	e.println(e.paint(styleBold, "Stepfork Behavioral Diff"))
	e.println("")
	e.printf("Base:     %s\n", clean(basePath))
	e.printf("Variant:  %s\n", clean(variantPath))
	e.println("")
	printLines(e, d.Explain())
	e.println("")
	if d.Equivalent() {
		e.println(e.paint(styleGreen, "Result: BEHAVIOR EQUIVALENT"))
	} else {
		e.println(e.paint(styleRed, "Result: BEHAVIOR CHANGED"))
	}
	return code
}

// printLines prints rendered text line by line, each line redacted and
// stripped of control characters, coloring the result line.
func printLines(e *env, text string) {
	for line := range strings.Lines(text) {
		line = clean(strings.TrimSuffix(line, "\n"))
		switch {
		case line == "Result: BEHAVIOR CHANGED":
			line = e.paint(styleRed, line)
		case line == "Result: BEHAVIOR EQUIVALENT":
			line = e.paint(styleGreen, line)
		}
		e.println(line)
	}
}
