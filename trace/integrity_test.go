package trace

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// forkedTrace is validTrace with an extra bundle file, as a fork carries.
func forkedTrace(t testing.TB) *Trace {
	t.Helper()
	tr := validTrace(t)
	tr.Extras = map[string][]byte{"fork.json": []byte("{\"parent_run_id\": \"run_base\"}\n")}
	return tr
}

func TestVerifyIntegrity(t *testing.T) {
	t.Parallel()
	core := []string{ManifestFile, EventsFile, RedactionsFile}
	tests := []struct {
		name     string
		trace    func(testing.TB) *Trace
		mutate   func(t *testing.T, p string)
		status   IntegrityStatus
		issues   []IntegrityIssue
		verified []string
		exit     int // ValidateBundle strict + CheckIntegrity
	}{
		{
			name: "fresh bundle", trace: validTrace, mutate: func(*testing.T, string) {},
			status: IntegrityVerified, verified: core,
		},
		{
			name: "edited events",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, EventsFile, replace(`"2026-01-01T00:00:00Z"`, `"2026-01-01T00:00:00.5Z"`))
			}, // timestamps are not hashed
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMismatch, "SHA-256 mismatch.", EventsFile}},
			verified: []string{ManifestFile, RedactionsFile}, exit: 1,
		},
		{
			name:   "edited manifest",
			mutate: func(t *testing.T, p string) { editFile(t, p, ManifestFile, replace(`"agent"`, `"agent2"`)) },
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMismatch, "SHA-256 mismatch.", ManifestFile}},
			verified: []string{EventsFile, RedactionsFile}, exit: 1,
		},
		{
			name:   "edited redactions",
			mutate: func(t *testing.T, p string) { editFile(t, p, RedactionsFile, replace("[]", "[ ]")) },
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMismatch, "SHA-256 mismatch.", RedactionsFile}},
			verified: []string{ManifestFile, EventsFile}, exit: 1,
		},
		{
			name:   "integrity.json deleted",
			mutate: func(t *testing.T, p string) { os.Remove(filepath.Join(p, IntegrityFile)) },
			status: IntegrityUnverifiedLegacy, issues: []IntegrityIssue{{CodeIntegrityUnverified, "Bundle has no integrity.json metadata.", IntegrityFile}},
			exit: 3,
		},
		{
			name:   "integrity.json not JSON",
			mutate: func(t *testing.T, p string) { editFile(t, p, IntegrityFile, func(string) string { return "{" }) },
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMetadataInvalid, "integrity.json is not valid JSON.", IntegrityFile}},
			exit: 2,
		},
		{
			name: "integrity.json is a directory",
			mutate: func(t *testing.T, p string) {
				os.Remove(filepath.Join(p, IntegrityFile))
				os.Mkdir(filepath.Join(p, IntegrityFile), 0o755)
			},
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMetadataInvalid, "integrity.json is not a file.", IntegrityFile}},
			exit: 2,
		},
		{
			name: "unknown key",
			mutate: func(t *testing.T, p string) {
				editFile(t, p, IntegrityFile, replace(`"algorithm"`, `"signature": "x",  "algorithm"`))
			},
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMetadataInvalid, "integrity.json metadata is invalid.", IntegrityFile}},
			exit: 2,
		},
		{
			name:   "digest deleted",
			mutate: func(t *testing.T, p string) { editFile(t, p, IntegrityFile, deleteDigest(EventsFile)) },
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMetadataInvalid, "Missing digest for events.jsonl.", EventsFile}},
			exit: 2,
		},
		{
			name:   "algorithm md5",
			mutate: func(t *testing.T, p string) { editFile(t, p, IntegrityFile, replace(`"sha256"`, `"md5"`)) },
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityAlgorithm, "Unsupported integrity algorithm 'md5'.", IntegrityFile}},
			exit: 2,
		},
		{
			name:   "digest not a digest",
			mutate: func(t *testing.T, p string) { editFile(t, p, IntegrityFile, setDigest(EventsFile, "not-a-digest")) },
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMetadataInvalid, "Invalid SHA-256 digest for events.jsonl.", EventsFile}},
			exit: 2,
		},
		{
			name: "extra file verified", trace: forkedTrace, mutate: func(*testing.T, string) {},
			status: IntegrityVerified, verified: append(core, "fork.json"),
		},
		{
			name:  "extra file tampered",
			trace: forkedTrace,
			mutate: func(t *testing.T, p string) {
				editFile(t, p, "fork.json", replace("run_base", "run_evil"))
			},
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeIntegrityMismatch, "SHA-256 mismatch.", "fork.json"}},
			verified: core, exit: 1,
		},
		{
			name:  "extra file removed",
			trace: forkedTrace,
			mutate: func(t *testing.T, p string) {
				os.Remove(filepath.Join(p, "fork.json"))
			},
			status: IntegrityMismatch, issues: []IntegrityIssue{{CodeMissingFile, "fork.json is missing.", "fork.json"}},
			verified: core, exit: 2,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mk := tt.trace
			if mk == nil {
				mk = validTrace
			}
			p := bundleOf(t, mk(t))
			tt.mutate(t, p)

			before := snapshot(t, p)
			got := VerifyIntegrity(p)
			if got.Status != tt.status {
				t.Errorf("Status = %s, want %s", got.Status, tt.status)
			}
			if diff := cmp.Diff(tt.issues, got.Issues); diff != "" {
				t.Errorf("Issues (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.verified, got.VerifiedFiles); diff != "" {
				t.Errorf("VerifiedFiles (-want +got):\n%s", diff)
			}

			// LoadVerified checks the bytes it loads and must come to the
			// same result, with the trace Load gives.
			if want, err := Load(p); err == nil {
				tr, res, err := LoadVerified(p)
				if err != nil {
					t.Fatalf("LoadVerified: %v; Load succeeded", err)
				}
				if diff := cmp.Diff(got, res); diff != "" {
					t.Errorf("LoadVerified integrity differs from VerifyIntegrity (-verify +load):\n%s", diff)
				}
				if diff := cmp.Diff(want, tr, cmp.AllowUnexported(Value{})); diff != "" {
					t.Errorf("LoadVerified loads differently (-Load +LoadVerified):\n%s", diff)
				}
			} else if _, _, err2 := LoadVerified(p); err2 == nil || err2.Error() != err.Error() {
				t.Errorf("LoadVerified error %v, Load's %v", err2, err)
			}

			// ValidateBundle hashes events.jsonl while streaming it and
			// must come to the same result.
			rep := ValidateBundle(context.Background(), p, CheckIntegrity())
			if rep.Integrity == nil {
				t.Fatalf("no integrity result; issues %v", rep.Issues)
			}
			if diff := cmp.Diff(got, *rep.Integrity); diff != "" {
				t.Errorf("ValidateBundle integrity differs from VerifyIntegrity (-verify +validate):\n%s", diff)
			}
			var want []Issue
			if tt.status != IntegrityVerified {
				for _, is := range tt.issues {
					want = append(want, Issue{Code: is.Code, Message: is.Message, Location: is.File})
				}
			}
			if diff := cmp.Diff(want, rep.Issues); diff != "" {
				t.Errorf("ValidateBundle issues (-want +got):\n%s", diff)
			}
			if got := rep.ExitCode(); got != tt.exit {
				t.Errorf("ExitCode() = %d, want %d", got, tt.exit)
			}
			if !ValidateBundle(context.Background(), p).Valid() {
				t.Error("structure alone should be valid")
			}
			if diff := cmp.Diff(before, snapshot(t, p)); diff != "" {
				t.Errorf("verification changed the bundle (-before +after):\n%s", diff)
			}
		})
	}
}

func TestLegacyBundleStillLoads(t *testing.T) {
	t.Parallel()
	p := bundleOf(t, validTrace(t))
	if err := os.Remove(filepath.Join(p, IntegrityFile)); err != nil {
		t.Fatal(err)
	}
	tr, err := Load(p)
	if err != nil {
		t.Fatalf("Load of a legacy bundle: %v", err)
	}
	if len(tr.Events) != 6 {
		t.Errorf("loaded %d events, want 6", len(tr.Events))
	}
}

// deleteDigest removes a file's line from integrity.json.
func deleteDigest(name string) func(string) string {
	return func(s string) string {
		var keep []string
		for _, l := range strings.Split(s, "\n") {
			if !strings.Contains(l, `"`+name+`"`) {
				keep = append(keep, l)
			}
		}
		out := strings.Join(keep, "\n")
		return strings.Replace(out, ",\n  }", "\n  }", 1) // a digest was the last one
	}
}

// setDigest replaces a file's digest in integrity.json.
func setDigest(name, digest string) func(string) string {
	return func(s string) string {
		lines := strings.Split(s, "\n")
		for i, l := range lines {
			if k := `"` + name + `": "`; strings.Contains(l, k) {
				j := strings.Index(l, k) + len(k)
				lines[i] = l[:j] + digest + l[j+64:]
			}
		}
		return strings.Join(lines, "\n")
	}
}

// fileState is what snapshot records of a file.
type fileState struct {
	Data    string
	Mode    fs.FileMode
	ModTime time.Time
}

// snapshot records every file of a bundle directory.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	out := map[string]fileState{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		st := fileState{Mode: info.Mode(), ModTime: info.ModTime()}
		if d.Type().IsRegular() {
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.Data = string(data)
		}
		out[p] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
