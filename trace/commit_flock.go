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
// another process holds the lock. On a file system that has no flock it
// returns a lock that holds nothing.
func lockDir(path string) (*dirLock, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err {
	case nil:
		return &dirLock{f}, nil
	case syscall.ENOSYS, syscall.EOPNOTSUPP, syscall.ENOLCK, syscall.EINVAL:
		f.Close()
		return &dirLock{}, nil
	default:
		f.Close()
		return nil, err
	}
}

// deadAge is how old a leftover must be, on a file system without flock,
// before it is taken for the leftover of a dead save.
const deadAge = 24 * time.Hour

// tryLockDir locks the leftover directory at path when no process holds its
// lock: its save is dead. Without flock, a leftover older than deadAge is
// taken for dead.
func tryLockDir(path string, mod time.Time) (*dirLock, bool) {
	l, err := lockDir(path)
	if err != nil {
		return nil, false
	}
	if l.f == nil {
		return l, time.Since(mod) > deadAge
	}
	return l, true
}

func (l *dirLock) release() {
	if l != nil && l.f != nil {
		l.f.Close() // closing the descriptor releases the lock
		l.f = nil
	}
}
