//go:build !unix

package trace

// crashChild has nothing to do where the crash tests do not run.
func crashChild() {}
