//go:build (linux && amd64) || arm64

package replay

import (
	"sync"
	"unsafe"
)

// getg returns the running goroutine's runtime descriptor: on arm64 the
// register the Go ABI keeps it in on every system, on linux/amd64 the
// thread-local slot (elsewhere goid reads runtime.Stack).
func getg() unsafe.Pointer

// The offset of the goroutine id inside the runtime's g, found once by
// searching the descriptors of three goroutines for the ids runtime.Stack
// prints for them. The layout of g is not part of Go's API, so nothing is
// assumed: -1 when no offset matched all three, and goid reads the stack
// header instead.
var (
	goidOnce   sync.Once
	goidOffset = -1
)

// gScan is how far into g the id is searched for; it sits in the first
// few hundred bytes in every Go release so far, and g is larger than this.
const gScan = 256

func findGoidOffset() {
	type probe struct {
		g  unsafe.Pointer
		id uint64
	}
	// Three new goroutines, not the caller: runtime.Stack walks the whole
	// stack of the goroutine it prints, and the caller's is deep.
	probes := make([]probe, 3)
	var wg sync.WaitGroup
	hold := make(chan struct{})
	for i := range probes {
		wg.Add(1)
		go func() {
			probes[i] = probe{getg(), stackGoid()}
			wg.Done()
			<-hold // alive, so the three descriptors are distinct
		}()
	}
	wg.Wait()
	defer close(hold)
	for off := 0; off+8 <= gScan; off += 8 {
		ok := true
		for _, p := range probes {
			if p.id == 0 || *(*uint64)(unsafe.Add(p.g, off)) != p.id {
				ok = false
				break
			}
		}
		if ok {
			goidOffset = off
			return
		}
	}
}

// goid returns the id of the calling goroutine. Sessions use it to tell
// the goroutine that opened a scope from the others that call in it; it is
// never called without a session.
func goid() uint64 {
	goidOnce.Do(findGoidOffset)
	if goidOffset < 0 {
		return stackGoid()
	}
	return *(*uint64)(unsafe.Add(getg(), goidOffset))
}
