// Package diff compares the behavior of two runs recorded as
// [trace.Trace] values.
//
// [Runs] reduces each run to its behavior steps ([trace.Trace.Behavior]),
// aligns the two step lists by a longest common subsequence (Myers'
// O((N+M)·D) algorithm in linear space), and reports the first divergence,
// the changes of every changed step with paths ("output.price",
// "input.args[1]"), the deltas of the final state, both runs' terminal
// status, and the token and cost deltas, in a [Result]. Ids, timestamps,
// durations, tokens and costs are not behavior: two runs that differ only in
// them are [Result.Equivalent].
//
// [AlignPosition] reproduces Python stepfork's diff_traces instead: steps
// aligned by position, and [Result.JSON] byte-identical to
// `stepfork diff --json`.
//
// Comparing many variants with one base run (a fork sweep), [Prepare]
// extracts the base once:
//
//	p := diff.Prepare(base)
//	for _, v := range variants {
//		d := p.Diff(v) // the same as diff.Runs(base, v)
//	}
//
// Comparing two saved runs too large to hold both in memory, [Bundles]
// gives the Result of Runs without loading either: it reads each bundle
// once keeping a digest of each step, and reads again only the payloads of
// the aligned steps whose digests differ.
package diff
