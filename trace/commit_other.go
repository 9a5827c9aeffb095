//go:build !linux

package trace

// exchange would swap two directories in one step; there is no portable way
// to do it outside Linux, so commitBundle falls back to two renames.
func exchange(a, b string) error { return errNoExchange }

// renameat2 reports that there is no renameat2 system call here.
func renameat2() (uintptr, bool) { return 0, false }
