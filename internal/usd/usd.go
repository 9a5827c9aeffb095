// Package usd prints amounts of US dollars — what a run, a call, a variant
// or a sweep cost — the one way every text of the module shows them: the
// CLI, goldens, Explain, failure messages, pages and chart ticks.
//
// An amount is shown to the micro-dollar (a millionth of a dollar), with
// the trailing zeros cut but at least cents: $0.00, $0.000015, $0.0021,
// $0.50, $12.345678. A model call costs a few micro-dollars to a few cents,
// so four fixed decimals ($0.0000) would hide most of them; a micro-dollar
// shows every significant digit of such a cost. A positive amount below
// half a micro-dollar is shown as "<$0.000001", never as $0.00.
//
// A total is the sum of its parts as they are shown ([Sum]), so that a
// reader adding up a column gets the total printed below it.
package usd

import (
	"math"
	"strconv"
	"strings"
)

// micro is the resolution amounts are shown at: one micro-dollar.
const micro = 1e-6

// Round is x as [Format] shows it: rounded to the micro-dollar, half away
// from zero. A positive amount below half a micro-dollar rounds to 0 (Format
// shows it as "<$0.000001").
func Round(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	return float64(micros(x)) * micro
}

// micros is x in whole micro-dollars.
func micros(x float64) int64 {
	return int64(math.Round(x / micro))
}

// Format is the amount x: "$" and x to the micro-dollar, trailing zeros cut
// but at least two decimals ("$0.00", "$0.000015", "$0.50", "$12.345678");
// "<$0.000001" for a positive amount below half a micro-dollar; a negative
// amount is "-$0.0021". NaN and infinities are "$?".
func Format(x float64) string {
	switch {
	case math.IsNaN(x) || math.IsInf(x, 0):
		return "$?"
	case x < 0:
		return "-" + Format(-x)
	}
	m := micros(x)
	if m == 0 && x > 0 {
		return "<$0.000001"
	}
	s := strconv.FormatInt(m, 10)
	if len(s) < 7 {
		s = strings.Repeat("0", 7-len(s)) + s
	}
	whole, frac := s[:len(s)-6], strings.TrimRight(s[len(s)-6:], "0")
	for len(frac) < 2 {
		frac += "0"
	}
	return "$" + whole + "." + frac
}

// Delta is a difference of two amounts with its sign: "+$0.0021",
// "-$0.000015", "+$0.00" when they are equal as shown.
func Delta(x float64) string {
	if x < 0 && micros(x) != 0 {
		return Format(x)
	}
	if x < 0 {
		return "-" + Format(-x) // "-<$0.000001"
	}
	return "+" + Format(x)
}

// Sum is the total of xs as they are shown: the sum of each one rounded by
// [Round], computed in whole micro-dollars so that no rounding error of
// floating point creeps in. When every part rounds to nothing but some are
// positive, the total is their exact sum, kept below half a micro-dollar
// unless it reaches one, so that "<$0.000001" parts add up to
// "<$0.000001", not to $0.00.
func Sum(xs ...float64) float64 {
	var m int64
	exact := 0.0
	for _, x := range xs {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return x
		}
		m += micros(x)
		exact += x
	}
	if m == 0 && exact > 0 {
		return exact
	}
	return float64(m) * micro
}

// Ticks returns n+1 evenly spaced amounts from 0 to at least top, each a
// "nice" step (1, 2 or 5 times a power of ten, at least a micro-dollar), for
// the axis of a chart; every tick is exact when shown with [Format].
func Ticks(top float64, n int) []float64 {
	n = max(n, 1)
	if !(top > 0) || math.IsInf(top, 0) {
		top = micro * float64(n)
	}
	raw := top / float64(n)
	step := micro
	if raw > micro {
		p := math.Pow(10, math.Floor(math.Log10(raw)))
		for _, f := range []float64{1, 2, 5, 10} {
			if f*p >= raw*(1-1e-9) {
				step = f * p
				break
			}
		}
	}
	stepM := max(micros(step), 1)
	out := make([]float64, n+1)
	for i := range out {
		out[i] = float64(int64(i)*stepM) * micro
	}
	return out
}
