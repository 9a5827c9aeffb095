//go:build !((linux && amd64) || arm64)

package replay

// goid returns the id of the calling goroutine. Sessions use it to tell
// the goroutine that opened a scope from the others that call in it; it is
// never called without a session.
func goid() uint64 { return stackGoid() }

// goidOffset is -1: no offset is looked for here.
const goidOffset = -1
