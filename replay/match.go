package replay

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/stepfork/stepfork/internal/valuepath"
	"github.com/stepfork/stepfork/trace"
)

// A Matcher tells a replay when a live call matches a recorded one although
// their inputs differ: the current time in a prompt, a request id in a tool
// input, a list whose order does not matter. It is either a normaliser,
// applied to both inputs before they are compared ([Normalize],
// [IgnoreFields], [IgnoreTimestamps], [SortList], as httprr scrubs
// requests), or a function that compares them ([MatchFunc], as go-vcr's
// MatcherFunc does). A Matcher applies to every tool and model call unless
// [Matcher.Tool] or [Matcher.Model] narrows it.
//
// Pass matchers to a replay with [Match], to a fork with fork.Match (which
// applies them to the served prefix, the side-effect guard, the memo and
// the diff, and names them in fork.json), or to a corpus with sftest.Match.
// Canonical equality is always tried first; a call that matches only
// through a matcher is served like any other, and says so
// ([CallRecord.MatchedBy]), so it is never silently equal: the new trace
// records the input the agent sent, and the run diff marks the step
// matched ([diff.Step.MatchedBy] of package trace/diff).
type Matcher struct {
	name  string
	kind  CallKind // "" for every kind
	label string   // tool name, or model label or model; "" for every call
	norm  func(trace.Value) trace.Value
	equal func(recorded, live trace.Value) bool
	err   error
}

// MatchFunc is a matcher that compares inputs itself: match reports whether
// the live input (redacted, as recorded) stands for the recorded one. name
// names it in reports and fork.json.
//
//	replay.MatchFunc("same question", func(recorded, live trace.Value) bool {
//		return recorded.Get("question") == live.Get("question")
//	}).Tool("search")
func MatchFunc(name string, match func(recorded, live trace.Value) bool) Matcher {
	m := Matcher{name: name, equal: match}
	if match == nil {
		m.err = errors.New("the function is nil")
	}
	return m
}

// Normalize is a matcher that rewrites both inputs with fn before they are
// compared; a live input matches a recorded one when their rewrites are
// canonically equal. fn must not change its argument (Values are
// immutable) and must be deterministic. name names it.
func Normalize(name string, fn func(trace.Value) trace.Value) Matcher {
	m := Matcher{name: name, norm: fn}
	if fn == nil {
		m.err = errors.New("the function is nil")
	}
	return m
}

// IgnoreFields is a normaliser that leaves the fields at paths out of both
// inputs: "system", "messages[0].content", "metadata.request_id",
// "tools[*].description" (the paths of the run diff, without its leading
// "input."; "*" is every element or member).
func IgnoreFields(paths ...string) Matcher {
	m := Matcher{name: "ignore " + strings.Join(paths, ", ")}
	if len(paths) == 0 {
		m.err = errors.New("no field is named")
		return m
	}
	ps := make([]valuepath.Path, 0, len(paths))
	for _, p := range paths {
		vp, err := valuepath.Parse(p)
		if err != nil {
			m.err = err
			return m
		}
		ps = append(ps, vp)
	}
	m.norm = func(v trace.Value) trace.Value {
		for _, p := range ps {
			v = p.Drop(v)
		}
		return v
	}
	return m
}

// timestamp matches the times people and programs write into text: RFC
// 3339 and ISO 8601 (2026-03-14T09:30:00Z, 2026-03-14 09:30:00.123+01:00,
// a date alone), Go's time.Time.String (2026-03-14 09:30:00 +0000 UTC) and
// RFC 1123 (Sat, 14 Mar 2026 09:30:00 GMT). It is compiled on first use,
// not when every program that links package replay starts.
var timestamp = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:\s?(?:Z|[+-]\d{2}:?\d{2}))?(?:\s[A-Z]{2,5}\b)?)?` +
		`|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d{2} (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} \d{2}:\d{2}:\d{2} (?:[A-Z]{2,5}|[+-]\d{4})`)
})

// TimestampPlaceholder is what [IgnoreTimestamps] writes in place of a
// time.
const TimestampPlaceholder = "<time>"

// IgnoreTimestamps is a normaliser that canonicalises the times written in
// the strings of both inputs (RFC 3339 and ISO 8601 dates and times, Go's
// time.Time.String, RFC 1123), each replaced by [TimestampPlaceholder]: in
// every string, or only in the strings at paths (see [IgnoreFields]).
// Member names are left as they are.
func IgnoreTimestamps(paths ...string) Matcher {
	m := Matcher{name: "ignore timestamps"}
	if len(paths) > 0 {
		m.name += " in " + strings.Join(paths, ", ")
	}
	ps := make([]valuepath.Path, 0, len(paths))
	for _, p := range paths {
		vp, err := valuepath.Parse(p)
		if err != nil {
			m.err = err
			return m
		}
		ps = append(ps, vp)
	}
	m.norm = func(v trace.Value) trace.Value {
		if len(ps) == 0 {
			return mapStrings(v, canonicalTimes)
		}
		for _, p := range ps {
			v = p.Apply(v, func(x trace.Value) trace.Value { return mapStrings(x, canonicalTimes) })
		}
		return v
	}
	return m
}

func canonicalTimes(s string) string {
	if !strings.ContainsAny(s, "0123456789") {
		return s
	}
	return timestamp().ReplaceAllString(s, TimestampPlaceholder)
}

// SortList is a normaliser that sorts the array at path in both inputs
// (by the canonical JSON of its elements), for a list whose order is not
// behaviour: tools offered to a model, ids looked up together.
func SortList(path string) Matcher {
	m := Matcher{name: "sort " + path}
	p, err := valuepath.Parse(path)
	if err != nil {
		m.err = err
		return m
	}
	m.norm = func(v trace.Value) trace.Value {
		return p.Apply(v, func(x trace.Value) trace.Value {
			if x.Kind() != trace.Array {
				return x
			}
			var es []trace.Value
			for _, e := range x.Elems() {
				es = append(es, e)
			}
			slices.SortStableFunc(es, func(a, b trace.Value) int { return strings.Compare(a.Canonical(), b.Canonical()) })
			out, err := trace.ArrayValue(es...)
			if err != nil {
				return x
			}
			return out
		})
	}
	return m
}

// Tool narrows m to the calls of the named tool.
func (m Matcher) Tool(name string) Matcher {
	m.kind, m.label = KindTool, name
	if name == "" && m.err == nil {
		m.err = errors.New("Tool: the tool name is empty")
	}
	return m
}

// Model narrows m to the calls of a model, named "provider/model" or by the
// model alone.
func (m Matcher) Model(label string) Matcher {
	m.kind, m.label = KindLLM, label
	if label == "" && m.err == nil {
		m.err = errors.New("Model: the model is empty")
	}
	return m
}

// String names the matcher as reports and fork.json do: "ignore
// timestamps (model 'openai/gpt-4o')", "sort ids (tool 'lookup')".
func (m Matcher) String() string {
	switch m.kind {
	case KindTool:
		return fmt.Sprintf("%s (tool '%s')", m.name, m.label)
	case KindLLM:
		return fmt.Sprintf("%s (model '%s')", m.name, m.label)
	}
	return m.name
}

// check reports a matcher that cannot work.
func (m Matcher) check() error {
	switch {
	case m.err != nil:
		return fmt.Errorf("matcher %q: %w", m.name, m.err)
	case m.name == "":
		return errors.New("a matcher has no name: name it, so that reports and fork.json can say which matcher matched")
	case m.norm == nil && m.equal == nil:
		return fmt.Errorf("matcher %q does nothing: make matchers with replay.MatchFunc, Normalize, IgnoreFields, IgnoreTimestamps or SortList", m.name)
	}
	return nil
}

// applies reports whether m applies to a call of kind with the given tool
// name, or provider and model.
func (m *Matcher) applies(kind CallKind, name, provider, model string) bool {
	switch {
	case m.kind == "":
		return true
	case m.kind != kind:
		return false
	case kind == KindTool:
		return m.label == name
	}
	return m.label == model || m.label == trace.LLMLabel(provider, model)
}

// Match makes a replay serve a recorded call to a live call whose input
// differs from it only in what the matchers accept (see [Matcher]): at the
// cursor, in concurrent groups, and for a [Director] ([Call.Match],
// [Call.Matches]). Matchers are checked before the replay starts; a
// malformed one is an error matching [ErrInvalidOptions].
func Match(ms ...Matcher) ReplayOption {
	return replayOnly(func(c *config) { c.matchers = append(c.matchers, ms...) })
}

// matchers are a session's matchers.
type matchers []Matcher

// Matched reports whether the live input of a call matches the recorded
// one through the matchers ms, as a replay with Match(ms...) decides: the
// inputs are canonically equal, or equal once every normaliser that applies
// to the call rewrote both, or a function matcher that applies accepts
// them. The call is of kind, to the tool called name or to provider and
// model. by names the matchers that made them match ("" for equal inputs).
func Matched(ms []Matcher, kind CallKind, name, provider, model string, recorded, live trace.Value) (by string, ok bool) {
	return matchers(ms).same(kind, name, provider, model, recorded, live)
}

// same reports whether the live input of a call (kind, name, provider,
// model) matches the recorded input, canonical equality first; by names the
// matchers that made them match ("" for canonical equality).
func (ms matchers) same(kind CallKind, name, provider, model string, recorded, live trace.Value) (by string, ok bool) {
	if recorded == live {
		return "", true
	}
	if len(ms) == 0 || recorded.IsAbsent() || live.IsAbsent() {
		return "", false
	}
	var names []string
	r, l := recorded, live
	for i := range ms {
		m := &ms[i]
		if m.norm == nil || !m.applies(kind, name, provider, model) {
			continue
		}
		nr, nl := m.norm(r), m.norm(l)
		if nr != r || nl != l {
			names = append(names, m.String())
		}
		r, l = nr, nl
	}
	if r == l && len(names) > 0 {
		return strings.Join(names, ", "), true
	}
	for i := range ms {
		m := &ms[i]
		if m.equal != nil && m.applies(kind, name, provider, model) && m.equal(recorded, live) {
			return m.String(), true
		}
	}
	return "", false
}

// Matches reports whether the live call c matches the recorded call r: the
// same kind and tool name (or provider and model), and inputs canonically
// equal or matched through the replay's matchers ([Match]); by names the
// matchers ("" for canonical equality). A Director uses it to check a
// recorded call it looked at (Cursor) as the replay would.
func (c *Call) Matches(r *Recorded) (by string, ok bool) {
	if r == nil || r.Kind != c.Kind {
		return "", false
	}
	if c.Kind == KindTool && r.Call.Name != c.Name || c.Kind == KindLLM && (r.Call.Provider != c.Provider || r.Call.Model != c.Model) {
		return "", false
	}
	return c.matchers.same(c.Kind, r.Call.Name, c.Provider, c.Model, inputOf(r.Call), c.Input)
}

// mapStrings applies fn to every string of v (not to member names).
func mapStrings(v trace.Value, fn func(string) string) trace.Value {
	switch v.Kind() {
	case trace.String:
		s, _ := v.Str()
		if t := fn(s); t != s {
			return trace.StringValue(t)
		}
		return v
	case trace.Array:
		var es []trace.Value
		changed := false
		for _, e := range v.Elems() {
			ne := mapStrings(e, fn)
			changed = changed || ne != e
			es = append(es, ne)
		}
		if !changed {
			return v
		}
		out, err := trace.ArrayValue(es...)
		if err != nil {
			return v
		}
		return out
	case trace.Object:
		var ms []trace.Member
		changed := false
		for k, e := range v.Members() {
			ne := mapStrings(e, fn)
			changed = changed || ne != e
			ms = append(ms, trace.Member{Key: k, Value: ne})
		}
		if !changed {
			return v
		}
		out, err := trace.ObjectValue(ms...)
		if err != nil {
			return v
		}
		return out
	}
	return v
}
