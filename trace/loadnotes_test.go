package trace

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestLoadHashedNotes checks what a load that hashes every payload notes
// (loadHashed, for rawline.LoadVerified): the trace and integrity result
// are LoadVerified's, bit i is set exactly when event i's stored hashes
// are ExpectedHashes, and all says that of every event. The bundles are
// the shared vectors, and copies of a saved bundle edited by hand in the
// ways a fixture is.
func TestLoadHashedNotes(t *testing.T) {
	t.Parallel()
	saved := filepath.Join(t.TempDir(), "saved.sftrace")
	tr, err := Load(filepath.Join(vectorDir, "stepfork", "failed_tool_run.sftrace"))
	if err != nil {
		t.Fatal(err)
	}
	tr.Path = ""
	if err := tr.Save(saved); err != nil {
		t.Fatal(err)
	}
	events, err := os.ReadFile(filepath.Join(saved, EventsFile))
	if err != nil {
		t.Fatal(err)
	}
	edited := func(name string, edit func(string) string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), name+".sftrace")
		if err := os.CopyFS(p, os.DirFS(saved)); err != nil {
			t.Fatal(err)
		}
		text := edit(string(events))
		if text == string(events) {
			t.Fatalf("%s: the edit changed nothing", name)
		}
		if err := os.WriteFile(filepath.Join(p, EventsFile), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	firstHash := func(s string) string {
		i := strings.Index(s, `"output_hash":"`) + len(`"output_hash":"`)
		return s[i : i+64]
	}
	paths := append(vectorBundles(t), saved,
		// a payload changed, its hash kept
		edited("payload", func(s string) string { return strings.Replace(s, `"output":{`, `"output":{"added":1,`, 1) }),
		// a hash changed, its payload kept
		edited("hash", func(s string) string { h := firstHash(s); return strings.Replace(s, h, strings.Repeat("0", 64), 1) }),
		// a hash in upper case: the same digest, not the stored form
		edited("upper", func(s string) string { h := firstHash(s); return strings.Replace(s, h, strings.ToUpper(h), 1) }),
		// a hash removed
		edited("missing", func(s string) string {
			h := firstHash(s)
			return strings.Replace(s, `"output_hash":"`+h+`"`, `"output_hash":null`, 1)
		}),
	)
	sawUnhashed := 0
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			wantTr, wantRes, wantErr := LoadVerified(p)
			gotTr, gotRes, hashed, all, gotErr := loadHashed(p)
			if (wantErr == nil) != (gotErr == nil) || wantErr != nil && wantErr.Error() != gotErr.Error() {
				t.Fatalf("error %v, want %v", gotErr, wantErr)
			}
			if wantErr != nil {
				return
			}
			if !reflect.DeepEqual(gotTr, wantTr) || !reflect.DeepEqual(gotRes, wantRes) {
				t.Fatalf("loadHashed loads another trace or result than LoadVerified")
			}
			if len(hashed) != (len(gotTr.Events)+63)/64 {
				t.Fatalf("%d words of bits for %d events", len(hashed), len(gotTr.Events))
			}
			wantAll := true
			for i := range gotTr.Events {
				ev := &gotTr.Events[i]
				in, out := ev.ExpectedHashes()
				want := in == ev.InputHash && out == ev.OutputHash
				if got := hashed[i/64]&(1<<(i%64)) != 0; got != want {
					t.Errorf("event %d (%s): noted hashed %v, want %v (stored %q %q, expected %q %q)", i, ev.Type, got, want, ev.InputHash, ev.OutputHash, in, out)
				}
				wantAll = wantAll && want
			}
			if all != wantAll {
				t.Errorf("all = %v, want %v", all, wantAll)
			}
			if !wantAll {
				sawUnhashed++
			}
		})
	}
	if sawUnhashed != 4 {
		t.Errorf("%d bundles have an event whose hashes are not its payloads', want the four edited", sawUnhashed)
	}
}
