package hostile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Usage is what one run of a command used.
type Usage struct {
	MaxRSS int64         // peak resident memory, in bytes
	CPU    time.Duration // user and system time
}

// Result is what one run of a command did.
type Result struct {
	Stdout, Stderr string
	Code           int  // its exit code; 128+N when killed by signal N
	Hung           bool // it outlived the timeout and was killed
	Usage
}

var measure struct {
	once      sync.Once
	dir, path string
	err       error
}

// Cleanup removes the command that [Run] built to measure what commands
// use. A test binary that calls Run calls it from TestMain, after m.Run.
func Cleanup() {
	if measure.dir != "" {
		os.RemoveAll(measure.dir)
	}
}

// measureBinary builds command measure once per process, into a
// temporary directory that [Cleanup] removes.
func measureBinary() (string, error) {
	measure.once.Do(func() {
		dir, err := os.MkdirTemp("", "stepfork-measure-")
		if err != nil {
			measure.err = err
			return
		}
		measure.dir = dir
		measure.path = filepath.Join(dir, "measure")
		// -buildvcs=false: a checkout without git (or owned by another
		// user) cannot stamp the binary, and measure needs no stamp.
		out, err := exec.Command("go", "build", "-buildvcs=false", "-o", measure.path, "github.com/stepfork/stepfork/internal/hostile/measure").CombinedOutput()
		if err != nil {
			measure.err = fmt.Errorf("building internal/hostile/measure: %v\n%s", err, out)
		}
	})
	return measure.path, measure.err
}

// Run runs name with args in dir, with env added to the environment, and
// returns what it printed and did and what it used, measured on its own
// (see command measure); a run that outlives timeout is killed.
func Run(timeout time.Duration, dir string, env []string, name string, args ...string) (Result, error) {
	m, err := measureBinary()
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, m, append([]string{name}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	pr, pw, err := os.Pipe()
	if err != nil {
		return Result{}, err
	}
	defer pr.Close()
	cmd.ExtraFiles = []*os.File{pw}
	err = cmd.Start()
	pw.Close()
	if err != nil {
		return Result{}, err
	}
	usage, _ := io.ReadAll(pr)
	err = cmd.Wait()
	r := Result{Stdout: stdout.String(), Stderr: stderr.String(), Hung: ctx.Err() != nil}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	default:
		return r, err
	}
	switch {
	case r.Hung:
		return r, nil
	case r.Code == 125:
		return r, fmt.Errorf("measure could not run %s: %s", name, r.Stderr)
	}
	var kib, user, sys int64
	if _, err := fmt.Sscan(string(usage), &kib, &user, &sys); err != nil {
		return r, fmt.Errorf("measure reported %q: %v", usage, err)
	}
	r.MaxRSS, r.CPU = kib<<10, time.Duration(user+sys)
	return r, nil
}
