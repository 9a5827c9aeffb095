//go:build race

package trace

// raceEnabled is set under the race detector, which makes sync.Pool drop
// items at random, so allocation counts are not meaningful.
const raceEnabled = true
