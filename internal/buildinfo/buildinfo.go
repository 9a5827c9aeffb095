// Package buildinfo finds which code a function belongs to: the module of
// its package, that module's version and VCS revision, from
// runtime/debug.ReadBuildInfo, for the build.json of the runs replay
// records (trace.BuildFile).
//
// The toolchain stamps the main module's revision, commit time and
// modified flag when go build runs in a repository; go test does not
// (unless -buildvcs=true), so for a test binary whose working directory is
// inside the main module's tree the revision is read from the repository's
// HEAD instead (its commit time too, when the commit is a loose object), and
// the modified flag stays unknown (false). A dependency module's revision
// and time come from its pseudo-version, when it has one.
package buildinfo

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stepfork/stepfork/trace"
)

// stepforkModule is this module's path: a function of it (replay.Typed's
// adapter, an adapter of contrib/…) stands for the agent it wraps, whose
// module is then taken to be the main module.
const stepforkModule = "github.com/stepfork/stepfork"

var (
	once  sync.Once
	info  *debug.BuildInfo
	mainB trace.Build
	known bool
)

func load() {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi == nil {
		return
	}
	info, known = bi, true
	mainB = trace.Build{Module: bi.Main.Path, Version: bi.Main.Version, Go: bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			mainB.Revision = strings.ToLower(s.Value)
		case "vcs.time":
			if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
				mainB.Time = t.UTC()
			}
		case "vcs.modified":
			mainB.Modified = s.Value == "true"
		}
	}
	if mainB.Revision == "" {
		if rev, at := pseudo(bi.Main.Version); rev != "" {
			mainB.Revision, mainB.Time = rev, at
		}
	}
	if mainB.Revision == "" && mainB.Module != "" {
		if wd, err := os.Getwd(); err == nil {
			if root := moduleRoot(wd, mainB.Module); root != "" {
				mainB.Revision, mainB.Time = gitHead(root)
			}
		}
	}
}

// Main is the build of the binary's main module; ok is false when the
// binary carries no build information.
func Main() (trace.Build, bool) {
	once.Do(load)
	return mainB, known && mainB.Module != ""
}

// Of is the build of the code of the function called name (as
// runtime.FuncForPC names it): the module of its package, else the main
// module; ok is false when neither is known.
func Of(name string) (trace.Build, bool) {
	m, ok := Main()
	if !ok {
		return trace.Build{}, false
	}
	return resolve(info, m, name), true
}

// resolve is the build of the function called name in a binary built as bi,
// whose main module's build is m.
func resolve(bi *debug.BuildInfo, m trace.Build, name string) trace.Build {
	pkg := packageOf(name)
	if pkg == "" || pkg == "main" {
		return m
	}
	best, bestMod := "", (*debug.Module)(nil)
	consider := func(mod *debug.Module) {
		if mod == nil || mod.Path == "" {
			return
		}
		if (pkg == mod.Path || strings.HasPrefix(pkg, mod.Path+"/")) && len(mod.Path) > len(best) {
			best, bestMod = mod.Path, mod
		}
	}
	consider(&bi.Main)
	for _, d := range bi.Deps {
		if d.Replace != nil {
			r := *d.Replace
			r.Path = d.Path // the import path stays the module's
			consider(&r)
			continue
		}
		consider(d)
	}
	if bestMod == nil || best == bi.Main.Path || best == stepforkModule || strings.HasPrefix(best, stepforkModule+"/") {
		return m
	}
	b := trace.Build{Module: bestMod.Path, Version: bestMod.Version, Go: m.Go}
	b.Revision, b.Time = pseudo(bestMod.Version)
	return b
}

// packageOf is the import path of the package of the function called name:
// "example.com/a/b" for "example.com/a/b.F.func1", an external test
// package's "_test" suffix removed.
func packageOf(name string) string {
	if i := strings.IndexByte(name, '['); i >= 0 {
		name = name[:i] // type arguments may hold slashes and dots
	}
	dir := ""
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		dir, name = name[:i+1], name[i+1:]
	}
	if i := strings.IndexByte(name, '.'); i >= 0 {
		name = name[:i]
	}
	return strings.TrimSuffix(dir+name, "_test")
}

// FuncName is the name of the function at pc, or "".
func FuncName(pc uintptr) string {
	if f := runtime.FuncForPC(pc); f != nil {
		return f.Name()
	}
	return ""
}

// pseudo is the revision and time a pseudo-version holds, or "": the
// 12-digit revision prefix and the UTC time of its tail
// (vX.Y.Z-yyyymmddhhmmss-abcdef123456, with the forms vX.Y.Z-pre.0.… and
// vX.Y.(Z+1)-0.…, and a +incompatible suffix). It reads the tail by hand:
// a regular expression compiled for it cost the first recording of every
// process a tenth of a millisecond.
func pseudo(v string) (string, time.Time) {
	v = strings.TrimSuffix(v, "+incompatible")
	const tail = 1 + 14 + 1 + 12 // [-.]yyyymmddhhmmss-abcdef123456
	if len(v) < tail {
		return "", time.Time{}
	}
	t := v[len(v)-tail:]
	stamp, rev := t[1:15], t[16:]
	if t[0] != '-' && t[0] != '.' || t[15] != '-' || !allDigits(stamp) || !isFullHash(rev, 12) {
		return "", time.Time{}
	}
	at, err := time.Parse("20060102150405", stamp)
	if err != nil {
		return "", time.Time{}
	}
	return rev, at.UTC()
}

// allDigits reports whether every byte of s is a decimal digit.
func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isFullHash reports whether s is n lowercase hexadecimal digits.
func isFullHash(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// moduleRoot is the directory, dir or above, whose go.mod declares module
// path; "" when there is none.
func moduleRoot(dir, path string) string {
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil {
			if modulePath(data) == path {
				return dir
			}
			return "" // another module's tree
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// modulePath is the path of go.mod's module directive.
func modulePath(gomod []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if rest, ok := strings.CutPrefix(line, "module"); ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t') {
			p := strings.TrimSpace(rest)
			if uq, err := strconv.Unquote(p); err == nil {
				p = uq
			}
			return p
		}
	}
	return ""
}

// gitHead is the commit HEAD names in the git repository holding dir, and
// its commit time when the commit is stored as a loose object; "" when dir
// is in no repository or HEAD cannot be read.
func gitHead(dir string) (string, time.Time) {
	gitDir := ""
	for d := dir; ; {
		p := filepath.Join(d, ".git")
		if fi, err := os.Stat(p); err == nil {
			if fi.IsDir() {
				gitDir = p
			} else if data, err := os.ReadFile(p); err == nil {
				// A worktree or submodule: "gitdir: PATH".
				if rest, ok := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir:"); ok {
					gitDir = strings.TrimSpace(rest)
					if !filepath.IsAbs(gitDir) {
						gitDir = filepath.Join(d, gitDir)
					}
				}
			}
			break
		}
		up := filepath.Dir(d)
		if up == d {
			return "", time.Time{}
		}
		d = up
	}
	if gitDir == "" {
		return "", time.Time{}
	}
	common := gitDir
	if data, err := os.ReadFile(filepath.Join(gitDir, "commondir")); err == nil {
		common = strings.TrimSpace(string(data))
		if !filepath.IsAbs(common) {
			common = filepath.Join(gitDir, common)
		}
	}
	head, err := os.ReadFile(filepath.Join(gitDir, "HEAD"))
	if err != nil {
		return "", time.Time{}
	}
	rev := strings.TrimSpace(string(head))
	for range 5 { // symbolic refs may chain
		ref, ok := strings.CutPrefix(rev, "ref:")
		if !ok {
			break
		}
		rev = resolveRef(gitDir, common, strings.TrimSpace(ref))
	}
	if !isFullHash(rev, 40) && !isFullHash(rev, 64) { // SHA-1 or SHA-256
		return "", time.Time{}
	}
	return rev, commitTime(common, rev)
}

// resolveRef is what the ref (refs/heads/main) holds: read from the
// worktree's or the common git directory, else from packed-refs.
func resolveRef(gitDir, common, ref string) string {
	if strings.Contains(ref, "..") {
		return ""
	}
	for _, d := range []string{gitDir, common} {
		if data, err := os.ReadFile(filepath.Join(d, filepath.FromSlash(ref))); err == nil {
			return strings.TrimSpace(string(data))
		}
	}
	data, err := os.ReadFile(filepath.Join(common, "packed-refs"))
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if h, name, ok := strings.Cut(strings.TrimSpace(line), " "); ok && name == ref {
			return h
		}
	}
	return ""
}

// commitTime is the committer time of a commit stored as a loose object,
// or zero.
func commitTime(common, rev string) time.Time {
	f, err := os.Open(filepath.Join(common, "objects", rev[:2], rev[2:]))
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	zr, err := zlib.NewReader(f)
	if err != nil {
		return time.Time{}
	}
	defer zr.Close()
	data, err := io.ReadAll(io.LimitReader(zr, 64<<10))
	if err != nil && len(data) == 0 {
		return time.Time{}
	}
	hdr, body, ok := bytes.Cut(data, []byte{0})
	if !ok || !bytes.HasPrefix(hdr, []byte("commit ")) {
		return time.Time{}
	}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" {
			break // the end of the headers
		}
		rest, ok := strings.CutPrefix(line, "committer ")
		if !ok {
			continue
		}
		// "Name <email> 1733250729 +0000"
		f := strings.Fields(rest[strings.LastIndexByte(rest, '>')+1:])
		if len(f) < 1 {
			return time.Time{}
		}
		sec, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return time.Time{}
		}
		return time.Unix(sec, 0).UTC()
	}
	return time.Time{}
}
