package replay

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/trace"
)

// TestCopyNumbersSharesNothing checks that a served model response gets
// copies of the recorded numbers, nil where the recording has none, and no
// pointer into the recorded event: a test that edits the new trace must not
// change its base.
func TestCopyNumbersSharesNothing(t *testing.T) {
	t.Parallel()
	i64 := func(v int64) *int64 { return &v }
	f64 := func(v float64) *float64 { return &v }
	for _, tc := range []struct {
		name string
		b    trace.Event
	}{
		{"none", trace.Event{}},
		{"all", trace.Event{DurationMS: i64(7), PromptTokens: i64(12), CompletionTokens: i64(5), TotalTokens: i64(17), CostUSD: f64(0.0012)}},
		{"tokens only", trace.Event{PromptTokens: i64(1), CompletionTokens: i64(2), TotalTokens: i64(3)}},
		{"cost only", trace.Event{CostUSD: f64(0)}},
		{"duration only", trace.Event{DurationMS: i64(0)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// ev starts with numbers of its own, which copyNumbers replaces.
			ev := trace.Event{DurationMS: i64(99), PromptTokens: i64(99), CompletionTokens: i64(99), TotalTokens: i64(99), CostUSD: f64(99)}
			copyNumbers(&ev, &tc.b)
			ints := []struct {
				name     string
				got, rec *int64
			}{
				{"DurationMS", ev.DurationMS, tc.b.DurationMS},
				{"PromptTokens", ev.PromptTokens, tc.b.PromptTokens},
				{"CompletionTokens", ev.CompletionTokens, tc.b.CompletionTokens},
				{"TotalTokens", ev.TotalTokens, tc.b.TotalTokens},
			}
			for _, f := range ints {
				if f.rec == nil {
					require.Nil(t, f.got, f.name)
					continue
				}
				require.NotNil(t, f.got, f.name)
				require.NotSame(t, f.rec, f.got, f.name)
				require.Equal(t, *f.rec, *f.got, f.name)
				*f.got += 1000
				require.NotEqual(t, *f.rec, *f.got, "%s: writing the copy changed the recording", f.name)
			}
			if tc.b.CostUSD == nil {
				require.Nil(t, ev.CostUSD)
				return
			}
			require.NotNil(t, ev.CostUSD)
			require.NotSame(t, tc.b.CostUSD, ev.CostUSD)
			require.Equal(t, *tc.b.CostUSD, *ev.CostUSD)
			*ev.CostUSD += 1000
			require.NotEqual(t, *tc.b.CostUSD, *ev.CostUSD)
		})
	}
}
