package main

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"slices"
	"strconv"

	"github.com/stepfork/stepfork/trace"
)

var validateCmd = &command{
	name:    "validate",
	args:    "PATH [--strict | --partial] [--verify-integrity] [--pedantic] [--json]",
	summary: "check a bundle against the stepfork v0.1 rules",
	description: `
Validate checks a trace bundle as stepfork's validator does: the manifest,
every event, unique ids, parent references, run ids, the event count, and in
strict mode (the default; --strict says so explicitly) exactly one run_start
and an error event in a failed run. --partial skips the two whole-run checks.
--verify-integrity also checks every payload hash and the SHA-256 digests of
integrity.json.

Checks that go beyond stepfork's (manifest status against run_end, totals,
failure step, run_end placement, tool call/result pairing) print as their own
lines; they are warnings unless --pedantic makes them errors.

The bundle is streamed, so memory does not grow with its size. Exit codes: 0
valid, 1 invalid, 2 unreadable (or unusable integrity metadata), 3
--verify-integrity on a legacy bundle without integrity.json.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &validateOptions{}
		fs.BoolVar(&o.strict, "strict", false, "strict mode, the default: exactly one run_start, failed runs have an error event")
		fs.BoolVar(&o.partial, "partial", false, "accept an incomplete run (skip the whole-run checks)")
		fs.BoolVar(&o.integrity, "verify-integrity", false, "verify payload hashes and integrity.json digests")
		fs.BoolVar(&o.pedantic, "pedantic", false, "report the checks beyond stepfork's as errors, not warnings")
		fs.BoolVar(&o.json, "json", false, "print the report as JSON")
		return func(e *env, args []string) int { return o.run(e, args[0]) }
	},
}

type validateOptions struct {
	strict, partial, integrity, pedantic, json bool
}

// The success checklist of stepfork's validator, in its order, and the
// lines of the checks beyond it, each with the codes that fail it.
var (
	stepforkChecks = []struct {
		line  string
		codes []string
	}{
		{"Manifest valid", []string{trace.CodeInvalidManifest, trace.CodeUnsupportedSchema}},
		{"Event structure valid", []string{trace.CodeInvalidEvent, trace.CodeInvalidJSON, trace.CodeStepOrder, trace.CodeRunStartCount, trace.CodeMissingErrorEvent}},
		{"Event IDs unique", []string{trace.CodeDuplicateEventID}},
		{"Parent references valid", []string{trace.CodeInvalidParent, trace.CodeParentNotEarlier}},
		{"Run IDs consistent", []string{trace.CodeRunIDMismatch}},
		{"Event count matches", []string{trace.CodeEventCountMismatch}},
	}
	extraChecks = []struct {
		line  string
		codes []string
	}{
		{"Run status matches run_end", []string{trace.CodeStatusMismatch}},
		{"Totals match events", []string{trace.CodeTotalsMismatch}},
		{"Failure step is an error event", []string{trace.CodeFailureStep}},
		{"run_end is last", []string{trace.CodeRunEndCount, trace.CodeRunEndNotLast}},
		{"Tool calls paired with results", []string{trace.CodeToolResultUnpaired, trace.CodeToolResultDuplicate, trace.CodeToolNameMismatch, trace.CodeToolCallUnanswered}},
	}
)

func (o *validateOptions) run(e *env, path string) int {
	if o.strict && o.partial {
		return usageError(e, "validate", "--strict and --partial cannot be used together")
	}
	var opts []trace.ValidateOption
	if o.partial {
		opts = append(opts, trace.Partial())
	}
	if o.integrity {
		opts = append(opts, trace.CheckIntegrity())
	}
	if o.pedantic {
		opts = append(opts, trace.Pedantic())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	p := e.startProgress("Validating "+clean(path), bundleSize(path))
	rep := trace.ValidateBundle(ctx, path, opts...)
	p.stop()

	code := rep.ExitCode()
	if o.json {
		e.writeJSON(validationJSON(rep, code))
		return code
	}
	o.human(e, path, rep)
	return code
}

func validationJSON(rep *trace.Report, code int) []byte {
	o := newObject().str("path", rep.Path).bool("valid", rep.Valid()).str("mode", rep.Mode)
	if rep.Loaded {
		o.str("schema_version", trace.SchemaVersion).int("events", int64(rep.Events))
	} else {
		o.null("schema_version").null("events")
	}
	if rep.Integrity != nil {
		files := make([][]byte, len(rep.Integrity.VerifiedFiles))
		for i, f := range rep.Integrity.VerifiedFiles {
			files[i] = appendJSONString(nil, f)
		}
		o.raw("integrity", newObject().str("status", string(rep.Integrity.Status)).raw("verified_files", array(files)).bytes())
	} else {
		o.null("integrity")
	}
	issues := make([][]byte, len(rep.Issues))
	for i, is := range rep.Issues {
		j := newObject().str("code", is.Code).str("severity", is.Severity.String()).
			str("message", redact(is.Message)).optStr("location", redact(is.Location)).optStr("event_id", is.EventID)
		if is.Step != nil {
			j.int("step", int64(*is.Step))
		} else {
			j.null("step")
		}
		issues[i] = j.bytes()
	}
	o.raw("issues", array(issues))
	if rep.Omitted > 0 {
		o.int("omitted_issues", int64(rep.Omitted))
	}
	if rep.Canceled != nil {
		o.str("canceled", rep.Canceled.Error())
	}
	o.int("exit_code", int64(code))
	return o.bytes()
}

func (o *validateOptions) human(e *env, path string, rep *trace.Report) {
	e.println(e.paint(styleBold, "Stepfork Trace Validation"))
	e.println("")
	e.printf("Trace    %s\n", clean(path))
	if _, err := os.Stat(path); err != nil {
		e.printf("Mode     %s\n", rep.Mode)
	}
	e.println("")
	if rep.Loaded {
		e.printf("Schema    %s\n", trace.SchemaVersion)
		e.printf("Events    %d\n", rep.Events)
		e.printf("Mode      %s\n", rep.Mode)
		e.println("")
	}
	if in := rep.Integrity; in != nil {
		if structureValid(rep) {
			e.printf("Structure: %s\n", e.paint(styleGreen, "PASS"))
		}
		switch in.Status {
		case trace.IntegrityVerified:
			e.printf("Integrity: %s\n", e.paint(styleGreen, "VERIFIED"))
		case trace.IntegrityMismatch:
			e.printf("Integrity: %s\n", e.paint(styleRed, "MISMATCH"))
		default:
			e.printf("Integrity: %s\n", e.paint(styleYellow, "UNVERIFIED (legacy bundle)"))
		}
		e.println("")
		files := []string{trace.ManifestFile, trace.EventsFile, trace.RedactionsFile}
		for _, f := range in.VerifiedFiles {
			if !slices.Contains(files, f) {
				files = append(files, f) // fork.json and other listed extras
			}
		}
		for _, is := range in.Issues {
			if is.File != trace.IntegrityFile && !slices.Contains(files, is.File) {
				files = append(files, is.File)
			}
		}
		for _, f := range files {
			state := "unverified"
			if slices.Contains(in.VerifiedFiles, f) {
				state = e.paint(styleGreen, "verified")
			} else if i := slices.IndexFunc(in.Issues, func(is trace.IntegrityIssue) bool { return is.File == f }); i >= 0 {
				state = e.paint(styleRed, clean(in.Issues[i].Message))
			}
			e.printf("%-19s%s\n", clean(f), state)
		}
		if in.Status == trace.IntegrityUnverifiedLegacy {
			e.printf("%-19s%s\n", trace.IntegrityFile, e.paint(styleYellow, "missing legacy metadata"))
		} else if i := slices.IndexFunc(in.Issues, func(is trace.IntegrityIssue) bool { return is.File == trace.IntegrityFile }); i >= 0 {
			e.printf("%-19s%s\n", trace.IntegrityFile, e.paint(styleRed, clean(in.Issues[i].Message)))
		}
		e.println("")
	}
	errs, warns := rep.Errors(), rep.Warnings()
	if rep.Valid() {
		for _, c := range stepforkChecks {
			e.printf("%s %s\n", e.paint(styleGreen, "✓"), c.line)
		}
		for _, c := range extraChecks {
			found := false
			for _, w := range warns {
				if slices.Contains(c.codes, w.Code) {
					if !found {
						e.printf("%s %s\n", e.paint(styleYellow, "⚠"), c.line)
					}
					found = true
					e.printf("  %s\n", clean(w.Message))
				}
			}
			if !found {
				e.printf("%s %s\n", e.paint(styleGreen, "✓"), c.line)
			}
		}
		e.println("")
		e.println(e.paint(styleGreen, "Validation passed."))
		return
	}
	for _, is := range rep.Issues {
		mark := e.paint(styleRed, "✗")
		if is.Severity == trace.SeverityWarning {
			mark = e.paint(styleYellow, "⚠")
		}
		e.printf("%s %s\n", mark, is.Code)
		e.printf("  %s\n", clean(is.Message))
		if is.Location != "" {
			e.printf("  %s\n", e.paint(styleDim, clean(is.Location)))
		}
		e.println("")
	}
	if rep.Omitted > 0 {
		e.printf("… and %d more issues not shown (a report holds the first %d)\n\n", rep.Omitted, trace.MaxIssues)
	}
	if rep.Canceled != nil {
		e.printf("Validation did not finish: %s\n", rep.Canceled)
	}
	e.println(e.paint(styleRed, "Validation failed: "+strconv.Itoa(len(errs)+rep.OmittedErrors)+" issues."))
}

// structureValid reports whether no error concerns the structure (as
// opposed to payload hashes and file digests).
func structureValid(rep *trace.Report) bool {
	integrityCodes := []string{trace.CodeIntegrityUnverified, trace.CodePayloadHash, trace.CodeIntegrityMismatch,
		trace.CodeIntegrityMetadataInvalid, trace.CodeIntegrityAlgorithm}
	for _, is := range rep.Errors() {
		if !slices.Contains(integrityCodes, is.Code) && !(is.Code == trace.CodeMissingFile && rep.Loaded) {
			return false
		}
	}
	return true
}
