package view

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/internal/outcome"
	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
)

// SweepVariant is one variant of a sweep: its name and run, either as it ran
// (Variant) or as saved in a directory (Trace, with its fork.json).
type SweepVariant struct {
	Name    string
	Path    string
	Trace   *trace.Trace
	Variant *fork.Variant
	Err     error // the variant did not run, or its bundle could not be read

	entry *fork.Entry // the sweep's entry, with every sample (FromSweep)
}

// LoadDir reads the variants of a sweep saved with fork.SaveDir: every
// NAME.sftrace bundle directly in dir, and every packed
// NAME.sftrace.tar.gz, in name order. A bundle that cannot be read is a
// variant with Err set; a directory without bundles is an error.
func LoadDir(dir string) ([]SweepVariant, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("view: cannot read the sweep directory: %w", err)
	}
	var out []SweepVariant
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".sftrace")
		if !ok || !e.IsDir() {
			name, ok = strings.CutSuffix(e.Name(), trace.PackedSuffix)
			ok = ok && !e.IsDir()
		}
		if !ok || name == "" {
			continue
		}
		p := filepath.Join(dir, e.Name())
		tr, err := trace.Load(p)
		out = append(out, SweepVariant{Name: name, Path: p, Trace: tr, Err: err})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("view: %s holds no .sftrace bundle; give a bundle, two bundles, or the directory a sweep was saved to with fork.SaveDir", dir)
	}
	return out, nil
}

// FindBase finds the base run of a sweep saved in dir whose variants are
// vs: the bundle their fork.json name as parent_trace_path, when they all
// name the same parent run. The path is recorded as the test that forked
// it gave it, often relative to its package's directory; it is tried as
// it is, then relative to dir and to each directory above dir. When no base
// is found, note says why and what to do.
func FindBase(dir string, vs []SweepVariant) (base *trace.Trace, note string) {
	parentRun, parentPath := "", ""
	for _, v := range vs {
		if v.Trace == nil {
			continue
		}
		info, err := fork.ReadInfo(v.Trace)
		if err != nil {
			continue
		}
		switch {
		case parentRun == "":
			parentRun, parentPath = info.ParentRunID, info.ParentTracePath
		case info.ParentRunID != parentRun:
			return nil, "the variants were forked from different runs; give the base: stepfork view BASE " + dir
		}
	}
	if parentRun == "" {
		return nil, "no variant has a fork.json naming its base; give the base: stepfork view BASE " + dir
	}
	if parentPath == "" {
		return nil, fmt.Sprintf("the base run %s was never saved (fork.json has no parent_trace_path); give it: stepfork view BASE %s", parentRun, dir)
	}
	try := func(p string) *trace.Trace {
		tr, err := trace.Load(p)
		if err != nil || tr.RunID != parentRun {
			return nil
		}
		return tr
	}
	if filepath.IsAbs(parentPath) {
		if tr := try(parentPath); tr != nil {
			return tr, ""
		}
	} else {
		if tr := try(parentPath); tr != nil {
			return tr, ""
		}
		abs, err := filepath.Abs(dir)
		for d := abs; err == nil; d = filepath.Dir(d) {
			if tr := try(filepath.Join(d, parentPath)); tr != nil {
				return tr, ""
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return nil, fmt.Sprintf("the base run %s (fork.json: parent_trace_path %s) was not found where it was recorded; give it: stepfork view BASE %s", parentRun, parentPath, dir)
}

// FromSweep lists the variants of a sweep as it ran: the first sample of
// each, with all of its samples.
func FromSweep(sw *fork.Sweep) []SweepVariant {
	var out []SweepVariant
	for i := range sw.Entries {
		e := &sw.Entries[i]
		sv := SweepVariant{Name: e.Name, Variant: e.Variant, Err: e.Err, entry: e}
		if e.Variant != nil {
			sv.Trace, sv.Path = e.Variant.Trace, e.Variant.Path
		}
		out = append(out, sv)
	}
	return out
}

// sweepSection is the table of a sweep's variants and its chart.
type sweepSection struct {
	Base     *runSummary
	At       string
	GroupID  string
	Rows     []sweepRow
	Statuses []string // the statuses of the rows, for the filter
	Scored   bool     // some variant has a score: the table has its column
	Total    float64
	NoBase   string // why the sweep has no base, when it has none
	Chart    chart
	Embedded bool // rows open diffs within the page
}

// sweepRow is one variant: what it changed and did (outcome.Row, as every
// text of a sweep says it), and what the page adds.
type sweepRow struct {
	outcome.Row
	Diverged string // "no", "yes", or "" when the base is not known
	DivIndex int
	Tokens   int64
	Score    float64 // the mean score (NaN without one), for sorting
	Link     string
	Path     string
}

// ChangesText is the variant's changes, or that it is the control.
func (r *sweepRow) ChangesText() string {
	if len(r.Changes) == 0 {
		return "none (the control)"
	}
	return strings.Join(r.Changes, "; ")
}

// StatusKey is the status the filter and the chart use: the first word of
// the status ("completed"; for samples, whether all completed).
func (r *sweepRow) StatusKey() string {
	switch {
	case r.Err != "":
		return "error"
	case strings.Contains(r.Status, "/"):
		n, total, _ := strings.Cut(strings.Fields(r.Status)[0], "/")
		if n == total {
			return "completed"
		}
		return "mixed"
	}
	return r.Status
}

// SweepPage is the page of a sweep: one row per variant saying which change
// did what — its changes, status, own first divergence from the base, its
// output cut around where it differs from the base's, the tool calls it
// added or lost, incurred cost and tokens, and its score (the mean and its
// interval over several samples) — sortable by every column and filtered
// by text, status and divergence, each row opening its diff; and a chart
// of cost against outcome. base may be nil (a saved sweep opened without
// its base): the rows then say nothing of divergence. link gives the
// address a row opens; nil puts every variant's diff in the page itself.
func SweepPage(base *trace.Trace, variants []SweepVariant, link func(name string) string) *Page {
	p := &Page{Kind: "sweep", Title: fmt.Sprintf("sweep · %d variant(s)", len(variants))}
	s := &sweepSection{Embedded: link == nil}
	var d *differ
	if base != nil {
		d = newDiffer(base, base.Path)
		b := summaryOfTrace(base)
		s.Base = &b
		p.Title = "sweep of " + base.AgentName + " · " + base.RunID
	}
	p.know(base)
	for i, sv := range variants {
		if sv.Variant != nil {
			p.know(sv.Variant.Trace)
		}
		p.know(sv.Trace)
		row := sweepRow{Row: outcome.Row{Name: sv.Name}, Path: sv.Path, DivIndex: -1, Score: math.NaN()}
		var fs *forkSection
		rd := variantResult(sv, d)
		var changes []string
		samples := []outcome.Sample{}
		switch {
		case sv.Variant != nil:
			fs = forkFromVariant(sv.Variant)
			for _, c := range sv.Variant.Changes {
				changes = append(changes, describe(c.Change, c.Description))
			}
			runs := []*fork.Variant{sv.Variant}
			if sv.entry != nil && len(sv.entry.Samples) > 0 {
				runs = sv.entry.Samples
			}
			for _, v := range runs {
				if v != nil {
					samples = append(samples, outcome.Sample{Status: string(v.Status), Cost: v.IncurredCost})
				} else {
					samples = append(samples, outcome.Sample{})
				}
			}
		case sv.Trace != nil:
			fs = forkFromBundle(sv.Trace, base)
			status := string(sv.Trace.Status)
			cost := 0.0
			if fs != nil {
				if fs.Status != "" {
					status = fs.Status
				}
				cost = fs.IncurredCost
				for _, c := range fs.Changes {
					changes = append(changes, c.Desc)
				}
			}
			samples = append(samples, outcome.Sample{Status: status, Cost: cost})
		}
		if sv.Err != nil || (sv.Variant == nil && sv.Trace == nil) {
			msg := "not run"
			if sv.Err != nil {
				msg, _, _ = strings.Cut(sv.Err.Error(), "\n")
			}
			row.Row = outcome.Row{Name: sv.Name, Err: msg, Status: "error"}
		} else {
			row.Row = outcome.RowOf(sv.Name, changes, samples, rd, nil)
		}
		if sv.entry != nil && sv.Variant != nil && sv.Variant.Scored {
			if st := sv.entry.Stats(); !math.IsNaN(st.Mean) {
				row.Row.Score = outcome.ScoreText(st.Samples, st.Mean, st.Low, st.High, sv.Variant.BaseScore)
				row.Score = st.Mean
				s.Scored = true
			}
		}
		var ds *diffSection
		if rd != nil {
			ds = fromRunDiff(rd)
			row.Diverged = "no"
			if !ds.Equivalent && ds.Div != nil {
				row.Diverged, row.DivIndex = "yes", ds.DivIndex
			}
		}
		if fs != nil {
			row.Tokens = fs.IncurredTokens
			if s.At == "" {
				s.At, s.GroupID = fs.ForkPoint, fs.GroupID
			}
		}
		s.Total = usd.Sum(s.Total, row.Cost)
		if st := row.StatusKey(); !slices.Contains(s.Statuses, st) {
			s.Statuses = append(s.Statuses, st)
		}
		id := fmt.Sprintf("variant-%d", i+1)
		switch {
		case link != nil && sv.Trace != nil:
			row.Link = link(sv.Name)
		case link == nil && (ds != nil || fs != nil):
			row.Link = "#" + id
			p.Embedded = append(p.Embedded, &embedded{ID: id, Name: sv.Name, Diff: ds, Fork: fs})
		}
		s.Rows = append(s.Rows, row)
	}
	slices.SortStableFunc(s.Statuses, func(a, b string) int { return rank(a) - rank(b) })
	s.Chart = newChart(s.Rows)
	p.Sweep = s
	return p
}

func summaryOfTrace(tr *trace.Trace) runSummary {
	rs := runSummary{Path: tr.Path, Agent: tr.AgentName, RunID: tr.RunID, Status: string(tr.Status), Events: len(tr.Events)}
	if tot := trace.TotalsOf(tr.Events); tot.CostUSD != nil {
		rs.Cost = *tot.CostUSD
	}
	for i := range tr.Events {
		rs.Tokens += tr.Events[i].Tokens()
	}
	return rs
}

// chart is a scatter plot of incurred cost (x) against outcome (y, one
// band per status), drawn as inline SVG.
type chart struct {
	W, H, Left, Bottom int
	Bands              []chartBand
	Ticks              []chartTick
	Points             []chartPoint
}

type chartBand struct {
	Y     int
	Label string
}

type chartTick struct {
	X     int
	Label string
}

type chartPoint struct {
	X, Y     int
	Name     string
	Status   string
	Cost     float64
	Diverged string
	Link     string
}

var outcomeOrder = []string{"completed", "mixed", "failed", "blocked", "canceled", "running", "error"}

func newChart(rows []sweepRow) chart {
	c := chart{W: 640, H: 0, Left: 110, Bottom: 30}
	var statuses []string
	maxCost := 0.0
	for _, r := range rows {
		if !slices.Contains(statuses, r.StatusKey()) {
			statuses = append(statuses, r.StatusKey())
		}
		maxCost = max(maxCost, r.Cost)
	}
	slices.SortStableFunc(statuses, func(a, b string) int { return rank(a) - rank(b) })
	const band = 44
	c.H = len(statuses)*band + c.Bottom + 10
	for i, st := range statuses {
		c.Bands = append(c.Bands, chartBand{Y: 10 + i*band + band/2, Label: st})
	}
	span := float64(c.W - c.Left - 150) // room for the labels on the right
	ticks := usd.Ticks(maxCost, 4)
	maxCost = ticks[len(ticks)-1]
	for i, v := range ticks {
		c.Ticks = append(c.Ticks, chartTick{X: c.Left + int(span*float64(i)/4), Label: usd.Format(v)})
	}
	// Points at the same place are stacked within their band.
	type spot struct{ x, y int }
	at := map[spot][]int{}
	for i, r := range rows {
		y := 0
		for _, b := range c.Bands {
			if b.Label == r.StatusKey() {
				y = b.Y
			}
		}
		x := c.Left + int(span*r.Cost/maxCost)
		c.Points = append(c.Points, chartPoint{X: x, Y: y, Name: r.Name, Status: r.StatusKey(), Cost: r.Cost, Diverged: r.Diverged, Link: r.Link})
		k := spot{x / 8, y}
		at[k] = append(at[k], i)
	}
	for _, idx := range at {
		n := len(idx)
		step := min(14, (band-8)/max(n-1, 1))
		for k, i := range idx {
			c.Points[i].Y += (2*k - (n - 1)) * step / 2
		}
	}
	return c
}

func rank(status string) int {
	if i := slices.Index(outcomeOrder, status); i >= 0 {
		return i
	}
	return len(outcomeOrder)
}
