package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/trace"
)

// Plain types of the shapes agents pass between tools, and some that take
// encoding/json's less common rules.
type (
	plainChain struct {
		V   int    `json:"v"`
		Tag string `json:"tag"`
	}
	plainWidths struct {
		I   int
		I8  int8
		I16 int16
		I32 int32
		I64 int64
		U   uint
		U8  uint8
		U16 uint16
		U32 uint32
		U64 uint64
		B   bool
		S   string
	}
	plainNested struct {
		Name   string          `json:"name,omitempty"`
		Items  [3]plainChain   `json:"items"`
		Flags  [2]bool         `json:"flags"`
		Grid   [2][2]int8      `json:"grid"`
		Inner  plainWidths     `json:"inner"`
		Odd    string          `json:"a-b.c:d"`
		Skip   int             `json:"-"`
		Dash   int             `json:"-,"`
		hidden string          // json ignores it
		Bytes  [4]byte         `json:"bytes"`
		Empty  struct{}        `json:"empty"`
		Deep   [1][1][1]string `json:"deep"`
	}
	// Types json names by rules the fast decoder does not follow: they
	// have no plainDecoder and decode as before.
	plainEmbedded struct {
		plainChain
		W int
	}
	plainQuoted struct {
		N int `json:"n,string"`
	}
	plainClash struct {
		A int
		B int `json:"A"` // json takes the tagged one
	}
	plainTextual struct{ T plainText }
	plainText    string
	// A type of what json decodes beyond plain values: floats, slices,
	// maps, pointers, interfaces, raw messages.
	typeRich struct {
		F64   float64 `json:"f64"`
		F32   float32
		Tags  []string       `json:"tags"`
		Items []plainChain   `json:"items,omitempty"`
		M     map[string]int `json:"m"`
		MS    map[typeKey][]*plainChain
		P     *plainChain
		PP    **int
		Any   any `json:"any"`
		Anys  []any
		Raw   map[string]any
		Grid  [][2]float64
		Args  json.RawMessage `json:"args"`
		Deep  *[]map[string]*[1]string
	}
	typeKey string
	// Types with the two json unmarshalers the fast decoder calls as json
	// does, with the value's text (null too): time.Time and trace.Value.
	typeStamped struct {
		At     time.Time            `json:"at"`
		Until  *time.Time           `json:"until"`
		Raw    trace.Value          `json:"raw"`
		Times  []time.Time          `json:"times"`
		ByKey  map[string]time.Time `json:"by_key"`
		Values []trace.Value        `json:"values"`
	}
	// Any other unmarshaler has no decoder: typeLevel notes what it is
	// given (null too) and refuses "bad".
	typeLeveled struct {
		Level typeLevel    `json:"level"`
		Ptrs  []*typeLevel `json:"ptrs"`
	}
	typeLevel struct {
		Text  string
		Calls int
	}
)

func (l *typeLevel) UnmarshalJSON(b []byte) error {
	if string(b) == `"bad"` {
		return fmt.Errorf("bad level")
	}
	l.Text, l.Calls = string(b), l.Calls+1
	return nil
}

// stampedTexts are canonical texts for typeStamped.
var stampedTexts = []string{
	`{"at":"2026-12-03T20:02:04.123456789Z","by_key":{"k":"2026-12-03T20:02:04Z","n":null},"level":{"a":[1]},"ptrs":[null,"p",1],"raw":{"a":[1,1.5]},"times":["2026-01-01T00:00:00+01:00"],"until":"2026-12-03T20:02:04Z","values":[null,1,"x",{}]}`,
	`{"at":null,"level":null,"raw":null,"until":null,"times":null,"by_key":null,"ptrs":null,"values":null}`,
	`{"at":"2026-12-03 20:02:04Z"}`, `{"at":"2026-13-03T20:02:04Z"}`, `{"at":"2026-12-03T24:00:00Z"}`, `{"at":"2026-12-03T20:02:04+24:00"}`,
	`{"at":"2026-12-03T20:02:04.Z"}`, `{"at":"2026-12-03T20:02:04z"}`, `{"at":1}`, `{"at":["x"]}`, `{"until":"x"}`, `{"by_key":{"k":"bad"}}`,
	`{"level":"bad"}`, `{"ptrs":["bad"]}`, `{"level":"x","at":"bad"}`, `{"Level":"x","AT":"2026-12-03T20:02:04Z"}`,
	`{"times":[null,"2026-12-03T20:02:04Z"]}`, `{"raw":"\u00e9\ud83d\ude00"}`, `{}`, `null`, `[]`, `"x"`, `"2026-12-03T20:02:04Z"`,
}

func (t *plainText) UnmarshalText(b []byte) error {
	*t = plainText(strings.ToUpper(string(b)))
	return nil
}

// plainTexts are canonical texts to decode into every type: matching,
// mismatched, out of range, escaped, and keys json matches ignoring case.
var plainTexts = []string{
	`{"tag":"n1","v":1}`, `{"v":-9223372036854775808,"tag":""}`, `{"v":9223372036854775808}`,
	`{"v":1.5}`, `{"v":1e3}`, `{"v":-0}`, `{"v":"1"}`, `{"v":true}`, `{"v":null,"tag":null}`,
	`{"V":1,"TAG":"x"}`, `{"Tag":"x"}`, `{"unknown":[1,{"a":"b"}],"v":2}`, `{}`, `null`, `[]`,
	`{"tag":"a\"b\\c\/d\b\f\n\r\t"}`, `{"tag":"\u00e9\u2028\u0000x"}`, `{"tag":"\ud83d\ude00"}`,
	`{"tag":"é😀\u007f"}`, `{"tag":"<>&"}`, `{"tag":1}`, `{"tag":["x"]}`,
	`{"I":-1,"I8":127,"I16":-32768,"I32":2147483647,"I64":-9223372036854775808,"U":18446744073709551615,"U8":255,"U16":65535,"U32":4294967295,"U64":18446744073709551615,"B":true,"S":"s"}`,
	`{"I8":128}`, `{"I8":-129}`, `{"U8":256}`, `{"U":-1}`, `{"U":-0}`, `{"U64":18446744073709551616}`, `{"B":"true"}`, `{"B":1}`, `{"S":false}`,
	`{"items":[{"v":1,"tag":"a"},{"v":2},null,{"v":4}],"flags":[true],"grid":[[1,2],[3,4,5]],"name":"n"}`,
	`{"items":null,"flags":[true,false,true],"grid":[[],[-128]],"inner":{"I":3,"S":"\n"}}`,
	`{"a-b.c:d":"odd","-":5,"Skip":6,"Dash":7,"hidden":"h","bytes":[1,2,3,4,5],"empty":{"x":1},"deep":[[["d"]]]}`,
	`{"bytes":"AQID"}`, `{"items":{}}`, `{"flags":{"a":1}}`, `{"empty":[]}`, `{"W":1,"v":2,"tag":"t"}`, `{"n":"12"}`, `{"n":12}`,
	`{"A":3}`, `{"T":"abc"}`,
	`{"f64":1.5,"F32":3.4e38}`, `{"F32":3.5e38}`, `{"f64":-0}`, `{"f64":0.1,"F32":1e-46}`, `{"f64":5e-324}`,
	`{"tags":[]}`, `{"tags":null}`, `{"tags":["a",null,"b"]}`, `{"tags":"a"}`, `{"tags":[1]}`, `{"m":{}}`, `{"m":{"a":1,"b":null}}`, `{"m":[]}`,
	`{"P":null}`, `{"P":{"v":1}}`, `{"P":{"V":1}}`, `{"PP":3}`, `{"PP":null}`, `{"any":{"a":[1,"x",null,true,{"b":2.5}]}}`, `{"any":[]}`,
	`{"any":-0}`, `{"Anys":[1,2]}`, `{"Anys":[]}`, `{"Raw":{"k":{}}}`, `{"Grid":[[1,2,3],[4]]}`, `{"Grid":[null]}`,
	`{"MS":{"k":[{"v":1},null]},"items":[]}`, `{"args":{"a":[1,{"b":"c"}]}}`, `{"args":null}`, `{"args":"s"}`, `{"args":12.5}`,
	`{"Deep":[{"a":["x"],"b":null},null]}`, `{"Deep":null}`, `{"Deep":[{"a":["x","y"]}]}`,
	`{"content":"hi","tool_calls":[{"id":"c1","name":"f","arguments":{"a":1}},{"name":"g"}],"usage":{"prompt_tokens":3,"cost_usd":0.001},"extra":{"x":[1]},"stop_reason":"end"}`, `{"deep":[[[null]]]}`, `{"grid":[[1,2]],"items":[]}`, `true`, `"s"`, `12`,
}

func TestTypeDecodeMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, text := range plainTexts {
		v, err := trace.ParseValue([]byte(text))
		require.NoError(t, err, text)
		checkTypeDecode[plainChain](t, v.Canonical())
		checkTypeDecode[plainWidths](t, v.Canonical())
		checkTypeDecode[plainNested](t, v.Canonical())
		checkTypeDecode[plainEmbedded](t, v.Canonical())
		checkTypeDecode[plainQuoted](t, v.Canonical())
		checkTypeDecode[plainClash](t, v.Canonical())
		checkTypeDecode[plainTextual](t, v.Canonical())
		checkTypeDecode[typeRich](t, v.Canonical())
		checkTypeDecode[Response](t, v.Canonical())
		checkTypeDecode[[]any](t, v.Canonical())
		checkTypeDecode[map[string]any](t, v.Canonical())
		checkTypeDecode[any](t, v.Canonical())
		checkTypeDecode[float32](t, v.Canonical())
		checkTypeDecode[json.RawMessage](t, v.Canonical())
		checkTypeDecode[[2]int](t, v.Canonical())
		checkTypeDecode[string](t, v.Canonical())
		checkTypeDecode[bool](t, v.Canonical())
		checkTypeDecode[int16](t, v.Canonical())
		checkTypeDecode[typeStamped](t, v.Canonical())
		checkTypeDecode[time.Time](t, v.Canonical())
		checkTypeDecode[trace.Value](t, v.Canonical())
	}
	for _, text := range stampedTexts {
		v, err := trace.ParseValue([]byte(text))
		require.NoError(t, err, text)
		before := v.Canonical()
		checkTypeDecode[typeStamped](t, v.Canonical())
		checkTypeDecode[[]typeStamped](t, "["+v.Canonical()+"]")
		checkTypeDecode[*typeStamped](t, v.Canonical())
		checkTypeDecode[time.Time](t, v.Canonical())
		checkTypeDecode[typeLeveled](t, v.Canonical())
		require.Equal(t, before, v.Canonical(), "decoding changed the recording's text")
	}
}

// The fast decoder must actually be taken for what agents record, or the
// test above would pass with a decoder that always declines.
func TestTypeDecodeTakesCommonShapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		typ  reflect.Type
		text string
	}{
		{reflect.TypeFor[plainChain](), `{"tag":"n1","v":1}`},
		{reflect.TypeFor[plainChain](), `{"tag":"a\"b\\c\n\u00e9","v":-3}`},
		{reflect.TypeFor[plainChain](), `{"v":1}`},
		{reflect.TypeFor[plainNested](), `{"items":[{"v":1,"tag":"a"},{"v":2},null,{"v":4}],"flags":[true],"grid":[[1,2],[3,4,5]],"name":"n"}`},
		{reflect.TypeFor[plainWidths](), `{"I":-1,"U64":18446744073709551615,"B":true,"S":"é😀"}`},
		{reflect.TypeFor[string](), `"plain"`},
		{reflect.TypeFor[[2]int](), `[1,2,3]`},
		{reflect.TypeFor[typeRich](), `{"Deep":[{"a":["x"],"b":null},null],"MS":{"k":[{"v":1},null]},"P":{"v":1},"any":{"a":[1,"x",null,true,{"b":2.5}]},"args":{"a":1},"f64":0.1,"tags":["a"]}`},
		{reflect.TypeFor[Response](), `{"content":"hi","extra":{"x":[1]},"stop_reason":"end","tool_calls":[{"arguments":{"a":1},"id":"c1","name":"f"}],"usage":{"cost_usd":0.001,"prompt_tokens":3}}`},
		{reflect.TypeFor[float64](), `-1.5e-7`},
		{reflect.TypeFor[any](), `{"a":[]}`},
		{reflect.TypeFor[typeStamped](), `{"at":"2026-12-03T20:02:04.123456789Z","by_key":{"k":"2026-12-03T20:02:04Z","n":null},"raw":{"a":[1,1.5]},"times":["2026-01-01T00:00:00+01:00"],"until":"2026-12-03T20:02:04Z","values":[null,1,"x",{}]}`},
		{reflect.TypeFor[time.Time](), `"2026-12-03T20:02:04+05:30"`},
		{reflect.TypeFor[*time.Time](), `"2026-12-03T20:02:04Z"`},
	} {
		d := typeDecoderFor(tc.typ)
		require.NotNil(t, d, tc.typ)
		s := typeScan{text: tc.text}
		require.True(t, d.decode(&s, reflect.New(tc.typ).UnsafePointer()) && s.pos == len(tc.text), "%v %s", tc.typ, tc.text)
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[plainEmbedded](), reflect.TypeFor[plainQuoted](), reflect.TypeFor[plainClash](),
		reflect.TypeFor[plainTextual](), reflect.TypeFor[[]byte](), reflect.TypeFor[map[int]string](),
		reflect.TypeFor[map[plainText]int](), reflect.TypeFor[fmt.Stringer](),
		reflect.TypeFor[chan int](), reflect.TypeFor[*plainTextual](), reflect.TypeFor[[]plainQuoted](),
		reflect.TypeFor[typeLeveled](), reflect.TypeFor[typeLevel](), reflect.TypeFor[*typeLevel](),
	} {
		require.Nil(t, typeDecoderFor(typ), typ)
	}
}

// checkTypeDecode requires that whenever the fast decoder decodes text
// into a T, json.Unmarshal gives the same value and no error.
func checkTypeDecode[T any](t *testing.T, text string) bool {
	t.Helper()
	var want T
	jerr := json.Unmarshal([]byte(text), &want)
	d := typeDecoderFor(reflect.TypeFor[T]())
	if d == nil {
		return false
	}
	got, ok := decodeTyped[T](d, text)
	if !ok {
		var zero T
		require.Equal(t, zero, got, "a declined decoding returns the zero value")
		return false
	}
	require.NoError(t, jerr, "fast decoder took %s into %T, json.Unmarshal refuses it", text, want)
	require.Equal(t, want, got, "%s into %T", text, want)
	return true
}

func TestTypeDecodeRandomValues(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 24))
	taken := 0
	for range 3000 {
		var x plainNested
		x.Name = plainRandomString(rng)
		for i := range x.Items {
			x.Items[i] = plainChain{V: rng.IntN(2000) - 1000, Tag: plainRandomString(rng)}
		}
		x.Flags = [2]bool{rng.IntN(2) == 0, rng.IntN(2) == 0}
		x.Grid = [2][2]int8{{int8(rng.Uint32()), int8(rng.Uint32())}, {int8(rng.Uint32()), 0}}
		x.Inner = plainWidths{I: int(rng.Int64()), I8: int8(rng.Uint32()), I16: int16(rng.Uint32()), I32: int32(rng.Uint32()),
			I64: -int64(rng.Uint64() >> 1), U: uint(rng.Uint64()), U8: uint8(rng.Uint32()), U16: uint16(rng.Uint32()),
			U32: rng.Uint32(), U64: rng.Uint64(), B: rng.IntN(2) == 1, S: plainRandomString(rng)}
		x.Odd = plainRandomString(rng)
		x.Bytes = [4]byte{byte(rng.Uint32()), 0, 255, byte(rng.Uint32())}
		x.Deep[0][0][0] = plainRandomString(rng)
		v, err := valueOf(x)
		require.NoError(t, err)
		if checkTypeDecode[plainNested](t, v.Canonical()) {
			taken++
		}
	}
	require.Greater(t, taken, 1500, "most random values take the fast decoder")

	taken = 0
	for range 2000 {
		x := typeRich{F64: typeRandomFloat(rng), F32: float32(rng.NormFloat64() * 1e30), Any: typeRandomAny(rng, 0)}
		for range rng.IntN(3) {
			x.Tags = append(x.Tags, plainRandomString(rng))
			x.Anys = append(x.Anys, typeRandomAny(rng, 0))
			x.Grid = append(x.Grid, [2]float64{typeRandomFloat(rng), typeRandomFloat(rng)})
		}
		if rng.IntN(2) == 0 {
			x.M = map[string]int{plainRandomString(rng): rng.Int(), "": -1}
			x.MS = map[typeKey][]*plainChain{typeKey(plainRandomString(rng)): {nil, {V: 1, Tag: plainRandomString(rng)}}}
			x.Raw = map[string]any{"k": typeRandomAny(rng, 0)}
		}
		if rng.IntN(2) == 0 {
			x.P = &plainChain{V: rng.Int(), Tag: plainRandomString(rng)}
			n := rng.Int()
			pn := &n
			x.PP = &pn
			q, _ := json.Marshal(plainRandomString(rng))
			x.Args = json.RawMessage(`{"q":` + string(q) + `}`)
		}
		v, err := valueOf(x)
		require.NoError(t, err)
		if checkTypeDecode[typeRich](t, v.Canonical()) {
			taken++
		}
	}
	require.Greater(t, taken, 1000, "most random values take the fast decoder")
}

func typeRandomFloat(rng *rand.Rand) float64 {
	switch rng.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.Copysign(0, -1)
	case 2:
		return rng.NormFloat64() * 1e300
	case 3:
		return rng.NormFloat64() * 1e-300
	case 4:
		return float64(rng.IntN(1000))
	}
	return rng.NormFloat64()
}

func typeRandomAny(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(7); {
	case k == 0 || depth > 3:
		return typeRandomFloat(rng)
	case k == 1:
		return plainRandomString(rng)
	case k == 2:
		return rng.IntN(2) == 0
	case k == 3:
		return nil
	case k == 4:
		a := []any{}
		for range rng.IntN(3) {
			a = append(a, typeRandomAny(rng, depth+1))
		}
		return a
	}
	m := map[string]any{}
	for range rng.IntN(3) {
		m[plainRandomString(rng)] = typeRandomAny(rng, depth+1)
	}
	return m
}

// plainRandomString is a string an agent might pass on: words, quotes,
// escapes, control characters, non-ASCII, invalid UTF-8, secrets.
func plainRandomString(rng *rand.Rand) string {
	parts := []string{"", "word", `"`, `\`, "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "😀", "\u2028", "<a&b>",
		"\xff", "\xed\xa0\x80", "\ufffd", "sk-ant-api03-XXXXXXXXXXXXXXXX", "Bearer abc.def", strings.Repeat("x", 300)}
	var b strings.Builder
	for range rng.IntN(5) {
		b.WriteString(parts[rng.IntN(len(parts))])
	}
	return b.String()
}

func FuzzTypeDecode(f *testing.F) {
	for _, text := range plainTexts {
		f.Add(text)
	}
	f.Add(`{"tag":"` + strings.Repeat(`\u00e9`, 40) + `","v":12}`)
	f.Add(fmt.Sprintf(`{"v":%d}`, math.MinInt64))
	f.Add(`{"tag":"\ud800","v":1}`)
	f.Add(`{ "v" : 01 }`)
	for _, text := range stampedTexts {
		f.Add(text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		v, err := trace.ParseValue([]byte(text))
		if err != nil {
			return
		}
		c := v.Canonical()
		checkTypeDecode[plainChain](t, c)
		checkTypeDecode[plainWidths](t, c)
		checkTypeDecode[plainNested](t, c)
		checkTypeDecode[typeRich](t, c)
		checkTypeDecode[Response](t, c)
		checkTypeDecode[any](t, c)
		checkTypeDecode[[]float32](t, c)
		checkTypeDecode[[2]int](t, c)
		checkTypeDecode[string](t, c)
		checkTypeDecode[bool](t, c)
		checkTypeDecode[int16](t, c)
		checkTypeDecode[uint8](t, c)
		checkTypeDecode[typeStamped](t, c)
		// Valid text that is not canonical (spaces, escapes the canonical
		// form rewrites) must be declined or decoded as json does too.
		if json.Valid([]byte(text)) {
			checkTypeDecode[plainChain](t, text)
			checkTypeDecode[plainNested](t, text)
		}
	})
}

// BenchmarkTypeDecode compares the served-output decoder with
// encoding/json on outputs of the shapes agents return. Each checks that
// its last decoding equals the value json.Unmarshal decodes, computed
// once beforehand.
//
//	go test ./replay -run '^$' -bench TypeDecode
func BenchmarkTypeDecode(b *testing.B) {
	response := trace.MustParse(`{"content":"The refund of 120.50 EUR exceeds the policy limit.","extra":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","system_fingerprint":"fp_44709d6fcb"},"stop_reason":"tool_use","tool_calls":[{"arguments":{"amount":120.5,"order":"A-1001"},"id":"toolu_01A09q90qw90lq917835lq9","name":"issue_refund"}],"usage":{"completion_tokens":48,"cost_usd":0.00213,"prompt_tokens":1520,"total_tokens":1568}}`)
	chain := trace.MustParse(`{"tag":"chain","v":417}`)
	rich := trace.MustParse(`{"Grid":[[1.5,2],[3,4]],"P":{"tag":"p","v":1},"any":{"a":[1,"x",true]},"f64":0.25,"items":[{"tag":"a","v":1},{"tag":"b","v":2}],"m":{"a":1,"b":2},"tags":["x","y","z"]}`)
	benchTypeDecode[Response](b, "response", response)
	benchTypeDecode[plainChain](b, "chain", chain)
	benchTypeDecode[typeRich](b, "rich", rich)
	benchTypeDecode[typeStamped](b, "stamped", trace.MustParse(`{"at":"2026-12-03T20:02:04.123456789Z","raw":{"a":[1,1.5]},"times":["2026-01-01T00:00:00+01:00"],"until":"2026-12-03T20:02:04Z"}`))
}

// benchTypeDecode runs BenchmarkTypeDecode's pair of benchmarks for v
// decoded into a T: name/json and name/typed.
func benchTypeDecode[T any](b *testing.B, name string, v trace.Value) {
	b.Helper()
	want, ok := jsonDecode[T](v.Canonical())
	if !ok {
		b.Fatalf("json.Unmarshal refuses %s into %T", v.Canonical(), want)
	}
	for _, dec := range []struct {
		name   string
		decode func(string) (T, bool)
	}{{"json", jsonDecode[T]}, {"typed", typedDecode[T]}} {
		b.Run(name+"/"+dec.name, func(b *testing.B) {
			b.ReportAllocs()
			var got T
			for b.Loop() {
				if got, ok = dec.decode(v.Canonical()); !ok {
					b.Fatalf("the %s decoder declined", dec.name)
				}
			}
			if !reflect.DeepEqual(got, want) {
				b.Fatalf("the %s decoder decoded %s into %+v, json.Unmarshal into %+v", dec.name, v.Canonical(), got, want)
			}
		})
	}
}

func typedDecode[T any](text string) (T, bool) {
	return decodeTyped[T](typeDecoderFor(reflect.TypeFor[T]()), text)
}

func jsonDecode[T any](text string) (T, bool) {
	var out T
	err := json.Unmarshal([]byte(text), &out)
	return out, err == nil
}

// typeSchema is recursive through four fields, as a JSON schema is: its
// decoder, compiled level by level, took time exponential in the depth
// limit (4^16 compilations) on the first decoding.
type typeSchema struct {
	Items      *typeSchema            `json:"items,omitempty"`
	Properties map[string]*typeSchema `json:"properties,omitempty"`
	Extra      *typeSchema            `json:"extra,omitempty"`
	AnyOf      []typeSchema           `json:"anyOf,omitempty"`
	Type       string                 `json:"type"`
}

// typeShared uses one struct type in many fields, and each of those in
// many more: it is compiled once, and decoded by its decoder.
type typeShared struct{ A, B, C, D [2]typeSharedLevel }
type typeSharedLevel struct{ A, B, C, D [2]plainChain }

func TestTypeDecodeRecursiveAndSharedTypes(t *testing.T) {
	t.Parallel()
	require.Nil(t, typeDecoderFor(reflect.TypeFor[typeSchema]()), "a recursive type is json's")
	text := `{"anyOf":[{"type":"string"},{"items":{"type":"integer"},"type":"array"}],"properties":{"a":{"type":"object"}},"type":"object"}`
	got, err := decodeValue[typeSchema](trace.MustParse(text))
	require.NoError(t, err)
	var want typeSchema
	require.NoError(t, json.Unmarshal([]byte(text), &want))
	require.Equal(t, want, got)

	require.NotNil(t, typeDecoderFor(reflect.TypeFor[typeShared]()))
	require.True(t, checkTypeDecode[typeShared](t, `{"B":[{"C":[{"tag":"x","v":1}]}]}`))
}
