package trace

import (
	"path/filepath"
	"testing"
)

// FuzzLaneFiles: whatever lanes.json and joins.json hold, Lanes and Joins
// answer or refuse without panicking, and EventLanes, on the events of a
// shared vector, gives every event a lane (none when the lanes are
// unreadable) whose part never decreases within a scope and is 0 outside
// a laned run.
func FuzzLaneFiles(f *testing.F) {
	tr, err := Load(filepath.Join(vectorDir, "stepfork", "successful_run.sftrace"))
	if err != nil {
		f.Fatal(err)
	}
	ids := make([]string, len(tr.Events))
	for i, ev := range tr.Events {
		ids[i] = ev.ID
	}
	lane := `{"` + ids[2] + `":1,"` + ids[3] + `":2}`
	f.Add([]byte(lane), []byte(`["`+ids[len(ids)-1]+`"]`))
	f.Add([]byte(lane), []byte(`["`+ids[3]+`","`+ids[1]+`"]`))
	f.Add([]byte(`{}`), []byte(`[]`))
	f.Add([]byte(`{"x":0}`), []byte(`null`))
	f.Add([]byte(`[`), []byte(`{"a":1}`))
	f.Fuzz(func(t *testing.T, lanes, joins []byte) {
		if m, err := Lanes(lanes); err == nil {
			for id, n := range m {
				if n < 1 {
					t.Fatalf("Lanes accepted lane %d for %q", n, id)
				}
			}
		}
		if js, err := Joins(joins); err == nil && js == nil {
			t.Fatal("Joins accepted a file without an array")
		}
		run := &Trace{Manifest: tr.Manifest, Events: tr.Events, Extras: map[string][]byte{LanesFile: lanes, JoinsFile: joins}}
		got := run.EventLanes()
		if got == nil {
			return
		}
		if len(got) != len(tr.Events) {
			t.Fatalf("%d lanes for %d events", len(got), len(tr.Events))
		}
		last := map[string]int{}
		for i, l := range got {
			if l.Number < 0 || l.Part < 0 {
				t.Fatalf("event %d: lane %+v", i, l)
			}
			if p := tr.Events[i].ParentID; l.Part < last[p] {
				t.Fatalf("event %d: part %d after part %d in its scope", i, l.Part, last[p])
			}
			last[tr.Events[i].ParentID] = l.Part
		}
	})
}
