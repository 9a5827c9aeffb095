package replay

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

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
)

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
	`{"A":3}`, `{"T":"abc"}`, `{"deep":[[[null]]]}`, `{"grid":[[1,2]],"items":[]}`, `true`, `"s"`, `12`,
}

func TestPlainDecodeMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, text := range plainTexts {
		v, err := trace.ParseValue([]byte(text))
		require.NoError(t, err, text)
		checkPlainDecode[plainChain](t, v.Canonical())
		checkPlainDecode[plainWidths](t, v.Canonical())
		checkPlainDecode[plainNested](t, v.Canonical())
		checkPlainDecode[plainEmbedded](t, v.Canonical())
		checkPlainDecode[plainQuoted](t, v.Canonical())
		checkPlainDecode[plainClash](t, v.Canonical())
		checkPlainDecode[plainTextual](t, v.Canonical())
		checkPlainDecode[[2]int](t, v.Canonical())
		checkPlainDecode[string](t, v.Canonical())
		checkPlainDecode[bool](t, v.Canonical())
		checkPlainDecode[int16](t, v.Canonical())
	}
}

// The fast decoder must actually be taken for what agents record, or the
// test above would pass with a decoder that always declines.
func TestPlainDecodeTakesCommonShapes(t *testing.T) {
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
	} {
		d := plainDecoderFor(tc.typ)
		require.NotNil(t, d, tc.typ)
		s := plainScan{text: tc.text}
		require.True(t, d.decode(&s, reflect.New(tc.typ).UnsafePointer()) && s.pos == len(tc.text), "%v %s", tc.typ, tc.text)
	}
	for _, typ := range []reflect.Type{
		reflect.TypeFor[plainEmbedded](), reflect.TypeFor[plainQuoted](), reflect.TypeFor[plainClash](),
		reflect.TypeFor[plainTextual](), reflect.TypeFor[float64](), reflect.TypeFor[[]int](), reflect.TypeFor[*int](),
		reflect.TypeFor[map[string]int](), reflect.TypeFor[any](), reflect.TypeFor[trace.Value](),
	} {
		require.Nil(t, plainDecoderFor(typ), typ)
	}
}

// checkPlainDecode requires that whenever the fast decoder decodes text
// into a T, json.Unmarshal gives the same value and no error.
func checkPlainDecode[T any](t *testing.T, text string) bool {
	t.Helper()
	var want T
	jerr := json.Unmarshal([]byte(text), &want)
	d := plainDecoderFor(reflect.TypeFor[T]())
	if d == nil {
		return false
	}
	got, ok := decodePlain[T](d, text)
	if !ok {
		var zero T
		require.Equal(t, zero, got, "a declined decoding returns the zero value")
		return false
	}
	require.NoError(t, jerr, "fast decoder took %s into %T, json.Unmarshal refuses it", text, want)
	require.Equal(t, want, got, "%s into %T", text, want)
	return true
}

func TestPlainDecodeRandomValues(t *testing.T) {
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
		if checkPlainDecode[plainNested](t, v.Canonical()) {
			taken++
		}
	}
	require.Greater(t, taken, 1500, "most random values take the fast decoder")
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

func FuzzPlainDecode(f *testing.F) {
	for _, text := range plainTexts {
		f.Add(text)
	}
	f.Add(`{"tag":"` + strings.Repeat(`\u00e9`, 40) + `","v":12}`)
	f.Add(fmt.Sprintf(`{"v":%d}`, math.MinInt64))
	f.Add(`{"tag":"\ud800","v":1}`)
	f.Add(`{ "v" : 01 }`)
	f.Fuzz(func(t *testing.T, text string) {
		v, err := trace.ParseValue([]byte(text))
		if err != nil {
			return
		}
		c := v.Canonical()
		checkPlainDecode[plainChain](t, c)
		checkPlainDecode[plainWidths](t, c)
		checkPlainDecode[plainNested](t, c)
		checkPlainDecode[[2]int](t, c)
		checkPlainDecode[string](t, c)
		checkPlainDecode[bool](t, c)
		checkPlainDecode[int16](t, c)
		checkPlainDecode[uint8](t, c)
		// Valid text that is not canonical (spaces, escapes the canonical
		// form rewrites) must be declined or decoded as json does too.
		if json.Valid([]byte(text)) {
			checkPlainDecode[plainChain](t, text)
			checkPlainDecode[plainNested](t, text)
		}
	})
}
