package corpus

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzRead feeds Read arbitrary results files: it must return records or an
// error naming the file and line, never panic, and what it returns must
// encode and read back to the same records.
func FuzzRead(f *testing.F) {
	for _, seed := range []string{
		`{"kind":"shard","corpus":"TestCorpus","index":1,"total":4,"matched":40,"owned":9}` + "\n",
		`{"kind":"entry","corpus":"TestCorpus","name":"run-07","outcome":"diverged","divergence":"call #2","path":"/x/run-07.sftrace"}` + "\n" +
			`{"kind":"used","path":"/x/run-07.sftrace"}` + "\n",
		`{"kind":"entry","passed":true,"incurred_cost_usd":0.25}`,
		`{"kind":"entry","corpus":"C","name":"run-03","outcome":"changed","passed":true,"incurred_cost_usd":0.0004,"healed":true,"tail":"tail from model call 'a' at step 8","live_calls":3,"tokens":121,"module":"example.com/a","version":"(devel)","revision":"46b7ad0c4abd","revision_time":"2026-03-14T09:30:00Z"}` + "\n",
		"\n\n",
		`{"kind":"bogus"}`,
		`{"kind":"entry","extra":1}`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data string) {
		p := filepath.Join(t.TempDir(), "r.jsonl")
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		recs, err := Read(p)
		if err != nil {
			if !strings.HasPrefix(err.Error(), p) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		var b strings.Builder
		for _, r := range recs {
			if err := Encode(&b, r); err != nil {
				t.Fatal(err)
			}
		}
		q := filepath.Join(t.TempDir(), "q.jsonl")
		os.WriteFile(q, []byte(b.String()), 0o644)
		again, err := Read(q)
		if err != nil || len(again) != len(recs) {
			t.Fatalf("re-reading the encoded records: %d records, %v; want %d", len(again), err, len(recs))
		}
		for i := range recs {
			if again[i] != recs[i] {
				t.Fatalf("record %d changed: %+v → %+v", i, recs[i], again[i])
			}
		}
		Merge(recs) // must not panic on any records
	})
}
