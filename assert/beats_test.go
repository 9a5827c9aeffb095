package assert_test

import (
	"testing"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
)

// scored is a sweep entry of n samples, k of which scored 1.
func scored(name string, k, n int) fork.Entry {
	e := fork.Entry{Name: name}
	for i := range n {
		v := &fork.Variant{Status: fork.StatusCompleted, Scored: true}
		if i < k {
			v.Score = 1
		}
		e.Samples = append(e.Samples, v)
	}
	e.Variant = e.Samples[0]
	return e
}

func TestBeats(t *testing.T) {
	t.Parallel()
	sw := &fork.Sweep{Entries: []fork.Entry{scored("fixed", 19, 20), scored("shipped", 4, 20), scored("close", 6, 20)}}
	unscored := &fork.Sweep{Entries: []fork.Entry{{Name: "a", Samples: []*fork.Variant{{}}}, {Name: "b", Samples: []*fork.Variant{{}}}}}
	tests := []struct {
		name string
		a    assertion
		want string
	}{
		{"beats", func(t assert.TestingT) bool { return assert.Beats(t, sw, "fixed", "shipped") }, ""},
		{"within the noise", func(t assert.TestingT) bool { return assert.Beats(t, sw, "close", "shipped") },
			"expected 'close' to beat 'shipped' beyond the noise; 'close' scores 0.30 [0.15, 0.52] over 20 sample(s), 'shipped' 0.20 [0.08, 0.42] over 20: the intervals overlap (more samples may tell them apart)"},
		{"worse", func(t assert.TestingT) bool { return assert.Beats(t, sw, "shipped", "fixed") },
			"expected 'shipped' to beat 'fixed' beyond the noise; 'shipped' scores 0.20 [0.08, 0.42] over 20 sample(s), 'fixed' 0.95 [0.76, 0.99] over 20: it does not score higher"},
		{"unknown variant", func(t assert.TestingT) bool { return assert.Beats(t, sw, "fixed", "nope") },
			"Beats: fork: no variant 'nope' in the sweep"},
		{"not scored", func(t assert.TestingT) bool { return assert.Beats(t, unscored, "a", "b") },
			"Beats: fork: the sweep has no scores for 'a' and 'b'; run it with fork.Score"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			runAssertion(t, tt.a, tt.want)
		})
	}
}
