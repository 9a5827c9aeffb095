package trace

import (
	"os"
	"path/filepath"
	"testing"
)

// seedBundleFiles adds every manifest.json, redactions.json and
// integrity.json of the shared vectors to a fuzz corpus.
func seedBundleFiles(f *testing.F, name string) {
	f.Helper()
	paths, err := filepath.Glob(filepath.Join(vectorDir, "*", "*.sftrace", name))
	if err != nil || len(paths) < 8 {
		f.Fatalf("found %d shared %s files under %s (err %v)", len(paths), name, vectorDir, err)
	}
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// FuzzManifest: parseManifest never panics, and a manifest it accepts
// re-encodes to bytes that parse back to the same manifest and re-encode to
// the same bytes.
func FuzzManifest(f *testing.F) {
	seedBundleFiles(f, ManifestFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := parseManifest("manifest.json", data)
		if err != nil {
			return
		}
		out := appendManifest(nil, &m)
		back, err := parseManifest("manifest.json", out)
		if err != nil {
			t.Fatalf("re-encoded manifest does not parse: %v\n%s", err, out)
		}
		if again := appendManifest(nil, &back); string(again) != string(out) {
			t.Fatalf("manifest encoding is not a fixed point:\n%s\n%s", out, again)
		}
	})
}

// FuzzRedactions: parseRedactions never panics, and accepted entries
// re-encode to a file that parses back to the same entries.
func FuzzRedactions(f *testing.F) {
	seedBundleFiles(f, RedactionsFile)
	f.Fuzz(func(t *testing.T, data []byte) {
		es, err := parseRedactions("redactions.json", data)
		if err != nil {
			return
		}
		out := appendRedactions(nil, es)
		back, err := parseRedactions("redactions.json", out)
		if err != nil || len(back) != len(es) {
			t.Fatalf("re-encoded redactions do not parse back (%v):\n%s", err, out)
		}
		for i := range es {
			if back[i] != es[i] {
				t.Fatalf("entry %d: %+v != %+v", i, back[i], es[i])
			}
		}
	})
}

// FuzzIntegrityFile: whatever integrity.json holds, VerifyIntegrity answers
// with a status and never panics, and a record it can read names only files
// inside the bundle.
func FuzzIntegrityFile(f *testing.F) {
	seedBundleFiles(f, IntegrityFile)
	f.Add([]byte(`{"schema_version":"0.1","algorithm":"sha256","files":{"../../etc/passwd":"` + hashString("") + `"}}`))
	src := filepath.Join(vectorDir, "stepfork", "successful_run.sftrace")
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := filepath.Join(t.TempDir(), "b.sftrace")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, name := range coreFiles {
			b, err := os.ReadFile(filepath.Join(src, name))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, IntegrityFile), data, 0o644); err != nil {
			t.Fatal(err)
		}
		res := VerifyIntegrity(dir)
		switch res.Status {
		case IntegrityVerified, IntegrityMismatch:
		default:
			t.Fatalf("status %q for a bundle that has integrity.json", res.Status)
		}
		for _, f := range res.VerifiedFiles {
			if !validExtraName(f) && f != ManifestFile && f != EventsFile && f != RedactionsFile {
				t.Fatalf("verified a file outside the bundle: %q", f)
			}
		}
	})
}
