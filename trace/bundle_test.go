package trace

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// vectorDir holds the Python-written interoperability bundles, copied into
// the module so that a clone with nothing beside it passes every test.
const vectorDir = "../testdata/vectors"

func vectorBundles(t testing.TB) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{"stepfork", "stepfork-recorded"} {
		m, err := filepath.Glob(filepath.Join(vectorDir, dir, "*.sftrace"))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, m...)
	}
	if len(out) < 9 {
		t.Fatalf("found %d shared test vectors under %s", len(out), vectorDir)
	}
	return out
}

func TestRoundTripVectors(t *testing.T) {
	t.Parallel()
	for _, src := range vectorBundles(t) {
		t.Run(filepath.Base(src), func(t *testing.T) {
			t.Parallel()
			tr, err := Load(src)
			if err != nil {
				t.Fatal(err)
			}
			dst := filepath.Join(t.TempDir(), filepath.Base(src))
			if err := tr.Save(dst); err != nil {
				t.Fatal(err)
			}
			files := []string{ManifestFile, EventsFile, RedactionsFile, IntegrityFile}
			for _, name := range files {
				want, err := os.ReadFile(filepath.Join(src, name))
				if os.IsNotExist(err) && name == IntegrityFile {
					continue // legacy bundle: Save adds integrity.json
				}
				if err != nil {
					t.Fatal(err)
				}
				got, err := os.ReadFile(filepath.Join(dst, name))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("%s differs after Load+Save:\n%s", name, firstDiff(want, got))
				}
			}
		})
	}
}

// firstDiff shows the first line where two files differ.
func firstDiff(want, got []byte) string {
	wl, gl := bytes.Split(want, []byte("\n")), bytes.Split(got, []byte("\n"))
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			return "line " + itoa(i+1) + ":\nwant: " + string(w) + "\ngot:  " + string(g)
		}
	}
	return ""
}

func itoa(i int) string { return strconv.Itoa(i) }
