package replay

import (
	"fmt"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

// Mode says how a replay answers the calls the agent makes; [Result.Mode]
// reports it. A replay is frozen unless [Hybrid] or [Live] says otherwise.
type Mode string

// Replay modes.
const (
	// ModeFrozen serves every recorded result; no tool or model body runs.
	// It is the default.
	ModeFrozen Mode = "frozen"
	// ModeHybrid runs the models named with [Hybrid] live (their input may
	// differ from the recording) and serves everything else strictly.
	ModeHybrid Mode = "hybrid"
	// ModeLive matches every call and then runs it: models always, tools
	// only when named with [Live] (any other tool is refused before its body
	// runs).
	ModeLive Mode = "live"
)

// RecordOption configures [Record]. [SaveTo] is one.
type RecordOption interface{ applyRecord(*config) }

// ReplayOption configures [Replay] and [Prepared.Replay]: [Hybrid], [Live],
// [WithDirector], and [SaveTo].
type ReplayOption interface{ applyReplay(*config) }

// Option is an option of both [Record] and [Replay]: [SaveTo].
type Option interface {
	RecordOption
	ReplayOption
}

// replayOnly is an option that means something only to a replay.
type replayOnly func(*config)

func (o replayOnly) applyReplay(c *config) { o(c) }

// both is an option of Record and Replay alike.
type both func(*config)

func (o both) applyRecord(c *config) { o(c) }
func (o both) applyReplay(c *config) { o(c) }

type config struct {
	mode       Mode
	modeBy     string // the option that set a mode other than frozen: "Hybrid" or "Live"
	conflict   string // a second mode option, when it differs from modeBy
	liveModels []string
	liveTools  []string
	director   Director
	save       bool
	savePath   string
	saveOpts   []trace.SaveOption
	runID      string // "" draws one
	scrub      []trace.Scrubber
	strict     bool // StrictContext
	build      *trace.Build
	matchers   matchers // Match
}

// setMode records the mode an option asks for; asking for two different
// modes is an error reported by checkReplay.
func (c *config) setMode(m Mode, by string) {
	if c.modeBy != "" && c.modeBy != by && c.conflict == "" {
		c.conflict = by
	}
	if c.modeBy == "" {
		c.mode, c.modeBy = m, by
	}
}

// Hybrid makes the replay run the models named by label live and serve
// everything else strictly ([ModeHybrid]). A label is "provider/model", or
// the model alone when the call has no provider; each must occur in the
// trace, and at least one must be given. The input of a live model call
// may differ from the recording.
func Hybrid(liveModels ...string) ReplayOption {
	return replayOnly(func(c *config) {
		c.setMode(ModeHybrid, "Hybrid")
		c.liveModels = append(c.liveModels, liveModels...)
	})
}

// Live makes the replay match every call and then run it ([ModeLive]):
// models always, tools only when named in allowTools (each must occur in
// the trace); any other tool is refused with a [*PolicyError] before its
// body runs and before the cursor advances.
func Live(allowTools ...string) ReplayOption {
	return replayOnly(func(c *config) {
		c.setMode(ModeLive, "Live")
		c.liveTools = append(c.liveTools, allowTools...)
	})
}

// WithDirector lets d decide what the session does with every intercepted
// call (see [Director]). Package fork builds counterfactual runs on it.
func WithDirector(d Director) ReplayOption {
	return replayOnly(func(c *config) { c.director = d })
}

// SaveTo saves the session's trace when the run ends, to path, or, when path
// is "", to [DefaultPath]. opts are passed to [trace.Trace.Save]
// ([trace.Overwrite], for instance). The trace is saved even when the agent
// fails or panics; a save failure is the error of [Record] or [Replay].
func SaveTo(path string, opts ...trace.SaveOption) Option {
	return both(func(c *config) { c.save, c.savePath, c.saveOpts = true, path, opts })
}

// RunID names the session's run before it starts: id is the run id of the
// trace the session records, known to an [Observer] from StartRun on, so a
// sink keyed on the run can open before the run writes into it. Without it
// the session draws a fresh "run_<32 hex>".
func RunID(id string) Option { return both(func(c *config) { c.runID = id }) }

// Scrubbers are scrubbers ([trace.Scrubber]) to install on a session, as
// an option of [Record] or [Replay], on a [Transport], as one of its
// options, or on a [Sampler]: customer text that the library cannot know is
// secret (tickets, e-mail addresses, account numbers) is removed with the
// same guarantee as the built-in redaction. The session passes every
// payload and name it records, and every live value it compares with the
// recording or quotes in an error, through the credential patterns and then
// through the scrubbers, before anything is hashed, saved, printed or
// compared; what they change is listed in redactions.json with the reason
// "scrubber". Scrubbers on a Transport apply to the whole session of every
// request made through it, from the run's start. A run recorded with
// scrubbers is replayed with the same ones, so that what the agent does
// live is scrubbed as the recording was.
//
//	emails := trace.ScrubPattern(regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`))
//	res, err := replay.Record(ctx, "triage", ticket, agent, replay.Scrubbers{emails})
type Scrubbers []trace.Scrubber

func (s Scrubbers) applyRecord(c *config) { c.scrub = append(c.scrub, s...) }
func (s Scrubbers) applyReplay(c *config) { c.scrub = append(c.scrub, s...) }

func recordConfig(opts []RecordOption) config {
	c := config{mode: ModeFrozen}
	for _, o := range opts {
		if o != nil {
			o.applyRecord(&c)
		}
	}
	return c
}

func replayConfig(opts []ReplayOption) config {
	c := config{mode: ModeFrozen}
	for _, o := range opts {
		if o != nil {
			o.applyReplay(&c)
		}
	}
	return c
}

// checkReplay checks the mode options against each other and against the
// trace p was prepared from.
func (c *config) checkReplay(p *Prepared) error {
	if err := checkNames("replay.Replay", "", c.runID, c.scrub); err != nil {
		return err
	}
	if err := c.checkBuild(); err != nil {
		return err
	}
	for _, m := range c.matchers {
		if err := m.check(); err != nil {
			return optionErrf("replay.Match: %v", err)
		}
	}
	if c.runID != "" && c.runID == p.base.RunID {
		return optionErrf("replay.RunID: %s is the run id of the trace replayed; a replay is a new run and needs a new id", c.runID)
	}
	if c.conflict != "" {
		return optionErrf("replay: both %s and %s were given; a replay has one mode", c.modeBy, c.conflict)
	}
	switch c.mode {
	case ModeHybrid:
		if len(c.liveModels) == 0 {
			return optionErrf("replay.Hybrid: no model was named; name the models that run live, as \"provider/model\" (the trace has %s)", pyList(sortedKeys(p.models)))
		}
		if slices.Contains(c.liveModels, "") {
			return optionErrf("replay.Hybrid: a model label is empty; name models as \"provider/model\"")
		}
		if missing := notIn(c.liveModels, p.models); len(missing) > 0 {
			return optionErrf("replay.Hybrid: models not found in the trace: %s (the trace has %s)", pyList(missing), pyList(sortedKeys(p.models)))
		}
	case ModeLive:
		if slices.Contains(c.liveTools, "") {
			return optionErrf("replay.Live: a tool name is empty")
		}
		if missing := notIn(c.liveTools, p.tools); len(missing) > 0 {
			return optionErrf("replay.Live: tools not found in the trace: %s (the trace has %s)", pyList(missing), pyList(sortedKeys(p.tools)))
		}
	}
	return nil
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
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
