package replay_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/stepfork/stepfork/replay"
	"github.com/stepfork/stepfork/trace"
)

type htmlText struct {
	Text  string  `json:"text"`
	Ratio float64 `json:"ratio"`
	Whole float64 `json:"whole"`
	Tags  []string
	Inner *htmlText `json:"inner,omitempty"`
}

type rawMarshaler struct{}

func (rawMarshaler) MarshalJSON() ([]byte, error) {
	return []byte(` { "b" : 1.50, "a" : [ 1 , "<x>" ] } `), nil
}

type badMarshaler struct{}

func (badMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("no JSON for you") }

type nanHolder struct{ F float64 }

// TestRecordedInputsAreValueOf checks that what the wrappers record for a Go
// value is exactly trace.ValueOf of it, and that a value trace.ValueOf
// refuses is refused with the same words.
func TestRecordedInputsAreValueOf(t *testing.T) {
	t.Parallel()
	var nilPtr *htmlText
	cases := []struct {
		name string
		in   any
	}{
		{"struct with HTML and separators", htmlText{Text: "a<b>&c \u2028 \u2029 é \x01", Ratio: 0.1, Whole: 3, Tags: []string{"<", ">"}}},
		{"nested pointer", &htmlText{Text: "x", Inner: &htmlText{Text: "y"}}},
		{"nil pointer", nilPtr},
		{"typed map", map[string]int{"z": 1, "a": 2}},
		{"typed slice", []float64{1, 1.5, 1e21, 1e-7}},
		{"marshaler", rawMarshaler{}},
		{"time", time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)},
		{"raw message", json.RawMessage(`{"b":2,"a":1}`)},
		{"string", "plain"},
		{"any map", map[string]any{"k": []any{1, 2.5, nil}}},
		{"bad marshaler", badMarshaler{}},
		{"NaN in a struct", nanHolder{F: math.NaN()}},
		{"channel", make(chan int)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want, wantErr := trace.ValueOf(c.in)
			echo := replay.Tool("echo", func(_ context.Context, in any) (int, error) { return 1, nil })
			res, err := replay.Record(context.Background(), "values", nil, func(ctx context.Context, _ trace.Value) (any, error) {
				return echo(ctx, c.in)
			})
			require.NoError(t, err)
			if wantErr != nil {
				// The wrapper refused the input; the agent returned that error.
				require.Error(t, res.Err)
				assert.ErrorIs(t, res.Err, replay.ErrNotRecordable)
				assert.Contains(t, res.Err.Error(), wantErr.Error())
				return
			}
			var got trace.Value
			for _, ev := range res.Trace.Events {
				if ev.Type == trace.ToolCall {
					got = ev.Input
				}
			}
			assert.Equal(t, want.Canonical(), got.Canonical())
		})
	}
}
