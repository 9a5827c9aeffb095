// Command stepfork validates, inspects, forks, diffs and exports the .sftrace
// bundles of recorded AI-agent runs, lists the points a run can be forked
// at, and shows runs, forks, diffs and sweeps as HTML pages (view).
//
// A failed run is forked just before things went wrong, and the result is a
// smaller, valid trace to replay or to change:
//
//	$ stepfork fork testdata/booking-agent.sftrace --at-step 2
//	$ stepfork validate booking-agent-forked.sftrace --strict
//	$ stepfork diff base.sftrace variant.sftrace
//	$ stepfork view base.sftrace variant.sftrace --html diff.html
//	$ stepfork export testdata/booking-agent.sftrace --go-test --agent example.com/app/agent.Run
//
// Every command prints text for people by default and JSON with --json.
// Color is used only when stdout is a terminal and NO_COLOR is not set.
// Everything printed from a trace is redacted first (API keys, bearer tokens,
// values under sensitive keys), as Python stepfork does.
//
// Exit codes: 0 success, 1 the run behaved differently or a check failed,
// 2 invalid or unreadable input or a usage error, 3 validate
// --verify-integrity on a bundle without integrity.json.
//
// Every input is read within a budget, so that a hostile bundle is refused
// at once with a message that says what was refused: each file of a
// bundle is a regular file within its size limit (see package trace), a
// packed bundle holds one bundle within the budgets of packed bundles, and
// a line of events.jsonl is at most 16 MiB (package trace reads up to
// 64 MiB; set STEPFORK_MAX_LINE_BYTES to read longer lines). Results files
// of stepfork report are at most 64 MiB each and 256 MiB in all.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/internal/readlimit"
)

// version is reported by --version when the binary was not built from a
// tagged module version.
const version = "0.1.0-dev"

// Exit codes shared by every command, as Python stepfork's CLI uses them.
const (
	exitOK        = 0 // success, equivalent, reproduced
	exitDifferent = 1 // behaved differently, check failed, could not complete
	exitInput     = 2 // invalid or unreadable input, usage error
	exitLegacy    = 3 // validate --verify-integrity on a legacy bundle
)

func main() {
	setBudgets(os.Getenv)
	os.Exit(run(os.Args[1:], newEnv(os.Stdout, os.Stderr, os.Getenv)))
}

// maxLineBytes is the longest line of events.jsonl a command reads, unless
// STEPFORK_MAX_LINE_BYTES says otherwise.
const maxLineBytes = 16 << 20

// setBudgets sets the budgets of the process's reads (package doc).
func setBudgets(getenv func(string) string) {
	n := maxLineBytes
	if v, err := strconv.Atoi(getenv("STEPFORK_MAX_LINE_BYTES")); err == nil && v > 0 {
		n = v
	}
	readlimit.SetMaxLine(n, "stepfork reads lines of at most this size; set STEPFORK_MAX_LINE_BYTES (up to 67108864) to read longer ones")
}

// command is one subcommand: its usage line, help text and a setup function
// that defines its flags on fs and returns what runs it with the positional
// arguments.
type command struct {
	name        string
	args        string // the usage line after "stepfork NAME"
	summary     string // one line for the command list
	description string // paragraphs for "stepfork help NAME"
	minArgs     int
	maxArgs     int // -1: no limit
	setup       func(fs *flag.FlagSet) func(e *env, args []string) int
}

// commands lists the subcommands in the order help shows them.
func commands() []*command {
	return []*command{validateCmd, inspectCmd, pointsCmd, forkCmd, diffCmd, minimizeCmd, exportCmd, viewCmd, packCmd, unpackCmd, reportCmd}
}

func lookup(name string) *command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
	}
	return nil
}

// run is main without os.Exit, so tests can drive it in-process too.
func run(args []string, e *env) int {
	defer e.flush()
	if len(args) == 0 {
		printHelp(e.stdout)
		return exitOK
	}
	switch a := args[0]; a {
	case "--version", "-version", "-V":
		fmt.Fprintf(e.stdout, "stepfork %s\n", buildVersion())
		return exitOK
	case "--help", "-help", "-h":
		printHelp(e.stdout)
		return exitOK
	case "help":
		if len(args) == 1 {
			printHelp(e.stdout)
			return exitOK
		}
		c := lookup(args[1])
		if c == nil || len(args) > 2 {
			fmt.Fprintf(e.stderr, "stepfork help: unknown command %q\nRun 'stepfork help' for the list of commands.\n", strings.Join(args[1:], " "))
			return exitInput
		}
		printCommandHelp(e.stdout, c)
		return exitOK
	}
	c := lookup(args[0])
	if c == nil {
		if strings.HasPrefix(args[0], "-") {
			fmt.Fprintf(e.stderr, "stepfork: unknown flag %s\nRun 'stepfork help' for usage.\n", args[0])
		} else {
			fmt.Fprintf(e.stderr, "stepfork: unknown command %q\nRun 'stepfork help' for the list of commands.\n", args[0])
		}
		return exitInput
	}
	return c.run(e, args[1:])
}

// run parses the command's flags (which may come before, between or after
// the positional arguments) and runs it.
func (c *command) run(e *env, args []string) int {
	fs := newFlagSet(c.name)
	exec := c.setup(fs)
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(e.stdout, c)
		return exitOK
	}
	if err != nil {
		return c.usageError(e, "%s", err)
	}
	switch {
	case len(pos) < c.minArgs:
		return c.usageError(e, "missing %s", missingArgs(c.args, len(pos)))
	case c.maxArgs >= 0 && len(pos) > c.maxArgs:
		return c.usageError(e, "unexpected argument %q", pos[c.maxArgs])
	}
	return exec(e, pos)
}

// usageError prints a usage error naming the command and returns exitInput.
func (c *command) usageError(e *env, format string, args ...any) int {
	return usageError(e, c.name, format, args...)
}

// usageError prints a usage error of the named command and returns exitInput.
func usageError(e *env, name, format string, args ...any) int {
	fmt.Fprintf(e.stderr, "stepfork %s: %s\nRun 'stepfork help %s' for usage.\n", name, fmt.Sprintf(format, args...), name)
	return exitInput
}

// missingArgs names the positional arguments of usage from index have on
// ("PATH", "BASE VARIANT").
func missingArgs(usage string, have int) string {
	var names []string
	for f := range strings.FieldsSeq(usage) {
		if strings.ContainsAny(f[:1], "[(-") {
			break
		}
		names = append(names, f)
	}
	if have >= len(names) {
		return "argument"
	}
	return "argument " + strings.Join(names[have:], " ")
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// parseInterspersed parses flags anywhere among the arguments, as the
// Python CLI accepts them ("stepfork validate out.sftrace --strict").
// Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// aliasPrefix marks the usage text of a short alias (-o for --output), so
// help lists the two together.
const aliasPrefix = "\x00alias:"

// aliasFlag defines short as another name of the already defined flag long.
func aliasFlag(fs *flag.FlagSet, short, long string) {
	fs.Var(fs.Lookup(long).Value, short, aliasPrefix+long)
}

// repeated is a flag that may be given several times.
type repeated []string

func (r *repeated) String() string     { return strings.Join(*r, ", ") }
func (r *repeated) Set(s string) error { *r = append(*r, s); return nil }

func buildVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return strings.TrimPrefix(bi.Main.Version, "v")
	}
	return version
}

func printHelp(w io.Writer) {
	fmt.Fprint(w, `stepfork: Behavioral regression testing for AI agents.
Turn failed AI-agent runs into reproducible regression tests: fork a recorded
run where it went wrong, change one thing, and see what became different.

Usage:
  stepfork COMMAND [ARGS] [FLAGS]
  stepfork help COMMAND
  stepfork --version

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Every command prints JSON with --json. Exit codes: 0 success, 1 different or
failed check, 2 invalid input or usage error, 3 unverified legacy bundle.
`)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: stepfork %s %s\n\n%s\n", c.name, c.args, strings.TrimSpace(c.description))
	fs := newFlagSet(c.name)
	c.setup(fs)
	short := map[string]string{} // long name -> short alias
	var names []string
	fs.VisitAll(func(f *flag.Flag) {
		if long, ok := strings.CutPrefix(f.Usage, aliasPrefix); ok {
			short[long] = f.Name
			return
		}
		names = append(names, f.Name)
	})
	if len(names) == 0 {
		return
	}
	slices.Sort(names)
	type row struct{ left, usage string }
	var rows []row
	width := 0
	for _, n := range names {
		f := fs.Lookup(n)
		kind, usage := flag.UnquoteUsage(f)
		left := "--" + n
		if s, ok := short[n]; ok {
			left = "-" + s + ", " + left
		}
		if _, isBool := f.Value.(interface{ IsBoolFlag() bool }); !isBool && kind != "" {
			left += " " + kind
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" && f.DefValue != "[]" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	}
	fmt.Fprint(w, "\nFlags:\n")
	for _, r := range rows {
		fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.usage)
	}
}
