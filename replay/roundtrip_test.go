package replay

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/stepfork/stepfork/trace"
)

type rtPlain struct {
	A string            `json:"a"`
	B []float64         `json:"b,omitempty"`
	C map[string]*int32 `json:"c"`
	D [2]uint8
	E *rtPlain `json:"e,omitempty"`
}

type rtUnexported struct {
	A string
	b int
}

type rtDash struct {
	A string `json:"-"`
}

type rtEmbedded struct {
	rtPlain
}

type rtCaseClash struct {
	Name string
	NAME string `json:"name"`
}

type rtAny struct{ V any }

// TestRoundTrips lists which types the agent gets back without decoding
// (their values survive JSON unchanged) and which are decoded.
func TestRoundTrips(t *testing.T) {
	t.Parallel()
	cases := []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[string](), true},
		{reflect.TypeFor[float32](), true},
		{reflect.TypeFor[[]byte](), true},
		{reflect.TypeFor[map[int]string](), true},
		{reflect.TypeFor[rtPlain](), true},
		{reflect.TypeFor[*rtPlain](), true},
		{reflect.TypeFor[any](), false},
		{reflect.TypeFor[map[string]any](), false},
		{reflect.TypeFor[[]any](), false},
		{reflect.TypeFor[time.Time](), false},
		{reflect.TypeFor[json.RawMessage](), false},
		{reflect.TypeFor[trace.Value](), false},
		{reflect.TypeFor[rtUnexported](), false},
		{reflect.TypeFor[rtDash](), false},
		{reflect.TypeFor[rtEmbedded](), false},
		{reflect.TypeFor[rtCaseClash](), false},
		{reflect.TypeFor[rtAny](), false},
		{reflect.TypeFor[map[bool]string](), false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, roundTrips(tc.t), "%v", tc.t)
	}
}
