package sftest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/sftest"
	"github.com/stepfork/stepfork/trace"
)

// TestLoadVouchesForHashes checks what Load's verification leaves for the
// first replay: every event of a verified bundle is vouched for its hashes
// (vouch.Of), so the replay takes them as they are; a replay of it gives
// what a replay of a copy of its events (no vouch) gives, event for event;
// and an event changed after Load (its payload edited, its stored hash
// left stale) is hashed again, as in the copy.
func TestLoadVouchesForHashes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		edit bool
	}{{"as loaded", false}, {"a tool's output changed after Load", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tr := sftest.Load(t, "testdata/refund-failure.sftrace")
			v := vouch.Of(tr.Events)
			if v == nil {
				t.Fatal("a verified bundle is not vouched for")
			}
			for i := range tr.Events {
				if !v.IsHashed(i) || v.IsClean(i) || !v.Holds(i, &tr.Events[i]) {
					t.Fatalf("event %d: hashed %v, clean %v; want its hashes vouched for, not its cleanness", i, v.IsHashed(i), v.IsClean(i))
				}
			}
			k := slices.IndexFunc(tr.Events, func(ev trace.Event) bool { return ev.Type == trace.ToolResult && ev.Name == "get_order" })
			if k < 0 {
				t.Fatal("no get_order result in the fixture")
			}
			stale := tr.Events[k].OutputHash
			if tc.edit {
				out := tr.Events[k].Output.Canonical()
				changed := strings.Replace(out, `"c_77"`, `"c_78"`, 1)
				if changed == out {
					t.Fatalf("the edit changes nothing in %s", out)
				}
				tr.Events[k].Output = trace.MustParse(changed)
				if v.Holds(k, &tr.Events[k]) {
					t.Fatal("the changed event holds its vouch")
				}
			}
			copied := *tr
			copied.Events = slices.Clone(tr.Events)
			if vouch.Of(copied.Events) != nil {
				t.Fatal("a copy of the events is vouched for")
			}
			got, gotErr := replay.Replay(context.Background(), tr, refund.Agent)
			want, wantErr := replay.Replay(context.Background(), &copied, refund.Agent)
			if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
				t.Fatalf("replay error %v, of the copy %v", gotErr, wantErr)
			}
			if d := cmp.Diff(served(want.Trace), served(got.Trace)); d != "" {
				t.Errorf("the replay differs from the copy's (-copy +vouched):\n%s", d)
			}
			// The replay checks a served result's stored hash against its
			// payload: as loaded, the vouched hash is served; changed, the
			// stale hash is found out, as in the copy.
			msg := fmt.Sprint(gotErr)
			tampered := strings.Contains(msg, "recorded tool 'get_order' has an invalid output fingerprint") &&
				strings.Contains(msg, "computed output fingerprint: "+trace.Hash(tr.Events[k].Output))
			if tampered != tc.edit {
				t.Errorf("edited %v, the replay's error: %v", tc.edit, gotErr)
			}
			if served := got.Trace.Events[k]; !tc.edit && (served.Type != trace.ToolResult || served.OutputHash != stale) {
				t.Errorf("the served result is %s with output hash %s, want the stored %s", served.Type, served.OutputHash, stale)
			}
		})
	}
}

// served is, event by event, what a replay's trace holds that a vouch
// decides (the payload hashes) or serves (the payloads), with each event's
// place, type, names and status.
func served(tr *trace.Trace) []string {
	out := make([]string, len(tr.Events))
	for i, ev := range tr.Events {
		out[i] = fmt.Sprint(ev.Step, ev.Type, ev.Status, ev.Name, ev.Key, ev.InputHash, ev.OutputHash,
			ev.Input, ev.Output, ev.Before, ev.After, ev.Details, ev.Redactions)
	}
	return out
}
