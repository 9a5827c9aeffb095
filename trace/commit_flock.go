//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package trace

import (
	"os"
	"syscall"
	"time"
)

// dirLock is an exclusive flock on a directory, held by the process that
// writes into it; the kernel releases it when the process ends, however it
// ends. A nil *dirLock holds nothing.
type dirLock struct{ f *os.File }

// lockDir locks the directory at path, waiting for no one: it fails if
// another process holds the lock.
func lockDir(path string) (*dirLock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, err
	}
	return &dirLock{f}, nil
}

// tryLockDir locks the leftover directory at path when no process holds its
// lock: its save is dead.
func tryLockDir(path string, _ time.Time) (*dirLock, bool) {
	l, err := lockDir(path)
	return l, err == nil
}

func (l *dirLock) release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the descriptor releases the lock
		l.f = nil
	}
}
