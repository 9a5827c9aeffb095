package assert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/internal/readlimit"
	"github.com/stepfork/stepfork/trace"
)

// Expectations are trajectory checks held as data: the declarative JSON of
// stepfork's --expect-trajectory, so that tests the
// CLI exports and tests written by hand share one format. Every field is
// optional; the zero Expectations checks nothing.
//
// In JSON the keys are
//
//	called           ["name", …]                  each tool was called (CheckToolCalled)
//	not_called       ["name", …]                  no tool was called (CheckToolNotCalled)
//	counts           {"name": n, …}               exact call counts, n ≥ 0 (CheckToolCallCount)
//	arguments        [{"name", "value", "occurrence"}, …]
//	                                              a call had these arguments; occurrence ≥ 1 is
//	                                              optional (CheckToolArguments, CheckToolArgumentsAt)
//	order            [["before", "after"], …]     call order (CheckToolOrder)
//	sequence         ["name", …]                  the tool sequence, non-empty (CheckTrajectory)
//	strict_sequence  true | false                 Strict (default) or InOrder; needs sequence
//	match            "strict" | "in_order" | "unordered" | "subset" | "superset"
//	                                              how sequence is matched; needs sequence
//	max_steps        n ≥ 0                        at most n tool and model calls (CheckMaxSteps)
//
// The "match" key is a Go extension: Python stepfork rejects it as an unknown
// key, so files that use it are for Go tests only. It cannot be combined with
// strict_sequence. No other keys are accepted, and nothing in the file is
// evaluated as code.
type Expectations struct {
	Called    []string       // tools that must have been called
	NotCalled []string       // tools that must not have been called
	Counts    map[string]int // exact call counts per tool
	Arguments []ToolArgs     // arguments some call (or one occurrence) must have had
	Order     [][2]string    // pairs: a call of [0] followed later by a call of [1]
	// Sequence is the expected tool sequence, matched under Match. A nil
	// Sequence is not checked; an empty non-nil one is invalid.
	Sequence []string
	Match    Match // how Sequence is matched; the zero value is Strict
	MaxSteps *int  // the most dependency calls allowed; nil is no limit
}

// ToolArgs expects arguments of a tool call.
type ToolArgs struct {
	Name string
	// Value is the expected arguments: anything trace.ValueOf accepts. In
	// loaded expectations it is a trace.Value.
	Value any
	// Occurrence selects the 1-based call of Name to compare; 0 compares every
	// call and passes when one matches.
	Occurrence int
}

// The keys of the declarative JSON, in the order stepfork applies them.
var expectationKeys = []string{"called", "not_called", "counts", "arguments", "order", "sequence", "strict_sequence", "match", "max_steps"}

// LoadExpectations reads declarative trajectory expectations from the JSON
// file at path. Errors wrap ErrInvalid and start with the path; a JSON syntax
// error gives its line and column (path:3:14: …), and a shape error is one of
// stepfork's messages, such as
//
//	refund.expect.json: counts must map tool names to non-negative integers
func LoadExpectations(path string) (*Expectations, error) {
	data, err := readlimit.ReadFile(path, 16<<20) // never a FIFO, never a gigabyte
	if err != nil {
		return nil, fmt.Errorf("reading trajectory expectations: %w", err)
	}
	e, err := parseExpectations(data, path)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// ParseExpectations parses declarative trajectory expectations from JSON
// text. Errors wrap ErrInvalid; shape errors are stepfork's messages
// literally, for example
//
//	unknown trajectory expectation key(s): ['__import__']
func ParseExpectations(data []byte) (*Expectations, error) {
	return parseExpectations(data, "")
}

// UnmarshalJSON parses declarative trajectory expectations, as
// ParseExpectations does.
func (e *Expectations) UnmarshalJSON(data []byte) error {
	p, err := parseExpectations(data, "")
	if err != nil {
		return err
	}
	*e = *p
	return nil
}

func parseExpectations(data []byte, file string) (*Expectations, error) {
	at := func(err error) error {
		if file == "" {
			return err
		}
		var ce *checkError
		if errors.As(err, &ce) {
			return &checkError{msg: file + ": " + ce.msg, kind: ce.kind, cause: ce.cause, step: ce.step}
		}
		return fmt.Errorf("%s: %w", file, err)
	}
	v, err := trace.ParseValue(data)
	if err != nil {
		var ce *trace.CanonicalError
		if errors.As(err, &ce) && ce.Off >= 0 {
			line, col := lineCol(data, ce.Off)
			if file == "" {
				return nil, invalidf("line %d, column %d: %s", line, col, ce.Msg)
			}
			return nil, invalidf("%s:%d:%d: %s", file, line, col, ce.Msg)
		}
		return nil, at(invalidf("trajectory expectation is not valid JSON: %v", err))
	}
	e, err := expectationsOf(v)
	if err != nil {
		return nil, at(err)
	}
	return e, nil
}

// lineCol turns a byte offset into a 1-based line and column.
func lineCol(data []byte, off int) (line, col int) {
	off = min(off, len(data))
	line = 1 + bytes.Count(data[:off], []byte("\n"))
	col = off - bytes.LastIndexByte(data[:off], '\n')
	return line, col
}

// expectationsOf checks the shape of v in stepfork's order, with stepfork's
// messages, and converts it.
func expectationsOf(v trace.Value) (*Expectations, error) {
	if v.Kind() != trace.Object {
		return nil, invalidf("trajectory expectation must be a JSON object")
	}
	var unknown []string
	for k := range v.Members() {
		if !slices.Contains(expectationKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return nil, invalidf("unknown trajectory expectation key(s): %s", reprNames(unknown))
	}
	e := &Expectations{}
	names := func(key string) ([]string, error) {
		f := v.Get(key)
		if f.IsAbsent() {
			return nil, nil
		}
		out, ok := nameList(f)
		if !ok {
			return nil, invalidf("%s must be a list of non-empty tool names", key)
		}
		return out, nil
	}
	var err error
	if e.Called, err = names("called"); err != nil {
		return nil, err
	}
	if e.NotCalled, err = names("not_called"); err != nil {
		return nil, err
	}
	if f := v.Get("counts"); !f.IsAbsent() {
		if f.Kind() != trace.Object {
			return nil, invalidf("counts must map tool names to non-negative integers")
		}
		if f.Len() > 0 { // an empty object is no counts, as an absent one
			e.Counts = make(map[string]int, f.Len())
		}
		for name, n := range f.Members() {
			c, ok := nonNegativeInt(n)
			if name == "" || !ok {
				return nil, invalidf("counts must map tool names to non-negative integers")
			}
			e.Counts[name] = c
		}
	}
	if f := v.Get("arguments"); !f.IsAbsent() {
		bad := invalidf("arguments must contain name, value and optional occurrence")
		if f.Kind() != trace.Array {
			return nil, bad
		}
		for _, item := range f.Elems() {
			if item.Kind() != trace.Object {
				return nil, bad
			}
			for k := range item.Members() {
				if k != "name" && k != "value" && k != "occurrence" {
					return nil, bad
				}
			}
			name, ok := item.Get("name").Str()
			value := item.Get("value")
			if !ok || name == "" || value.IsAbsent() {
				return nil, bad
			}
			a := ToolArgs{Name: name, Value: value}
			if occ := item.Get("occurrence"); !occ.IsAbsent() {
				n, ok := nonNegativeInt(occ)
				if !ok || n < 1 {
					return nil, bad
				}
				a.Occurrence = n
			}
			e.Arguments = append(e.Arguments, a)
		}
	}
	if f := v.Get("order"); !f.IsAbsent() {
		if f.Kind() != trace.Array {
			return nil, invalidf("order must be a list of two-name lists")
		}
		for _, pair := range f.Elems() {
			p, ok := nameList(pair)
			if !ok || len(p) != 2 {
				return nil, invalidf("order must be a list of two-name lists")
			}
			e.Order = append(e.Order, [2]string{p[0], p[1]})
		}
	}
	hasSequence := !v.Get("sequence").IsAbsent()
	if hasSequence {
		if e.Sequence, err = names("sequence"); err != nil {
			return nil, err
		}
		if e.Sequence == nil {
			e.Sequence = []string{}
		}
	}
	if f := v.Get("strict_sequence"); !f.IsAbsent() {
		strict, ok := f.BoolOf()
		if !ok || !hasSequence {
			return nil, invalidf("strict_sequence requires sequence and must be boolean")
		}
		if !strict {
			e.Match = InOrder
		}
	}
	if f := v.Get("match"); !f.IsAbsent() {
		s, _ := f.Str()
		m, ok := parseMatch(s)
		if !ok || !hasSequence {
			return nil, invalidf("match requires sequence and must be one of %s", reprNames(matchNames[:]))
		}
		if !v.Get("strict_sequence").IsAbsent() {
			return nil, invalidf("match and strict_sequence cannot be combined; use match alone")
		}
		e.Match = m
	}
	if f := v.Get("max_steps"); !f.IsAbsent() && !f.IsNull() {
		n, ok := nonNegativeInt(f)
		if !ok {
			return nil, invalidf("max_steps must be a non-negative integer")
		}
		e.MaxSteps = &n
	}
	if hasSequence && len(e.Sequence) == 0 {
		return nil, invalidf("sequence must contain at least one tool")
	}
	return e, nil
}

// nameList returns v as a list of non-empty strings.
func nameList(v trace.Value) ([]string, bool) {
	if v.Kind() != trace.Array {
		return nil, false
	}
	var out []string
	for _, e := range v.Elems() {
		s, ok := e.Str()
		if !ok || s == "" {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// nonNegativeInt returns v as a non-negative int; booleans and floats (even
// 1.0) are not integers, as in stepfork.
func nonNegativeInt(v trace.Value) (int, bool) {
	if v.Kind() != trace.Int {
		return 0, false
	}
	i, ok := v.Int()
	if !ok || i < 0 || int64(int(i)) != i {
		return 0, false
	}
	return int(i), true
}

// Validate reports the first problem with e itself, with the message the same
// problem has in the declarative JSON; the error wraps ErrInvalid.
func (e *Expectations) Validate() error {
	for _, f := range []struct {
		key   string
		names []string
	}{{"called", e.Called}, {"not_called", e.NotCalled}} {
		if slices.Contains(f.names, "") {
			return invalidf("%s must be a list of non-empty tool names", f.key)
		}
	}
	for name, n := range e.Counts {
		if name == "" || n < 0 {
			return invalidf("counts must map tool names to non-negative integers")
		}
	}
	for i, a := range e.Arguments {
		if a.Name == "" || a.Occurrence < 0 {
			return invalidf("arguments must contain name, value and optional occurrence")
		}
		if _, err := trace.ValueOf(a.Value); err != nil {
			return invalidf("arguments[%d].value is not JSON: %v", i, err)
		}
	}
	for _, p := range e.Order {
		if p[0] == "" || p[1] == "" {
			return invalidf("order must be a list of two-name lists")
		}
	}
	if slices.Contains(e.Sequence, "") {
		return invalidf("sequence must be a list of non-empty tool names")
	}
	if e.Match < Strict || e.Match > Superset || (e.Match != Strict && e.Sequence == nil) {
		return invalidf("match requires sequence and must be one of %s", reprNames(matchNames[:]))
	}
	if e.MaxSteps != nil && *e.MaxSteps < 0 {
		return invalidf("max_steps must be a non-negative integer")
	}
	if e.Sequence != nil && len(e.Sequence) == 0 {
		return invalidf("sequence must contain at least one tool")
	}
	return nil
}

// Check applies every expectation of e to run, in stepfork's order: called,
// not_called, counts (by tool name), arguments, order, sequence, max_steps.
// Unlike stepfork, which stops at the first failure, it reports them all: the
// error joins one message per failed check, each wrapping ErrMismatch, so its
// first line is the failure stepfork would report. An invalid e or a nil run
// gives an error wrapping ErrInvalid instead.
func (e *Expectations) Check(run Run) error {
	if err := e.Validate(); err != nil {
		return err
	}
	return onCalls(run, func(calls []call) error {
		var errs []error
		add := func(err error) {
			if err != nil {
				errs = append(errs, err)
			}
		}
		for _, n := range e.Called {
			add(toolCalledIn(calls, n))
		}
		for _, n := range e.NotCalled {
			add(toolNotCalledIn(calls, n))
		}
		for _, n := range slices.Sorted(maps.Keys(e.Counts)) {
			add(toolCallCountIn(calls, n, e.Counts[n]))
		}
		for _, a := range e.Arguments {
			add(toolArgumentsIn(calls, a.Name, a.Occurrence, a.Value, nil))
		}
		for _, p := range e.Order {
			add(toolOrderIn(calls, p[0], p[1]))
		}
		if e.Sequence != nil {
			add(trajectoryIn(calls, e.Sequence, e.Match))
		}
		if e.MaxSteps != nil {
			add(maxStepsIn(calls, *e.MaxSteps))
		}
		return errors.Join(errs...)
	})
}

// Expect asserts that run meets every expectation of exp; see
// Expectations.Check. All failures are reported together, one per line.
func Expect(t TestingT, run Run, exp *Expectations, msgAndArgs ...any) bool {
	if h, ok := t.(tHelper); ok {
		h.Helper()
	}
	if exp == nil {
		return report(t, invalidf("no expectations to check: got a nil *Expectations"), msgAndArgs)
	}
	return report(t, exp.Check(run), msgAndArgs)
}

// MarshalJSON writes e as declarative JSON that ParseExpectations reads back
// (and, when e uses no match mode beyond Strict and InOrder, that Python
// stepfork accepts too). Empty fields are left out; the keys come in canonical
// (sorted) order.
func (e Expectations) MarshalJSON() ([]byte, error) {
	if err := e.Validate(); err != nil {
		return nil, err
	}
	m := map[string]any{}
	if len(e.Called) > 0 {
		m["called"] = e.Called
	}
	if len(e.NotCalled) > 0 {
		m["not_called"] = e.NotCalled
	}
	if len(e.Counts) > 0 {
		m["counts"] = e.Counts
	}
	if len(e.Arguments) > 0 {
		args := make([]map[string]any, len(e.Arguments))
		for i, a := range e.Arguments {
			v, err := trace.ValueOf(a.Value)
			if err != nil {
				return nil, err
			}
			args[i] = map[string]any{"name": a.Name, "value": v}
			if a.Occurrence > 0 {
				args[i]["occurrence"] = a.Occurrence
			}
		}
		m["arguments"] = args
	}
	if len(e.Order) > 0 {
		m["order"] = e.Order
	}
	if e.Sequence != nil {
		m["sequence"] = e.Sequence
		switch e.Match {
		case Strict:
		case InOrder:
			m["strict_sequence"] = false
		default:
			m["match"] = e.Match.String()
		}
	}
	if e.MaxSteps != nil {
		m["max_steps"] = *e.MaxSteps
	}
	return json.Marshal(m)
}

// String returns e as its declarative JSON, or the reason it has none.
func (e Expectations) String() string {
	b, err := e.MarshalJSON()
	if err != nil {
		return "invalid expectations: " + err.Error()
	}
	return strings.TrimSpace(string(b))
}
