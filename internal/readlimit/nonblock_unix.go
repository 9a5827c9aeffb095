//go:build unix

package readlimit

import "syscall"

// openNonblock makes opening a FIFO or a device return at once instead of
// waiting for a writer; such a file is then refused.
const openNonblock = syscall.O_NONBLOCK
