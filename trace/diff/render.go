package diff

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stepfork/stepfork/internal/clip"
	"github.com/stepfork/stepfork/internal/fileform"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/internal/volatile"
	"github.com/stepfork/stepfork/trace"
)

// JSON returns the diff as compact JSON.
//
// A positional diff (AlignPosition) is rendered as stepfork's DiffResult,
// byte for byte what `stepfork diff --json` prints before its newline:
//
//	{"equivalent":…,"baseline":{"path":…,"agent_name":…,"run_id":…,"status":…,"events":…},
//	 "candidate":{…},"steps":[{"index":…,"kind":…,"step_type":…,"label":…,"fields":[…],
//	 "changes":[{"path":…,"kind":…,"expected":…,"actual":…}]}],
//	 "added":…,"removed":…,"changed":…,"unchanged":…}
//
// An LCS diff is rendered with the same step and change objects, plus the
// aligned sides, the divergence, state deltas and token and cost deltas, in
// this order (a missing side, path or value is null):
//
//	{"alignment":"lcs","equivalent":…,
//	 "base":{"path":…,"agent_name":…,"run_id":…,"status":…,"run_status":…,"events":…,"steps":…,"tokens":…,"cost_usd":…},
//	 "variant":{…},
//	 "divergence":{"index":…,"kind":…,"base_index":…,"variant_index":…,"base":STEP,"variant":STEP}|null,
//	 "steps":[{"index":…,"kind":…,"step_type":…,"label":…,"base":STEP,"variant":STEP,"fields":[…],"changes":[…]}],
//	 "state":[{"key":…,"change":…,"bytes_delta":…,"before":…,"after":…}],
//	 "tokens_delta":…,"cost_usd_delta":…,"added":…,"removed":…,"changed":…,"unchanged":…}
//
// where STEP is {"index":…,"event_id":…,"step":…,"result_id":…,"result_step":…}
// or null (result_step is step for a step of one event), and a step that
// [Result.Mark] found matched or intended has "matched_by" or "intended"
// (its reason) after "fields".
// Values are JSON as in events.jsonl (sorted keys, raw UTF-8, floats
// printed as Python's Pydantic prints them). Strings are not HTML-escaped;
// note that json.Marshal would escape <, > and & in them (MarshalJSON's
// output goes through encoding/json's compaction), so write JSON() directly
// or use an Encoder with SetEscapeHTML(false) when bytes matter.
func (d *Result) JSON() []byte {
	// Room for what a step takes without its changes (with the two step
	// references and their ids in the native form), so that the buffer of a
	// long run is not grown again and again.
	if d.Positional {
		return d.appendStepforkJSON(make([]byte, 0, 1024+160*len(d.Steps)))
	}
	return d.appendNativeJSON(make([]byte, 0, 1024+448*len(d.Steps)))
}

// MarshalJSON returns JSON().
func (d *Result) MarshalJSON() ([]byte, error) { return d.JSON(), nil }

func (d *Result) appendStepforkJSON(b []byte) []byte {
	b = append(b, `{"equivalent":`...)
	b = strconv.AppendBool(b, d.Equivalent())
	b = append(b, `,"baseline":`...)
	b = appendStepforkSummary(b, &d.Base)
	b = append(b, `,"candidate":`...)
	b = appendStepforkSummary(b, &d.Variant)
	b = append(b, `,"steps":[`...)
	for i := range d.Steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStepDiff(b, &d.Steps[i], false)
	}
	b = append(b, ']')
	return appendCounts(b, d)
}

func appendCounts(b []byte, d *Result) []byte {
	b = append(b, `,"added":`...)
	b = strconv.AppendInt(b, int64(d.Added), 10)
	b = append(b, `,"removed":`...)
	b = strconv.AppendInt(b, int64(d.Removed), 10)
	b = append(b, `,"changed":`...)
	b = strconv.AppendInt(b, int64(d.Changed), 10)
	b = append(b, `,"unchanged":`...)
	b = strconv.AppendInt(b, int64(d.Unchanged), 10)
	return append(b, '}')
}

func appendOptQuoted(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return fileform.AppendQuoted(b, s)
}

func appendStepforkSummary(b []byte, s *Summary) []byte {
	b = append(b, `{"path":`...)
	b = appendOptQuoted(b, s.Path)
	b = append(b, `,"agent_name":`...)
	b = fileform.AppendQuoted(b, s.AgentName)
	b = append(b, `,"run_id":`...)
	b = fileform.AppendQuoted(b, s.RunID)
	b = append(b, `,"status":`...)
	b = fileform.AppendQuoted(b, string(s.Status))
	b = append(b, `,"events":`...)
	b = strconv.AppendInt(b, int64(s.Events), 10)
	return append(b, '}')
}

func appendJSONValue(b []byte, v trace.Value) []byte {
	if v.IsAbsent() {
		return append(b, "null"...)
	}
	return fileform.AppendValue(b, v.Canonical())
}

func appendFloatJSON(b []byte, f float64) []byte {
	v, err := trace.FloatValue(f)
	if err != nil {
		return append(b, "null"...)
	}
	return fileform.AppendValue(b, v.Canonical())
}

func appendStepRef(b []byte, s *trace.BehaviorStep) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(s.Index), 10)
	b = append(b, `,"event_id":`...)
	b = appendOptQuoted(b, s.EventID)
	b = append(b, `,"step":`...)
	b = strconv.AppendInt(b, int64(s.Step), 10)
	b = append(b, `,"result_id":`...)
	b = appendOptQuoted(b, s.ResultID)
	b = append(b, `,"result_step":`...)
	b = strconv.AppendInt(b, int64(s.ResultStep), 10)
	return append(b, '}')
}

func appendStepDiff(b []byte, s *Step, native bool) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(s.Index), 10)
	b = append(b, `,"kind":`...)
	b = fileform.AppendQuoted(b, string(s.Kind))
	b = append(b, `,"step_type":`...)
	b = fileform.AppendQuoted(b, string(s.Type))
	b = append(b, `,"label":`...)
	b = fileform.AppendQuoted(b, s.Label)
	if native {
		b = append(b, `,"base":`...)
		b = appendStepRef(b, s.Base)
		b = append(b, `,"variant":`...)
		b = appendStepRef(b, s.Variant)
	}
	b = append(b, `,"fields":[`...)
	for i, f := range s.Fields {
		if i > 0 {
			b = append(b, ',')
		}
		b = fileform.AppendQuoted(b, f)
	}
	b = append(b, `]`...)
	if native && s.MatchedBy != "" {
		b = append(b, `,"matched_by":`...)
		b = fileform.AppendQuoted(b, s.MatchedBy)
	}
	if native && s.Intended != "" {
		b = append(b, `,"intended":`...)
		b = fileform.AppendQuoted(b, s.Intended)
	}
	b = append(b, `,"changes":[`...)
	for i := range s.Changes {
		c := &s.Changes[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"path":`...)
		b = fileform.AppendQuoted(b, c.Path)
		b = append(b, `,"kind":`...)
		b = fileform.AppendQuoted(b, string(c.Kind))
		b = append(b, `,"expected":`...)
		b = appendJSONValue(b, c.Expected)
		b = append(b, `,"actual":`...)
		b = appendJSONValue(b, c.Actual)
		b = append(b, '}')
	}
	return append(b, "]}"...)
}

func (d *Result) appendNativeJSON(b []byte) []byte {
	b = append(b, `{"alignment":"lcs","equivalent":`...)
	b = strconv.AppendBool(b, d.Equivalent())
	for _, side := range []struct {
		key string
		s   *Summary
	}{{"base", &d.Base}, {"variant", &d.Variant}} {
		s := side.s
		b = append(b, `,"`...)
		b = append(b, side.key...)
		b = append(b, `":{"path":`...)
		b = appendOptQuoted(b, s.Path)
		b = append(b, `,"agent_name":`...)
		b = fileform.AppendQuoted(b, s.AgentName)
		b = append(b, `,"run_id":`...)
		b = fileform.AppendQuoted(b, s.RunID)
		b = append(b, `,"status":`...)
		b = fileform.AppendQuoted(b, string(s.Status))
		b = append(b, `,"run_status":`...)
		b = appendOptQuoted(b, string(s.RunEnd))
		b = append(b, `,"events":`...)
		b = strconv.AppendInt(b, int64(s.Events), 10)
		b = append(b, `,"steps":`...)
		b = strconv.AppendInt(b, int64(s.Steps), 10)
		b = append(b, `,"tokens":`...)
		b = strconv.AppendInt(b, s.Tokens, 10)
		b = append(b, `,"cost_usd":`...)
		b = appendFloatJSON(b, s.CostUSD)
		b = append(b, '}')
	}
	b = append(b, `,"divergence":`...)
	if dv := d.Divergence; dv == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(dv.Index), 10)
		b = append(b, `,"kind":`...)
		b = fileform.AppendQuoted(b, string(dv.Kind))
		b = append(b, `,"base_index":`...)
		b = strconv.AppendInt(b, int64(dv.BaseIndex), 10)
		b = append(b, `,"variant_index":`...)
		b = strconv.AppendInt(b, int64(dv.VariantIndex), 10)
		b = append(b, `,"base":`...)
		b = appendStepRef(b, dv.Base)
		b = append(b, `,"variant":`...)
		b = appendStepRef(b, dv.Variant)
		b = append(b, '}')
	}
	b = append(b, `,"steps":[`...)
	for i := range d.Steps {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendStepDiff(b, &d.Steps[i], true)
	}
	b = append(b, `],"state":[`...)
	for i, s := range d.State {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"key":`...)
		b = fileform.AppendQuoted(b, s.Key)
		b = append(b, `,"change":`...)
		b = fileform.AppendQuoted(b, string(s.Change))
		b = append(b, `,"bytes_delta":`...)
		b = strconv.AppendInt(b, int64(s.BytesDelta), 10)
		b = append(b, `,"before":`...)
		b = appendJSONValue(b, s.Before)
		b = append(b, `,"after":`...)
		b = appendJSONValue(b, s.After)
		b = append(b, '}')
	}
	b = append(b, `],"tokens_delta":`...)
	b = strconv.AppendInt(b, d.TokensDelta, 10)
	b = append(b, `,"cost_usd_delta":`...)
	b = appendFloatJSON(b, d.CostDelta)
	return appendCounts(b, d)
}

// ---- stepfork's human output ----

// StepforkText renders the diff as `stepfork diff` prints it: the "Stepfork Behavioral Diff" header, the two
// paths ("(in-memory trace)" when a path is empty), one block per step with
// its changes grouped by top-level field, the step counts and the result.
// Values are printed as Python's json.dumps(sort_keys=True) prints them,
// cut to 120 characters. Rich's styling is not reproduced, nor its wrapping
// of lines longer than the terminal.
func (d *Result) StepforkText() string {
	var b strings.Builder
	pathOr := func(p string) string {
		if p == "" {
			return "(in-memory trace)"
		}
		return p
	}
	b.WriteString("Stepfork Behavioral Diff\n\n")
	fmt.Fprintf(&b, "Baseline:  %s\n", clip.Inert(pathOr(d.Base.Path)))
	fmt.Fprintf(&b, "Candidate: %s\n\n", clip.Inert(pathOr(d.Variant.Path)))
	for i := range d.Steps {
		writeStepforkStep(&b, &d.Steps[i])
	}
	if d.Equivalent() {
		fmt.Fprintf(&b, "Steps: %d total (all unchanged)\n\nResult: BEHAVIOR EQUIVALENT\n", len(d.Steps))
	} else {
		fmt.Fprintf(&b, "Steps: %d total (%d changed, %d added, %d removed, %d unchanged)\n\nResult: BEHAVIOR CHANGED\n",
			len(d.Steps), d.Changed, d.Added, d.Removed, d.Unchanged)
	}
	return b.String()
}

func writeStepforkStep(b *strings.Builder, s *Step) {
	// Names and values are printed inert (clip.Inert): a name holding a
	// line break cannot forge a line of the text.
	header := string(s.Type) + ": " + clip.Inert(s.Label)
	switch s.Kind {
	case Added:
		fmt.Fprintf(b, "+ %s (added)\n", header)
		return
	case Removed:
		fmt.Fprintf(b, "- %s (removed)\n", header)
		return
	}
	b.WriteString(header + "\n")
	if len(s.Changes) == 0 {
		b.WriteString("  unchanged\n")
		return
	}
	var order []string
	groups := make(map[string][]*Change)
	for i := range s.Changes {
		c := &s.Changes[i]
		key, _, _ := strings.Cut(c.Path, ".")
		key, _, _ = strings.Cut(key, "[")
		if _, ok := groups[key]; !ok {
			order = append(order, key)
		}
		groups[key] = append(groups[key], c)
	}
	for _, f := range s.Fields {
		if _, ok := groups[f]; !ok {
			order = append(order, f)
			groups[f] = nil
		}
	}
	for _, key := range order {
		cs := groups[key]
		if len(cs) == 0 {
			fmt.Fprintf(b, "  %s: unchanged\n", clip.Inert(key))
			continue
		}
		fmt.Fprintf(b, "  %s:\n", clip.Inert(key))
		for _, c := range cs {
			fmt.Fprintf(b, "    expected: %s\n", clip.Inert(pythonShort(c.Expected)))
			fmt.Fprintf(b, "    actual:   %s\n", clip.Inert(pythonShort(c.Actual)))
			if c.Path != key {
				fmt.Fprintf(b, "    at:       %s\n", clip.Inert(c.Path))
			}
		}
	}
}

// pythonShort is stepfork's _short: "(absent)" for a missing or null value,
// else json.dumps(redacted, ensure_ascii=False, sort_keys=True) cut to 120
// characters with "…".
func pythonShort(v trace.Value) string {
	if v.IsAbsent() || v.IsNull() {
		return "(absent)"
	}
	r, _ := trace.RedactValue(v)
	return clip.Head(pythonDumps(r), 119)
}

// pythonDumps prints a canonical value with json.dumps' default separators
// ", " and ": " (canonical JSON is otherwise what json.dumps prints).
func pythonDumps(v trace.Value) string {
	s := v.Canonical()
	if !strings.ContainsAny(s, ",:") {
		return s
	}
	out := make([]byte, 0, len(s)+len(s)/8)
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"': // copy the string as it is: its commas and colons are text
			end := i + 1
			for s[end] != '"' {
				if s[end] == '\\' {
					end++
				}
				end++
			}
			out = append(out, s[i:end+1]...)
			i = end
		case ',', ':':
			out = append(out, c, ' ')
		default:
			out = append(out, c)
		}
	}
	return string(out)
}

// ---- compact human rendering ----

// Explain limits, so that a diff of long runs stays readable.
const (
	explainPathBefore = 4   // path tokens shown before the divergence
	explainPathTokens = 12  // path tokens shown in all
	explainSteps      = 10  // differing steps detailed
	explainChanges    = 8   // field changes detailed per step
	explainValue      = 100 // characters of a changed value shown
)

// String returns Explain().
func (d *Result) String() string { return d.Explain() }

// Explain renders the diff compactly for a terminal or a test failure:
//
//	behavior changed: 3 changed, 1 added, 0 removed, 1 unchanged (5 steps, LCS)
//	  status    failed          was completed
//	  diverged  steps 1–2: tool 'search' changed: output.price 320 → 450
//	  path      ~tool:search → tool:book → ~state:draft → +error:Timeout → ~run
//	            ^ diverged here
//	  ~ #0      tool search (base #0 evt_a_002 steps 1–2, variant #0 evt_b_002 steps 1–2)
//	              output.price
//	                expected: 320
//	                actual:   450
//	  ~ #2      state draft (base #2 evt_a_006 step 5, variant #2 evt_b_006 step 5)
//	              after
//	                expected: "hi"
//	                actual:   "hi!"
//	  + #3      error Timeout (variant #3 evt_b_007 step 6)
//	  ~ #4      run run (base #3 evt_a_007 step 6, variant #4 evt_b_008 step 7)
//	              run_status
//	                expected: "completed"
//	                actual:   "failed"
//	  state     ~draft (+1B)
//	  tokens    +412 (1200 → 1612)
//	  cost      +$0.0021 ($0.01 → $0.0121)
//
// The status line shows the variant's terminal status (run_end, else the
// manifest's) and the base's when they differ; the diverged line is the
// first divergence ([Divergence.String]). Steps are named by the step
// numbers of their events: "steps 1–2" for a call made at step 1 and
// answered at step 2. Path tokens are type:label,
// marked ~ when changed, - when only in the base, + when only in the
// variant, base→variant when the type or label changed; long paths show a
// window around the divergence. Then up to 10 differing steps with up to 8
// field changes each (expected = base, actual = variant; a value longer
// than 100 characters is cut on both sides to the same window around the
// first character where the two differ, so a sentence appended to a long
// prompt shows as the sentence, not as two identical beginnings), the state deltas
// (~ changed, + added, - removed, with the size change), and the token and
// cost deltas when either run used any. The ids providers minted in the
// runs ([Summary.Minted]) show as placeholders numbered by kind
// (<call-1>, <response-1>), as in goldens: they change on every call of
// the same behavior.
func (d *Result) Explain() string {
	var b strings.Builder
	mode := "LCS"
	if d.Positional {
		mode = "positional"
	}
	switch {
	case d.Equivalent():
		fmt.Fprintf(&b, "behavior equivalent: %d steps unchanged (%s)\n", len(d.Steps), mode)
	case d.BehaviorChange() == nil:
		what := "changed only where intended"
		if d.Intended == 0 {
			what = "equivalent through user matchers"
		}
		fmt.Fprintf(&b, "behavior %s: %d intended, %d matched, %d unchanged (%d steps, %s)\n",
			what, d.Intended, d.Matched, d.Unchanged, len(d.Steps), mode)
	default:
		fmt.Fprintf(&b, "behavior changed: %d changed, %d added, %d removed, %d unchanged (%d steps, %s)\n",
			d.Changed, d.Added, d.Removed, d.Unchanged, len(d.Steps), mode)
	}
	bt, vt := d.Base.Terminal(), d.Variant.Terminal()
	if bt == vt {
		fmt.Fprintf(&b, "  status    %s\n", vt)
	} else {
		fmt.Fprintf(&b, "  status    %s          was %s\n", vt, bt)
	}
	m := d.masker()
	if d.Divergence != nil {
		dv := *d.Divergence
		dv.Changes = m.changes(dv.Changes)
		fmt.Fprintf(&b, "  diverged  %s\n", clip.Inert(dv.String()))
	}
	d.writePath(&b)
	shown := 0
	for i := range d.Steps {
		s := &d.Steps[i]
		if s.Kind == Unchanged {
			continue
		}
		if shown == explainSteps {
			fmt.Fprintf(&b, "  … and %d more differing steps\n", d.Changed+d.Added+d.Removed-shown)
			break
		}
		shown++
		writeExplainStep(&b, s, m)
	}
	if len(d.State) > 0 {
		parts := make([]string, len(d.State))
		for i, s := range d.State {
			mark := map[Kind]string{Added: "+", Removed: "-", Changed: "~"}[s.Change]
			parts[i] = mark + clip.Inert(s.Key)
			if s.BytesDelta != 0 {
				parts[i] += fmt.Sprintf(" (%+dB)", s.BytesDelta)
			}
		}
		fmt.Fprintf(&b, "  state     %s\n", strings.Join(parts, "  "))
	}
	if d.Base.Tokens != 0 || d.Variant.Tokens != 0 {
		fmt.Fprintf(&b, "  tokens    %+d (%d → %d)\n", d.TokensDelta, d.Base.Tokens, d.Variant.Tokens)
	}
	if d.Base.CostUSD != 0 || d.Variant.CostUSD != 0 {
		fmt.Fprintf(&b, "  cost      %s (%s → %s)\n", usd.Delta(usd.Round(d.Variant.CostUSD)-usd.Round(d.Base.CostUSD)),
			usd.Format(d.Base.CostUSD), usd.Format(d.Variant.CostUSD))
	}
	return b.String()
}

func stepToken(s *Step) string {
	name := func(t trace.StepType, label string) string {
		if t == trace.StepRun {
			return "run"
		}
		return string(t) + ":" + clip.Inert(label)
	}
	switch s.Kind {
	case Added:
		return "+" + name(s.Type, s.Label)
	case Removed:
		return "-" + name(s.Type, s.Label)
	case Changed:
		if s.Base.Type != s.Variant.Type || s.Base.Label != s.Variant.Label {
			return name(s.Base.Type, s.Base.Label) + "→" + name(s.Variant.Type, s.Variant.Label)
		}
		return "~" + name(s.Type, s.Label)
	}
	return name(s.Type, s.Label)
}

func (d *Result) writePath(b *strings.Builder) {
	if len(d.Steps) == 0 {
		b.WriteString("  path      (no steps)\n")
		return
	}
	div := -1
	if d.Divergence != nil {
		div = d.Divergence.Index
	}
	start := 0
	if div > explainPathBefore {
		start = div - explainPathBefore
	}
	end := min(len(d.Steps), start+explainPathTokens)
	var tokens []string
	if start > 0 {
		tokens = append(tokens, "…")
	}
	caret := -1
	for i := start; i < end; i++ {
		if i == div {
			caret = len(tokens)
		}
		tokens = append(tokens, stepToken(&d.Steps[i]))
	}
	if end < len(d.Steps) {
		tokens = append(tokens, "…")
	}
	fmt.Fprintf(b, "  path      %s\n", strings.Join(tokens, " → "))
	if caret >= 0 {
		pad := utf8.RuneCountInString(strings.Join(tokens[:caret], " → "))
		if pad > 0 {
			pad += 3
		}
		fmt.Fprintf(b, "%s%s^ diverged here\n", strings.Repeat(" ", 12), strings.Repeat(" ", pad))
	}
}

func sideRef(name string, s *trace.BehaviorStep) string {
	return fmt.Sprintf("%s #%d %s %s", name, s.Index, clip.Inert(s.EventID), clip.Inert(s.Where()))
}

func writeExplainStep(b *strings.Builder, s *Step, m *masker) {
	mark := map[Kind]string{Added: "+", Removed: "-", Changed: "~"}[s.Kind]
	var refs []string
	if s.Base != nil {
		refs = append(refs, sideRef("base", s.Base))
	}
	if s.Variant != nil {
		refs = append(refs, sideRef("variant", s.Variant))
	}
	why := ""
	switch {
	case s.Intended != "":
		why = " — intended: " + clip.Inert(s.Intended)
	case s.MatchedBy != "":
		why = " — matched by " + clip.Inert(s.MatchedBy)
	}
	fmt.Fprintf(b, "  %s %-8s%s %s (%s)%s\n", mark, "#"+strconv.Itoa(s.Index), s.Type, clip.Inert(s.Label), strings.Join(refs, ", "), why)
	for i := range s.Changes {
		if i == explainChanges {
			fmt.Fprintf(b, "              … and %d more changes\n", len(s.Changes)-i)
			break
		}
		c := &s.Changes[i]
		expected, actual := clip.Diff(m.text(explainValueText(c.Expected)), m.text(explainValueText(c.Actual)), explainValue)
		fmt.Fprintf(b, "              %s\n", clip.Inert(c.Path))
		fmt.Fprintf(b, "                expected: %s\n", clip.Inert(expected))
		fmt.Fprintf(b, "                actual:   %s\n", clip.Inert(actual))
	}
}

func explainValueText(v trace.Value) string {
	if v.IsAbsent() {
		return "(absent)"
	}
	return v.Canonical()
}

// masker shows the ids providers minted in the two runs (Summary.Minted)
// as placeholders, numbered by kind in order of first appearance in one
// rendering, before values are cut.
type masker struct {
	ids map[string]string
	ph  volatile.Numbering
}

func (d *Result) masker() *masker {
	m := &masker{}
	for _, ids := range []map[string]string{d.Base.Minted, d.Variant.Minted} {
		for id, kind := range ids {
			if m.ids == nil {
				m.ids = map[string]string{}
			}
			m.ids[id] = kind
		}
	}
	return m
}

// text is s with the minted ids replaced.
func (m *masker) text(s string) string { return m.ph.Minted(s, m.ids) }

// changes are cs with the minted ids in their values replaced (a copy when
// any is).
func (m *masker) changes(cs []Change) []Change {
	if len(m.ids) == 0 {
		return cs
	}
	out := slices.Clone(cs)
	for i := range out {
		out[i].Expected, out[i].Actual = m.value(out[i].Expected), m.value(out[i].Actual)
	}
	return out
}

// value is v with the minted ids in its strings replaced (placeholders
// keep JSON valid: they stand inside strings).
func (m *masker) value(v trace.Value) trace.Value {
	if v.IsAbsent() {
		return v
	}
	s := v.Canonical()
	if r := m.text(s); r != s {
		if out, err := trace.ParseValue([]byte(r)); err == nil {
			return out
		}
	}
	return v
}
