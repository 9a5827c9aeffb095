package fork

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// infoFile is the bundle file that holds a fork's provenance. Save lists it in
// integrity.json, so integrity verification covers it; Python stepfork
// ignores it.
const infoFile = "fork.json"

// infoSchemaVersion is the schema_version of the fork.json this package
// writes and the only one it reads.
const infoSchemaVersion = 1

// Kind says how a fork was made.
type Kind string

// Kinds of fork.
const (
	// KindStatic is a fork made by [Trace]: a prefix of the parent with
	// overridden outputs.
	KindStatic Kind = "static"
	// KindCounterfactual is a fork whose tail was executed again under
	// changes.
	KindCounterfactual Kind = "counterfactual"
)

// Info is the provenance of a fork: where it comes from and what was changed.
// It is stored in the fork's bundle as fork.json (see the package doc for the
// schema) and read back by ReadInfo.
type Info struct {
	Kind             Kind
	RunID            string // the fork's own run id
	ParentRunID      string
	ParentTracePath  string // "" when the parent was never saved
	ForkPoint        string // the fork point as asked: "step 5", "event evt_abc"
	ForkPointStep    int    // the step of the last event kept from the parent
	ForkPointEventID string // the id of that event
	ForkTimestamp    time.Time
	OverridesApplied int
	Overrides        []AppliedOverride // in the order of the events

	// Changes (their wire form), Policy and GroupID describe a
	// counterfactual fork; a static fork leaves them empty.
	Changes trace.Value
	// Applied says where each of Changes applied, in the same order (empty
	// in a fork.json written before it was recorded).
	Applied []ChangeUse
	Policy  string
	GroupID string
	// Memoize records that the tail's model calls were memoized (Memoize).
	Memoize bool
	// Matchers names the user matchers the fork matched calls with
	// ([Match]), as [replay.Matcher.String] names them; [Reproduce] needs
	// the same ones.
	Matchers []string

	// Ancestors is the provenance of the parent when the parent is a fork
	// itself, then of its parent, and so on: nearest first, each without
	// Ancestors of its own. Ancestors[0].RunID is ParentRunID.
	Ancestors []Info
}

// ChangeUse records a change of a counterfactual fork as it applied, as
// [ChangeReport] does: its description, how many tail calls it acted on
// (0: its target matched nothing in the tail) and the variant steps of the
// first of them.
type ChangeUse struct {
	Description string
	Count       int
	Steps       []int
}

// AppliedOverride records one override as applied.
type AppliedOverride struct {
	Target             string          // as asked: "step 5" or "event evt_abc"
	Step               int             // the event overridden
	EventID            string          //
	Type               trace.EventType // tool_result or llm_response
	Output             trace.Value     // the new output, redacted as saved
	OutputHash         string          // its payload hash
	OriginalOutputHash string          // the hash of the output it replaced
}

// Chain returns the run ids from the fork back to the original recording:
// the fork, its parent, the parent's parent, … .
func (i *Info) Chain() []string {
	ids := []string{i.RunID, i.ParentRunID}
	for _, a := range i.Ancestors {
		ids = append(ids, a.ParentRunID)
	}
	return ids
}

func (i *Info) withoutAncestors() Info {
	c := *i
	c.Ancestors = nil
	return c
}

// ReadInfo returns the provenance of a loaded trace from its fork.json, or an
// error matching ErrNotFork for an original recording. A fork.json that is
// malformed, of another schema version, or that describes another run is an
// error naming the problem.
func ReadInfo(tr *trace.Trace) (*Info, error) {
	data, ok := tr.Extras[infoFile]
	if !ok {
		return nil, ErrNotFork
	}
	info, err := parseInfo(data, tr.RunID)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", infoLocation(tr.Path), err)
	}
	return &info, nil
}

func infoLocation(bundle string) string {
	if bundle == "" {
		return infoFile
	}
	return filepath.Join(bundle, infoFile)
}

// readParentInfo reads the fork.json of the bundle r reads when its
// integrity.json lists it (as trace.Load does), or returns nil. The file is
// read through the bundle's checks (a regular file inside the bundle, within
// its size limit), like every other file of a bundle.
func readParentInfo(r *trace.Reader) ([]byte, error) {
	data, err := r.Extra(infoFile)
	if err != nil {
		return nil, &staticError{msg: fmt.Sprintf("cannot read the provenance of %s: %v", r.Path(), err), err: err}
	}
	return data, nil
}

// infoWire is fork.json.
type infoWire struct {
	SchemaVersion    int            `json:"schema_version"`
	Kind             Kind           `json:"kind"`
	RunID            string         `json:"run_id"`
	ParentRunID      string         `json:"parent_run_id"`
	ParentTracePath  *string        `json:"parent_trace_path"`
	ForkPoint        string         `json:"fork_point"`
	ForkPointStep    *int           `json:"fork_point_step"`
	ForkPointEventID string         `json:"fork_point_event_id"`
	ForkTimestamp    string         `json:"fork_timestamp"`
	OverridesApplied int            `json:"overrides_applied"`
	Overrides        []overrideWire `json:"overrides"`
	Changes          *trace.Value   `json:"changes,omitempty"`
	Applied          []useWire      `json:"applied,omitempty"`
	Policy           string         `json:"policy,omitempty"`
	GroupID          string         `json:"group_id,omitempty"`
	Memoize          bool           `json:"memoize,omitempty"`
	Matchers         []string       `json:"matchers,omitempty"`
	Ancestors        []infoWire     `json:"ancestors,omitempty"`
}

// useWire is one entry of "applied":
// {"description": "prompt of 'decide'", "count": 1, "steps": [7]}.
type useWire struct {
	Description string `json:"description"`
	Count       int    `json:"count"`
	Steps       []int  `json:"steps"`
}

type overrideWire struct {
	Target             string          `json:"target"`
	Step               int             `json:"step"`
	EventID            string          `json:"event_id"`
	Type               trace.EventType `json:"type"`
	Output             trace.Value     `json:"output"`
	OutputHash         string          `json:"output_hash"`
	OriginalOutputHash string          `json:"original_output_hash"`
}

const timestampLayout = "2006-01-02T15:04:05.999999Z07:00"

func (i *Info) wire(top bool) infoWire {
	w := infoWire{
		SchemaVersion:    infoSchemaVersion,
		Kind:             i.Kind,
		RunID:            i.RunID,
		ParentRunID:      i.ParentRunID,
		ForkPoint:        i.ForkPoint,
		ForkPointStep:    &i.ForkPointStep,
		ForkPointEventID: i.ForkPointEventID,
		ForkTimestamp:    i.ForkTimestamp.UTC().Format(timestampLayout),
		OverridesApplied: i.OverridesApplied,
		Overrides:        []overrideWire{},
		Policy:           i.Policy,
		GroupID:          i.GroupID,
		Memoize:          i.Memoize,
		Matchers:         redactAll(i.Matchers),
	}
	if i.ParentTracePath != "" {
		p, _ := trace.RedactString(i.ParentTracePath)
		w.ParentTracePath = &p
	}
	if !i.Changes.IsAbsent() {
		c, _ := trace.RedactValue(i.Changes)
		w.Changes = &c
	}
	for _, u := range i.Applied {
		d, _ := trace.RedactString(u.Description)
		w.Applied = append(w.Applied, useWire{Description: d, Count: u.Count, Steps: append([]int{}, u.Steps...)})
	}
	for _, o := range i.Overrides {
		out, _ := trace.RedactValue(o.Output)
		w.Overrides = append(w.Overrides, overrideWire{o.Target, o.Step, o.EventID, o.Type, out, o.OutputHash, o.OriginalOutputHash})
	}
	if top {
		for _, a := range i.Ancestors {
			w.Ancestors = append(w.Ancestors, a.wire(false))
		}
	}
	return w
}

// marshal encodes i as fork.json: indented JSON, keys in schema order,
// payloads redacted, ending with a newline.
func (i *Info) marshal() ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(i.wire(true)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseInfo decodes fork.json and checks it belongs to the run runID.
func parseInfo(data []byte, runID string) (Info, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w infoWire
	if err := dec.Decode(&w); err != nil {
		return Info{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if dec.More() {
		return Info{}, errors.New("invalid JSON: more than one value")
	}
	info, err := w.info("")
	if err != nil {
		return Info{}, err
	}
	if info.RunID != runID {
		return Info{}, fmt.Errorf("it describes run %s, but the trace is run %s; it was copied from another bundle", info.RunID, runID)
	}
	want := info.ParentRunID
	for n, a := range w.Ancestors {
		where := fmt.Sprintf("ancestors[%d]", n)
		if len(a.Ancestors) > 0 {
			return Info{}, fmt.Errorf("%s: an ancestor must not list ancestors of its own", where)
		}
		ai, err := a.info(where + ".")
		if err != nil {
			return Info{}, err
		}
		if ai.RunID != want {
			return Info{}, fmt.Errorf("%s is run %s, but the chain expects run %s (the parent of the entry before it)", where, ai.RunID, want)
		}
		want = ai.ParentRunID
		info.Ancestors = append(info.Ancestors, ai)
	}
	return info, nil
}

// info checks one record; prefix locates it in messages.
func (w *infoWire) info(prefix string) (Info, error) {
	if w.SchemaVersion == 0 {
		return Info{}, fmt.Errorf("%sschema_version is missing", prefix)
	}
	if w.SchemaVersion != infoSchemaVersion {
		return Info{}, fmt.Errorf("%sschema_version %d is not supported (this version of stepfork reads %d)", prefix, w.SchemaVersion, infoSchemaVersion)
	}
	switch w.Kind {
	case KindStatic, KindCounterfactual, KindHeal:
	default:
		return Info{}, fmt.Errorf("%skind %q is not one of %q, %q, %q", prefix, w.Kind, KindStatic, KindCounterfactual, KindHeal)
	}
	for _, f := range []struct{ name, v string }{{"run_id", w.RunID}, {"parent_run_id", w.ParentRunID}, {"fork_point_event_id", w.ForkPointEventID}} {
		if f.v == "" {
			return Info{}, fmt.Errorf("%s%s must be a non-empty string", prefix, f.name)
		}
	}
	if w.ForkPointStep == nil || *w.ForkPointStep < 0 {
		return Info{}, fmt.Errorf("%sfork_point_step must be an integer >= 0", prefix)
	}
	ts, err := time.Parse(time.RFC3339Nano, w.ForkTimestamp)
	if err != nil {
		return Info{}, fmt.Errorf("%sfork_timestamp %q is not an RFC 3339 time", prefix, w.ForkTimestamp)
	}
	if w.OverridesApplied != len(w.Overrides) {
		return Info{}, fmt.Errorf("%soverrides_applied is %d but %d overrides are listed", prefix, w.OverridesApplied, len(w.Overrides))
	}
	info := Info{
		Kind:             w.Kind,
		RunID:            w.RunID,
		ParentRunID:      w.ParentRunID,
		ForkPoint:        w.ForkPoint,
		ForkPointStep:    *w.ForkPointStep,
		ForkPointEventID: w.ForkPointEventID,
		ForkTimestamp:    ts.UTC(),
		OverridesApplied: w.OverridesApplied,
		Policy:           w.Policy,
		GroupID:          w.GroupID,
		Memoize:          w.Memoize,
		Matchers:         w.Matchers,
	}
	if w.ParentTracePath != nil {
		info.ParentTracePath = *w.ParentTracePath
	}
	if w.Changes != nil {
		info.Changes = *w.Changes
	}
	if len(w.Applied) > 0 && len(w.Applied) != info.Changes.Len() {
		return Info{}, fmt.Errorf("%sapplied lists %d change(s) but changes lists %d", prefix, len(w.Applied), info.Changes.Len())
	}
	for n, u := range w.Applied {
		if u.Count < 0 || len(u.Steps) > u.Count {
			return Info{}, fmt.Errorf("%sapplied[%d] says %d use(s) at %d step(s)", prefix, n, u.Count, len(u.Steps))
		}
		info.Applied = append(info.Applied, ChangeUse{Description: u.Description, Count: u.Count, Steps: u.Steps})
	}
	for n, o := range w.Overrides {
		if o.Type != trace.ToolResult && o.Type != trace.LLMResponse {
			return Info{}, fmt.Errorf("%soverrides[%d].type %q is not tool_result or llm_response", prefix, n, o.Type)
		}
		if o.EventID == "" || o.Output.IsAbsent() {
			return Info{}, fmt.Errorf("%soverrides[%d] requires event_id and output", prefix, n)
		}
		info.Overrides = append(info.Overrides, AppliedOverride(o))
	}
	return info, nil
}

// redactAll is each string redacted, nil for none.
func redactAll(ss []string) []string {
	if len(ss) == 0 {
		return nil
	}
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i], _ = trace.RedactString(s)
	}
	return out
}
