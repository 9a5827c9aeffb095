package fork

import (
	"context"
	"fmt"
	"hash/fnv"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

// coin is an agent whose model answers "yes" at the rate the parameter
// "rate" says. The answers are pseudo-random but fixed per rate: the n-th
// call at a rate always gets the same answer, whatever order the samples
// run in, so the test is deterministic.
type coin struct {
	mu    sync.Mutex
	calls map[float64]int
}

func (c *coin) agent() replay.Agent {
	return func(ctx context.Context, _ trace.Value) (any, error) {
		rate := replay.Param(ctx, "rate", 0.5)
		resp, err := replay.LLM(ctx, replay.Request{Provider: "fake", Model: "coin", Messages: []replay.Message{{Role: "user", Content: "heads?"}}},
			func(context.Context, replay.Request) (replay.Response, error) {
				c.mu.Lock()
				n := c.calls[rate]
				c.calls[rate]++
				c.mu.Unlock()
				h := fnv.New64a()
				fmt.Fprintf(h, "%v/%d", rate, n)
				answer := "no"
				if float64(h.Sum64()%10000)/10000 < rate {
					answer = "yes"
				}
				return replay.Response{Content: answer}, nil
			})
		if err != nil {
			return nil, err
		}
		return resp.Content, nil
	}
}

// yes scores a run 1 when it answered "yes".
func yes(_ *trace.Trace, output trace.Value) float64 {
	if s, _ := output.Str(); s == "yes" {
		return 1
	}
	return 0
}

// TestScores: with a Score, every variant and the base are scored; a sweep
// of 8 variants × 20 samples of known rates reports each variant's mean
// score with a 95 % interval that covers its rate, ranks the variants by
// it, and tells a variant that beats another beyond the noise from one
// that does not.
func TestScores(t *testing.T) {
	t.Parallel()
	c := &coin{calls: map[float64]int{}}
	rec, err := replay.Record(context.Background(), "coin", nil, c.agent())
	require.NoError(t, err)
	base := rec.Trace

	v, err := Run(context.Background(), base, Start(), c.agent(), Param("rate", 1.0), Score(yes))
	require.NoError(t, err)
	require.True(t, v.Scored)
	assert.Equal(t, 1.0, v.Score)
	assert.Equal(t, yes(base, runOutput(base)), v.BaseScore)
	assert.Contains(t, v.Explain(), fmt.Sprintf("  score     1.00 (base %.2f, %+.2f)\n", v.BaseScore, 1-v.BaseScore))

	rates := []float64{0.02, 0.15, 0.3, 0.45, 0.6, 0.75, 0.88, 0.98}
	var variants []Named
	for i := len(rates) - 1; i >= 0; i-- { // given in the reverse of their rank
		variants = append(variants, Named{Name: fmt.Sprint(rates[i]), Changes: []Change{Param("rate", rates[i])}})
	}
	sw, err := Each(context.Background(), base, Start(), c.agent(), variants, Samples(20), Score(yes))
	require.NoError(t, err)
	for i := range sw.Entries {
		e := &sw.Entries[i]
		st := e.Stats()
		var rate float64
		fmt.Sscan(e.Name, &rate)
		assert.Equal(t, 20, st.Samples)
		assert.True(t, st.Low <= rate && rate <= st.High, "%s: the interval [%.3f, %.3f] around %.3f misses the rate", e.Name, st.Low, st.High, st.Mean)
		assert.True(t, st.Low >= 0 && st.High <= 1 && st.Low <= st.Mean && st.Mean <= st.High, "%s: %+v", e.Name, st)
		assert.Equal(t, 1.0, st.PassRate, "every sample completed")
	}
	ranked := sw.Ranked()
	require.Len(t, ranked, len(rates))
	for i := 1; i < len(ranked); i++ {
		assert.GreaterOrEqual(t, ranked[i-1].Stats().Mean, ranked[i].Stats().Mean, "ranked by mean score")
	}
	assert.Equal(t, "0.98", ranked[0].Name)
	assert.Equal(t, "0.02", ranked[len(ranked)-1].Name)

	beats, err := sw.Beats("0.98", "0.02")
	require.NoError(t, err)
	assert.True(t, beats, "0.98 beats 0.02 beyond the noise")
	beats, err = sw.Beats("0.45", "0.3")
	require.NoError(t, err)
	assert.False(t, beats, "20 samples do not tell 0.45 from 0.3")
	_, err = sw.Beats("0.98", "nope")
	assert.ErrorContains(t, err, "no variant 'nope'")
	// Explain keeps each variant's mean score and its interval.
	st := sw.Entry("0.45").Stats()
	assert.Contains(t, sw.Explain(), fmt.Sprintf("      score     %.2f [%.2f, %.2f] (base %.2f)\n", st.Mean, st.Low, st.High, sw.Entry("0.45").Variant.BaseScore))
	assert.Contains(t, sw.Explain(), "      samples   20: 20 completed; mean $0.00 each\n")
	assert.False(t, math.IsNaN(sw.Entries[0].Stats().Mean))
}
