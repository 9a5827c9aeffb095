package sftest

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/internal/rawline"
	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// RecordFlag is the name of the command-line flag that makes Record record
// instead of replaying: go test -run TestRefund -stepfork.record=refund.
const RecordFlag = "stepfork.record"

// record is the -stepfork.record flag: a regexp of the names Record records.
// It is defined only in test binaries (testing.Testing), like httprr's
// -httprecord, so that importing sftest elsewhere adds no flag.
var record = new(string)

func init() {
	if testing.Testing() {
		record = flag.String(RecordFlag, "", "re-record the sftest.Record traces whose name matches `regexp` (\".\" records every one)")
	}
}

// recording reports whether Record records the trace called name: whether
// -stepfork.record is set and its regexp matches name.
func recording(name string) (bool, error) {
	if *record == "" {
		return false, nil
	}
	re, err := regexp.Compile(*record)
	if err != nil {
		return false, fmt.Errorf("-%s=%q is not a valid regexp: %v", RecordFlag, *record, err)
	}
	return re.MatchString(name), nil
}

// pathLocks serialises Record calls on one path in this process, so that
// parallel tests that record the same name do not write the bundle at once.
var pathLocks sync.Map // string → *sync.Mutex

func lockPath(p string) func() {
	m, _ := pathLocks.LoadOrStore(p, new(sync.Mutex))
	mu := m.(*sync.Mutex)
	mu.Lock()
	return mu.Unlock
}

// Load loads the bundle at path (trace.Load) and fails the test with the
// load error if it cannot: a missing bundle, a malformed event
// ("events.jsonl:17: …"), a bad manifest.
//
// It then verifies that the bundle holds what its writer saved: every
// payload hash (input_hash, output_hash) matches its payload, and the file
// digests of integrity.json, when the bundle has one, match the files. A
// fixture edited by hand fails the test with what no longer matches and
// what to do; [SkipVerify] loads it as it is.
func Load(t testing.TB, path string, opts ...LoadOption) *trace.Trace {
	t.Helper()
	skip := false
	for _, o := range opts {
		if _, ok := o.(skipVerify); ok {
			skip = true
		}
	}
	var (
		tr               *trace.Trace
		err, mismatchErr error
	)
	if skip {
		tr, err = trace.Load(path)
	} else {
		tr, err, mismatchErr = loadVerified(t.Context(), path)
	}
	if err != nil {
		hint := ""
		if errors.Is(err, fs.ErrNotExist) {
			hint = "\n(record it with sftest.Record and -" + RecordFlag + ", with replay.Record and replay.SaveTo, or copy it into place)"
		}
		t.Fatalf("sftest.Load: %v%s", err, hint)
	}
	if mismatchErr != nil {
		t.Fatalf("sftest.Load: %v\nrecord it again (sftest.Record with -%s, or replay.Record); if the edit is intended, save it again so that its hashes are recomputed (trace.Load, then Save with trace.Overwrite); or load it as it is with sftest.Load(t, %q, sftest.SkipVerify())",
			mismatchErr, RecordFlag, path)
	}
	results().usedBy(t, path)
	if *exploreFlag != "" {
		exploreLoaded(t, path)
	}
	return tr
}

// LoadOption configures [Load].
type LoadOption interface{ loadOption() }

type skipVerify struct{}

func (skipVerify) loadOption() {}

// SkipVerify makes [Load] load a bundle without verifying its payload hashes
// and integrity.json: for a fixture that is edited by hand on purpose (a
// test of what a damaged bundle does, say).
func SkipVerify() LoadOption { return skipVerify{} }

// loadVerified loads the bundle at path (trace.LoadVerified) and verifies
// it (verify): loadErr is the load's error, mismatchErr what verify found.
// The load hashes every payload as it reads it, so verify needs no second
// pass when every stored hash was right; and the first replay or fork of
// the trace takes the hashes found right as they are (package vouch),
// unless the events are changed first.
func loadVerified(ctx context.Context, path string) (tr *trace.Trace, loadErr, mismatchErr error) {
	tr, res, hashed, all, err := rawline.LoadVerified[*trace.Trace, trace.IntegrityResult](path)
	if err != nil {
		return nil, err, nil
	}
	if err := verify(ctx, path, tr, res, all); err != nil {
		return tr, nil, err
	}
	vouch.For(tr.Events, vouch.Sums(tr.Events, hashed), hashed, nil)
	return tr, nil, nil
}

// verify reports, as one error, what in the bundle at path (loaded as tr,
// its files' digests checked as res, by trace.LoadVerified) no longer holds
// what its writer saved: payload hashes that do not match their payloads,
// and files whose digests differ from integrity.json's. A bundle without
// integrity.json (as older Python stepfork wrote them) has only its payload
// hashes checked. hashed says that the load found every payload hash to
// match already, which leaves them nothing to check.
func verify(ctx context.Context, path string, tr *trace.Trace, res trace.IntegrityResult, hashed bool) error {
	var problems []string
	var issues []trace.Issue
	if !hashed {
		issues = trace.Validate(ctx, tr, trace.CheckIntegrity(), trace.Partial()).Errors()
	}
	for _, is := range issues {
		if is.Code == trace.CodePayloadHash {
			where := is.Location
			if is.Step != nil {
				where = fmt.Sprintf("step %d (%s)", *is.Step, is.EventID)
			}
			problems = append(problems, where+": "+is.Message)
		}
	}
	if res.Status == trace.IntegrityMismatch {
		for _, is := range res.Issues {
			problems = append(problems, is.File+": "+is.Message)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%s was changed after it was written:\n\t%s", path, strings.Join(problems, "\n\t"))
}

// Record returns the trace testdata/NAME.sftrace of a run of agent on input,
// recording or replaying it as httprr does with HTTP traffic. Its arguments
// come in replay.Record's order: what the run is called, its input, the
// agent.
//
//   - With go test -stepfork.record=REGEXP and a regexp matching name, the
//     agent runs for real (replay.Record) and its trace is written to
//     testdata/NAME.sftrace, replacing what was there. A run whose agent
//     returns an error is recorded too: it is a failed run.
//   - With go test -stepfork.heal=REGEXP ([HealFlag]) and a regexp matching
//     name, the committed trace is healed ([fork.Heal]): the agent runs
//     against it, served where the recording answers, live from where it
//     first departs from it (models live; a tool the recording cannot
//     answer fails the test, naming it), and the new run replaces the
//     trace when it differs. The test logs where the tail started and what
//     it spent.
//   - Otherwise the committed trace is loaded and the agent replayed against
//     it (frozen: nothing executes). The test fails when the trace is
//     missing, when input is not the recorded input, or when the replay
//     diverges; each message says how to heal or record again.
//
// The flag is defined only in test binaries and is not -update, so it never
// collides with golden-file libraries. name is the trace's name, not the
// agent's: it may contain slashes (refund/failure is
// testdata/refund/failure.sftrace). A new recording's agent is named by
// [AgentName], or else after the trace (the manifest's agent_name, which
// pages and goldens show): "refund/failure".
func Record(t testing.TB, name string, input any, agent replay.Agent, opts ...RecordOption) *trace.Trace {
	t.Helper()
	agentName := name
	for _, o := range opts {
		if a, ok := o.(agentNameOption); ok {
			agentName = string(a)
		}
	}
	if name == "" || strings.HasSuffix(name, "/") || path.IsAbs(name) || strings.Contains(name, "..") {
		t.Fatalf("sftest.Record: %q is not a trace name: use a relative name such as \"refund-failure\" (saved as testdata/refund-failure.sftrace)", name)
	}
	p := filepath.Join("testdata", filepath.FromSlash(name)+".sftrace")
	rec, err := recording(name)
	if err != nil {
		t.Fatalf("sftest.Record: %v", err)
	}
	again := fmt.Sprintf("go test -run '%s' -%s='^%s$'", runPattern(t.Name()), RecordFlag, regexp.QuoteMeta(name))
	if rec {
		unlock := lockPath(p)
		defer unlock()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatalf("sftest.Record: %v", err)
		}
		res, err := replay.Record(t.Context(), agentName, input, agent, replay.SaveTo(p, trace.Overwrite()))
		if res == nil || res.Path == "" {
			t.Fatalf("sftest.Record: recording %s failed: %v", p, err)
		}
		status := string(res.Trace.Status)
		if res.Err != nil {
			status += " (" + firstLine(res.Err.Error()) + ")"
		}
		t.Logf("sftest.Record: recorded %s: %d events, %s", p, len(res.Trace.Events), status)
		tr := Load(t, p)
		if *exploreFlag != "" {
			exploreAt(t, "Record", tr, agent)
		}
		return tr
	}

	results().usedBy(t, p)
	tr, err, mismatchErr := loadVerified(t.Context(), p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("sftest.Record: %s does not exist; record it with:\n\t%s", p, again)
		}
		t.Fatalf("sftest.Record: %v\nrecord it again with:\n\t%s", err, again)
	}
	if mismatchErr != nil {
		t.Fatalf("sftest.Record: %v\nrecord it again with:\n\t%s", mismatchErr, again)
	}
	want, err := trace.ValueOf(input)
	if err != nil {
		t.Fatalf("sftest.Record: the input cannot be recorded as JSON: %v", err)
	}
	want, _ = trace.RedactValue(want)
	if got := recordedInput(tr); got != want {
		t.Fatalf("sftest.Record: the input differs from the one recorded in %s; record it again with:\n\t%s\ninput (-recorded +given):\n%s",
			p, again, indent(cmp.Diff(plain(got), plain(want))))
	}
	if healed := healRecord(t, name, p, tr, agent); healed != nil {
		tr = healed
	} else if _, err := replay.Replay(t.Context(), tr, agent); err != nil {
		heal := fmt.Sprintf("go test -run '%s' -%s='^%s$'", runPattern(t.Name()), HealFlag, regexp.QuoteMeta(name))
		t.Fatalf("%s\nthe agent no longer reproduces %s; if that is intended, heal it (the tail from the divergence runs live):\n\t%s\nor record it again with:\n\t%s",
			divergenceReport("sftest.Record", p, err), p, heal, again)
	}
	if *exploreFlag != "" {
		exploreAt(t, "Record", tr, agent)
	}
	return tr
}

// plain is v decoded into plain Go values (numbers as float64), for cmp.Diff.
func plain(v trace.Value) any {
	var x any
	if err := v.Decode(&x); err != nil {
		return v.Canonical()
	}
	return x
}

// recordedInput is the input of tr's run_start (null when it has none).
func recordedInput(tr *trace.Trace) trace.Value {
	for i := range tr.Events {
		if tr.Events[i].Type == trace.RunStart {
			if tr.Events[i].Input.IsAbsent() {
				return trace.NullValue
			}
			return tr.Events[i].Input
		}
	}
	return trace.NullValue
}

// RecordOption configures [Record].
type RecordOption interface{ recordOption() }

type agentNameOption string

func (agentNameOption) recordOption() {}

// AgentName names the agent of a new recording made by [Record] (the
// manifest's agent_name, which pages, goldens and the CLI show), as
// replay.Record's agentName does; without it the agent is named after the
// trace. A recording already made keeps the name it was made with.
func AgentName(name string) RecordOption { return agentNameOption(name) }

// Replay replays agent against tr (replay.Replay: frozen unless opts say
// otherwise, so nothing executes) and returns the result. A divergence, or a
// frozen replay whose outcome differs from the recording, fails the test at
// once with replay's report: the first divergence first, naming the recorded
// step and event, then the (-recorded +actual) difference.
func Replay(t testing.TB, tr *trace.Trace, agent replay.Agent, opts ...replay.ReplayOption) *replay.Result {
	t.Helper()
	if *exploreFlag != "" {
		exploreAt(t, "Replay", tr, agent)
	}
	res, err := replay.Replay(t.Context(), tr, agent, opts...)
	if err != nil {
		where := "the trace"
		if tr != nil && tr.Path != "" {
			where = tr.Path
		}
		t.Fatalf("%s", divergenceReport("sftest.Replay", where, err))
	}
	return res
}

// divergenceReport renders a replay error for a test failure. The first line
// names the step of the divergence when the error knows it.
func divergenceReport(helper, where string, err error) string {
	var me *replay.MismatchError
	if errors.As(err, &me) && me.EventID != "" {
		return fmt.Sprintf("%s: the replay of %s diverged at step %d (%s): %s", helper, where, me.Step, me.EventID, err)
	}
	if errors.Is(err, replay.ErrDiverged) {
		return fmt.Sprintf("%s: the replay of %s diverged: %s", helper, where, err)
	}
	return fmt.Sprintf("%s: the replay of %s failed: %s", helper, where, err)
}

// runPattern is a -run pattern that selects exactly the test named name
// (subtests included): ^TestA$/^sub$.
func runPattern(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	return strings.Join(parts, "/")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func indent(s string) string {
	s = strings.ReplaceAll(strings.TrimRight(s, "\n"), "\u00a0", " ")
	return "\t" + strings.ReplaceAll(s, "\n", "\n\t")
}
