package view

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stepfork/stepfork/fork"
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
	var tried []string
	try := func(p string) *trace.Trace {
		tried = append(tried, p)
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

// FromSweep lists the variants of a sweep as it ran (the first sample of
// each).
func FromSweep(sw *fork.Sweep) []SweepVariant {
	var out []SweepVariant
	for _, e := range sw.Entries {
		sv := SweepVariant{Name: e.Name, Variant: e.Variant, Err: e.Err}
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
	Total    float64
	NoBase   string // why the sweep has no base, when it has none
	Chart    chart
	Embedded bool // rows open diffs within the page
}

type sweepRow struct {
	Name     string
	Status   string
	Diverged string // "no", "yes", or "" when the base is not known
	Where    string
	DivIndex int
	Cost     float64
	Tokens   int64
	Link     string
	Err      string
	Path     string
}

// SweepPage is the page of a sweep: one row per variant (status, whether
// and where it diverged from base, incurred cost and tokens), sortable, each
// opening its diff, and a chart of cost against outcome. base may be nil
// (a saved sweep opened without its base): the rows then say nothing of
// divergence. link gives the address a row opens; nil puts every variant's
// diff in the page itself.
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
	for i, sv := range variants {
		row := sweepRow{Name: sv.Name, Path: sv.Path, DivIndex: -1}
		if sv.Err != nil {
			row.Status, row.Err = "error", sv.Err.Error()
		}
		var fs *forkSection
		var ds *diffSection
		switch {
		case sv.Variant != nil:
			fs = forkFromVariant(sv.Variant)
			row.Status = string(sv.Variant.Status)
			ds = variantDiff(sv.Variant)
		case sv.Trace != nil:
			fs = forkFromBundle(sv.Trace, base)
			row.Status = string(sv.Trace.Status)
			if fs != nil && fs.Status != "" {
				row.Status = fs.Status
			}
			if d != nil {
				ds = d.section(sv.Trace)
			}
		}
		if fs != nil {
			row.Cost, row.Tokens = fs.IncurredCost, fs.IncurredTokens
			if s.At == "" {
				s.At, s.GroupID = fs.ForkPoint, fs.GroupID
			}
		}
		if ds != nil {
			row.Diverged = "no"
			if !ds.Equivalent && ds.Div != nil {
				row.Diverged, row.DivIndex, row.Where = "yes", ds.DivIndex, ds.DivText
			}
		}
		s.Total = usd.Sum(s.Total, row.Cost)
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

var outcomeOrder = []string{"completed", "failed", "blocked", "canceled", "running", "error"}

func newChart(rows []sweepRow) chart {
	c := chart{W: 640, H: 0, Left: 110, Bottom: 30}
	var statuses []string
	maxCost := 0.0
	for _, r := range rows {
		if !slices.Contains(statuses, r.Status) {
			statuses = append(statuses, r.Status)
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
			if b.Label == r.Status {
				y = b.Y
			}
		}
		x := c.Left + int(span*r.Cost/maxCost)
		c.Points = append(c.Points, chartPoint{X: x, Y: y, Name: r.Name, Status: r.Status, Cost: r.Cost, Diverged: r.Diverged, Link: r.Link})
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
