package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"

	"github.com/stepfork/stepfork/internal/view"
)

var viewCmd = &command{
	name:    "view",
	args:    "PATH [PATH2] [--open] [--html FILE]",
	summary: "see a run, a fork, a diff or a sweep as an HTML page",
	description: `
View shows bundles as a page in a browser:

  stepfork view RUN.sftrace              a run's timeline (a fork's too, with
                                         its fork point, changes and tail)
  stepfork view BASE.sftrace VARIANT.sftrace
                                         both runs aligned step by step, the
                                         first divergence and what changed
  stepfork view [BASE.sftrace] DIR       a sweep saved with fork.SaveDir: one
                                         row per variant, each opening its diff
                                         (without BASE, the base the variants'
                                         fork.json name, when it is found)

A bundle is a directory or a packed NAME.sftrace.tar.gz.

It serves the page on 127.0.0.1 at a free port and prints the URL until
interrupted (Ctrl-C); --open also opens it in a browser. Only the bundles
given are served. --html FILE writes one self-contained page instead (no
network needed; it opens from file://).

Every value shown is redacted first. Exit codes: 0 success, 1 the page could
not be served or written, 2 unreadable input or a usage error.`,
	minArgs: 1, maxArgs: 2,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &viewOptions{}
		fs.BoolVar(&o.open, "open", false, "open the page in a browser")
		fs.StringVar(&o.html, "html", "", "write the page to `FILE` instead of serving it")
		return func(e *env, args []string) int {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return o.run(ctx, e, args)
		}
	},
}

type viewOptions struct {
	open bool
	html string
}

func (o *viewOptions) run(ctx context.Context, e *env, args []string) int {
	site, err := view.Open(args...)
	if err != nil {
		fmt.Fprintf(e.stderr, "stepfork view: %s\n", clean(err.Error()))
		return exitInput
	}
	if o.html != "" {
		if err := view.WriteFile(o.html, site.Page(false)); err != nil {
			fmt.Fprintf(e.stderr, "stepfork view: %s\n", clean(err.Error()))
			return exitDifferent
		}
		abs, err := filepath.Abs(o.html)
		if err != nil {
			abs = o.html
		}
		e.printf("Wrote %s: %s\n", clean(site.Describe()), clean(abs))
		if o.open {
			openBrowser(e, "file://"+filepath.ToSlash(abs))
		}
		return exitOK
	}
	err = site.Serve(ctx, func(url string) {
		e.printf("Serving %s at %s (Ctrl-C to stop)\n", clean(site.Describe()), url)
		if o.open {
			openBrowser(e, url)
		}
	})
	if err != nil {
		fmt.Fprintf(e.stderr, "stepfork view: %s\n", clean(err.Error()))
		return exitDifferent
	}
	return exitOK
}

// openBrowser asks the desktop to open url; when it cannot, it says so and
// the command goes on.
func openBrowser(e *env, url string) {
	name, args := "xdg-open", []string{url}
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", url}
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(e.stderr, "stepfork view: cannot open a browser (%v); open %s yourself\n", err, url)
		return
	}
	go cmd.Wait()
}
