// Package lcs computes a longest common subsequence of two sequences of
// small integer ids with Myers' O((N+M)·D) algorithm in linear space.
package lcs

// Match calls match(i, j), in increasing order of i and j, for the pairs of
// a longest common subsequence of a and b, whose elements are ids in
// [0, nids). maxCost, when positive, lowers the bound on D of one bisection
// (see costLimit).
//
// Elements that occur on one side only cannot be part of a common
// subsequence and are set aside first, so that sequences differing in a few
// elements cost little more than reading them; the rest is Myers' O((N+M)·D)
// algorithm in linear space (divide and conquer on the middle snake). In a
// part of the problem where D grows past a bound, the search stops at the
// furthest point it reached and splits there, as GNU diff does: the
// alignment stays valid but may there be shorter than the longest.
//
// Match allocates its scratch for the call; a caller that aligns many
// stretches of one run uses a [Matcher].
func Match(a, b []int32, nids, maxCost int, match func(i, j int)) {
	var m Matcher
	m.Match(a, b, nids, maxCost, match)
}

// A Matcher is [Match] with scratch kept from one call to the next, for a
// caller that aligns many short stretches of one long run (ids in the
// hundreds of thousands): it pays for the stretches, not for nids each
// time. The zero Matcher is ready to use. A Matcher is not safe for
// concurrent use; its Match may be called from the match function of
// another Matcher's.
type Matcher struct {
	// in has bit 1 set for the ids in a, bit 2 for those in b, all zero
	// between calls.
	in     []uint8
	v1, v2 []int // bisect's
}

// Match is [Match] using m's scratch.
func (m *Matcher) Match(a, b []int32, nids, maxCost int, match func(i, j int)) {
	if len(m.in) < nids {
		// Grown geometrically: a caller aligning stretch after stretch
		// numbers ids as it goes, so nids often grows by one per call,
		// and a new array each time would cost the square of the run.
		m.in = make([]uint8, max(nids, 2*len(m.in)))
	}
	in := m.in[:nids]
	for _, x := range a {
		in[x] |= 1
	}
	for _, x := range b {
		in[x] |= 2
	}
	fa, ia := keepShared(a, in, 2)
	fb, ib := keepShared(b, in, 1)
	for _, x := range a {
		in[x] = 0
	}
	for _, x := range b {
		in[x] = 0
	}
	my := &myers{a: fa, b: fb, sc: m, maxCost: maxCost, match: func(i, j int) { match(int(ia[i]), int(ib[j])) }}
	my.diff(0, len(fa), 0, len(fb))
}

// keepShared returns the elements of s whose id has the bit other set in
// in, and their indexes in s.
func keepShared(s []int32, in []uint8, other uint8) (kept, index []int32) {
	kept, index = make([]int32, 0, len(s)), make([]int32, 0, len(s))
	for i, x := range s {
		if in[x]&other != 0 {
			kept = append(kept, x)
			index = append(index, int32(i))
		}
	}
	return kept, index
}

type myers struct {
	a, b    []int32
	sc      *Matcher // its v1 and v2 are bisect's scratch
	maxCost int      // if positive, a lower bound on D than costLimit's
	match   func(i, j int)
}

// diff reports the matches of an LCS of a[aLo:aHi] and b[bLo:bHi].
func (m *myers) diff(aLo, aHi, bLo, bHi int) {
	for aLo < aHi && bLo < bHi && m.a[aLo] == m.b[bLo] {
		m.match(aLo, bLo)
		aLo++
		bLo++
	}
	suffix := 0
	for aHi-suffix > aLo && bHi-suffix > bLo && m.a[aHi-1-suffix] == m.b[bHi-1-suffix] {
		suffix++
	}
	aHi -= suffix
	bHi -= suffix
	if aLo < aHi && bLo < bHi {
		if x, y, ok := m.bisect(aLo, aHi, bLo, bHi); ok {
			m.diff(aLo, x, bLo, y)
			m.diff(x, aHi, y, bHi)
		}
	}
	for k := 0; k < suffix; k++ {
		m.match(aHi+k, bHi+k)
	}
}

// bisect finds a point (x, y) on an optimal edit path of a[aLo:aHi] and
// b[bLo:bHi] by running the forward and the reverse search until they meet
// (Myers 1986, §4b; the formulation of diff-match-patch). ok is false when
// the two have nothing in common.
func (m *myers) bisect(aLo, aHi, bLo, bHi int) (x, y int, ok bool) {
	a, b := m.a[aLo:aHi], m.b[bLo:bHi]
	n, mm := len(a), len(b)
	maxD := (n + mm + 1) / 2
	off := maxD
	vlen := 2 * maxD
	sc := m.sc
	if cap(sc.v1) < vlen+2 {
		sc.v1, sc.v2 = make([]int, vlen+2), make([]int, vlen+2)
	}
	v1, v2 := sc.v1[:vlen+2], sc.v2[:vlen+2]
	for i := range v1 {
		v1[i], v2[i] = -1, -1
	}
	v1[off+1], v2[off+1] = 0, 0
	delta := n - mm
	front := delta%2 != 0
	k1start, k1end, k2start, k2end := 0, 0, 0, 0
	limit := min(maxD, costLimit(n+mm))
	if m.maxCost > 0 {
		limit = min(limit, m.maxCost)
	}
	bestX, bestY := -1, -1
	for d := 0; d < limit; d++ {
		for k1 := -d + k1start; k1 <= d-k1end; k1 += 2 {
			k1o := off + k1
			var x1 int
			if k1 == -d || (k1 != d && v1[k1o-1] < v1[k1o+1]) {
				x1 = v1[k1o+1]
			} else {
				x1 = v1[k1o-1] + 1
			}
			y1 := x1 - k1
			for x1 < n && y1 < mm && a[x1] == b[y1] {
				x1++
				y1++
			}
			v1[k1o] = x1
			switch {
			case x1 > n:
				k1end += 2
			case y1 > mm:
				k1start += 2
			default:
				if x1+y1 > bestX+bestY {
					bestX, bestY = x1, y1
				}
				if front {
					k2o := off + delta - k1
					if k2o >= 0 && k2o < vlen && v2[k2o] != -1 && x1 >= n-v2[k2o] {
						return aLo + x1, bLo + y1, true
					}
				}
			}
		}
		for k2 := -d + k2start; k2 <= d-k2end; k2 += 2 {
			k2o := off + k2
			var x2 int
			if k2 == -d || (k2 != d && v2[k2o-1] < v2[k2o+1]) {
				x2 = v2[k2o+1]
			} else {
				x2 = v2[k2o-1] + 1
			}
			y2 := x2 - k2
			for x2 < n && y2 < mm && a[n-x2-1] == b[mm-y2-1] {
				x2++
				y2++
			}
			v2[k2o] = x2
			switch {
			case x2 > n:
				k2end += 2
			case y2 > mm:
				k2start += 2
			case !front:
				k1o := off + delta - k2
				if k1o >= 0 && k1o < vlen && v1[k1o] != -1 {
					x1 := v1[k1o]
					y1 := off + x1 - k1o
					if x1 >= n-x2 {
						return aLo + x1, bLo + y1, true
					}
				}
			}
		}
	}
	// Too expensive (or nothing in common): split at the furthest point
	// the forward search reached, if that makes progress.
	if bestX+bestY > 0 && bestX+bestY < n+mm {
		return aLo + bestX, bLo + bestY, true
	}
	return 0, 0, false
}

// costLimit bounds D in one bisection of a problem of the given size:
// beyond it the search settles for a valid, possibly longer, edit path.
func costLimit(size int) int {
	l := 1
	for size > 0 {
		size >>= 2
		l <<= 1
	}
	return max(l*4, 2048)
}
