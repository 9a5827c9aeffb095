package trace

import "testing"

// TestLookupField checks the key switch of the event decoder against the
// field names, and that near misses are unknown.
func TestLookupField(t *testing.T) {
	t.Parallel()
	for i, name := range fieldNames {
		if f, ok := lookupField([]byte(name)); !ok || f != eventField(i) {
			t.Errorf("lookupField(%q) = %d, %v; want %d, true", name, f, ok, i)
		}
	}
	for _, name := range []string{"", "ID", "run-id", "inputs", "step ", "cost", "usd"} {
		if f, ok := lookupField([]byte(name)); ok {
			t.Errorf("lookupField(%q) = %d, true; want unknown", name, f)
		}
	}
}
