package fork

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// Policy says what the side-effect guard does with a tool call of the tail
// that no change substitutes. Build it with Replay, Block or Allow; it is an
// Option.
type Policy struct {
	block bool
	allow []string
}

// Replay is the default policy: a tail tool call whose name and canonical
// input equal a base call not yet consumed is served that call's recorded
// result (the earliest such, so repeated identical calls are served in
// recorded order; in a concurrent group, the one its goroutine's history
// points to, see package replay); any other tool call is blocked. The match
// is on the input fingerprint, never on position alone.
func Replay() Policy { return Policy{} }

// Block never executes a tool in the tail and never serves one from the
// recording: every tail tool call is blocked.
func Block() Policy { return Policy{block: true} }

// Allow executes the named tools for real in the tail; other tools are
// handled as under Replay.
func Allow(names ...string) Policy { return Policy{allow: slices.Clone(names)} }

func (p Policy) applyRun(cfg *config)  { cfg.policy = p }
func (p Policy) applyEach(cfg *config) { cfg.policy = p }

// String is "replay", "block" or "allow:a,b" (the fork.json form).
func (p Policy) String() string {
	switch {
	case p.block:
		return "block"
	case len(p.allow) > 0:
		return "allow:" + strings.Join(p.allow, ",")
	}
	return "replay"
}

func parsePolicy(s string) (Policy, error) {
	switch {
	case s == "" || s == "replay":
		return Replay(), nil
	case s == "block":
		return Block(), nil
	case strings.HasPrefix(s, "allow:"):
		return Allow(strings.Split(strings.TrimPrefix(s, "allow:"), ",")...), nil
	}
	return Policy{}, fmt.Errorf("unknown side-effect policy %q (replay, block, or allow:NAMES)", s)
}

// SuppressedEffect is a tail call the guard held back instead of executing.
type SuppressedEffect struct {
	Step   int             // the call's step in the variant
	Kind   replay.CallKind // replay.KindTool, or replay.KindApproval for an unanswered approval
	Tool   string          // the tool (or approval) name
	Input  trace.Value     // the input it was called with (redacted)
	Reason string
}

// MemoHit is a tail call served from the base run's recording: a model call
// under Memoize, or a tool call the guard replayed. It cost nothing and is
// never counted as incurred cost or tokens.
type MemoHit struct {
	Step     int // the call's step in the variant
	Kind     replay.CallKind
	Name     string // tool name or model label
	BaseStep int    // the step of the recorded call that was served
	// MatchedBy names the user matchers ([Match]) through which the call
	// matched the recorded one, "" when their inputs are equal.
	MatchedBy string
}

// director answers the replay session's calls for one variant run: the
// prefix strictly from the recording, the tail under the changes, the guard
// and the memo. Its fields are touched only from Direct, which the session
// calls one call at a time.
type director struct {
	ctx     context.Context
	ix      *index
	at      Resolved
	policy  Policy
	memoize bool
	log     *slog.Logger
	changes []*bound
	// reviewer answers the tail's approvals no change answers (Reviewer).
	reviewer func(ctx context.Context, approval string) (any, error)

	suppressed []SuppressedEffect
	memoHits   []MemoHit
	replayed   []MemoHit
	prefixErr  error
	tail       bool
	readDone   map[string]bool

	// matchFirst serves a tail tool call whose input matches an unconsumed
	// base call before asking whether the policy allows it live (Heal).
	matchFirst bool
	// dry blocks every call that would run live (DryRun); firstLive is the
	// first call that ran live or, dry, would have (its Step a Seq until
	// finishSteps), and firstLivePos the position of the base call it
	// stands for (len(events) for none).
	dry          bool
	firstLive    *TailCall
	firstLivePos int
	// matchers are the user matchers (Match): a request the code already
	// makes as a change would make it is recognised through them too.
	matchers []replay.Matcher
}

func (d *director) logf(msg string, attrs ...slog.Attr) {
	if d.log != nil {
		d.log.LogAttrs(d.ctx, slog.LevelInfo, msg, attrs...)
	}
}

// applied counts an application of b to call c. The steps of a variant's
// reports are kept as the calls' Seq until the run ends, then mapped to the
// steps of its trace (finishSteps).
func (d *director) applied(b *bound, c *replay.Call) {
	b.hit(c.Seq)
	d.logf("change applied", slog.String("change", b.desc), slog.Int("step", c.Step))
}

// Direct implements replay.Director.
func (d *director) Direct(c *replay.Call) replay.Action {
	dependency := c.Kind == replay.KindTool || c.Kind == replay.KindLLM
	if err := d.ctx.Err(); err != nil && dependency {
		return replay.Fail(fmt.Errorf("fork: %w", err))
	}
	if d.inPrefix(c) {
		return d.prefix(c)
	}
	d.tail = true
	switch c.Kind {
	case replay.KindTool:
		return d.tool(c)
	case replay.KindLLM:
		return d.model(c)
	case replay.KindDecision:
		for _, b := range d.changes {
			if b.kind == ckDecision && b.name == c.Name && (!b.once || b.applied == 0) {
				d.applied(b, c)
				return replay.Serve(b.value)
			}
		}
		return replay.Execute()
	case replay.KindApproval:
		var all *bound
		for _, b := range d.changes {
			if b.kind == ckHuman && b.name == c.Name {
				d.applied(b, c)
				return replay.Serve(b.value)
			}
			if b.kind == ckHuman && b.name == "" {
				all = b
			}
		}
		if all != nil {
			d.applied(all, c)
			return replay.Serve(all.value)
		}
		if d.reviewer != nil {
			answer, err := d.reviewer(d.ctx, c.Name)
			if err != nil {
				return replay.Fail(fmt.Errorf("fork: the reviewer of approval '%s': %w", c.Name, err))
			}
			v, err := toValue(answer)
			if err != nil {
				return replay.Fail(fmt.Errorf("fork: the reviewer's answer to approval '%s' cannot be recorded: %w", c.Name, err))
			}
			d.logf("approval reviewed", slog.String("approval", c.Name), slog.Int("step", c.Step))
			return replay.Serve(v)
		}
		if c.Marker != nil {
			return replay.Strict()
		}
		reason := fmt.Sprintf("approval '%s' has no recorded answer in the base run; answer it with fork.HumanResponse(%q, …)", c.Name, c.Name)
		d.suppress(c, reason)
		return replay.Block(reason)
	case replay.KindParam:
		for _, b := range d.changes {
			if b.kind == ckParam && b.name == c.Name {
				d.applied(b, c)
				return replay.Serve(b.value)
			}
		}
		if c.Marker != nil {
			return replay.Strict()
		}
		return replay.Execute()
	case replay.KindState:
		if d.readDone[c.Name] {
			return replay.Strict()
		}
		for _, b := range d.changes {
			if b.kind != ckState {
				continue
			}
			for _, m := range b.set {
				if m.Key == c.Name {
					d.readDone[c.Name] = true
					d.applied(b, c)
					return replay.Serve(m.Value)
				}
			}
			if slices.Contains(b.delete, c.Name) {
				d.readDone[c.Name] = true
				d.applied(b, c)
				return replay.Serve(trace.Value{})
			}
		}
		return replay.Strict()
	}
	// Now, NewID, SideEffect: the recorded value while there is one, so the
	// tail sees the nondeterminism the base run saw.
	if c.Marker != nil {
		return replay.Strict()
	}
	return replay.Execute()
}

// finishSteps maps the calls the director noted (by replay.Call.Seq) to
// their steps in the variant's trace, in step order: the order in which
// goroutines arrived is not the order of the trace.
func (d *director) finishSteps(res *replay.Result) {
	step := func(seq int) int {
		if s, ok := res.DirectedStep(seq); ok {
			return s
		}
		return -1
	}
	for _, b := range d.changes {
		for i, seq := range b.steps {
			b.steps[i] = step(seq)
		}
		slices.Sort(b.steps)
	}
	for i := range d.suppressed {
		d.suppressed[i].Step = step(d.suppressed[i].Step)
	}
	slices.SortStableFunc(d.suppressed, func(a, b SuppressedEffect) int { return a.Step - b.Step })
	for _, hits := range [][]MemoHit{d.memoHits, d.replayed} {
		for i := range hits {
			hits[i].Step = step(hits[i].Step)
		}
		slices.SortStableFunc(hits, func(a, b MemoHit) int { return a.Step - b.Step })
	}
	if d.firstLive != nil {
		d.firstLive.Step = step(d.firstLive.Step)
	}
}

// inPrefix reports whether c comes before the fork point: whether the
// recorded call or marker it stands for (the one strict matching would use,
// in its goroutine's concurrent group for a call made on another goroutine)
// is before the fork position, not how many events the run had when the
// call arrived, which depends on how far its other goroutines got. A call
// that stands for nothing recorded is placed by that count.
func (d *director) inPrefix(c *replay.Call) bool {
	var ev *trace.Event
	switch {
	case c.Kind == replay.KindTool || c.Kind == replay.KindLLM:
		if c.Cursor != nil {
			ev = c.Cursor.Call
		}
	case c.Marker != nil:
		ev = c.Marker
	}
	if ev != nil {
		if i, ok := d.ix.ids.Lookup(ev.ID); ok {
			return int(i) < d.at.pos
		}
	}
	return c.Step < d.at.pos
}

// prefix serves a call before the fork point strictly, and notes when the
// agent does not make the call the base run recorded there.
func (d *director) prefix(c *replay.Call) replay.Action {
	if d.prefixErr != nil {
		return replay.Strict()
	}
	switch c.Kind {
	case replay.KindTool, replay.KindLLM:
		r := c.Cursor
		switch {
		case r == nil:
			d.prefixErr = fmt.Errorf("the agent made %s call '%s' (call #%d) after every call of the base run was consumed", c.Kind, c.Name, c.Position)
		case r.Kind != c.Kind || r.Label != c.Name:
			d.prefixErr = fmt.Errorf("the agent made %s call '%s' (call #%d) where the base run recorded %s call '%s' (step %d)", c.Kind, c.Name, c.Position, r.Kind, r.Label, r.Call.Step)
		default:
			if _, ok := c.Matches(r); !ok {
				d.prefixErr = fmt.Errorf("%s call '%s' (call #%d, step %d) was made with another input than the base run recorded", c.Kind, c.Name, c.Position, r.Call.Step)
			}
		}
	case replay.KindDecision:
		if c.Marker == nil {
			d.prefixErr = fmt.Errorf("the agent made decision '%s', which the base run did not record before the fork point", c.Name)
		} else if m, _ := c.Marker.Marker(); m.Value != c.Input {
			d.prefixErr = fmt.Errorf("decision '%s' (step %d) came out %s where the base run recorded %s", c.Name, c.Marker.Step, short(c.Input), short(m.Value))
		}
	case replay.KindState:
	default:
		if c.Marker == nil {
			d.prefixErr = fmt.Errorf("the agent made a %s call '%s' that the base run did not record before the fork point", c.Kind, c.Name)
		}
	}
	return replay.Strict()
}

func inputOf(ev *trace.Event) trace.Value {
	if ev.Input.IsAbsent() {
		return trace.NullValue
	}
	return ev.Input
}

// output finds the output substitution for call c, if any, and the
// recorded call the substitution stands in for (nil when none).
//
// A change aimed at one recorded call applies to the tail call that stands
// for it: the pending recorded call with c's identity and input (in a
// concurrent group, the one its goroutine's history points to), else the
// one strict matching would use for c, when it has c's tool or model; only
// when neither is known does the call's occurrence decide. So a change
// aimed at one call of a concurrent group lands on that call whichever
// goroutine makes it and whenever it arrives, and consumes it.
func (d *director) output(kind ckind, c *replay.Call) (*bound, *replay.Recorded) {
	cp := c.Match
	if cp == nil && c.Cursor != nil && c.Cursor.Kind == c.Kind && c.Cursor.Label == c.Name {
		cp = c.Cursor
	}
	for _, b := range d.changes {
		if b.kind != kind || b.label != c.Name && (kind != ckLLMResponse || b.label != c.Model) {
			continue
		}
		switch {
		case b.call > 0 && cp != nil:
			if cp.Call.ID == d.ix.tr.Events[b.call].ID {
				return b, cp
			}
		case b.occ == 0 || b.occ == c.Occurrence:
			return b, cp
		}
	}
	return nil, nil
}

func (d *director) suppress(c *replay.Call, reason string) {
	d.suppressed = append(d.suppressed, SuppressedEffect{Step: c.Seq, Kind: c.Kind, Tool: c.Name, Input: c.Input, Reason: reason})
	d.logf("effect suppressed", slog.String("kind", string(c.Kind)), slog.String("name", c.Name), slog.Int("step", c.Step), slog.String("reason", reason))
}

// tool is the side-effect guard.
func (d *director) tool(c *replay.Call) replay.Action {
	if b, cp := d.output(ckToolResult, c); b != nil {
		d.applied(b, c)
		return replay.Serve(b.value).Instead(cp)
	}
	if d.matchFirst && !d.policy.block && c.Match != nil {
		d.replayed = append(d.replayed, MemoHit{Step: c.Seq, Kind: c.Kind, Name: c.Name, BaseStep: c.Match.Call.Step, MatchedBy: c.MatchedBy})
		return replay.ServeMatch()
	}
	if slices.Contains(d.policy.allow, c.Name) {
		return d.live(c, replay.Execute())
	}
	if d.policy.block {
		reason := "the side-effect policy is Block"
		d.suppress(c, reason)
		return replay.Block(reason)
	}
	if c.Match != nil {
		d.replayed = append(d.replayed, MemoHit{Step: c.Seq, Kind: c.Kind, Name: c.Name, BaseStep: c.Match.Call.Step, MatchedBy: c.MatchedBy})
		return replay.ServeMatch()
	}
	reason := fmt.Sprintf("the base run has no unconsumed call of tool '%s' with this input, so there is no recorded result to replay and executing it could touch the world. Allow it with fork.Allow(%q), or fork where its input is unchanged.", c.Name, c.Name)
	d.suppress(c, reason)
	return replay.Block(reason)
}

// model applies output substitutions, then request patches, then the memo.
func (d *director) model(c *replay.Call) replay.Action {
	if b, cp := d.output(ckLLMResponse, c); b != nil {
		d.applied(b, c)
		return replay.Serve(b.value).Instead(cp)
	}
	input, model, patched := d.patch(c)
	if !patched && d.memoize && c.Match != nil {
		d.memoHits = append(d.memoHits, MemoHit{Step: c.Seq, Kind: c.Kind, Name: c.Name, BaseStep: c.Match.Call.Step, MatchedBy: c.MatchedBy})
		d.logf("memo hit", slog.String("model", c.Name), slog.Int("step", c.Step), slog.Int("base_step", c.Match.Call.Step))
		return replay.ServeMatch()
	}
	a := replay.Execute()
	if patched {
		a = a.WithInput(input)
		if model != c.Model {
			a = a.WithModel(model)
		}
	}
	return d.live(c, a)
}

// live notes that the tail runs the dependency call c live (a, an Execute
// action): the first such call is where the tail started re-recording. In a
// dry run it blocks the call instead, so that nothing runs live and the
// variant stops where its tail would start.
func (d *director) live(c *replay.Call, a replay.Action) replay.Action {
	if d.firstLive == nil {
		d.firstLive = &TailCall{Step: c.Seq, Kind: c.Kind, Name: c.Name, BaseStep: -1}
		d.firstLivePos = len(d.ix.tr.Events)
		if r := c.Cursor; r != nil {
			d.firstLive.BaseStep = r.Call.Step
			if i, ok := d.ix.ids.Lookup(r.Call.ID); ok {
				d.firstLivePos = int(i)
			}
		}
	}
	if d.dry {
		return replay.Block(fmt.Sprintf("dry run: %s call '%s' would run live here", c.Kind, c.Name))
	}
	return a
}

// specificity ranks how an agent change's target matches a call made in
// node to the model label (provider/model): 3 for its node, 2 for its model
// label, 1 for its model, 0 for All; -1 for no match.
func specificity(target, node, label, model string) int {
	switch target {
	case node:
		if node != "" {
			return 3
		}
	case label:
		return 2
	case model:
		return 1
	case All:
		return 0
	}
	return -1
}

// requestPatch is what the request changes among bs make of a model call's
// request: the most specific matching prompt, model and temperature change
// each apply (see specificity). It returns the patched input and model, and
// the changes that acted (a prompt change whose passage is not in the
// prompt does not).
func requestPatch(bs []*bound, node, label, provider, model string, input trace.Value) (trace.Value, string, []*bound) {
	var pick [3]*bound
	best := [3]int{-1, -1, -1}
	for _, b := range bs {
		slot := -1
		switch b.kind {
		case ckPrompt:
			slot = 0
		case ckModel:
			slot = 1
		case ckTemperature:
			slot = 2
		}
		if slot < 0 {
			continue
		}
		if s := specificity(b.label, node, label, model); s > best[slot] {
			best[slot], pick[slot] = s, b
		}
	}
	var acted []*bound
	if pick[0] != nil {
		var ok bool
		if input, ok = patchPrompt(input, provider, pick[0].edit); ok {
			acted = append(acted, pick[0])
		}
	}
	if pick[1] != nil {
		model = pick[1].text
		if !input.Get("model").IsAbsent() {
			input = withMember(input, "model", trace.StringValue(model))
		}
		acted = append(acted, pick[1])
	}
	if pick[2] != nil {
		if t, err := trace.FloatValue(pick[2].temp); err == nil {
			input = patchTemperature(input, t)
		}
		acted = append(acted, pick[2])
	}
	return input, model, acted
}

// patch applies the most specific matching prompt, model and temperature
// changes to the request of c. patched is false when nothing matched or the
// patched request equals the original.
//
// A request that already is what the changes make of the recorded request
// it stands for (the call at the cursor, of the same model) is left as it
// is: the agent's code carries the change already (the prompt was edited),
// and applying it again would apply it twice (an appended sentence
// appended again). The changes still count as applied.
func (d *director) patch(c *replay.Call) (trace.Value, string, bool) {
	if r := c.Cursor; r != nil && r.Kind == replay.KindLLM && r.Label == c.Name {
		in, model, acted := requestPatch(d.changes, c.Node, c.Name, c.Provider, c.Model, inputOf(r.Call))
		_, same := replay.Matched(d.matchers, c.Kind, "", c.Provider, c.Model, sanitized(in), c.Input)
		if len(acted) > 0 && same && model == c.Model && in != inputOf(r.Call) {
			for _, b := range acted {
				d.applied(b, c)
			}
			return trace.Value{}, "", false
		}
	}
	input, model, acted := requestPatch(d.changes, c.Node, c.Name, c.Provider, c.Model, c.Input)
	if len(acted) == 0 {
		return trace.Value{}, "", false
	}
	for _, b := range acted {
		d.applied(b, c)
	}
	return input, model, input != c.Input || model != c.Model
}
