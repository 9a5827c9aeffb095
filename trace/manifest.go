package trace

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Format and SchemaVersion are the only values of manifest.json's format and
// schema_version (and of the schema_version of redactions.json and
// integrity.json) that stepfork v0.1 accepts.
const (
	Format        = "stepfork"
	SchemaVersion = "0.1"
)

// errInvalidManifest marks a manifest.json that is JSON but not a valid
// manifest.
var errInvalidManifest = errors.New("invalid manifest")

// Manifest is manifest.json: who ran, when, how it ended, and totals.
type Manifest struct {
	RunID       string
	AgentName   string
	CreatedAt   time.Time
	Status      RunStatus
	Failure     *Failure // required iff Status is RunFailed
	Environment Environment
	Totals      Totals
}

// Failure describes why a failed run failed: the type and message of the
// run-level error and its step.
type Failure struct {
	Type    string
	Message string
	Step    int
}

// Environment records where a run was recorded. Every field may be null.
type Environment struct {
	Python          *string
	OS              *string
	StepforkVersion *string
}

// Totals are the counters of a run. Save recomputes Events, LLMCalls and
// ToolCalls from the events; CostUSD and DurationMS are kept as set.
type Totals struct {
	Events     int
	LLMCalls   int
	ToolCalls  int
	CostUSD    *float64
	DurationMS *int64
}

// check enforces the manifest model's rules.
func (m *Manifest) check() error {
	if m.RunID == "" {
		return fmt.Errorf("run_id must be a non-empty string")
	}
	if m.AgentName == "" {
		return fmt.Errorf("agent_name must be a non-empty string")
	}
	if m.CreatedAt.IsZero() {
		return fmt.Errorf("created_at is required")
	}
	if !m.Status.Valid() {
		return fmt.Errorf("status %q is not one of running, completed, failed", m.Status)
	}
	if m.Status == RunFailed && m.Failure == nil {
		return fmt.Errorf("failure is required when status is failed")
	}
	if m.Status != RunFailed && m.Failure != nil {
		return fmt.Errorf("failure must be omitted unless status is failed")
	}
	if f := m.Failure; f != nil {
		if f.Type == "" || f.Message == "" {
			return fmt.Errorf("failure.type and failure.message must be non-empty strings")
		}
		if f.Step < 0 {
			return fmt.Errorf("failure.step must be >= 0")
		}
	}
	t := m.Totals
	if t.Events < 0 || t.LLMCalls < 0 || t.ToolCalls < 0 || (t.CostUSD != nil && *t.CostUSD < 0) || (t.DurationMS != nil && *t.DurationMS < 0) {
		return fmt.Errorf("totals must not be negative")
	}
	return nil
}

// parseManifest parses manifest.json. name prefixes the messages
// ("<path>: unsupported schema version '9.9'").
func parseManifest(name string, data []byte) (Manifest, error) {
	var m Manifest
	v, err := ParseValue(data)
	if err != nil {
		return m, fmt.Errorf("%s: invalid JSON: %w", name, err)
	}
	if v.Kind() != Object {
		return m, fmt.Errorf("%s: %w: expected object, got %s", name, errInvalidManifest, v.Kind())
	}
	if sv := v.Get("schema_version"); sv.Canonical() != `"0.1"` {
		return m, fmt.Errorf("%s: unsupported schema version %s", name, pyRepr(sv))
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", name, errInvalidManifest, fmt.Sprintf(format, args...))
	}
	seen := map[string]bool{}
	for k, f := range v.Members() {
		seen[k] = true
		switch k {
		case "format":
			if f.Canonical() != `"stepfork"` {
				return m, bad("format must be 'stepfork'")
			}
		case "schema_version":
		case "run_id":
			if m.RunID, err = strField(f, k); err != nil {
				return m, bad("%v", err)
			}
		case "agent_name":
			if m.AgentName, err = strField(f, k); err != nil {
				return m, bad("%v", err)
			}
		case "created_at":
			s, err := strField(f, k)
			if err != nil {
				return m, bad("%v", err)
			}
			if m.CreatedAt, err = parseTimestamp(k, s); err != nil {
				// parseTimestamp's errors wrap errInvalidEvent; keep only the detail.
				return m, bad("%s", strings.TrimPrefix(err.Error(), errInvalidEvent.Error()+": "))
			}
		case "status":
			s, err := strField(f, k)
			if err != nil {
				return m, bad("%v", err)
			}
			m.Status = RunStatus(s)
		case "failure":
			if f.IsNull() {
				continue
			}
			fl, err := parseFailure(f)
			if err != nil {
				return m, bad("%v", err)
			}
			m.Failure = fl
		case "environment":
			if m.Environment, err = parseEnvironment(f); err != nil {
				return m, bad("%v", err)
			}
		case "totals":
			if m.Totals, err = parseTotals(f); err != nil {
				return m, bad("%v", err)
			}
		default:
			return m, bad("unknown field %q", k)
		}
	}
	for _, k := range []string{"run_id", "agent_name", "created_at"} {
		if !seen[k] {
			return m, bad("%s is required", k)
		}
	}
	if !seen["status"] {
		m.Status = RunRunning
	}
	if err := m.check(); err != nil {
		return m, bad("%v", err)
	}
	return m, nil
}

// pyRepr renders a JSON scalar the way Python's repr would show it in the
// reference's messages: strings in single quotes, None for absent or null.
func pyRepr(v Value) string {
	if v.IsAbsent() || v.IsNull() {
		return "None"
	}
	if s, ok := v.Str(); ok {
		return "'" + s + "'"
	}
	return v.Canonical()
}

func strField(v Value, name string) (string, error) {
	s, ok := v.Str()
	if !ok || s == "" {
		return "", fmt.Errorf("%s must be a non-empty string", name)
	}
	return s, nil
}

func intField(v Value, name string) (int64, error) {
	i, ok := v.Int()
	if !ok {
		return 0, fmt.Errorf("%s must be an integer", name)
	}
	if i < 0 {
		return 0, fmt.Errorf("%s must be >= 0", name)
	}
	return i, nil
}

func parseFailure(v Value) (*Failure, error) {
	if v.Kind() != Object {
		return nil, fmt.Errorf("failure must be an object or null")
	}
	var f Failure
	seen := map[string]bool{}
	for k, x := range v.Members() {
		seen[k] = true
		var err error
		switch k {
		case "type":
			f.Type, err = strField(x, "failure.type")
		case "message":
			f.Message, err = strField(x, "failure.message")
		case "step":
			var i int64
			i, err = intField(x, "failure.step")
			f.Step = int(i)
		default:
			err = fmt.Errorf("unknown field failure.%s", k)
		}
		if err != nil {
			return nil, err
		}
	}
	if !seen["type"] || !seen["message"] || !seen["step"] {
		return nil, fmt.Errorf("failure requires type, message and step")
	}
	return &f, nil
}

func parseEnvironment(v Value) (Environment, error) {
	var e Environment
	if v.Kind() != Object {
		return e, fmt.Errorf("environment must be an object")
	}
	for k, x := range v.Members() {
		var p *string
		if !x.IsNull() {
			s, ok := x.Str()
			if !ok {
				return e, fmt.Errorf("environment.%s must be a string or null", k)
			}
			p = &s
		}
		switch k {
		case "python":
			e.Python = p
		case "os":
			e.OS = p
		case "stepfork_version":
			e.StepforkVersion = p
		default:
			return e, fmt.Errorf("unknown field environment.%s", k)
		}
	}
	return e, nil
}

func parseTotals(v Value) (Totals, error) {
	var t Totals
	if v.Kind() != Object {
		return t, fmt.Errorf("totals must be an object")
	}
	for k, x := range v.Members() {
		switch k {
		case "events", "llm_calls", "tool_calls":
			i, err := intField(x, "totals."+k)
			if err != nil {
				return t, err
			}
			switch k {
			case "events":
				t.Events = int(i)
			case "llm_calls":
				t.LLMCalls = int(i)
			default:
				t.ToolCalls = int(i)
			}
		case "cost_usd":
			if x.IsNull() {
				continue
			}
			f, ok := x.Float()
			if !ok || f < 0 {
				return t, fmt.Errorf("totals.cost_usd must be a non-negative number or null")
			}
			t.CostUSD = &f
		case "duration_ms":
			if x.IsNull() {
				continue
			}
			i, err := intField(x, "totals.duration_ms")
			if err != nil {
				return t, err
			}
			t.DurationMS = &i
		default:
			return t, fmt.Errorf("unknown field totals.%s", k)
		}
	}
	return t, nil
}

// appendManifest appends manifest.json as Pydantic's model_dump_json(indent=2)
// writes it, with the trailing newline.
func appendManifest(dst []byte, m *Manifest) []byte {
	dst = append(dst, "{\n  \"format\": \"stepfork\",\n  \"schema_version\": \"0.1\",\n  \"run_id\": "...)
	dst = appendQuoted(dst, m.RunID)
	dst = append(dst, ",\n  \"agent_name\": "...)
	dst = appendQuoted(dst, m.AgentName)
	dst = append(dst, ",\n  \"created_at\": \""...)
	dst = appendTimestamp(dst, m.CreatedAt)
	dst = append(dst, "\",\n  \"status\": "...)
	dst = appendQuoted(dst, string(m.Status))
	dst = append(dst, ",\n  \"failure\": "...)
	if f := m.Failure; f != nil {
		dst = append(dst, "{\n    \"type\": "...)
		dst = appendQuoted(dst, f.Type)
		dst = append(dst, ",\n    \"message\": "...)
		dst = appendQuoted(dst, f.Message)
		dst = append(dst, ",\n    \"step\": "...)
		dst = strconv.AppendInt(dst, int64(f.Step), 10)
		dst = append(dst, "\n  }"...)
	} else {
		dst = append(dst, "null"...)
	}
	e := m.Environment
	dst = append(dst, ",\n  \"environment\": {\n    \"python\": "...)
	dst = appendOptString(dst, e.Python)
	dst = append(dst, ",\n    \"os\": "...)
	dst = appendOptString(dst, e.OS)
	dst = append(dst, ",\n    \"stepfork_version\": "...)
	dst = appendOptString(dst, e.StepforkVersion)
	t := m.Totals
	dst = append(dst, "\n  },\n  \"totals\": {\n    \"events\": "...)
	dst = strconv.AppendInt(dst, int64(t.Events), 10)
	dst = append(dst, ",\n    \"llm_calls\": "...)
	dst = strconv.AppendInt(dst, int64(t.LLMCalls), 10)
	dst = append(dst, ",\n    \"tool_calls\": "...)
	dst = strconv.AppendInt(dst, int64(t.ToolCalls), 10)
	dst = append(dst, ",\n    \"cost_usd\": "...)
	dst = appendNullableFloat(dst, t.CostUSD)
	dst = append(dst, ",\n    \"duration_ms\": "...)
	dst = appendNullableInt(dst, t.DurationMS)
	return append(dst, "\n  }\n}\n"...)
}

func appendOptString(dst []byte, p *string) []byte {
	if p == nil {
		return append(dst, "null"...)
	}
	return appendQuoted(dst, *p)
}
