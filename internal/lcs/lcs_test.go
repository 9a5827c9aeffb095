package lcs

import (
	"math/rand/v2"
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
	for n := range 2000 {
		alpha := 1 + r.IntN(6)
		a, b := make([]int32, r.IntN(30)), make([]int32, r.IntN(30))
		for i := range a {
			a[i] = int32(r.IntN(alpha))
		}
		for i := range b {
			b[i] = int32(r.IntN(alpha + 2))
		}
		var got [][2]int
		Match(a, b, alpha+2, 0, func(i, j int) { got = append(got, [2]int{i, j}) })
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
