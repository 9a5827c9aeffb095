package trace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unsafe"
)

// Issue codes of validation. The codes and messages of stepfork's own checks
// are the ones Python stepfork's validator reports, so that both tools
// report a trace alike; the integrity codes are declared with
// [IntegrityStatus].
const (
	CodeEventCountMismatch = "event_count_mismatch"
	CodeDuplicateEventID   = "duplicate_event_id"
	CodeRunIDMismatch      = "run_id_mismatch"
	CodeStepOrder          = "step_order"
	CodeInvalidParent      = "invalid_parent"
	CodeParentNotEarlier   = "parent_not_earlier"
	CodeRunStartCount      = "run_start_count"
	CodeMissingErrorEvent  = "missing_error_event"
	CodePayloadHash        = "payload_hash_mismatch"

	// Bundle-level codes: the bundle could not be read at all.
	CodeUnsupportedSchema = "unsupported_schema"
	CodeInvalidJSON       = "invalid_json"
	CodeInvalidManifest   = "invalid_manifest"
	CodeInvalidEvent      = "invalid_event"
)

// Codes of the checks that go beyond stepfork's validator. They are reported
// with SeverityWarning unless the Pedantic option is given, because Python
// stepfork accepts such traces (its own golden diff bundles say "running" in
// the manifest and end with a completed run_end).
const (
	CodeStatusMismatch      = "status_mismatch"
	CodeTotalsMismatch      = "totals_mismatch"
	CodeFailureStep         = "failure_step_invalid"
	CodeRunEndCount         = "run_end_count"
	CodeRunEndNotLast       = "run_end_not_last"
	CodeToolResultUnpaired  = "tool_result_unpaired"
	CodeToolResultDuplicate = "tool_result_duplicate"
	CodeToolNameMismatch    = "tool_name_mismatch"
	CodeToolCallUnanswered  = "tool_call_unanswered"
)

// Validation modes, as Report.Mode names them.
const (
	ModeStrict  = "strict"
	ModePartial = "partial"
)

// ErrInvalidTrace is matched (errors.Is) by the error of Report.Err.
var ErrInvalidTrace = errors.New("trace is not valid")

// Severity says whether an Issue makes a trace invalid.
type Severity uint8

// Severities. The zero value is SeverityError.
const (
	SeverityError   Severity = iota // the trace is invalid
	SeverityWarning                 // suspicious, but stepfork accepts it
)

// String returns the name of the severity.
func (s Severity) String() string {
	if s == SeverityWarning {
		return "warning"
	}
	return "error"
}

// Issue is one problem found by Validate or ValidateBundle.
type Issue struct {
	Code    string
	Message string
	// Location is where the problem is: a file ("events.jsonl"), a field
	// ("manifest.json:totals.events", "events.jsonl:input_hash"), a file
	// with a line ("…/events.jsonl:17"), or "" for an event's own fields
	// (then EventID and Step say which event).
	Location string
	EventID  string
	Step     *int
	Severity Severity
}

// String formats the issue as "code: message (location)".
func (i Issue) String() string {
	s := i.Code + ": " + i.Message
	if i.Severity == SeverityWarning {
		s = "warning: " + s
	}
	if i.Location != "" {
		s += " (" + i.Location + ")"
	}
	return s
}

// Report is the outcome of Validate or ValidateBundle. Every problem found
// is listed; validation never stops at the first, except that a bundle which
// cannot be read at all yields a single bundle-level issue (missing_file,
// unsupported_schema, invalid_json, invalid_manifest or invalid_event), as
// in stepfork.
type Report struct {
	Path   string // bundle path ("" for Validate)
	Mode   string // ModeStrict or ModePartial
	Loaded bool   // the bundle was read (always true for Validate)
	Events int    // events read
	// Integrity is the outcome of verifying the file digests, when
	// ValidateBundle ran with CheckIntegrity and the bundle could be read.
	Integrity *IntegrityResult
	// Issues, errors and warnings, in a stable order: manifest, then each
	// event in file order, then whole-trace checks, then payload hashes,
	// then file integrity, then the checks beyond stepfork's.
	Issues []Issue
	// Canceled is set when validation could not finish because the context
	// given to Validate or ValidateBundle was done; the report is then
	// incomplete.
	Canceled error
	// Omitted counts the issues found beyond the first [MaxIssues] in
	// report order, which Issues does not hold (a trace with a fault on
	// every line is reported in bounded memory and output), and
	// OmittedErrors those of them that are errors.
	Omitted, OmittedErrors int

	checkedIntegrity bool
}

// MaxIssues is how many issues a [Report] holds at most; the others are
// counted in Report.Omitted.
const MaxIssues = 1000

// Valid reports whether the trace passed: no issue of SeverityError, and
// validation finished.
func (r *Report) Valid() bool {
	return r.Canceled == nil && len(r.Errors()) == 0 && r.OmittedErrors == 0
}

// Errors returns the issues of SeverityError.
func (r *Report) Errors() []Issue { return r.filter(SeverityError) }

// Warnings returns the issues of SeverityWarning.
func (r *Report) Warnings() []Issue { return r.filter(SeverityWarning) }

func (r *Report) filter(s Severity) []Issue {
	var out []Issue
	for _, i := range r.Issues {
		if i.Severity == s {
			out = append(out, i)
		}
	}
	return out
}

// Codes returns the codes of the error issues, in order (warnings excluded).
func (r *Report) Codes() []string {
	var out []string
	for _, i := range r.Errors() {
		out = append(out, i.Code)
	}
	return out
}

// bundleCodes make `stepfork validate` exit 2: the input could not be read.
var bundleCodes = []string{CodeMissingFile, CodeInvalidJSON, CodeInvalidManifest, CodeInvalidEvent,
	CodeUnsupportedSchema, CodeIntegrityMetadataInvalid, CodeIntegrityAlgorithm}

// ExitCode is the exit status `stepfork validate` gives this report:
// 3 when integrity was checked and the bundle is a legacy one without
// integrity.json; else 2 when the input is unreadable or its integrity
// metadata is unusable; else 1 when the trace is invalid (or validation did
// not finish); else 0. Warnings never change it.
func (r *Report) ExitCode() int {
	errs := r.Errors()
	if r.checkedIntegrity && slices.ContainsFunc(errs, func(i Issue) bool {
		return i.Code == CodeIntegrityUnverified && i.Location == IntegrityFile
	}) {
		return 3
	}
	if slices.ContainsFunc(errs, func(i Issue) bool { return slices.Contains(bundleCodes, i.Code) }) {
		return 2
	}
	if !r.Valid() {
		return 1
	}
	return 0
}

// Err returns nil when the report is valid, and otherwise an error matching
// ErrInvalidTrace that lists every error issue.
func (r *Report) Err() error {
	if r.Valid() {
		return nil
	}
	return &ValidationError{Report: r}
}

// ValidationError is a report with at least one error, as an error.
type ValidationError struct{ Report *Report }

// Error returns the error message.
func (e *ValidationError) Error() string {
	var b strings.Builder
	name := e.Report.Path
	if name == "" {
		name = "trace"
	}
	errs := e.Report.Errors()
	fmt.Fprintf(&b, "%s is not valid (%s): %d issues", name, e.Report.Mode, len(errs)+e.Report.OmittedErrors)
	if e.Report.Canceled != nil {
		fmt.Fprintf(&b, "; validation did not finish: %v", e.Report.Canceled)
	}
	const shown = 20 // an error message stays readable
	for _, i := range errs[:min(len(errs), shown)] {
		b.WriteString("\n  ")
		b.WriteString(i.String())
	}
	if more := len(errs) + e.Report.OmittedErrors - min(len(errs), shown); more > 0 {
		fmt.Fprintf(&b, "\n  … and %d more", more)
	}
	return b.String()
}

// Unwrap makes the error match ErrInvalidTrace.
func (e *ValidationError) Unwrap() error { return ErrInvalidTrace }

// ValidateOption configures Validate and ValidateBundle.
type ValidateOption func(*validateConfig)

type validateConfig struct {
	partial   bool
	integrity bool
	pedantic  bool
	ctx       context.Context
}

// Partial validates a trace that may be incomplete: the two checks of a
// whole run (exactly one run_start; a failed run has an error event) and the
// unanswered-tool-call check are skipped. Strict is the default.
func Partial() ValidateOption { return func(c *validateConfig) { c.partial = true } }

// CheckIntegrity verifies every payload hash (input_hash and output_hash
// against the canonical payloads) and, for ValidateBundle, the SHA-256 file
// digests that integrity.json records. It is `stepfork validate
// --verify-integrity`.
func CheckIntegrity() ValidateOption { return func(c *validateConfig) { c.integrity = true } }

// Pedantic reports the checks that go beyond stepfork's validator
// (manifest status and totals against the events, failure.step, run_end
// placement, tool call/result pairing) as errors instead of warnings.
func Pedantic() ValidateOption { return func(c *validateConfig) { c.pedantic = true } }

func newConfig(ctx context.Context, opts []ValidateOption) validateConfig {
	c := validateConfig{ctx: ctx}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func (c *validateConfig) mode() string {
	if c.partial {
		return ModePartial
	}
	return ModeStrict
}

// Validate checks a trace in memory: every check of stepfork's validator
// (the event count of the manifest, unique event ids, one run id, steps that
// never decrease, parents that exist and come earlier, exactly one run_start,
// an error event in a failed run), each event's fields and the manifest's rules
// (which Load guarantees but a hand-made Trace may break), and the checks
// beyond stepfork's. With CheckIntegrity it verifies the payload hashes;
// file digests belong to bundles ([ValidateBundle]). When ctx is done before
// every event was checked, the report is incomplete and says so in
// [Report.Canceled].
//
//	rep := trace.Validate(ctx, tr, trace.CheckIntegrity())
//	if !rep.Valid() {
//		for _, is := range rep.Issues { fmt.Println(is) }
//	}
func Validate(ctx context.Context, tr *Trace, opts ...ValidateOption) *Report {
	cfg := newConfig(ctx, opts)
	rep := &Report{Path: tr.Path, Mode: cfg.mode(), Loaded: true}
	m := tr.Manifest
	if m.Status == "" {
		m.Status = RunRunning // as Save writes it
	}
	v := newValidator(cfg, &m)
	if err := m.check(); err != nil {
		v.issue(phaseManifest, 0, Issue{Code: CodeInvalidManifest, Location: ManifestFile,
			Message: fmt.Sprintf("Manifest is invalid: %v.", err)})
	}
	for i := range tr.Events {
		if i%1024 == 0 && cfg.ctx != nil && cfg.ctx.Err() != nil {
			rep.Canceled = cfg.ctx.Err()
			break
		}
		ev := &tr.Events[i]
		if err := ev.checkFields(); err != nil {
			v.issue(phaseEvent, i, Issue{Code: CodeInvalidEvent, Location: EventsFile,
				EventID: ev.ID, Step: intp(ev.Step),
				Message: fmt.Sprintf("Event %s (index %d) is invalid: %v.", ev.ID, i, err)})
		}
		var sums payloadSums
		if cfg.integrity {
			sums.fromEvent(ev)
		}
		v.add(ev, &sums)
	}
	rep.Events = len(tr.Events)
	rep.Issues = v.finish()
	rep.Omitted, rep.OmittedErrors = v.omitted, v.omittedErrors
	return rep
}

// ValidateBundle checks the bundle at path by streaming events.jsonl once,
// in memory that grows only with the set of event ids: the checks of
// Validate and, with CheckIntegrity, every payload hash and the file digests
// of integrity.json (events.jsonl is hashed while it is read, not read
// twice). A bundle that cannot be read yields one bundle-level issue whose
// location is the file (and line) at fault. When ctx is done before the
// bundle was read, the report is incomplete and says so in [Report.Canceled].
func ValidateBundle(ctx context.Context, path string, opts ...ValidateOption) *Report {
	cfg := newConfig(ctx, opts)
	rep := &Report{Path: path, Mode: cfg.mode(), checkedIntegrity: cfg.integrity}
	if !isPacked(path) {
		// stepfork's first check: the path must be a directory.
		if st, err := os.Stat(path); err != nil || !st.IsDir() {
			rep.Issues = []Issue{{Code: CodeMissingFile, Message: fmt.Sprintf("Missing required file: %s.", path), Location: path}}
			return rep
		}
	}
	b, err := openBundle(path)
	if err != nil {
		rep.Issues = []Issue{loadIssue(path, err)}
		return rep
	}
	if issues := missingFiles(b); len(issues) > 0 {
		b.Close()
		rep.Issues = issues
		return rep
	}
	r, err := openReader(b, path, openConfig{digest: cfg.integrity})
	if err != nil {
		b.Close()
		rep.Issues = []Issue{loadIssue(path, err)}
		return rep
	}
	defer r.Close()
	m := r.Manifest()
	v := newValidator(cfg, &m)
	n := 0
	err = decodeEvents(r, cfg.integrity, runtime.GOMAXPROCS(0), func(ev *Event, sums *payloadSums) bool {
		if n%1024 == 0 && cfg.ctx != nil && cfg.ctx.Err() != nil {
			rep.Canceled = cfg.ctx.Err()
			return false
		}
		v.add(ev, sums)
		n++
		return true
	})
	rep.Events = n
	if err != nil {
		rep.Issues = []Issue{loadIssue(path, err)}
		return rep
	}
	if rep.Canceled != nil {
		rep.Issues = v.finish()
		rep.Omitted, rep.OmittedErrors = v.omitted, v.omittedErrors
		return rep
	}
	rep.Loaded = true
	if cfg.integrity {
		res := verifyBundle(b, map[string]string{EventsFile: r.eventsDigest()})
		rep.Integrity = &res
		if res.Status != IntegrityVerified {
			for _, is := range res.Issues {
				v.issue(phaseFiles, 0, Issue{Code: is.Code, Message: is.Message, Location: is.File})
			}
		}
	}
	rep.Issues = v.finish()
	rep.Omitted, rep.OmittedErrors = v.omitted, v.omittedErrors
	return rep
}

// decodeEvents reads every event of r in file order and passes it, with the
// digests of its payloads when hashOnly (zero otherwise), to yield until
// yield returns false. The event's id, parent id and payload hashes are
// borrowed from its line (eventDecoder.borrow): yield must copy what it
// keeps of them. It returns the first error in file order. With more
// than one worker the Reader decodes batches of lines on that many
// goroutines (as with Workers), one of which cuts the lines and hashes
// events.jsonl; memory stays bounded by the batches in flight.
func decodeEvents(r *Reader, hashOnly bool, workers int, yield func(*Event, *payloadSums) bool) error {
	r.dec.hashOnly, r.dec.borrow = hashOnly, true
	r.workers = workers
	var sums payloadSums
	for ev, err := range r.Events() {
		if err != nil {
			return err
		}
		sums = r.payloadSums()
		if !yield(ev, &sums) {
			return nil
		}
	}
	return nil
}

// missingFiles is stepfork's first bundle check: every required file must
// exist (all missing ones listed).
func missingFiles(b *bundle) []Issue {
	var out []Issue
	for _, name := range coreFiles {
		if _, err := b.file(name); errors.Is(err, fs.ErrNotExist) {
			p := b.where(name)
			out = append(out, Issue{Code: CodeMissingFile, Message: fmt.Sprintf("Missing required file: %s.", p), Location: p})
		}
	}
	return out
}

// loadIssue maps an error of Open or of reading events.jsonl to a
// bundle-level issue. The code follows stepfork's reading of the error text;
// an error at a line of events.jsonl is classified by its type instead (a
// line that is too long is invalid_json, not invalid_manifest). The location
// is the file (with ":line" for events.jsonl), taken from the error rather
// than from the text before the first colon, so Windows paths survive.
func loadIssue(path string, err error) Issue {
	msg := err.Error()
	is := Issue{Message: msg}
	var le *LineError
	switch {
	case errors.As(err, &le):
		is.Location = fmt.Sprintf("%s:%d", le.File, le.Line)
		is.Code = CodeInvalidJSON
		if errors.Is(err, errInvalidEvent) {
			is.Code = CodeInvalidEvent
		}
		return is
	case strings.Contains(msg, "unsupported"):
		is.Code = CodeUnsupportedSchema
	case strings.Contains(msg, "invalid JSON"), strings.Contains(msg, "blank JSONL line"):
		is.Code = CodeInvalidJSON
	case strings.Contains(msg, "invalid manifest"):
		is.Code = CodeInvalidManifest
	case strings.Contains(msg, "invalid event"):
		is.Code = CodeInvalidEvent
	case strings.Contains(msg, "missing required file"):
		is.Code = CodeMissingFile
	default:
		is.Code = CodeInvalidManifest
	}
	is.Location = path
	for _, p := range []string{path, filepath.Clean(path)} {
		if rest, ok := strings.CutPrefix(msg, p); ok { // "<path>/manifest.json: …"
			if i := strings.Index(rest, ": "); i >= 0 {
				is.Location = p + rest[:i]
			}
			return is
		}
		if i := strings.LastIndex(msg, ": "+p); i >= 0 { // "… is not a file: <path>/x"
			is.Location = msg[i+2:]
			return is
		}
	}
	return is
}

// Phases order the issues of a report.
const (
	phaseManifest = iota
	phaseEvent
	phaseTrace
	phaseHashes
	phaseFiles
	phaseExtra
)

type rankedIssue struct {
	phase, index int
	Issue
}

// payloadSums are the SHA-256 digests of an event's canonical payloads that
// input_hash and output_hash must hold (ok false: the field must be null).
type payloadSums struct {
	in, out payloadSum
}

type payloadSum struct {
	ok  bool
	sum [sha256.Size]byte
}

func (p *payloadSum) set(v Value) {
	if v.IsAbsent() {
		return
	}
	p.ok, p.sum = true, sha256.Sum256([]byte(v.raw))
}

// fromEvent computes the expected digests from the event's payloads
// (which payload each hash covers), as Event.ExpectedHashes does.
func (s *payloadSums) fromEvent(e *Event) {
	switch e.Type {
	case RunStart, LLMRequest, ToolCall:
		s.in.set(e.Input)
	case LLMResponse, ToolResult, RunEnd:
		s.out.set(e.Output)
	case StateChange:
		s.in.set(e.Before)
		s.out.set(e.After)
	case ErrorEvent:
		s.out.set(e.Details)
	}
}

// matches reports whether the stored hex hash equals the digest, without
// allocating.
func (p *payloadSum) matches(stored string) bool {
	if len(stored) != 2*sha256.Size {
		return false
	}
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], p.sum[:])
	return string(buf[:]) == stored
}

// idInfo is what the validator remembers of each event id: the index of
// its first event, and whether that is a tool_call.
type idInfo struct {
	index    int32
	toolCall bool
}

// idArena holds copies of the event ids the validator keeps, in chunks of
// memory shared by many ids: a kept id then costs its bytes, not also the
// string the decoder allocated for it (which is released with its event).
type idArena struct{ chunk []byte }

// keepString is keep of a string.
func (a *idArena) keepString(id string) string {
	return a.keep(unsafe.Slice(unsafe.StringData(id), len(id)))
}

// keep returns a copy of id in the arena. The bytes of a chunk are never
// written again once given out.
func (a *idArena) keep(id []byte) string {
	if len(id) == 0 || len(id) > 1<<10 {
		return string(id)
	}
	if len(id) > cap(a.chunk)-len(a.chunk) {
		// Chunks double from 1 KB to 64 KB: a small bundle's ids take
		// a small chunk.
		a.chunk = make([]byte, 0, min(max(2*cap(a.chunk), 1<<10), 64<<10))
	}
	start := len(a.chunk)
	a.chunk = append(a.chunk, id...)
	return unsafe.String(&a.chunk[start], len(id))
}

// idKey appends to buf the key under which the validator keeps an event
// id: the id as it is after a 0 byte, or, for an id that ends in 16 or
// more lowercase hex digits (as stepfork's "evt_" and 32 digits do), a 1
// byte, the length of what comes before the digits, that, and the bytes
// the digits stand for: 22 bytes instead of 36. The digits are the
// longest even-length run of them that ends the id, so every id has one
// key and two ids have the same key only if they are equal.
func idKey(buf []byte, id string) []byte {
	h := len(id)
	// A table rather than comparisons: random hex digits make the
	// branches of "0-9 or a-f" unpredictable.
	for h > 0 && lowerHex[id[h-1]] < 16 {
		h--
	}
	if (len(id)-h)%2 == 1 {
		h++
	}
	if len(id)-h < 16 || h > 255 {
		return append(append(buf, 0), id...)
	}
	buf = append(append(buf, 1, byte(h)), id[:h]...)
	n := len(buf)
	buf = slices.Grow(buf, (len(id)-h)/2)[:n+(len(id)-h)/2]
	for i := h; i < len(id); i += 2 {
		buf[n] = lowerHex[id[i]]<<4 | lowerHex[id[i+1]]
		n++
	}
	return buf
}

// lowerHex holds the value of each lowercase hex digit, and 0xff for
// every other byte.
var lowerHex = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := range 10 {
		t['0'+i] = byte(i)
	}
	for i := range 6 {
		t['a'+i] = byte(10 + i)
	}
	return t
}()

// openCall is a tool_call still waiting for its tool_result.
type openCall struct {
	index int
	step  int
	name  string
}

// pendingParent is a parent id not seen before its child; it is resolved
// when the whole trace has been read.
type pendingParent struct {
	index, step int
	id, parent  string
}

// validator runs the checks one event at a time, so that the same code
// serves a Trace in memory and a bundle being streamed.
type validator struct {
	cfg       validateConfig
	m         *Manifest
	issues    []rankedIssue
	ids       map[string]idInfo // by idKey, the keys held in idBytes
	idBytes   idArena
	key, pkey []byte // scratch for idKey: the event's id, its parent's
	n         int
	prevStep  int
	pending   []pendingParent

	runStarts, errorEvents, llmCalls, toolCalls int
	failureStepOK                               bool

	runEnds           int
	lastRunEnd        int // index of the last run_end, -1 if none
	lastRunEndID      string
	lastRunEndStep    int
	lastRunStatus     RunStatus
	open              map[string]openCall // tool_call id → call
	lastCallByName    map[string]string   // tool name → id of its latest call
	eventsAfterRunEnd int

	omitted, omittedErrors int // issues trimmed beyond MaxIssues
}

func newValidator(cfg validateConfig, m *Manifest) *validator {
	return &validator{
		cfg: cfg, m: m,
		ids:            make(map[string]idInfo, min(max(m.Totals.Events, 16), 1<<20)),
		lastRunEnd:     -1,
		open:           map[string]openCall{},
		lastCallByName: map[string]string{},
	}
}

func intp(i int) *int { return &i }

func (v *validator) issue(phase, index int, is Issue) {
	v.issues = append(v.issues, rankedIssue{phase, index, is})
	if len(v.issues) >= 2*MaxIssues {
		v.trim()
	}
}

// trim keeps the first MaxIssues issues in report order and counts the
// others. An issue it drops ranks after MaxIssues it keeps, so it is never
// one of the first MaxIssues of the whole report.
func (v *validator) trim() {
	slices.SortStableFunc(v.issues, func(a, b rankedIssue) int {
		return cmp.Or(cmp.Compare(a.phase, b.phase), cmp.Compare(a.index, b.index))
	})
	if len(v.issues) <= MaxIssues {
		return
	}
	for _, r := range v.issues[MaxIssues:] {
		v.omitted++
		if r.Severity == SeverityError {
			v.omittedErrors++
		}
	}
	clear(v.issues[MaxIssues:])
	v.issues = v.issues[:MaxIssues]
}

// extra records an issue of a check beyond stepfork's.
func (v *validator) extra(index int, is Issue) {
	if !v.cfg.pedantic {
		is.Severity = SeverityWarning
	}
	v.issue(phaseExtra, index, is)
}

// add checks ev, the next event. The strings of ev may be borrowed from
// the line it was decoded from (eventDecoder.borrow): add copies what it
// keeps.
func (v *validator) add(ev *Event, sums *payloadSums) {
	i := v.n
	v.n++
	step := ev.Step
	at := func(code, msg string) {
		v.issue(phaseEvent, i, Issue{Code: code, Message: msg, EventID: strings.Clone(ev.ID), Step: intp(step)})
	}
	// stepfork's structural checks.
	v.key = idKey(v.key[:0], ev.ID)
	_, dup := v.ids[string(v.key)]
	if dup {
		at(CodeDuplicateEventID, fmt.Sprintf("Event %s appears more than once.", ev.ID))
	}
	if ev.RunID != v.m.RunID {
		at(CodeRunIDMismatch, fmt.Sprintf("Event %s run_id '%s' does not match manifest run_id '%s'.", ev.ID, ev.RunID, v.m.RunID))
	}
	if i > 0 && step < v.prevStep {
		at(CodeStepOrder, fmt.Sprintf("Event %s step %d is less than the previous step %d.", ev.ID, step, v.prevStep))
	}
	v.prevStep = step
	var parent idInfo
	var parentKnown bool
	if ev.ParentID != "" {
		v.pkey = idKey(v.pkey[:0], ev.ParentID)
		parent, parentKnown = v.ids[string(v.pkey)]
		if !parentKnown {
			v.pending = append(v.pending, pendingParent{i, step, v.idBytes.keepString(ev.ID), v.idBytes.keepString(ev.ParentID)})
		}
	}
	if !dup {
		v.ids[v.idBytes.keep(v.key)] = idInfo{int32(i), ev.Type == ToolCall}
	}

	// Counters.
	switch ev.Type {
	case RunStart:
		v.runStarts++
	case ErrorEvent:
		v.errorEvents++
		if f := v.m.Failure; f != nil && f.Step == step {
			v.failureStepOK = true
		}
	case LLMRequest:
		v.llmCalls++
	case ToolCall:
		v.toolCalls++
		id := v.idBytes.keepString(ev.ID)
		v.open[id] = openCall{i, step, ev.Name}
		v.lastCallByName[ev.Name] = id
	case ToolResult:
		v.pairResult(ev, i, parent, parentKnown)
	case RunEnd:
		v.runEnds++
		v.lastRunEnd, v.lastRunEndID, v.lastRunEndStep, v.lastRunStatus = i, strings.Clone(ev.ID), step, ev.RunStatus
	}
	if v.lastRunEnd >= 0 && ev.Type != RunEnd {
		v.eventsAfterRunEnd++
	}

	if v.cfg.integrity {
		v.checkHash(ev, i, "input_hash", ev.InputHash, &sums.in)
		v.checkHash(ev, i, "output_hash", ev.OutputHash, &sums.out)
	}
}

// pairResult matches a tool_result with its tool_call: the call is its
// parent, or else (legacy traces without parent links) the latest call of
// the same name, as stepfork's replay pairs them.
func (v *validator) pairResult(ev *Event, i int, parent idInfo, parentKnown bool) {
	step := ev.Step
	warn := func(code, msg string) {
		v.extra(i, Issue{Code: code, Message: msg, Location: EventsFile, EventID: strings.Clone(ev.ID), Step: intp(step)})
	}
	callID := ""
	switch {
	case parentKnown && parent.toolCall:
		callID = ev.ParentID
		if _, ok := v.open[callID]; !ok {
			warn(CodeToolResultDuplicate, fmt.Sprintf("Event %s tool_result answers tool_call %s, which already has a result; a call has one result.", ev.ID, callID))
			return
		}
	default:
		callID = v.lastCallByName[ev.Name]
		if _, ok := v.open[callID]; callID == "" || !ok {
			warn(CodeToolResultUnpaired, fmt.Sprintf("Event %s tool_result '%s' answers no tool_call; set its parent_id to the id of the tool_call it answers.", ev.ID, ev.Name))
			return
		}
	}
	call := v.open[callID]
	delete(v.open, callID)
	if call.name != ev.Name {
		warn(CodeToolNameMismatch, fmt.Sprintf("Event %s tool_result name '%s' does not match the name '%s' of its tool_call %s.", ev.ID, ev.Name, call.name, callID))
	}
}

// checkHash compares a stored payload hash with the digest of the payload
// it covers (Event.ExpectedHashes).
func (v *validator) checkHash(ev *Event, i int, field, stored string, want *payloadSum) {
	var code, msg string
	switch {
	case want.ok && stored == "":
		code, msg = CodeIntegrityUnverified, fmt.Sprintf("Event %s is missing %s.", ev.ID, field)
	case !want.ok && stored != "", want.ok && !want.matches(stored):
		code, msg = CodePayloadHash, fmt.Sprintf("Event %s has a %s mismatch.", ev.ID, field)
	default:
		return
	}
	v.issue(phaseHashes, i, Issue{Code: code, Message: msg, Location: EventsFile + ":" + field, EventID: strings.Clone(ev.ID), Step: intp(ev.Step)})
}

// finish runs the checks that need the whole trace and returns the issues
// in report order.
func (v *validator) finish() []Issue {
	m := v.m
	if m.Totals.Events != v.n {
		v.issue(phaseManifest, 0, Issue{Code: CodeEventCountMismatch, Location: "manifest.json:totals.events",
			Message: fmt.Sprintf("Manifest event count %d does not match %d.", m.Totals.Events, v.n)})
	}
	for _, p := range v.pending {
		is := Issue{EventID: p.id, Step: intp(p.step)}
		v.key = idKey(v.key[:0], p.parent)
		if first, ok := v.ids[string(v.key)]; ok && int(first.index) >= p.index {
			is.Code, is.Message = CodeParentNotEarlier, fmt.Sprintf("Event %s parent %s does not appear earlier in the trace.", p.id, p.parent)
		} else {
			is.Code, is.Message = CodeInvalidParent, fmt.Sprintf("Event %s references missing parent %s.", p.id, p.parent)
		}
		v.issue(phaseEvent, p.index, is)
	}
	if !v.cfg.partial {
		if v.runStarts != 1 {
			v.issue(phaseTrace, 0, Issue{Code: CodeRunStartCount, Location: EventsFile,
				Message: fmt.Sprintf("Strict validation requires exactly one run_start; found %d.", v.runStarts)})
		}
		if m.Status == RunFailed && v.errorEvents == 0 {
			v.issue(phaseTrace, 1, Issue{Code: CodeMissingErrorEvent, Location: EventsFile,
				Message: "Failed traces require at least one error event in strict mode."})
		}
	}
	v.finishExtra()
	v.trim()
	var out []Issue
	for _, r := range v.issues {
		out = append(out, r.Issue)
	}
	return out
}

// finishExtra runs the whole-trace checks beyond stepfork's.
func (v *validator) finishExtra() {
	m := v.m
	if v.lastRunEnd >= 0 && m.Status != v.lastRunStatus {
		v.extra(-3, Issue{Code: CodeStatusMismatch, Location: "manifest.json:status", EventID: v.lastRunEndID, Step: intp(v.lastRunEndStep),
			Message: fmt.Sprintf("Manifest status '%s' does not match run_status '%s' of the run_end %s; set the manifest status to what the run_end records.", m.Status, v.lastRunStatus, v.lastRunEndID)})
	}
	if m.Totals.LLMCalls != v.llmCalls {
		v.extra(-2, Issue{Code: CodeTotalsMismatch, Location: "manifest.json:totals.llm_calls",
			Message: fmt.Sprintf("Manifest totals.llm_calls %d does not match the %d llm_request events; save the trace again to recompute totals.", m.Totals.LLMCalls, v.llmCalls)})
	}
	if m.Totals.ToolCalls != v.toolCalls {
		v.extra(-2, Issue{Code: CodeTotalsMismatch, Location: "manifest.json:totals.tool_calls",
			Message: fmt.Sprintf("Manifest totals.tool_calls %d does not match the %d tool_call events; save the trace again to recompute totals.", m.Totals.ToolCalls, v.toolCalls)})
	}
	if f := m.Failure; f != nil && !v.failureStepOK {
		v.extra(-1, Issue{Code: CodeFailureStep, Location: "manifest.json:failure.step",
			Message: fmt.Sprintf("Manifest failure.step %d is not the step of an error event; set it to the step of the error that ended the run.", f.Step)})
	}
	if v.runEnds > 1 {
		v.extra(v.lastRunEnd, Issue{Code: CodeRunEndCount, Location: EventsFile,
			Message: fmt.Sprintf("Found %d run_end events; a run ends once, so keep only the last.", v.runEnds)})
	}
	if v.eventsAfterRunEnd > 0 {
		v.extra(v.lastRunEnd, Issue{Code: CodeRunEndNotLast, Location: EventsFile, EventID: v.lastRunEndID, Step: intp(v.lastRunEndStep),
			Message: fmt.Sprintf("Event %s run_end is followed by %d more events; run_end must be the last event.", v.lastRunEndID, v.eventsAfterRunEnd)})
	}
	completed := v.lastRunStatus == RunCompleted || (v.lastRunEnd < 0 && m.Status == RunCompleted)
	if completed && !v.cfg.partial {
		calls := make([]struct {
			id string
			openCall
		}, 0, len(v.open))
		for id, c := range v.open {
			calls = append(calls, struct {
				id string
				openCall
			}{id, c})
		}
		slices.SortFunc(calls, func(a, b struct {
			id string
			openCall
		}) int {
			return cmp.Compare(a.index, b.index)
		})
		for _, c := range calls {
			v.extra(c.index, Issue{Code: CodeToolCallUnanswered, Location: EventsFile, EventID: c.id, Step: intp(c.step),
				Message: fmt.Sprintf("Event %s tool_call '%s' has no tool_result, but the run completed; record its result or mark the run as not completed.", c.id, c.name)})
		}
	}
}
