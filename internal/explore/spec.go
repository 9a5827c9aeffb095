package explore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
)

// changeSpec is one change as the page sends it. Each kind is built by one
// constructor of package fork, and written in Go as the call of that
// constructor, so what runs and the code offered for it are the same
// change.
type changeSpec struct {
	// Kind is tool_result, llm_response, prompt, model, temperature, state,
	// decision, param or human_response.
	Kind string `json:"kind"`
	// Name is the tool or model label of an output change (fork.OnCall),
	// or the decision, parameter or approval.
	Name string `json:"name,omitempty"`
	// Occurrence is an output change's call, 1-based (0: every call of the
	// tail).
	Occurrence int  `json:"occurrence,omitempty"`
	NewInTail  bool `json:"new_in_tail,omitempty"`
	// Value is the JSON text of an output, a decision, a parameter or an
	// answer, as the person wrote it (1.0 stays a float).
	Value string `json:"value,omitempty"`
	Once  bool   `json:"once,omitempty"`
	// Target is the node, model label or "*" of a prompt, model or
	// temperature change.
	Target string `json:"target,omitempty"`
	// Op is a prompt change's edit: set (the whole prompt), append, prepend
	// or replace (a passage).
	Op          string            `json:"op,omitempty"`
	Text        string            `json:"text,omitempty"`
	Passage     string            `json:"passage,omitempty"`
	Model       string            `json:"model,omitempty"`
	Temperature *float64          `json:"temperature,omitempty"`
	Set         map[string]string `json:"set,omitempty"` // JSON texts
	Delete      []string          `json:"delete,omitempty"`
}

// built is a change ready to run, with its Go source.
type built struct {
	change fork.Change
	code   string
}

// build makes the fork change the spec describes, and its Go source.
func (s changeSpec) build() (built, error) {
	fail := func(format string, args ...any) (built, error) {
		return built{}, fmt.Errorf("%s change: %s", s.Kind, fmt.Sprintf(format, args...))
	}
	value := func() (trace.Value, error) {
		if len(s.Value) == 0 {
			return trace.Value{}, fmt.Errorf("%s change: the value is missing", s.Kind)
		}
		v, err := trace.ParseValue([]byte(s.Value))
		if err != nil {
			return trace.Value{}, fmt.Errorf("%s change: the value is not valid JSON: %v", s.Kind, err)
		}
		return v, nil
	}
	var b built
	switch s.Kind {
	case "tool_result", "llm_response":
		if s.Name == "" {
			return fail("name the call's tool or model")
		}
		if s.Occurrence < 0 {
			return fail("occurrences are 1-based (0 for every call of the tail)")
		}
		v, err := value()
		if err != nil {
			return built{}, err
		}
		target := fork.OnCall(s.Name, s.Occurrence)
		targetCode := fmt.Sprintf("fork.OnCall(%s, %d)", strconv.Quote(s.Name), s.Occurrence)
		if s.Kind == "tool_result" {
			b = built{fork.ToolResult(target, v), fmt.Sprintf("fork.ToolResult(%s, %s)", targetCode, goRedacted(v))}
		} else {
			b = built{fork.LLMResponse(target, v), fmt.Sprintf("fork.LLMResponse(%s, %s)", targetCode, goRedacted(v))}
		}
	case "prompt":
		t, q := s.Target, strconv.Quote(s.Target)
		switch s.Op {
		case "", "set":
			b = built{fork.Prompt(t, s.Text), fmt.Sprintf("fork.Prompt(%s, %s)", q, goString(s.Text))}
		case "append":
			b = built{fork.PromptAppend(t, s.Text), fmt.Sprintf("fork.PromptAppend(%s, %s)", q, goString(s.Text))}
		case "prepend":
			b = built{fork.PromptPrepend(t, s.Text), fmt.Sprintf("fork.PromptPrepend(%s, %s)", q, goString(s.Text))}
		case "replace":
			b = built{fork.PromptReplace(t, s.Passage, s.Text), fmt.Sprintf("fork.PromptReplace(%s, %s, %s)", q, goString(s.Passage), goString(s.Text))}
		default:
			return fail("op %q is not set, append, prepend or replace", s.Op)
		}
	case "model":
		b = built{fork.Model(s.Target, s.Model), fmt.Sprintf("fork.Model(%s, %s)", strconv.Quote(s.Target), strconv.Quote(s.Model))}
	case "temperature":
		if s.Temperature == nil || math.IsNaN(*s.Temperature) {
			return fail("the temperature is missing")
		}
		b = built{fork.Temperature(s.Target, *s.Temperature), fmt.Sprintf("fork.Temperature(%s, %s)", strconv.Quote(s.Target), goFloat(*s.Temperature))}
	case "state":
		st := fork.State{Delete: slices.Clone(s.Delete)}
		var sets []string
		keys := make([]string, 0, len(s.Set))
		for k := range s.Set {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			v, err := trace.ParseValue([]byte(s.Set[k]))
			if err != nil {
				return fail("the value of %q is not valid JSON: %v", k, err)
			}
			if st.Set == nil {
				st.Set = map[string]any{}
			}
			st.Set[k] = v
			sets = append(sets, fmt.Sprintf("%s: %s", strconv.Quote(k), goRedacted(v)))
		}
		var fields []string
		if len(sets) > 0 {
			fields = append(fields, "Set: map[string]any{"+strings.Join(sets, ", ")+"}")
		}
		if len(st.Delete) > 0 {
			q := make([]string, len(st.Delete))
			for i, k := range st.Delete {
				q[i] = strconv.Quote(k)
			}
			fields = append(fields, "Delete: []string{"+strings.Join(q, ", ")+"}")
		}
		b = built{st, "fork.State{" + strings.Join(fields, ", ") + "}"}
	case "decision", "param", "human_response":
		v, err := value()
		if err != nil {
			return built{}, err
		}
		q := strconv.Quote(s.Name)
		switch {
		case s.Kind == "decision" && s.Once:
			b = built{fork.DecisionOnce(s.Name, v), fmt.Sprintf("fork.DecisionOnce(%s, %s)", q, goRedacted(v))}
		case s.Kind == "decision":
			b = built{fork.Decision(s.Name, v), fmt.Sprintf("fork.Decision(%s, %s)", q, goRedacted(v))}
		case s.Kind == "param":
			b = built{fork.Param(s.Name, v), fmt.Sprintf("fork.Param(%s, %s)", q, goRedacted(v))}
		default:
			b = built{fork.HumanResponse(s.Name, v), fmt.Sprintf("fork.HumanResponse(%s, %s)", q, goRedacted(v))}
		}
	default:
		return built{}, fmt.Errorf("unknown change kind %q", s.Kind)
	}
	if s.NewInTail {
		b = built{fork.NewInTail(b.change), "fork.NewInTail(" + b.code + ")"}
	}
	return b, nil
}

// policySpec is the fork's policy as the page sends it.
type policySpec struct {
	// Allow names the tools that run live in the tail; Block blocks every
	// tool call of the tail. Neither: the guard's default (fork.Replay).
	Allow   []string `json:"allow,omitempty"`
	Block   bool     `json:"block,omitempty"`
	Memoize bool     `json:"memoize,omitempty"`
}

// build returns the options and their Go source.
func (p policySpec) build() ([]fork.RunOption, []string, error) {
	var opts []fork.RunOption
	var code []string
	switch {
	case p.Block && len(p.Allow) > 0:
		return nil, nil, fmt.Errorf("policy: block every tool call, or allow some to run live, not both")
	case p.Block:
		opts, code = append(opts, fork.Block()), append(code, "fork.Block()")
	case len(p.Allow) > 0:
		names := make([]string, len(p.Allow))
		for i, n := range p.Allow {
			if n == "" {
				return nil, nil, fmt.Errorf("policy: a tool allowed to run live has no name")
			}
			names[i] = strconv.Quote(n)
		}
		opts, code = append(opts, fork.Allow(p.Allow...)), append(code, "fork.Allow("+strings.Join(names, ", ")+")")
	}
	if p.Memoize {
		opts, code = append(opts, fork.Memoize()), append(code, "fork.Memoize()")
	}
	return opts, code, nil
}

// goRedacted is the Go source of v redacted (trace.RedactValue): a secret
// in a change runs, but never reaches the code offered for it.
func goRedacted(v trace.Value) string {
	v, _ = trace.RedactValue(v)
	return goValue(v)
}

// goValue is the Go source of a JSON value as a change's payload: a
// literal for a string, a number, a boolean or null (an integer as an int,
// a number with a fraction or an exponent as a float64, so that its
// canonical JSON is the same), trace.MustParse of its JSON otherwise.
func goValue(v trace.Value) string {
	switch v.Kind() {
	case trace.Null:
		return "nil"
	case trace.Bool, trace.Int:
		return v.Canonical()
	case trace.Float:
		f, _ := v.Float()
		return goFloat(f)
	case trace.String:
		s, _ := v.Str()
		return goString(s)
	}
	text := v.Canonical()
	if len(text) > 100 {
		var b bytes.Buffer
		if err := json.Indent(&b, v.Bytes(), "\t", "\t"); err == nil {
			text = b.String()
		}
	}
	return "trace.MustParse(" + goString(text) + ")"
}

// goFloat is a float64 literal that reads back as f and keeps a fraction
// or an exponent, so that Go does not take it for an integer.
func goFloat(f float64) string {
	s := strconv.FormatFloat(f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// goString is a Go string literal of s: a raw string when s has lines or
// quotes to escape and nothing a raw string cannot hold (a backquote, a
// carriage return, a control or unprintable character, invalid UTF-8), an
// interpreted one otherwise.
func goString(s string) string {
	if !strings.ContainsAny(s, "\n\"\\") || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, r := range s {
		if r == '`' || r == '\uFEFF' || (r != '\n' && r != '\t' && !unicode.IsPrint(r)) {
			return strconv.Quote(s)
		}
	}
	return "`" + s + "`"
}
