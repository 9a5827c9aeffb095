package trace

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// Known-answer vectors of stepfork-format.md §3.2 and §3.4: the JSON as it may
// appear in a file, its canonical form, and the SHA-256 of that form.
var hashVectors = []struct {
	in, canonical, sha string
}{
	{`null`, `null`, "74234e98afe7498fb5daf1f36ac2d78acc339464f950703b8c019892f982b90b"},
	{`true`, `true`, "b5bea41b6c623f7c09f1bf24dcae58ebab3c0cdd90ad966bc43a45b44867e12b"},
	{`42`, `42`, "73475cb40a568e8da8a045ced110137e159f890ac4da883b6b17dc651b3a8049"},
	{`1.5`, `1.5`, "9f29a130438b81170b92a42650f9a94291ecad60bd47af2a3886e75f7f728725"},
	{`{}`, `{}`, "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"},
	{`[]`, `[]`, "4f53cda18c2baa0c0354bb5f9a3ecbe5ed12ab4d8e11ba873c2f11161202b945"},
	{`{"b":2,"a":1}`, `{"a":1,"b":2}`, "43258cff783fe7036d8a43033f830adfc60ec037382473548ac742b888292777"},
	{`{"nested":{"z":[1,"काठमाडौँ",null],"a":false}}`, `{"nested":{"a":false,"z":[1,"काठमाडौँ",null]}}`, "5e994630d09623b09ab0043b91b383a698f9effbebd1ab0271db0877ba6b4ac7"},
	{`{"status":"failed"}`, `{"status":"failed"}`, "759315d5ae8c31136d2a7bc803e591554894987559325cdf7e0b5965bec0eaca"},
	{`0.0`, `0.0`, "8aed642bf5118b9d3c859bd4be35ecac75b6e873cce34e7b6f554b06f75550d7"},
	{`-0.0`, `-0.0`, "c26617c7ccbcaa6631b45d851b8cf56e21d2ca624bdb1193afdbd4b560702cec"},
	{`1.0`, `1.0`, "d0ff5974b6aa52cf562bea5921840c032a860a91a3512f7fe8f768f6bbe005f6"},
	{`0.61`, `0.61`, "c85e09eb8176db9e00c43c8bdc564dd91330c9d14f2a52ad6bc7872931e4c7ef"},
	{`0.1`, `0.1`, "14be4b45f18e0d8c67b4f719b5144eee88497e413709d11d85b096d8e2346310"},
	{`0.00001`, `1e-05`, "5a9530d3c6d5faad6ba8afe16fb8e438df23865128370b2ec14ef622bb5f2ec9"},
	{`0.0001`, `0.0001`, "e539aebac7fd2ed8aba8854fedeaa65436962f8ee1c82341b394698f085b6496"},
	{`1e-7`, `1e-07`, "e485fac25775a7da830698e7daac582737fc8b43ba4b351467a16cf8ed83122a"},
	{`1.5e-7`, `1.5e-07`, "d3d74b7715e6c72e828bb309c3f125f4fd347239e8ffee97b83d328147256cd6"},
	{`123456.789`, `123456.789`, "df16e278bec8bd79b90a36552e05a4179549b0870da68fbe2580a8a920597ef4"},
	{`1000000000000000.0`, `1000000000000000.0`, "c02731631f61648f06ba5501a9c68e2b0a9186a934ff45f40ab28eb6f3673021"},
	{`1e+16`, `1e+16`, "a144838520595009e7daf5aff8472573f9ce6a4bcd8c30673675618883464ab0"},
	{`2500000000000000.0`, `2500000000000000.0`, "360804d59fa1ceafadadc317c8d5975abbe29e491dc977621950ac821c907ad4"},
	{`1e+21`, `1e+21`, "241c4643fa70b1dcde1205b71be4e3bebb17e9f880c8e1a33d0ead6c27271d3c"},
	{`1.7976931348623157e+308`, `1.7976931348623157e+308`, "c2784e1abd6317452708f3fbf9641c16b959561bc621a1d408c23a20aa2cb585"},
	{`5e-324`, `5e-324`, "c46e7ca1be4c8734f373a56530787288fa2058d73d07855e9247e949f811a42a"},
	{`0.30000000000000004`, `0.30000000000000004`, "06bad31060c1212ae832de4c031f7b31e3b48aed57858294478cb19450cf34ca"},
	{`1.2345678901234568e+17`, `1.2345678901234568e+17`, "9555eaa95711887fbf7ea4ed9f0e17bc0f580f26739f90722ddfbea81e9ab2e9"},
	{`1234567890123456.8`, `1234567890123456.8`, "d398b229646051d1b7f705bfb8b5e2c063ae7df46628e67632c1814f77f75d80"},
	{`0.001`, `0.001`, "9fca51987c96ba92d35f303353b7065f31114501c9f2afa37463ff1fdffe8f1f"},
	{`[1.0,1]`, `[1.0,1]`, "73afdcc0bf263ef876ed0f16195385407f730ee8b466b4aaf189fcf100daea4c"},
	{`{"é":1,"e":2,"E":3}`, `{"E":3,"e":2,"é":1}`, "b2eb13b5fbfbb315c307fbf61c6f45183997886ad2eebe7bdc36e927653f0114"},
	// Also as they are printed in other ways.
	{` 1e16 `, `1e+16`, "a144838520595009e7daf5aff8472573f9ce6a4bcd8c30673675618883464ab0"},
	{`1E15`, `1000000000000000.0`, "c02731631f61648f06ba5501a9c68e2b0a9186a934ff45f40ab28eb6f3673021"},
	{`1e-05`, `1e-05`, "5a9530d3c6d5faad6ba8afe16fb8e438df23865128370b2ec14ef622bb5f2ec9"},
}

func TestHashVectors(t *testing.T) {
	t.Parallel()
	for _, tc := range hashVectors {
		v, err := ParseValue([]byte(tc.in))
		if err != nil {
			t.Errorf("ParseValue(%s): %v", tc.in, err)
			continue
		}
		if got := v.Canonical(); got != tc.canonical {
			t.Errorf("canonical(%s) = %s, want %s", tc.in, got, tc.canonical)
		}
		if got := Hash(v); got != tc.sha {
			t.Errorf("Hash(%s) = %s, want %s", tc.in, got, tc.sha)
		}
	}
}

func TestPydanticFloatForm(t *testing.T) {
	t.Parallel()
	// stepfork-format.md §3.4: canonical (repr) vs events.jsonl (Pydantic).
	for _, tc := range []struct{ canonical, file string }{
		{"0.0", "0.0"}, {"-0.0", "-0.0"}, {"1.0", "1.0"}, {"0.61", "0.61"},
		{"1e-05", "0.00001"}, {"0.0001", "0.0001"}, {"1e-07", "1e-7"}, {"1.5e-07", "1.5e-7"},
		{"1000000000000000.0", "1000000000000000.0"}, {"1e+16", "1e+16"}, {"1e+21", "1e+21"},
		{"1.7976931348623157e+308", "1.7976931348623157e+308"}, {"5e-324", "5e-324"},
		{"1.2345678901234568e+17", "1.2345678901234568e+17"}, {"0.001", "0.001"},
		{`{"a":[1e-05,"e-05",-1.5e-07]}`, `{"a":[0.00001,"e-05",-1.5e-7]}`},
	} {
		v := MustParse(tc.canonical)
		if got := string(appendFileForm(nil, v)); got != tc.file {
			t.Errorf("file form of %s = %s, want %s", tc.canonical, got, tc.file)
		}
		back := MustParse(tc.file)
		if back != v {
			t.Errorf("canonical of %s = %s, want %s", tc.file, back, v)
		}
	}
}

func TestCanonicalStrings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{`"a\u2028b\u2029"`, "\"a\u2028b\u2029\""},
		{`"<>&/\/"`, `"<>&//"`},
		{`"\u0001\u001F\u007f"`, "\"\\u0001\\u001f\u007f\""},
		{`"\b\f\n\r\t\"\\"`, `"\b\f\n\r\t\"\\"`},
		{`"\ud83d\ude00"`, `"😀"`},
		{`{"a\"":1,"a#":2}`, `{"a\"":1,"a#":2}`},
		{`{"b":1,"\u0062":2}`, ``}, // duplicate after unescaping
		{`-0`, `0`},
		{`123456789012345678901234567890`, `123456789012345678901234567890`},
	} {
		v, err := ParseValue([]byte(tc.in))
		if tc.want == "" {
			if err == nil {
				t.Errorf("ParseValue(%s) = %s, want error", tc.in, v)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseValue(%s): %v", tc.in, err)
			continue
		}
		if v.Canonical() != tc.want {
			t.Errorf("ParseValue(%s) = %s, want %s", tc.in, v.Canonical(), tc.want)
		}
	}
}

// TestHashJSONAndAppendCanonical checks the allocation-free public paths
// against the known answers, that appendCanonical appends after what dst
// holds, and that both refuse what ParseValue refuses, leaving dst as it was.
//
// It is not parallel: testing.AllocsPerRun refuses to run in parallel tests.
func TestHashJSONAndAppendCanonical(t *testing.T) {
	for _, tc := range hashVectors {
		if got, err := hashJSON([]byte(tc.in)); err != nil || got != tc.sha {
			t.Errorf("hashJSON(%s) = %q, %v; want %s", tc.in, got, err, tc.sha)
		}
		got, err := appendCanonical([]byte("prefix:"), []byte(tc.in))
		if err != nil || string(got) != "prefix:"+tc.canonical {
			t.Errorf("appendCanonical(prefix, %s) = %q, %v; want %q", tc.in, got, err, "prefix:"+tc.canonical)
		}
	}
	for _, in := range []string{`NaN`, `{"a":1,"a":2}`, "\"\xff\"", `[1,]`, ``} {
		if h, err := hashJSON([]byte(in)); err == nil || h != "" || !errors.Is(err, ErrCanonical) {
			t.Errorf("hashJSON(%q) = %q, %v; want an ErrCanonical error", in, h, err)
		}
		dst := []byte("keep")
		if out, err := appendCanonical(dst, []byte(in)); err == nil || string(out) != "keep" {
			t.Errorf("appendCanonical(keep, %q) = %q, %v; want keep and an error", in, out, err)
		}
	}
	if raceEnabled {
		return
	}
	payload := []byte(`{"z":[1,2.50,"काठमाडौँ"],"a":{"y":null,"b":0.00001}}`)
	buf := make([]byte, 0, 256)
	if n := testing.AllocsPerRun(100, func() { buf, _ = appendCanonical(buf[:0], payload) }); n != 0 {
		t.Errorf("appendCanonical into a reused buffer: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = hashJSON(payload) }); n > 1 {
		t.Errorf("hashJSON: %v allocations, want at most 1 (the result)", n)
	}
}

func TestCanonicalRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, msg string }{
		{`NaN`, "non-finite floats are not supported"},
		{`[Infinity]`, "non-finite floats are not supported"},
		{`-Infinity`, "non-finite floats are not supported"},
		{`1e400`, "non-finite floats are not supported"},
		{`{1:2}`, "JSON object keys must be strings"},
		{`"\ud800"`, "lone UTF-16 surrogate"},
		{`"\udc00x"`, "lone UTF-16 surrogate"},
		{"\"\xff\"", "invalid UTF-8"},
		{`{"a":1,"a":2}`, "duplicate object key"},
		{`[1,]`, "invalid JSON"},
		{`01`, "invalid JSON"},
		{`1.`, "invalid JSON"},
		{`"a` + "\n" + `"`, "control character"},
		{strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1), "maximum nesting depth of 1000"},
		{``, "unexpected end"},
		{`1 2`, "extra data"},
	} {
		_, err := ParseValue([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("ParseValue(%.40s) error = %v, want %q", tc.in, err, tc.msg)
		}
		if err != nil && !errors.Is(err, ErrCanonical) {
			t.Errorf("ParseValue(%.40s) error %v does not match ErrCanonical", tc.in, err)
		}
	}
	if _, err := ParseValue([]byte(strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth))); err != nil {
		t.Errorf("depth %d refused: %v", MaxDepth, err)
	}
}

func TestValueOf(t *testing.T) {
	t.Parallel()
	type S struct {
		B int     `json:"b"`
		A float64 `json:"a"`
	}
	for _, tc := range []struct {
		in   any
		want string
	}{
		{nil, "null"},
		{1, "1"},
		{1.0, "1.0"},
		{float32(0.5), "0.5"},
		{"<&>", `"<&>"`},
		{map[string]any{"z": 1e-5, "a": []any{true, nil}}, `{"a":[true,null],"z":1e-05}`},
		{S{B: 2, A: 0.25}, `{"a":0.25,"b":2}`},
		{[]string{"x"}, `["x"]`},
		{MustParse(`{"b":1,"a":2}`), `{"a":2,"b":1}`},
	} {
		v, err := ValueOf(tc.in)
		if err != nil || v.Canonical() != tc.want {
			t.Errorf("ValueOf(%#v) = %s, %v; want %s", tc.in, v, err, tc.want)
		}
	}
	for _, in := range []any{map[string]any{"x": []any{1.0, func() {}}}} {
		if _, err := ValueOf(in); err == nil {
			t.Errorf("ValueOf(%#v) succeeded", in)
		}
	}
	_, err := ValueOf(map[string]any{"a": []any{0, nanValue()}})
	if err == nil || err.Error() != "non-finite float at $.a[1] cannot be recorded as JSON" {
		t.Errorf("NaN error = %v", err)
	}
}

func nanValue() float64 { var z float64; return z / z }

// TestStringValueInvalidUTF8 checks what StringValue's doc says: each run
// of invalid bytes becomes one U+FFFD (encoding/json writes one per byte).
func TestStringValueInvalidUTF8(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"a\xff\xfeb", "\"a\uFFFDb\""},
		{"\xff x \xfe", "\"\uFFFD x \uFFFD\""},
		{"cut \xe6\x97", "\"cut \uFFFD\""},
		{"ünï 日本", "\"ünï 日本\""},
	} {
		if got := StringValue(tc.in).Canonical(); got != tc.want {
			t.Errorf("StringValue(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestValueAccessors(t *testing.T) {
	t.Parallel()
	v := MustParse(`{"s":"a\"b","n":[1,2.5,{"k":null}],"t":true}`)
	if v.Kind() != Object || v.Len() != 3 {
		t.Fatalf("kind %v len %d", v.Kind(), v.Len())
	}
	if s, ok := v.Get("s").Str(); !ok || s != `a"b` {
		t.Errorf("Get(s) = %q %v", s, ok)
	}
	var kinds []Kind
	for _, e := range v.Get("n").Elems() {
		kinds = append(kinds, e.Kind())
	}
	if len(kinds) != 3 || kinds[0] != Int || kinds[1] != Float || kinds[2] != Object {
		t.Errorf("kinds = %v", kinds)
	}
	if !v.Get("n").Get("x").IsAbsent() || !v.Get("missing").IsAbsent() {
		t.Error("Get of a missing key is not absent")
	}
	if b, ok := v.Get("t").BoolOf(); !ok || !b {
		t.Error("BoolOf")
	}
}

// TestValueDecodeIntoValue checks that Decode into a *Value, which stores
// the value itself, gives what encoding/json gives, and that every other
// target still goes through encoding/json.
func TestValueDecodeIntoValue(t *testing.T) {
	t.Parallel()
	obj, err := ObjectValue(Member{"b", IntValue(2)}, Member{"a", StringValue("x\u2028\"")})
	if err != nil {
		t.Fatal(err)
	}
	float, err := FloatValue(1e21)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []Value{
		NullValue, TrueValue, IntValue(-7), float, StringValue("sk-live \u00e9\x01"), obj,
		MustParse(`{"s":"a\"b","n":[1,2.5,{"k":null}],"t":true,"u":"\ud83d\ude00"}`),
		MustParse(`[[[[]]],{},"",-0.0,1E2]`),
	} {
		var viaDecode, viaJSON Value
		if err := v.Decode(&viaDecode); err != nil || viaDecode != v {
			t.Errorf("Decode(%s) into a Value = %s, %v", v, viaDecode, err)
		}
		if err := json.Unmarshal([]byte(v.Canonical()), &viaJSON); err != nil || viaJSON != v {
			t.Errorf("json.Unmarshal(%s) into a Value = %s, %v", v, viaJSON, err)
		}
		var wrapped struct{ V Value }
		if err := MustParse(`{"V":` + v.Canonical() + `}`).Decode(&wrapped); err != nil || wrapped.V != v {
			t.Errorf("Decode into a struct's Value field = %s, %v; want %s", wrapped.V, err, v)
		}
	}
	var absent, into Value
	if err := absent.Decode(&into); err == nil || !strings.Contains(err.Error(), "cannot decode an absent value") {
		t.Errorf("Decode of an absent value: %v", err)
	}
	var nilValue *Value
	var invalid *json.InvalidUnmarshalError
	if err := IntValue(1).Decode(nilValue); !errors.As(err, &invalid) {
		t.Errorf("Decode into a nil *Value: %v, want encoding/json's InvalidUnmarshalError", err)
	}
}
