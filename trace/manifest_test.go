package trace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// manifestJSON is a valid manifest.json with every field set.
const manifestJSON = `{
  "format": "stepfork",
  "schema_version": "0.1",
  "run_id": "run_m",
  "agent_name": "agent",
  "created_at": "2026-10-08T10:00:00.123456Z",
  "status": "completed",
  "failure": null,
  "environment": {
    "python": "3.13",
    "os": "linux",
    "stepfork_version": "0.1.0a6"
  },
  "totals": {
    "events": 4,
    "llm_calls": 1,
    "tool_calls": 1,
    "cost_usd": 0.25,
    "duration_ms": 123
  }
}
`

func TestParseManifest(t *testing.T) {
	t.Parallel()
	m, err := parseManifest("manifest.json", []byte(manifestJSON))
	if err != nil {
		t.Fatal(err)
	}
	py, osName, sv := "3.13", "linux", "0.1.0a6"
	cost, dur := 0.25, int64(123)
	want := Manifest{RunID: "run_m", AgentName: "agent", CreatedAt: time.Date(2026, 10, 8, 10, 0, 0, 123456000, time.UTC),
		Status: RunCompleted, Environment: Environment{&py, &osName, &sv},
		Totals: Totals{Events: 4, LLMCalls: 1, ToolCalls: 1, CostUSD: &cost, DurationMS: &dur}}
	if !m.CreatedAt.Equal(want.CreatedAt) {
		t.Errorf("created_at = %v", m.CreatedAt)
	}
	m.CreatedAt = want.CreatedAt
	if !reflect.DeepEqual(m, want) {
		t.Errorf("parseManifest =\n%+v\nwant\n%+v", m, want)
	}
	if got := string(appendManifest(nil, &m)); got != manifestJSON {
		t.Errorf("appendManifest =\n%s\nwant\n%s", got, manifestJSON)
	}
}

// TestManifestDefaults ports the defaults of test_manifest.py: status
// running, totals zero, format and schema_version always written.
func TestManifestDefaults(t *testing.T) {
	t.Parallel()
	minimal := `{"schema_version":"0.1","run_id":"r","agent_name":"a","created_at":"2026-01-01T00:00:00+05:45"}`
	m, err := parseManifest("manifest.json", []byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	if m.Status != RunRunning || m.Totals != (Totals{}) || m.Failure != nil || m.Environment != (Environment{}) {
		t.Errorf("defaults = %+v", m)
	}
	got := string(appendManifest(nil, &m))
	for _, s := range []string{`"format": "stepfork"`, `"schema_version": "0.1"`, `"created_at": "2026-01-01T00:00:00+05:45"`,
		`"status": "running"`, `"failure": null`, `"python": null`, `"events": 0`, `"cost_usd": null`} {
		if !strings.Contains(got, s) {
			t.Errorf("written manifest lacks %s:\n%s", s, got)
		}
	}
}

// TestManifestRules ports test_manifest.py's refusals.
func TestManifestRules(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, old, new, want string }{
		{"format other", `"format": "stepfork"`, `"format": "other"`, "invalid manifest: format must be 'stepfork'"},
		{"schema 1.0", `"schema_version": "0.1"`, `"schema_version": "1.0"`, "unsupported schema version '1.0'"},
		{"empty run_id", `"run_id": "run_m"`, `"run_id": ""`, "invalid manifest: run_id must be a non-empty string"},
		{"empty agent_name", `"agent_name": "agent"`, `"agent_name": ""`, "invalid manifest: agent_name must be a non-empty string"},
		{"naive created_at", `.123456Z"`, `.123456"`, "invalid manifest: created_at must be timezone-aware"},
		{"negative events", `"events": 4`, `"events": -1`, "invalid manifest: totals.events must be >= 0"},
		{"negative llm_calls", `"llm_calls": 1`, `"llm_calls": -1`, "invalid manifest: totals.llm_calls must be >= 0"},
		{"negative tool_calls", `"tool_calls": 1`, `"tool_calls": -1`, "invalid manifest: totals.tool_calls must be >= 0"},
		{"negative cost", `"cost_usd": 0.25`, `"cost_usd": -0.01`, "invalid manifest: totals.cost_usd must be a non-negative number or null"},
		{"negative duration", `"duration_ms": 123`, `"duration_ms": -1`, "invalid manifest: totals.duration_ms must be >= 0"},
		{"failed without failure", `"status": "completed"`, `"status": "failed"`, "invalid manifest: failure is required when status is failed"},
		{"failure without failed", `"failure": null`, `"failure": {"type": "E", "message": "m", "step": 0}`, "invalid manifest: failure must be omitted unless status is failed"},
		{"unknown key", `"status"`, `"surprise": 1, "status"`, `invalid manifest: unknown field "surprise"`},
		{"failure unknown key", `"status": "completed",
  "failure": null`, `"status": "failed",
  "failure": {"type": "E", "message": "m", "step": 0, "trace": "x"}`, "invalid manifest: unknown field failure.trace"},
		{"failure empty message", `"status": "completed",
  "failure": null`, `"status": "failed",
  "failure": {"type": "E", "message": "", "step": 0}`, "invalid manifest: failure.message must be a non-empty string"},
		{"failure without step", `"status": "completed",
  "failure": null`, `"status": "failed",
  "failure": {"type": "E", "message": "m"}`, "invalid manifest: failure requires type, message and step"},
		{"environment not an object", `"environment": {`, `"environment": 1, "x": {`, "invalid manifest: environment must be an object"},
		{"environment value a number", `"python": "3.13"`, `"python": 3.13`, "invalid manifest: environment.python must be a string or null"},
	}
	for _, tc := range cases {
		if !strings.Contains(manifestJSON, tc.old) {
			t.Fatalf("%s: %q not in manifestJSON", tc.name, tc.old)
		}
		data := strings.Replace(manifestJSON, tc.old, tc.new, 1)
		_, err := parseManifest("m/manifest.json", []byte(data))
		if err == nil || err.Error() != "m/manifest.json: "+tc.want {
			t.Errorf("%s: error = %v\nwant            m/manifest.json: %s", tc.name, err, tc.want)
		}
		if strings.HasPrefix(tc.want, "invalid manifest") && !errors.Is(err, errInvalidManifest) {
			t.Errorf("%s: error does not wrap errInvalidManifest", tc.name)
		}
	}
}

// TestManifestCheck checks the same rules on manifests built in memory,
// which Save enforces.
func TestManifestCheck(t *testing.T) {
	t.Parallel()
	ok := Manifest{RunID: "r", AgentName: "a", CreatedAt: time.Now(), Status: RunCompleted}
	if err := ok.check(); err != nil {
		t.Fatal(err)
	}
	neg, negI := -0.01, int64(-1)
	cases := []struct {
		edit func(*Manifest)
		want string
	}{
		{func(m *Manifest) { m.RunID = "" }, "run_id must be a non-empty string"},
		{func(m *Manifest) { m.AgentName = "" }, "agent_name must be a non-empty string"},
		{func(m *Manifest) { m.CreatedAt = time.Time{} }, "created_at is required"},
		{func(m *Manifest) { m.Status = "done" }, `status "done" is not one of running, completed, failed`},
		{func(m *Manifest) { m.Status = RunFailed }, "failure is required when status is failed"},
		{func(m *Manifest) { m.Failure = &Failure{Type: "E", Message: "m"} }, "failure must be omitted unless status is failed"},
		{func(m *Manifest) { m.Status, m.Failure = RunFailed, &Failure{Type: "E", Message: "m", Step: -1} }, "failure.step must be >= 0"},
		{func(m *Manifest) { m.Status, m.Failure = RunFailed, &Failure{Message: "m"} }, "failure.type and failure.message must be non-empty strings"},
		{func(m *Manifest) { m.Totals.Events = -1 }, "totals must not be negative"},
		{func(m *Manifest) { m.Totals.CostUSD = &neg }, "totals must not be negative"},
		{func(m *Manifest) { m.Totals.DurationMS = &negI }, "totals must not be negative"},
	}
	for _, tc := range cases {
		m := ok
		tc.edit(&m)
		if err := m.check(); err == nil || err.Error() != tc.want {
			t.Errorf("check() = %v, want %q", err, tc.want)
		}
	}
}

// TestManifestVectors re-encodes every shared manifest.json to its exact
// bytes.
func TestManifestVectors(t *testing.T) {
	t.Parallel()
	for _, dir := range vectorBundles(t) {
		name := filepath.Join(dir, ManifestFile)
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		m, err := parseManifest(name, data)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if got := appendManifest(nil, &m); string(got) != string(data) {
			t.Errorf("%s re-encoded differently:\n%s", name, firstDiff(data, got))
		}
	}
}
