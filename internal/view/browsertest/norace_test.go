//go:build !race

package browsertest

const raceEnabled = false
