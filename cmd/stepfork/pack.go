package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/stepfork/stepfork/trace"
)

var packCmd = &command{
	name:    "pack",
	args:    "PATH [-o FILE] [--overwrite]",
	summary: "pack a bundle into one compressed file",
	description: `
Pack writes the bundle directory PATH as one gzip-compressed tar file,
by default {stem}.sftrace.tar.gz beside it, for corpora of many runs that
should not bloat a repository. Every command reads a packed bundle as it
reads the directory, and its integrity.json covers its files the same way:
validate --verify-integrity checks them. The same bundle packs to the same
bytes (no times or owners of this machine are stored).

Directory bundles stay the default and the form Python stepfork reads;
unpack converts back.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &packOptions{}
		fs.StringVar(&o.output, "output", "", "write the packed bundle to `FILE` (default {stem}.sftrace.tar.gz)")
		aliasFlag(fs, "o", "output")
		fs.BoolVar(&o.overwrite, "overwrite", false, "replace an existing file at the output path")
		return func(e *env, args []string) int { return o.run(e, args[0], true) }
	},
}

var unpackCmd = &command{
	name:    "unpack",
	args:    "FILE [-o PATH] [--overwrite]",
	summary: "unpack a packed bundle into a bundle directory",
	description: `
Unpack writes the packed bundle FILE (NAME.sftrace.tar.gz) as the bundle
directory NAME.sftrace beside it, or at -o PATH, file for file and byte for
byte, atomically. A corrupt packed file is refused and nothing is written.`,
	minArgs: 1, maxArgs: 1,
	setup: func(fs *flag.FlagSet) func(*env, []string) int {
		o := &packOptions{}
		fs.StringVar(&o.output, "output", "", "write the bundle to `PATH` (default {stem}.sftrace)")
		aliasFlag(fs, "o", "output")
		fs.BoolVar(&o.overwrite, "overwrite", false, "replace an existing bundle at the output path")
		return func(e *env, args []string) int { return o.run(e, args[0], false) }
	},
}

type packOptions struct {
	output    string
	overwrite bool
}

func (o *packOptions) run(e *env, src string, pack bool) int {
	name, dst := "unpack", o.output
	if pack {
		name = "pack"
	}
	var opts []trace.SaveOption
	if o.overwrite {
		opts = append(opts, trace.Overwrite())
	}
	var err error
	if pack {
		if dst == "" {
			dst = strings.TrimSuffix(strings.TrimRight(src, `/\`), ".sftrace") + trace.PackedSuffix
		}
		err = trace.Pack(src, dst, opts...)
	} else {
		if dst == "" {
			dst = strings.TrimSuffix(src, trace.PackedSuffix) + ".sftrace"
		}
		err = trace.Unpack(src, dst, opts...)
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "stepfork %s: %s\n", name, redact(err.Error()))
		return exitInput
	}
	e.printf("%s\n", redact(dst))
	return exitOK
}
