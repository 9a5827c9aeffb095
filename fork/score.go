package fork

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/stepfork/stepfork/trace"
)

// Score scores every run a fork makes, and its base: score is a function of
// a run's trace and its output (the run_end's, null for a run that did not
// finish), larger is better. A scored [Variant] has Score, BaseScore and
// their delta in its [Variant.Explain]; a scored [Sweep] ranks its variants
// ([Sweep.Ranked]) and says which beats which beyond the noise of its
// [Samples] ([Sweep.Beats]). Scores from 0 to 1 where 1 is a pass (a
// pass/fail check) get exact binomial-style intervals; see [Stats].
func Score(score func(run *trace.Trace, output trace.Value) float64) Option {
	return optionFunc(func(c *config) { c.score = score })
}

// runOutput is the output a run's last run_end recorded, null without one.
func runOutput(tr *trace.Trace) trace.Value {
	for i := len(tr.Events) - 1; i >= 0; i-- {
		if tr.Events[i].Type == trace.RunEnd {
			if o := tr.Events[i].Output; !o.IsAbsent() {
				return o
			}
			break
		}
	}
	return trace.NullValue
}

// Stats summarises the samples of one variant of a sweep.
type Stats struct {
	// Samples is the number of samples that ran.
	Samples int
	// Mean is their mean score ([Score]), and Low and High bound it with
	// 95 % confidence: Wilson's interval when every score is 0 or 1 (a
	// pass/fail score, whose mean is a rate), else the mean ± 1.96 standard
	// errors (unbounded below 2 samples). All are NaN without a Score.
	Mean, Low, High float64
	// PassRate is the share of the samples that completed, and PassLow and
	// PassHigh its 95 % Wilson interval.
	PassRate, PassLow, PassHigh float64
}

// Stats computes the statistics of the samples of e that ran.
func (e *Entry) Stats() Stats {
	st := Stats{Mean: math.NaN(), Low: math.NaN(), High: math.NaN()}
	var scores []float64
	completed := 0
	for _, v := range e.Samples {
		if v == nil {
			continue
		}
		st.Samples++
		if v.Status == StatusCompleted {
			completed++
		}
		if v.Scored {
			scores = append(scores, v.Score)
		}
	}
	if st.Samples == 0 {
		return Stats{Mean: math.NaN(), Low: math.NaN(), High: math.NaN(), PassRate: math.NaN(), PassLow: math.NaN(), PassHigh: math.NaN()}
	}
	st.PassRate, st.PassLow, st.PassHigh = wilson(completed, st.Samples)
	if len(scores) == 0 {
		return st
	}
	sum, binary := 0.0, true
	for _, s := range scores {
		sum += s
		binary = binary && (s == 0 || s == 1)
	}
	n := float64(len(scores))
	st.Mean = sum / n
	if binary {
		_, st.Low, st.High = wilson(int(sum), len(scores))
		return st
	}
	if len(scores) < 2 {
		st.Low, st.High = math.Inf(-1), math.Inf(1)
		return st
	}
	ss := 0.0
	for _, s := range scores {
		ss += (s - st.Mean) * (s - st.Mean)
	}
	half := 1.96 * math.Sqrt(ss/(n-1)/n)
	st.Low, st.High = st.Mean-half, st.Mean+half
	return st
}

// wilson is the rate k/n with its 95 % Wilson score interval.
func wilson(k, n int) (rate, low, high float64) {
	const z = 1.96
	p, nf := float64(k)/float64(n), float64(n)
	d := 1 + z*z/nf
	center := (p + z*z/(2*nf)) / d
	half := z * math.Sqrt(p*(1-p)/nf+z*z/(4*nf*nf)) / d
	return p, max(0, center-half), min(1, center+half)
}

// Ranked returns the entries of the sweep from the best mean score to the
// worst (then by pass rate, then in the order given); entries without
// samples come last.
func (s *Sweep) Ranked() []*Entry {
	out := make([]*Entry, len(s.Entries))
	for i := range s.Entries {
		out[i] = &s.Entries[i]
	}
	key := func(e *Entry) (float64, float64) {
		st := e.Stats()
		mean, pass := st.Mean, st.PassRate
		if math.IsNaN(mean) {
			mean = math.Inf(-1)
		}
		if math.IsNaN(pass) {
			pass = math.Inf(-1)
		}
		return mean, pass
	}
	slices.SortStableFunc(out, func(a, b *Entry) int {
		am, ap := key(a)
		bm, bp := key(b)
		return cmp.Or(cmp.Compare(bm, am), cmp.Compare(bp, ap))
	})
	return out
}

// Beats reports whether variant a scores better than variant b beyond the
// noise of their samples: the 95 % interval of a's mean score lies entirely
// above b's ([Stats]). It is an error when either is not in the sweep or the
// sweep was not scored ([Score]).
func (s *Sweep) Beats(a, b string) (bool, error) {
	ea, eb := s.Entry(a), s.Entry(b)
	for name, e := range map[string]*Entry{a: ea, b: eb} {
		if e == nil {
			return false, fmt.Errorf("fork: no variant '%s' in the sweep", name)
		}
	}
	sa, sb := ea.Stats(), eb.Stats()
	if math.IsNaN(sa.Mean) || math.IsNaN(sb.Mean) {
		return false, fmt.Errorf("fork: the sweep has no scores for '%s' and '%s'; run it with fork.Score", a, b)
	}
	return sa.Low > sb.High, nil
}
