//go:build !unix

package readlimit

// openNonblock is zero where opening a file has no non-blocking mode.
const openNonblock = 0
