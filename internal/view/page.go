package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/stepfork/stepfork/internal/failures"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
)

// Page is one self-contained HTML page: a run, a fork, two runs compared,
// or a sweep of variants. Build it with RunPage, DiffPage, VariantPage or
// SweepPage, and write it with Render or WriteFile.
type Page struct {
	Kind  string // run, fork, diff, sweep
	Title string

	Runs  []*runSection // the run (run, fork), or none
	Fork  *forkSection  // the fork's provenance (fork; diff of a fork)
	Diff  *diffSection  // diff, and a fork page whose base is known
	Sweep *sweepSection

	// Embedded are the pages a sweep's rows open, when they are in this
	// page (a written file) rather than behind links (the server).
	Embedded []*embedded

	// Failures are the failed assertions of the test the page was written
	// for, shown first (WithFailures); TestFailed says the page is that of
	// a failed test, which may have failed without any.
	Failures   []pageFailure
	TestFailed bool

	minted map[string]string // ids providers minted in the page's runs, shown as placeholders
}

// pageFailure is a failed assertion as the page shows it: which, where,
// its message, and a link to the step it names.
type pageFailure struct {
	failures.Failure
	Step     int    // the step it is about, -1 for none
	Link     string // where that step (or the variant) is on the page ("" when it is not)
	LinkText string
}

// stepNamed finds the first step number a message names: "step 9",
// "steps 7–8". It is compiled on first use.
var stepNamed = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\bsteps? (\d+)`) })

// WithFailures makes p the page of a failed test: its failed assertions
// first, each with its message and a link to the step it is about (the one
// the assertion gave, else the first its message names; in the aligned
// steps when the page has a diff, else in the timeline) or to the sweep's
// variant whose check failed. A test that failed with none (t.Error in the
// test itself) says where its failures are.
func (p *Page) WithFailures(fs []failures.Failure) *Page {
	p.TestFailed = true
	for _, f := range fs {
		pf := pageFailure{Failure: f, Step: f.Step}
		if m := stepNamed().FindStringSubmatch(f.Message); pf.Step < 0 && m != nil {
			pf.Step, _ = strconv.Atoi(m[1])
		}
		switch {
		case f.Variant != "":
			for _, e := range p.Embedded {
				if e.Name == f.Variant {
					pf.Link, pf.LinkText = "#"+e.ID, "go to variant "+f.Variant
				}
			}
		case pf.Step >= 0:
			pf.Link, pf.LinkText = p.linkToStep(pf.Step), fmt.Sprintf("go to step %d", pf.Step)
		}
		p.Failures = append(p.Failures, pf)
	}
	return p
}

// linkToStep is the address of the page's row holding the event at step
// n: the aligned step of the diff that holds it (the variant's first), else
// the row of the first run's timeline.
func (p *Page) linkToStep(n int) string {
	if p.Diff != nil {
		for _, side := range []func(*diffStep) *diffSide{func(s *diffStep) *diffSide { return s.V }, func(s *diffStep) *diffSide { return s.B }} {
			for _, st := range p.Diff.Steps {
				if sd := side(st); sd != nil && (sd.Step == n || sd.ResultStep == n) {
					return fmt.Sprintf("#d-%d", st.I)
				}
			}
		}
	}
	for _, rs := range p.Runs {
		for _, it := range rs.Timeline.Rows {
			if slices.Contains(it.Steps, n) && it.Kind != "node" && it.Kind != "group" {
				return fmt.Sprintf("#row-%d", it.Row)
			}
		}
	}
	return ""
}

// know adds the ids providers minted in the runs trs to those the page
// shows as placeholders.
func (p *Page) know(trs ...*trace.Trace) { p.knowIDs(trace.MintedIDs(trs...)) }

func (p *Page) knowIDs(ids ...map[string]string) {
	for _, m := range ids {
		for id, kind := range m {
			if p.minted == nil {
				p.minted = map[string]string{}
			}
			p.minted[id] = kind
		}
	}
}

type embedded struct {
	ID   string
	Name string
	Diff *diffSection
	Fork *forkSection
}

// runSummary is the header of a run.
type runSummary struct {
	Path   string  `json:"path"`
	Agent  string  `json:"agent"`
	RunID  string  `json:"run"`
	Status string  `json:"status"`
	Events int     `json:"events"`
	Steps  int     `json:"steps"`
	Tokens int64   `json:"tokens"`
	Cost   float64 `json:"cost"`
}

// runSection is one run's header and timeline.
type runSection struct {
	Label     string // "run", "variant"
	Path      string
	Agent     string
	RunID     string
	Status    string
	Created   string
	Events    int
	ToolCalls int
	LLMCalls  int
	Tokens    int64
	Cost      float64
	DurMS     *int64
	Failure   string
	// Code is the build of the code that made the run (build.json), ""
	// when the bundle does not say.
	Code     string
	Timeline *timeline
	// Static says the timeline is small enough to be in the markup for
	// readers without JavaScript; a larger one is only summarized there.
	Static bool
	// ForkStep is the step of the last event served from the recording in a
	// fork (-1 for a run that is not a fork).
	ForkStep int
}

// maxStaticRows is the most timeline rows or diff steps written as markup;
// beyond it the markup holds a summary and the script renders the rows
// that are on screen from the embedded data.
const maxStaticRows = 1500

func newRunSection(tr *trace.Trace, label string) *runSection {
	rs := &runSection{Label: label, Path: tr.Path, Agent: tr.AgentName, RunID: tr.RunID, Status: string(tr.Status),
		Events: len(tr.Events), DurMS: tr.Totals.DurationMS, ForkStep: -1}
	if !tr.CreatedAt.IsZero() {
		rs.Created = tr.CreatedAt.UTC().Format(time.RFC3339)
	}
	if tr.Failure != nil {
		rs.Failure = fmt.Sprintf("%s: %s (step %d)", tr.Failure.Type, tr.Failure.Message, tr.Failure.Step)
	}
	if b, ok, err := tr.Build(); ok && err == nil {
		rs.Code = b.String()
	}
	tot := trace.TotalsOf(tr.Events)
	rs.ToolCalls, rs.LLMCalls = tot.ToolCalls, tot.LLMCalls
	if tot.CostUSD != nil {
		rs.Cost = *tot.CostUSD
	}
	for i := range tr.Events {
		rs.Tokens += tr.Events[i].Tokens()
	}
	rs.Timeline = buildTimeline(tr)
	rs.Static = len(rs.Timeline.Rows) <= maxStaticRows
	return rs
}

// RunPage is the page of one recorded run; when the run is a fork (it has
// a fork.json), the page also shows where it was forked and what changed.
func RunPage(tr *trace.Trace) *Page {
	p := &Page{Kind: "run", Title: "run " + tr.AgentName + " · " + tr.RunID}
	p.know(tr)
	rs := newRunSection(tr, "run")
	p.Runs = []*runSection{rs}
	if fs := forkFromBundle(tr, nil); fs != nil {
		p.Kind, p.Fork = "fork", fs
		p.Title = "fork " + tr.AgentName + " · " + tr.RunID
		rs.Label = "fork"
		rs.ForkStep = fs.ForkPointStep
		markSides(rs.Timeline, fs.ForkPointStep)
		markOverrides(rs.Timeline, fs)
	}
	return p
}

// DiffPage is the page comparing two runs: both aligned step by step as the
// run diff aligns them, the first divergence, changed fields side by side,
// state, status, token and cost deltas. When the variant is a fork (of
// base), its provenance is shown too.
func DiffPage(base, variant *trace.Trace) *Page {
	p := &Page{Kind: "diff", Title: "diff " + base.AgentName + " · " + base.RunID + " → " + variant.RunID}
	p.Diff = diffTwo(base, variant)
	p.Fork = forkFromBundle(variant, base)
	p.know(base, variant)
	return p
}

// Render writes the page as one self-contained HTML document.
func (p *Page) Render(w io.Writer) error {
	cleanAll(p, p.minted)
	p.derive()
	head, rest, payloads, err := p.data()
	if err != nil {
		return err
	}
	return pageTemplate().Execute(w, &pageData{Page: p, Data: template.JS(head), Rest: template.JS(rest), Payloads: template.JS(payloads), CSS: css(), JS: js()})
}

// derive computes what the page shows from values, once they are
// redacted: previews and the windows of changed values.
func (p *Page) derive() {
	for _, rs := range p.Runs {
		for _, it := range rs.Timeline.Rows {
			it.Preview = preview(it.PreviewV)
			if it.Cost != 0 {
				it.CostText = usd.Format(it.Cost)
			}
		}
	}
	diffs := []*diffSection{p.Diff}
	for _, e := range p.Embedded {
		diffs = append(diffs, e.Diff)
	}
	for _, d := range diffs {
		if d == nil {
			continue
		}
		for _, st := range d.Steps {
			for i := range st.Changes {
				st.Changes[i].window()
			}
		}
		for i := range d.State {
			d.State[i].window()
		}
	}
}

// WriteFile renders the page to path atomically: into a temporary file in
// the same directory, renamed over path once complete.
func WriteFile(path string, p *Page) error {
	var buf bytes.Buffer
	if err := p.Render(&buf); err != nil {
		return err
	}
	return writeAtomic(path, buf.Bytes())
}

func writeAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("view: cannot write %s: %w", path, err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("view: cannot write %s: %w", path, err)
	}
	return nil
}

// headRows is how many rows of each timeline and steps of a diff come
// before the page's script, so that the first screen is drawn as soon as the
// browser has read that far; the rest follow the script and are added when
// the whole document has been read.
const headRows = 200

// data is what the page's script reads: the first rows of every timeline
// and steps of the diff (head), the rest of them (rest), both without
// payloads, and the payloads, parsed only when something is selected.
func (p *Page) data() (head, rest, payloads []byte, err error) {
	type runData struct {
		Rows     []*item `json:"rows"`
		Count    int     `json:"count"`
		ForkStep int     `json:"forkStep"`
	}
	type diffData struct {
		Steps    []*diffStep `json:"steps"`
		Count    int         `json:"count"`
		DivIndex int         `json:"div"`
	}
	var d struct {
		Kind string    `json:"kind"`
		Runs []runData `json:"runs"`
		Diff *diffData `json:"diff,omitempty"`
	}
	var r struct {
		Runs [][]*item   `json:"runs"`
		Diff []*diffStep `json:"diff"`
	}
	var pl struct {
		Runs [][][2]trace.Value `json:"runs"`
		Diff [][2]trace.Value   `json:"diff,omitempty"`
	}
	d.Kind = p.Kind
	d.Runs = []runData{}
	r.Runs = [][]*item{}
	r.Diff = []*diffStep{}
	pl.Runs = [][][2]trace.Value{}
	for _, rs := range p.Runs {
		rows := rs.Timeline.Rows
		n := min(len(rows), headRows)
		d.Runs = append(d.Runs, runData{Rows: rows[:n], Count: len(rows), ForkStep: rs.ForkStep})
		r.Runs = append(r.Runs, rows[n:])
		rp := make([][2]trace.Value, len(rows))
		for i, it := range rows {
			rp[i] = [2]trace.Value{it.Input, it.Output}
		}
		pl.Runs = append(pl.Runs, rp)
	}
	if p.Diff != nil {
		steps := p.Diff.Steps
		n := min(len(steps), headRows)
		d.Diff = &diffData{Steps: steps[:n], Count: len(steps), DivIndex: p.Diff.DivIndex}
		r.Diff = steps[n:]
		pl.Diff = make([][2]trace.Value, len(steps))
		for i, st := range steps {
			pl.Diff[i] = [2]trace.Value{st.BasePayload, st.VariantPayload}
		}
	}
	// encoding/json escapes <, > and & in strings, so the data cannot end the
	// script element it is embedded in.
	for _, x := range []struct {
		dst *[]byte
		v   any
	}{{&head, &d}, {&rest, &r}, {&payloads, &pl}} {
		if *x.dst, err = json.Marshal(x.v); err != nil {
			return nil, nil, nil, fmt.Errorf("view: %w", err)
		}
	}
	return head, rest, payloads, nil
}

// diffSection is the comparison of two runs.
type diffSection struct {
	Base, Variant                      runSummary
	Alignment                          string
	Equivalent                         bool
	Added, Removed, Changed, Unchanged int
	DivIndex                           int // -1 when equivalent
	Div                                *diffStep
	DivText                            string // the first divergence in one line (diff.Divergence.String)
	Steps                              []*diffStep
	State                              []change
	TokensDelta                        int64
	CostDelta                          float64
}

// diffStep is one entry of the alignment.
type diffStep struct {
	I       int       `json:"i"`
	Kind    string    `json:"k"` // added, removed, changed, unchanged
	Type    string    `json:"t"`
	Label   string    `json:"n"`
	B       *diffSide `json:"b"`
	V       *diffSide `json:"v"`
	Div     bool      `json:"div,omitempty"`
	Changes []change  `json:"ch,omitempty"`
	// Why says why a differing step is not a change of behaviour: "intended:
	// prompt of 'decide'", "matched by ignore timestamps" (diff.Result.Mark).
	Why string `json:"why,omitempty"`

	BasePayload, VariantPayload trace.Value `json:"-"`
}

// diffSide is one run's step of an entry.
type diffSide struct {
	Index      int    `json:"i"`
	Type       string `json:"t"`
	Label      string `json:"n"`
	EventID    string `json:"id"`
	Step       int    `json:"st"`
	ResultStep int    `json:"-"`
	Where      string `json:"w"` // the step numbers of its events: "steps 10–11"
	ResultID   string `json:"rid,omitempty"`
	Status     string `json:"s,omitempty"`
}
