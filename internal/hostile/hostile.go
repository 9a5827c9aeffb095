//go:build linux

package hostile

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Input is one hostile input.
type Input struct {
	// Name says what it is: "packed/hardlink-after-events",
	// "dir/fork.json/fifo".
	Name string
	// Make makes the input in dir, a fresh directory, and returns the path
	// to give a reader; it skips t when the machine cannot make it (a
	// device node needs privileges).
	Make func(t testing.TB, dir string) string
	// Extra is true when the input is hostile only in integrity.json or in
	// the extra files it lists: a reader that reads neither (validate
	// without --verify-integrity) may accept it.
	Extra bool
	// Large is true for a bundle that is only large (50,000 lines): it is
	// hostile to what prints one line per problem, not to what reads it.
	Large bool
	// Lines is true when only the lines of events.jsonl are hostile: a
	// reader that copies them as they are (pack) or stops before them (a
	// fork at its first step) may accept it.
	Lines bool
}

// Corpus returns every hostile input made from base, a sound directory
// bundle whose integrity.json lists an extra file fork.json (a fork made
// with stepfork fork): issue 21's cases and more.
func Corpus(base string) []Input {
	var out []Input
	for _, x := range slices.Concat(packedInputs(), fileInputs(), dirInputs()) {
		mk := x.make
		out = append(out, Input{Name: x.name, Extra: x.extra, Large: x.large, Lines: x.lines,
			Make: func(t testing.TB, dir string) string {
				t.Helper()
				return mk(t, dir, base)
			}})
	}
	return out
}

// input is an Input whose Make also takes base.
type input struct {
	name                string
	make                func(t testing.TB, dir, base string) string
	extra, large, lines bool
}

// The names of a bundle's files as Pack writes them.
var packedFiles = []string{"manifest.json", "redactions.json", "integrity.json", "fork.json", "events.jsonl"}

// entry is one entry of a hand-made archive; cut, when positive, ends the
// archive that many bytes into its body, whatever its header declares.
type entry struct {
	hdr  tar.Header
	body []byte
	cut  int
}

func regular(name string, body []byte) entry {
	return entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(body))}, body: body}
}

// writeTar writes entries as a gzip-compressed tar file at path.
func writeTar(t testing.TB, path string, entries []entry) {
	t.Helper()
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(gz)
	for _, e := range entries {
		h := e.hdr
		h.Format = tar.FormatPAX
		if err := tw.WriteHeader(&h); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		if e.cut > 0 {
			tw.Write(make([]byte, e.cut))
			tw.Flush()
			gz.Close()
			writeFile(t, path, buf.Bytes())
			return
		}
		if _, err := tw.Write(e.body); err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	gz.Close()
	writeFile(t, path, buf.Bytes())
}

func writeFile(t testing.TB, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t testing.TB, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// packedEntries returns the entries of the bundle base as Pack writes
// them: the top directory, the small files, events.jsonl last.
func packedEntries(t testing.TB, base string) []entry {
	t.Helper()
	out := []entry{{hdr: tar.Header{Typeflag: tar.TypeDir, Name: "run.sftrace/", Mode: 0o755}}}
	for _, n := range packedFiles {
		out = append(out, regular("run.sftrace/"+n, readFile(t, filepath.Join(base, n))))
	}
	return out
}

// packedInputs are packed bundles whose archives do not hold exactly one
// bundle, or hold it as a bomb.
func packedInputs() []input {
	packed := func(name string, entries func(good []entry) []entry) input {
		return input{name: "packed/" + name, make: func(t testing.TB, dir, base string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			writeTar(t, p, entries(packedEntries(t, base)))
			return p
		}}
	}
	// after places entries after events.jsonl; first, before the files.
	after := func(extra ...entry) func([]entry) []entry {
		return func(good []entry) []entry { return append(append([]entry{}, good...), extra...) }
	}
	first := func(extra ...entry) func([]entry) []entry {
		return func(good []entry) []entry { return append(append([]entry{good[0]}, extra...), good[1:]...) }
	}
	withEvents := func(body func(events []byte) []byte) func([]entry) []entry {
		return func(good []entry) []entry {
			ev := good[len(good)-1]
			return append(append([]entry{}, good[:len(good)-1]...), regular(ev.hdr.Name, body(ev.body)))
		}
	}
	special := func(typ byte, name, link string) entry {
		return entry{hdr: tar.Header{Typeflag: typ, Name: name, Linkname: link, Mode: 0o644, Devmajor: 1, Devminor: 5}}
	}
	var in []input
	for _, k := range []struct {
		typ  byte
		name string
	}{{tar.TypeLink, "hardlink"}, {tar.TypeSymlink, "symlink"}, {tar.TypeChar, "char-device"}, {tar.TypeBlock, "block-device"},
		{tar.TypeFifo, "fifo"}, {tar.TypeCont, "contiguous"}, {tar.TypeGNUSparse, "gnu-sparse"}} {
		link := ""
		if k.typ == tar.TypeLink || k.typ == tar.TypeSymlink {
			link = "/etc/passwd"
		}
		m := special(k.typ, "run.sftrace/fork2.json", link)
		in = append(in, packed(k.name+"-after-events", after(m)), packed(k.name+"-first", first(m)))
	}
	in = append(in,
		packed("events-as-hardlink", func(good []entry) []entry {
			return append(append([]entry{}, good[:len(good)-1]...), special(tar.TypeLink, "run.sftrace/events.jsonl", "run.sftrace/manifest.json"))
		}),
		packed("absolute-path-after-events", after(regular("/etc/x.json", []byte("{}")))),
		packed("absolute-path-first", first(regular("/run.sftrace/fork2.json", []byte("{}")))),
		packed("dot-dot-after-events", after(regular("run.sftrace/../../x.json", []byte("{}")))),
		packed("dot-dot-first", first(regular("run.sftrace/../fork2.json", []byte("{}")))),
		packed("second-bundle-after-events", func(good []entry) []entry {
			out := append([]entry{}, good...)
			for _, e := range good {
				e.hdr.Name = strings.Replace(e.hdr.Name, "run.sftrace", "b.sftrace", 1)
				out = append(out, e)
			}
			return out
		}),
		packed("second-bundle-first", func(good []entry) []entry {
			var out []entry
			for _, e := range good {
				e.hdr.Name = strings.Replace(e.hdr.Name, "run.sftrace", "b.sftrace", 1)
				out = append(out, e)
			}
			return append(out, good...)
		}),
		packed("same-bundle-again-after-events", func(good []entry) []entry { return append(append([]entry{}, good...), good[1:]...) }),
		packed("nested-directory", after(special(tar.TypeDir, "run.sftrace/sub/", ""))),
		packed("file-in-nested-directory", first(regular("run.sftrace/sub/fork.json", []byte("{}")))),
		packed("file-outside-the-directory", first(regular("fork.json", []byte("{}")))),
		packed("top-directory-not-a-bundle", func(good []entry) []entry {
			var out []entry
			for _, e := range good {
				e.hdr.Name = strings.Replace(e.hdr.Name, "run.sftrace", "run", 1)
				out = append(out, e)
			}
			return out
		}),
		packed("duplicate-events", func(good []entry) []entry { return append(append([]entry{}, good...), good[len(good)-1]) }),
		packed("duplicate-manifest", first(regular("run.sftrace/manifest.json", []byte(`{"run_id":"other"}`)))),
		packed("unlisted-extra-first", first(regular("run.sftrace/notes.json", []byte("{}")))),
		packed("unlisted-extra-after", after(regular("run.sftrace/notes.json", []byte("{}")))),
		packed("not-a-bundle-file-name", first(regular("run.sftrace/.hidden", []byte("{}")))),
		packed("more-than-64-entries", func(good []entry) []entry {
			out := append([]entry{}, good[:len(good)-1]...)
			for i := range 70 {
				out = append(out, regular(fmt.Sprintf("run.sftrace/x%d.json", i), []byte("{}")))
			}
			return append(out, good[len(good)-1])
		}),
		packed("ratio-bomb-of-duplicate-lines", withEvents(func(events []byte) []byte {
			line := bytes.SplitAfter(events, []byte("\n"))[0]
			return bytes.Repeat(line, (24<<20)/len(line)+1)
		})),
		packed("ratio-bomb-of-zeros-first", first(regular("run.sftrace/zeros.json", make([]byte, 64<<20)))),
		packed("declared-4GiB-events", func(good []entry) []entry {
			ev := regular("run.sftrace/events.jsonl", nil)
			ev.hdr.Size, ev.cut = 4<<30, 1<<20
			return append(append([]entry{}, good[:len(good)-1]...), ev)
		}),
		packed("declared-4GiB-unlisted-first", func(good []entry) []entry {
			big := regular("run.sftrace/big.json", nil)
			big.hdr.Size, big.cut = 4<<30, 1<<20
			return []entry{good[0], big}
		}),
		packed("declared-4GiB-unlisted-after", func(good []entry) []entry {
			big := regular("run.sftrace/big.json", nil)
			big.hdr.Size, big.cut = 4<<30, 1<<20
			return append(append([]entry{}, good...), big)
		}),
		packed("truncated-events", func(good []entry) []entry {
			ev := good[len(good)-1]
			ev.cut = len(ev.body) / 2
			return append(append([]entry{}, good[:len(good)-1]...), ev)
		}),
		packed("global-header", first(entry{hdr: tar.Header{Typeflag: tar.TypeXGlobalHeader, Name: "g", PAXRecords: map[string]string{"comment": "x"}}})),
		input{name: "packed/garbage-after-the-archive", make: func(t testing.TB, dir, base string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			writeTar(t, p, packedEntries(t, base))
			data := readFile(t, p)
			var tail bytes.Buffer
			gz := gzip.NewWriter(&tail)
			gz.Write(make([]byte, 1<<20))
			gz.Close()
			writeFile(t, p, append(data, tail.Bytes()...))
			return p
		}},
		input{name: "packed/not-gzip", make: func(t testing.TB, dir, _ string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			writeFile(t, p, bytes.Repeat([]byte("x"), 1<<20))
			return p
		}},
		input{name: "packed/gzip-not-tar", make: func(t testing.TB, dir, _ string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			var buf bytes.Buffer
			gz := gzip.NewWriter(&buf)
			gz.Write(bytes.Repeat([]byte("not a tar archive\n"), 1000))
			gz.Close()
			writeFile(t, p, buf.Bytes())
			return p
		}},
		input{name: "packed/fifo", make: func(t testing.TB, dir, _ string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			if err := syscall.Mkfifo(p, 0o644); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		input{name: "packed/devzero-link", make: func(t testing.TB, dir, _ string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			if err := os.Symlink("/dev/zero", p); err != nil {
				t.Fatal(err)
			}
			return p
		}},
		input{name: "packed/sparse-gigabyte", make: func(t testing.TB, dir, _ string) string {
			p := filepath.Join(dir, "run.sftrace.tar.gz")
			writeFile(t, p, nil)
			if err := os.Truncate(p, 1<<30); err != nil {
				t.Fatal(err)
			}
			return p
		}},
	)
	return in
}

// fileKinds are the ways one file of a bundle directory can be hostile:
// replaced by something that must never be read whole, or read at all.
var fileKinds = []struct {
	name string
	make func(t testing.TB, path string)
	// sized is true for the kinds that only files with a size limit
	// refuse (events.jsonl is read line by line instead).
	sized bool
}{
	{"fifo", func(t testing.TB, p string) {
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}, false},
	{"device", func(t testing.TB, p string) {
		// A character device node of /dev/zero inside the bundle.
		if err := syscall.Mknod(p, syscall.S_IFCHR|0o644, 1<<8|5); err != nil {
			t.Skipf("cannot make a device node here (%v); the /dev/zero link covers devices outside the bundle", err)
		}
	}, false},
	{"devzero-link", func(t testing.TB, p string) {
		if err := os.Symlink("/dev/zero", p); err != nil {
			t.Fatal(err)
		}
	}, false},
	{"link-out-of-the-bundle", func(t testing.TB, p string) {
		out := filepath.Join(filepath.Dir(filepath.Dir(p)), "outside.json")
		writeFile(t, out, []byte("{}"))
		if err := os.Symlink("../outside.json", p); err != nil {
			t.Fatal(err)
		}
	}, false},
	{"sparse-gigabyte", func(t testing.TB, p string) {
		// A valid start followed by a gigabyte (sparse: nothing is written).
		writeFile(t, p, []byte(`{"schema_version": "0.1"}`))
		if err := os.Truncate(p, 1<<30); err != nil {
			t.Fatal(err)
		}
	}, true},
}

// fileInputs replace each file of the bundle in turn by one of fileKinds.
func fileInputs() []input {
	var in []input
	for _, file := range packedFiles {
		for _, k := range fileKinds {
			if k.sized && file == "events.jsonl" {
				continue
			}
			in = append(in, input{name: "dir/" + file + "/" + k.name, extra: file == "fork.json" || file == "integrity.json",
				make: func(t testing.TB, dir, base string) string {
					b := copyBundle(t, base, dir)
					p := filepath.Join(b, file)
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
					k.make(t, p)
					return b
				}})
		}
	}
	return in
}

// dirInputs are bundle directories whose extras or lines are too many or
// too large.
func dirInputs() []input {
	edited := func(name string, edit func(t testing.TB, b string)) input {
		return input{name: "dir/" + name, make: func(t testing.TB, dir, base string) string {
			b := copyBundle(t, base, dir)
			edit(t, b)
			return b
		}}
	}
	events := func(t testing.TB, b string, edit func([]byte) []byte) {
		p := filepath.Join(b, "events.jsonl")
		writeFile(t, p, edit(readFile(t, p)))
	}
	longLine := func(n int) func(t testing.TB, b string) {
		return func(t testing.TB, b string) {
			events(t, b, func(data []byte) []byte {
				first, rest, _ := bytes.Cut(data, []byte("\n"))
				long := bytes.Replace(first, []byte(`"input":`), []byte(`"input":{"blob":"`+strings.Repeat("x", n)+`"},"was":`), 1)
				return append(append(long, '\n'), rest...)
			})
		}
	}
	in := []input{
		withFlags(edited("1000-listed-extras-hard-linked", func(t testing.TB, b string) {
			big := filepath.Join(b, "a0.json")
			writeFile(t, big, []byte("{}"))
			if err := os.Truncate(big, 16<<20); err != nil {
				t.Fatal(err)
			}
			names := []string{"a0.json"}
			for i := 1; i < 1000; i++ {
				n := fmt.Sprintf("a%d.json", i)
				if err := os.Link(big, filepath.Join(b, n)); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
			listExtras(t, b, names)
		}), true, false, false),
		withFlags(edited("3-sparse-extras-of-16MiB", func(t testing.TB, b string) {
			var names []string
			for _, n := range []string{"a.json", "b.json", "c.json"} {
				writeFile(t, filepath.Join(b, n), []byte("{}"))
				if err := os.Truncate(filepath.Join(b, n), 16<<20); err != nil {
					t.Fatal(err)
				}
				names = append(names, n)
			}
			listExtras(t, b, names)
		}), true, false, false),
		withFlags(edited("60MB-line", longLine(60<<20)), false, false, true),
		withFlags(edited("70MB-line", longLine(70<<20)), false, false, true),
		withFlags(edited("50k-duplicate-lines", func(t testing.TB, b string) {
			events(t, b, func(data []byte) []byte {
				line, _, _ := bytes.Cut(data, []byte("\n"))
				return bytes.Repeat(append(line, '\n'), 50_000)
			})
		}), false, true, false),
		withFlags(edited("events-a-gigabyte-of-zeros", func(t testing.TB, b string) {
			if err := os.Truncate(filepath.Join(b, "events.jsonl"), 1<<30); err != nil {
				t.Fatal(err)
			}
		}), false, false, true),
		withFlags(edited("deeply-nested-line", func(t testing.TB, b string) {
			events(t, b, func(data []byte) []byte {
				first, rest, _ := bytes.Cut(data, []byte("\n"))
				deep := strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20)
				long := bytes.Replace(first, []byte(`"input":`), []byte(`"input":{"deep":`+deep+`},"was":`), 1)
				return append(append(long, '\n'), rest...)
			})
		}), false, false, true),
		edited("manifest-deeply-nested", func(t testing.TB, b string) {
			writeFile(t, filepath.Join(b, "manifest.json"), []byte(strings.Repeat("[", 1<<20)+strings.Repeat("]", 1<<20)))
		}),
	}
	return in
}

func withFlags(x input, extra, large, lines bool) input {
	x.extra, x.large, x.lines = extra, large, lines
	return x
}

// listExtras adds names to the files integrity.json lists (with digests
// that match nothing).
func listExtras(t testing.TB, b string, names []string) {
	t.Helper()
	p := filepath.Join(b, "integrity.json")
	data := string(readFile(t, p))
	var add strings.Builder
	for _, n := range names {
		fmt.Fprintf(&add, ",\n    %q: %q", n, strings.Repeat("0", 64))
	}
	i := strings.LastIndex(data, "\n  }\n}")
	if i < 0 {
		t.Fatalf("%s: not as Save writes it", p)
	}
	writeFile(t, p, []byte(data[:i]+add.String()+data[i:]))
}

// copyBundle copies the regular files of the bundle base into
// dir/run.sftrace and returns that path.
func copyBundle(t testing.TB, base, dir string) string {
	t.Helper()
	b := filepath.Join(dir, "run.sftrace")
	if err := os.MkdirAll(b, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(base)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Type()&fs.ModeType != 0 {
			continue
		}
		writeFile(t, filepath.Join(b, e.Name()), readFile(t, filepath.Join(base, e.Name())))
	}
	return b
}
