//go:build linux

// Command measure runs a command and reports what it used: its peak
// resident memory and its CPU time, written as "maxrss_kib user_ns sys_ns"
// to file descriptor 3. It exits as the command exits.
//
// A test cannot read this from the rusage of a command it starts itself:
// Linux starts a process that os/exec makes (with vfork) from the parent's
// high-water mark, so a command run by a test binary that has grown reports
// the test binary's peak. measure is small, so the command's figures are
// its own.
//
// It is test support (package hostile builds and runs it).
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: measure COMMAND [ARG...]")
		os.Exit(2)
	}
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// Killed with measure, when a test kills measure on a timeout.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(125)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	out := os.NewFile(3, "usage")
	fmt.Fprintf(out, "%d %d %d\n", ru.Maxrss, ru.Utime.Nano(), ru.Stime.Nano())
	out.Close()
	if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); ws.Signaled() {
		os.Exit(128 + int(ws.Signal()))
	}
	os.Exit(cmd.ProcessState.ExitCode())
}
