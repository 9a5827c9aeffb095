package diff

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// pagedRun is a long run of one repeated shape: page after page, the tool
// fetch_page answers the same text and the model says "continue", until it
// says "stop" on page stop. It has 4·(stop+1)+2 events.
func pagedRun(tb testing.TB, stop int) *trace.Trace {
	tb.Helper()
	tr := &trace.Trace{Manifest: trace.Manifest{RunID: "run_paged", AgentName: "reader", Status: trace.RunCompleted,
		CreatedAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}}
	add := func(ev trace.Event) string {
		ev.ID = fmt.Sprintf("evt_%07d", len(tr.Events))
		appendEvent(tr, ev)
		return ev.ID
	}
	add(trace.Event{Type: trace.RunStart, Input: trace.IntValue(int64(stop))})
	for page := 0; page <= stop; page++ {
		call := add(trace.Event{Type: trace.ToolCall, Name: "fetch_page", Input: trace.StringValue("next")})
		add(trace.Event{Type: trace.ToolResult, ParentID: call, Name: "fetch_page", Output: trace.StringValue("the same text on every page")})
		answer := "continue"
		if page == stop {
			answer = "stop"
		}
		req := add(trace.Event{Type: trace.LLMRequest, Provider: "fake", Model: "reader", Input: trace.StringValue("More?")})
		add(trace.Event{Type: trace.LLMResponse, ParentID: req, Model: "reader", Output: trace.StringValue(answer)})
	}
	add(trace.Event{Type: trace.RunEnd, RunStatus: trace.RunCompleted, Output: trace.IntValue(int64(stop))})
	tr.Totals.Events = len(tr.Events)
	return tr
}

// appendEvent appends ev to tr with the run's id, its step, a timestamp,
// its parent (the run start unless set) and its hashes.
func appendEvent(tr *trace.Trace, ev trace.Event) {
	ev.RunID, ev.Step, ev.Timestamp = tr.RunID, len(tr.Events), tr.CreatedAt.Add(time.Duration(len(tr.Events))*time.Millisecond)
	ev.Status, ev.ReplayPolicy = trace.StatusOK, trace.PolicyFrozen
	if ev.ParentID == "" && len(tr.Events) > 0 && ev.Type != trace.RunEnd {
		ev.ParentID = tr.Events[0].ID
	}
	ev.SetHashes()
	tr.Events = append(tr.Events, ev)
}

// forkedAt is what a fork of base makes when the model's answer on page
// is changed to "stop": the base's events (their ids too) up to that
// answer, the new answer, and the run's end. With live, the pages from
// from on ran again live (the same content, new event ids) before the
// changed answer.
func forkedAt(base *trace.Trace, page, live int) *trace.Trace {
	v := base.Clone()
	v.RunID = "run_paged_fork"
	served := 1 + 4*live
	v.Events = v.Events[:0:0]
	for i := range served {
		ev := base.Events[i].Clone()
		ev.RunID = v.RunID
		v.Events = append(v.Events, ev)
	}
	fresh := func(ev trace.Event) { ev.ID = fmt.Sprintf("evt_live_%07d", len(v.Events)); appendEvent(v, ev) }
	last := func() string { return v.Events[len(v.Events)-1].ID }
	for p := live; p <= page; p++ {
		fresh(trace.Event{Type: trace.ToolCall, Name: "fetch_page", Input: trace.StringValue("next")})
		fresh(trace.Event{Type: trace.ToolResult, ParentID: last(), Name: "fetch_page", Output: trace.StringValue("the same text on every page")})
		answer := "continue"
		if p == page {
			answer = "stop"
		}
		fresh(trace.Event{Type: trace.LLMRequest, Provider: "fake", Model: "reader", Input: trace.StringValue("More?")})
		fresh(trace.Event{Type: trace.LLMResponse, ParentID: last(), Model: "reader", Output: trace.StringValue(answer)})
	}
	fresh(trace.Event{Type: trace.RunEnd, RunStatus: trace.RunCompleted, Output: trace.IntValue(int64(page))})
	v.Totals.Events = len(v.Events)
	return v
}

// TestDiffForkOfLongRepetitiveRun: a fork of a run of 9,000 events whose
// changed answer on page 499 equals the base's own last answer (page
// 2,249) shows one changed call where the fork departs, and the base's
// later pages removed — not the pages between removed and the changed
// answer paired with the base's last one. Runs, a Prepared and Bundles
// align alike, whether the pages before the change were served (the base's
// event ids) or ran again live from page 400 (new ids, the same content).
func TestDiffForkOfLongRepetitiveRun(t *testing.T) {
	t.Parallel()
	const stop, page = 2249, 499
	base := pagedRun(t, stop)
	if n := len(base.Events); n != 9002 {
		t.Fatalf("the base has %d events", n)
	}
	dir := t.TempDir()
	basePath := filepath.Join(dir, "base.sftrace")
	if err := base.Save(basePath); err != nil {
		t.Fatal(err)
	}
	for _, live := range []int{page, 400} {
		variant := forkedAt(base, page, live)
		varPath := filepath.Join(dir, fmt.Sprintf("fork-%d.sftrace", live))
		if err := variant.Save(varPath); err != nil {
			t.Fatal(err)
		}
		bundles, err := Bundles(basePath, varPath)
		if err != nil {
			t.Fatal(err)
		}
		for name, d := range map[string]*Result{"Runs": Runs(base, variant), "Prepared": Prepare(base).Diff(variant), "Bundles": bundles} {
			t.Run(fmt.Sprintf("%s/live-from-%d", name, live), func(t *testing.T) {
				dv := d.Divergence
				if dv == nil || dv.Kind != Changed || dv.Base == nil || dv.Variant == nil {
					t.Fatalf("divergence %v", dv)
				}
				// Page 499's answer is its second call: behavior step
				// 2·499 + 1 on both sides.
				if want := 2*page + 1; dv.Base.Index != want || dv.Variant.Index != want {
					t.Errorf("the divergence pairs base #%d with variant #%d, want #%d with #%d: %s", dv.Base.Index, dv.Variant.Index, want, want, dv)
				}
				if want := `changed: output "continue" → "stop"`; !strings.Contains(dv.String(), want) {
					t.Errorf("divergence %q, want it to say %q", dv, want)
				}
				if d.Changed != 2 || d.Added != 0 || d.Removed != 2*(stop-page) {
					t.Errorf("changed %d, added %d, removed %d; want 2 (the answer, the run's end), 0, %d", d.Changed, d.Added, d.Removed, 2*(stop-page))
				}
			})
		}
	}
}

// TestDiffIndependentRunsStillLCS: two runs that share no event (two
// recordings) are aligned by the LCS alone.
func TestDiffIndependentRunsStillLCS(t *testing.T) {
	t.Parallel()
	base, other := pagedRun(t, 300), pagedRun(t, 100)
	for i := range other.Events {
		ev := &other.Events[i]
		ev.ID = "other_" + ev.ID
		if ev.ParentID != "" {
			ev.ParentID = "other_" + ev.ParentID
		}
	}
	bs, vs := behavior(base, false), behavior(other, false)
	bn := numberSteps(bs)
	all := numberSteps(append(slices.Clone(bs), vs...))
	got := alignNumbered(bs, bn, vs)
	want := alignRest(nil, 0, bs, vs, all.ids[:len(bs)], all.ids[len(bs):], int32(len(all.byKey)))
	if !slices.Equal(got, want) {
		t.Errorf("the alignment of two independent runs is not the LCS's")
	}
	d := Runs(base, other)
	if d.Divergence == nil || d.Divergence.Kind != Removed || d.Removed != 2*200 {
		t.Errorf("divergence %v, removed %d: want the base's pages 100–299 removed, the answers 'stop' matched", d.Divergence, d.Removed)
	}
}
