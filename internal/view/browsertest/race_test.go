//go:build race

package browsertest

// raceEnabled says this test binary was built with -race, so that the go
// test it runs builds with it too and shares the build cache.
const raceEnabled = true
