package replay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// Mode says how a replay session answers the calls the agent makes. The
// values are stepfork's replay modes.
type Mode string

// Replay modes (stepfork-format.md §5.2).
const (
	// ModeFrozen serves every recorded result; no tool or model body runs.
	// It is the default.
	ModeFrozen Mode = "frozen"
	// ModeHybrid runs the models named with LiveModels live (their input may
	// differ from the recording) and serves everything else strictly.
	ModeHybrid Mode = "hybrid"
	// ModeLive matches every call and then runs it: models always, tools
	// only when named with AllowLiveTools (any other tool is refused before
	// its body runs).
	ModeLive Mode = "live"
	// ModeForbidden refuses every dependency call.
	ModeForbidden Mode = "forbidden"
	// ModeManual refuses every dependency call: it would need an approval
	// mechanism that stepfork v0.1 does not have.
	ModeManual Mode = "manual"
	// ModeDerived is not supported in stepfork v0.1 and refuses every call.
	ModeDerived Mode = "derived"
)

// ParseMode returns the Mode named s, or an error in stepfork's words
// ("'banana' is not a valid ReplayPolicy").
func ParseMode(s string) (Mode, error) {
	m := Mode(s)
	if !m.valid() {
		return "", optionErrf("'%s' is not a valid ReplayPolicy", s)
	}
	return m, nil
}

func (m Mode) valid() bool {
	switch m {
	case ModeFrozen, ModeHybrid, ModeLive, ModeForbidden, ModeManual, ModeDerived:
		return true
	}
	return false
}

// Option configures Record or Replay.
type Option func(*config)

type config struct {
	mode          Mode
	modeSet       bool
	liveModels    []string
	liveModelsSet bool
	liveTools     []string
	liveToolsSet  bool
	concurrent    bool
	director      Director
	prepared      *Prepared
	save          bool
	savePath      string
	saveOpts      []trace.SaveOption
}

// WithMode sets the replay mode (default ModeFrozen). Replay only.
func WithMode(m Mode) Option { return func(c *config) { c.mode, c.modeSet = m, true } }

// LiveModels names the models that run live in ModeHybrid, by label:
// "provider/model", or the model alone when the call has no provider. Each
// label must occur in the trace. Replay only, and only with ModeHybrid.
func LiveModels(labels ...string) Option {
	return func(c *config) { c.liveModels, c.liveModelsSet = append(c.liveModels, labels...), true }
}

// AllowLiveTools names the tools that may run live in ModeLive. Each must
// occur in the trace. Replay only, and only with ModeLive.
func AllowLiveTools(names ...string) Option {
	return func(c *config) { c.liveTools, c.liveToolsSet = append(c.liveTools, names...), true }
}

// Concurrent switches matching from stepfork's strict cursor to an
// order-insensitive match for agents that make calls from several goroutines:
// a call is matched with the earliest pending recorded call of the same kind,
// name (or provider and model) and input fingerprint made under the same
// parent (the same tool call, model call, node or the run itself). Calls with
// equal inputs are served in recorded order. Replay only.
func Concurrent() Option { return func(c *config) { c.concurrent = true } }

// WithDirector lets d decide what the session does with every intercepted
// call (see Director). The fork package uses it. Replay only.
func WithDirector(d Director) Option { return func(c *config) { c.director = d } }

// SaveTo saves the session's trace when the run ends, to path, or, when path
// is "", to .stepfork/traces/<agent>-<run_id>.sftrace as stepfork's recorder
// does (agent = the agent name with every run of characters outside
// [A-Za-z0-9._-] replaced by '-'). opts are passed to trace.Save
// (trace.Overwrite, for instance). The trace is saved even when the agent
// fails or panics; a save failure is joined to the agent's error, after it.
func SaveTo(path string, opts ...trace.SaveOption) Option {
	return func(c *config) { c.save, c.savePath, c.saveOpts = true, path, opts }
}

func newConfig(opts []Option) config {
	c := config{mode: ModeFrozen}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// checkRecord refuses options that only make sense for a replay.
func (c *config) checkRecord() error {
	var bad []string
	if c.modeSet {
		bad = append(bad, "WithMode")
	}
	if c.liveModelsSet {
		bad = append(bad, "LiveModels")
	}
	if c.liveToolsSet {
		bad = append(bad, "AllowLiveTools")
	}
	if c.concurrent {
		bad = append(bad, "Concurrent")
	}
	if c.director != nil {
		bad = append(bad, "WithDirector")
	}
	if c.prepared != nil {
		bad = append(bad, "WithPrepared")
	}
	if len(bad) > 0 {
		return optionErrf("replay.Record: %s only apply to Replay", strings.Join(bad, ", "))
	}
	return nil
}

// checkReplay applies stepfork's construction rules (§5.2) against the
// trace p was prepared from.
func (c *config) checkReplay(p *Prepared) error {
	if !c.mode.valid() {
		return optionErrf("'%s' is not a valid ReplayPolicy", c.mode)
	}
	if c.mode == ModeHybrid && !c.liveModelsSet {
		return optionErrf("hybrid replay requires explicit live_llms")
	}
	if c.liveModelsSet && c.mode != ModeHybrid {
		return optionErrf("live_llms is only valid with mode='hybrid'")
	}
	if slices.Contains(c.liveModels, "") {
		return optionErrf("live_llms must contain non-empty provider/model labels")
	}
	if c.liveToolsSet && c.mode != ModeLive {
		return optionErrf("allow_live_tools is only valid with mode='live'")
	}
	if slices.Contains(c.liveTools, "") {
		return optionErrf("allow_live_tools must contain non-empty tool names")
	}
	tools, models := p.tools, p.models
	if missing := notIn(c.liveTools, tools); len(missing) > 0 {
		return optionErrf("allow_live_tools not found in trace: %s", pyList(missing))
	}
	if missing := notIn(c.liveModels, models); len(missing) > 0 {
		return optionErrf("live_llms not found in trace: %s", pyList(missing))
	}
	return nil
}

func notIn(names []string, have map[string]bool) []string {
	var out []string
	for _, n := range names {
		if !have[n] && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// pyList prints names the way Python prints a sorted list of strings.
func pyList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// pyStr prints an optional string the way Python's repr does: 'x' or None.
func pyStr(s string) string {
	if s == "" {
		return "None"
	}
	return fmt.Sprintf("'%s'", s)
}
