//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package trace

import (
	"time"
)

// dirLock stands for a lock where there is no flock: nothing is held, and a
// leftover is taken for the leftover of a dead save by its age alone.
type dirLock struct{}

// deadAge is how old a leftover must be, on systems without flock, before
// it is taken for the leftover of a dead save.
const deadAge = 24 * time.Hour

func lockDir(string) (*dirLock, error) { return &dirLock{}, nil }

func tryLockDir(_ string, mod time.Time) (*dirLock, bool) {
	return &dirLock{}, time.Since(mod) > deadAge
}

func (*dirLock) release() {}
