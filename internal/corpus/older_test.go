package corpus

import (
	"strings"
	"testing"
	"time"
)

// fakeVCS knows a line of history: a → b → c (c newest).
type fakeVCS struct{}

var history = []string{"aaaaaaa1111111111111111111111111111111a1", "bbbbbbb2222222222222222222222222222222b2", "ccccccc3333333333333333333333333333333c3"}

func (fakeVCS) IsAncestor(older, newer string) (bool, bool) {
	io, in := -1, -1
	for i, h := range history {
		if strings.HasPrefix(h, older) {
			io = i
		}
		if strings.HasPrefix(h, newer) {
			in = i
		}
	}
	if io < 0 || in < 0 {
		return false, false
	}
	return io <= in, true
}

func (fakeVCS) CommitTime(rev string) (time.Time, bool) { return time.Time{}, false }

func TestOlderThan(t *testing.T) {
	t.Parallel()
	rep, err := Merge([]Record{
		{Kind: "shard", Corpus: "C", Total: 1, Matched: 5},
		{Kind: "entry", Corpus: "C", Name: "a", Revision: history[0], RevisionTime: "2026-01-01T00:00:00Z"},
		{Kind: "entry", Corpus: "C", Name: "b", Revision: history[1], RevisionTime: "2026-02-01T00:00:00Z"},
		{Kind: "entry", Corpus: "C", Name: "c", Revision: history[2], RevisionTime: "2026-03-01T00:00:00Z"},
		{Kind: "entry", Corpus: "C", Name: "d", Revision: "ddddddd4444444444444444444444444444444d4", RevisionTime: "2026-01-15T00:00:00Z"}, // not in the history
		{Kind: "entry", Corpus: "C", Name: "e"},
	})
	if err != nil {
		t.Fatal(err)
	}
	names := func(rs []Record) string {
		var n []string
		for _, r := range rs {
			n = append(n, r.Name)
		}
		return strings.Join(n, ",")
	}
	tests := []struct {
		rev            string
		vcs            VCS
		older, unknown string
		err            string
	}{
		{"ccccccc", fakeVCS{}, "a,b,d", "e", ""},            // ancestry, then d by time (before c's time)
		{"bbbbbbb2", fakeVCS{}, "a,d", "e", ""},             // d (Jan 15) is before b (Feb 1)
		{"ccccccc", nil, "a,b,d", "e", ""},                  // times only
		{"2026-01-20T00:00:00Z", fakeVCS{}, "a,d", "e", ""}, // a time
		{"eeeeeee", nil, "", "a,b,c,d,e", ""},               // nobody knows when eeeeeee was made
		{"main", nil, "", "", "neither a commit hash"},
		{"", nil, "", "", "the revision is empty"},
	}
	for _, tt := range tests {
		older, unknown, err := rep.OlderThan(tt.rev, tt.vcs)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("OlderThan(%q): err %v, want %q", tt.rev, err, tt.err)
			}
			continue
		}
		if err != nil || names(older) != tt.older || names(unknown) != tt.unknown {
			t.Errorf("OlderThan(%q) = older %q, unknown %q, %v; want %q, %q", tt.rev, names(older), names(unknown), err, tt.older, tt.unknown)
		}
	}
}
