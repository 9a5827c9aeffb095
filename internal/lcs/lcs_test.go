package lcs

import (
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"
)

// lcsLength is the textbook table, for checking small cases only.
func lcsLength(a, b []int32) int {
	t := make([][]int, len(a)+1)
	for i := range t {
		t[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	return t[0][0]
}

func TestLCSIsLongest(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	var shared Matcher
	for n := range 2000 {
		alpha := 1 + r.IntN(6)
		a, b := make([]int32, r.IntN(30)), make([]int32, r.IntN(30))
		for i := range a {
			a[i] = int32(r.IntN(alpha))
		}
		for i := range b {
			b[i] = int32(r.IntN(alpha + 2))
		}
		var got, again [][2]int
		Match(a, b, alpha+2, 0, func(i, j int) { got = append(got, [2]int{i, j}) })
		// A Matcher used for every case leaves its scratch as it found it.
		shared.Match(a, b, alpha+2, 0, func(i, j int) { again = append(again, [2]int{i, j}) })
		if !slices.Equal(got, again) {
			t.Fatalf("case %d: a reused Matcher matched %v, Match %v (a=%v b=%v)", n, again, got, a, b)
		}
		for k, p := range got {
			if a[p[0]] != b[p[1]] || (k > 0 && (p[0] <= got[k-1][0] || p[1] <= got[k-1][1])) {
				t.Fatalf("case %d: invalid match %v in %v (a=%v b=%v)", n, p, got, a, b)
			}
		}
		if want := lcsLength(a, b); len(got) != want {
			t.Fatalf("case %d: LCS length %d, want %d (a=%v b=%v)", n, len(got), want, a, b)
		}
	}
}

// TestLCSExpensiveStaysValid reverses a long run of shared steps: D is far
// beyond the search bound, and the alignment must still be valid.
func TestLCSExpensiveStaysValid(t *testing.T) {
	t.Parallel()
	const n = 6000
	a, b := make([]int32, n), make([]int32, n)
	for i := range n {
		a[i], b[n-1-i] = int32(i), int32(i)
	}
	last := [2]int{-1, -1}
	count := 0
	Match(a, b, n, 0, func(i, j int) {
		if a[i] != b[j] || i <= last[0] || j <= last[1] {
			t.Fatalf("invalid match (%d, %d) after %v", i, j, last)
		}
		last = [2]int{i, j}
		count++
	})
	if count < 1 {
		t.Errorf("no match found")
	}
}

// TestMatchScratchGrowsGeometrically: the diff aligns a long run stretch by
// stretch, numbering the stretches' keys as it goes, so that each call of
// a Matcher's Match may see one id more than the one before. Its scratch
// must grow geometrically: a new array for each call cost a diff of a
// 100,000-node fork 41 MB of allocation, a cost of the square of the run's
// length.
func TestMatchScratchGrowsGeometrically(t *testing.T) {
	const base, calls = 1 << 20, 200
	var m Matcher
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for i := range int32(calls) {
		id := int32(base) + i
		m.Match([]int32{0, id}, []int32{id, 1}, base+int(i)+1, 0, func(int, int) {})
	}
	runtime.ReadMemStats(&after)
	// Geometric growth allocates a few MB; an array per call would be
	// 200 MB.
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Errorf("%d calls with one id more each allocated %d MB, want a few", calls, got>>20)
	}
}
