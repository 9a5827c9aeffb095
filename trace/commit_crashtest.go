//go:build stepfork_crashtest

package trace

import (
	"os"
	"strconv"
)

// Built with -tags stepfork_crashtest, as the CLI's crash tests build the
// stepfork command, a program kills itself (SIGKILL) at the k-th step of
// writing a bundle that commitHook reports, k from STEPFORK_CRASH_AT; with
// STEPFORK_CRASH_FALLBACK=1 it uses the two renames instead of the
// exchange. No other build has this file.
func init() {
	k, err := strconv.Atoi(os.Getenv("STEPFORK_CRASH_AT"))
	if err != nil || k <= 0 {
		return
	}
	noExchange = os.Getenv("STEPFORK_CRASH_FALLBACK") == "1"
	n := 0
	commitHook = func(string) {
		if n++; n == k {
			p, _ := os.FindProcess(os.Getpid())
			p.Signal(os.Kill)
			select {}
		}
	}
}
