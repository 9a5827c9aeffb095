package trace_test

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stepfork/stepfork/trace"
)

func TestMintedIDs(t *testing.T) {
	t.Parallel()
	tr := &trace.Trace{Extras: map[string][]byte{trace.MintedFile: []byte(
		`{"evt_1":[{"kind":"response","id":"chatcmpl-AAAA1111"},{"kind":"call","id":"call_BBBB2222","live":"call_CCCC3333"}],` +
			`"evt_2":[{"kind":"call","id":"call_0"}]}`)}}
	want := map[string]string{"chatcmpl-AAAA1111": "response", "call_BBBB2222": "call", "call_CCCC3333": "call"}
	if got := trace.MintedIDs(tr, nil, &trace.Trace{}); !reflect.DeepEqual(got, want) {
		t.Errorf("MintedIDs = %v, want %v (a live id as the kind of the one it stands for, short ids left out)", got, want)
	}
	bad := &trace.Trace{Extras: map[string][]byte{trace.MintedFile: []byte(`[1]`)}}
	if got := trace.MintedIDs(bad); got != nil {
		t.Errorf("an unreadable file counts as absent, got %v", got)
	}
	for _, data := range []string{`[]`, `null`, `{"e":[{"id":"x"}]}`, `{"e":[{"kind":"call"}]}`, `{"e":"x"}`} {
		if _, err := trace.Minted([]byte(data)); err == nil {
			t.Errorf("Minted(%s) accepted it", data)
		}
	}
}

// FuzzMinted: Minted never panics, and what it accepts re-encodes to a file
// it reads back the same.
func FuzzMinted(f *testing.F) {
	for _, seed := range []string{
		`{"evt_1":[{"kind":"response","id":"chatcmpl-AAAA1111"},{"kind":"call","id":"call_BBBB2222","live":"call_CCCC3333"}]}`,
		`{}`, `{"e":[]}`, `{"e":null}`, `{"e":[{"kind":"item","id":"fc_1","extra":1}]}`, `[]`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := trace.Minted(data)
		if err != nil {
			return
		}
		out, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := trace.Minted(out)
		if err != nil {
			t.Fatalf("re-encoded file does not read back: %v\n%s", err, out)
		}
		if len(back) != len(m) {
			t.Fatalf("%d entries read back, want %d", len(back), len(m))
		}
		for k, ids := range m {
			if !reflect.DeepEqual(back[k], ids) && !(len(ids) == 0 && len(back[k]) == 0) {
				t.Fatalf("entry %q: %v != %v", k, back[k], ids)
			}
		}
	})
}
