package sftest_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

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
			if d := cmp.Diff(comparable(want.Trace, tr.Events), comparable(got.Trace, tr.Events)); d != "" {
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

// comparable is the events of tr without their run id, time and duration,
// and with every id that is not one of base's replaced by its position.
func comparable(tr *trace.Trace, base []trace.Event) []trace.Event {
	known := map[string]bool{}
	for _, ev := range base {
		known[ev.ID] = true
	}
	name := map[string]string{}
	for i, ev := range tr.Events {
		if !known[ev.ID] {
			name[ev.ID] = fmt.Sprint("#", i)
		}
	}
	out := make([]trace.Event, len(tr.Events))
	for i, ev := range tr.Events {
		ev.RunID, ev.Timestamp, ev.DurationMS = "", time.Time{}, nil
		if n, ok := name[ev.ID]; ok {
			ev.ID = n
		}
		if n, ok := name[ev.ParentID]; ok {
			ev.ParentID = n
		}
		out[i] = ev
	}
	return out
}
