package trace

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// naiveMayHoldCredential is the filter's definition: some anchor, or
// "bearer" in any case, is a substring.
func naiveMayHoldCredential(s string) bool {
	for _, a := range credentialAnchors {
		if strings.Contains(s, a) {
			return true
		}
	}
	return strings.Contains(strings.ToLower(s), "bearer")
}

// TestMayHoldCredentialIsItsDefinition compares the pair filter with the
// definition on strings built from anchors, their prefixes and noise, at
// every position, including the very end.
func TestMayHoldCredentialIsItsDefinition(t *testing.T) {
	t.Parallel()
	r := rand.New(rand.NewPCG(1, 2))
	pieces := append([]string{"", "a", "s", "k", "-", "_", "b", "B", "e", "r", "A", "I", "z", "x", "o", "y", "J", "P",
		"bEaReR", "Bearer ", "bea", "RIVATE", "PRIVATE KE", "ghp", "AKI", "ey", "sk", "ü", "\u212a", `"`, "\\"}, credentialAnchors...)
	for i := 0; i < 20000; i++ {
		var b strings.Builder
		for n := r.IntN(6); n >= 0; n-- {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		s := b.String()
		if got, want := mayHoldCredential(s), naiveMayHoldCredential(s); got != want {
			t.Fatalf("mayHoldCredential(%q) = %v, want %v", s, got, want)
		}
	}
	for _, a := range append(credentialAnchors, "bearer", "BEARER") {
		for _, s := range []string{a, "x" + a, a + "x", "xx" + a[:len(a)-1]} {
			if got, want := mayHoldCredential(s), naiveMayHoldCredential(s); got != want {
				t.Errorf("mayHoldCredential(%q) = %v, want %v", s, got, want)
			}
		}
	}
}

func BenchmarkMayHoldCredential(b *testing.B) {
	text := strings.Repeat(`{"content":"The refund of order 1234 was approved by the agent after checking the policy limits and the customer's history.","role":"assistant","usage":{"total_tokens":42}}`, 8)
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		if mayHoldCredential(text) {
			b.Fatal("no anchor in the text")
		}
	}
}
