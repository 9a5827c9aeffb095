package replay

import (
	"testing"
	"unicode/utf8"

	"github.com/stepfork/stepfork/trace"
)

// FuzzSSEParser: a model server's event stream is untrusted input. The parser
// never panics, gives the same frames however the bytes are split into reads,
// records only valid JSON values, and a recorded frame written back to the
// wire parses to the same frame.
func FuzzSSEParser(f *testing.F) {
	f.Add([]byte("data: {\"id\":\"c1\",\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\ndata: [DONE]\n\n"), uint8(7))
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\"}\n\n: ping\n\nevent: message_stop\r\ndata: {}\r\n\r\n"), uint8(3))
	f.Add([]byte("id: 1\nretry: 10\ndata: a\ndata: b\n\ndata: cut"), uint8(1))
	f.Fuzz(func(t *testing.T, stream []byte, chunk uint8) {
		var whole sseParser
		whole.feed(stream)
		var split sseParser
		n := int(chunk%16) + 1
		for b := stream; len(b) > 0; {
			k := min(n, len(b))
			split.feed(b[:k])
			b = b[k:]
		}
		if len(whole.frames) != len(split.frames) || whole.tail() != split.tail() {
			t.Fatalf("frames depend on how the stream is read: %d vs %d frames, tail %q vs %q",
				len(whole.frames), len(split.frames), whole.tail(), split.tail())
		}
		for i, fr := range whole.frames {
			if fr != split.frames[i] {
				t.Fatalf("frame %d: %s vs %s", i, fr, split.frames[i])
			}
			if _, err := trace.ParseValue([]byte(fr.Canonical())); err != nil {
				t.Fatalf("frame %d is not valid JSON (%v): %q", i, err, fr.Canonical())
			}
			// Replayed bytes are the rendering of the recorded frame. For a
			// UTF-8 stream it parses back to the same frame; invalid bytes
			// were recorded as U+FFFD, so there it only has to stay one frame
			// (every replay renders the same recorded value).
			r := renderFrame(fr)
			var back sseParser
			back.feed(r)
			if len(back.frames) != 1 {
				t.Fatalf("frame %d renders as %d frames: %s -> %q", i, len(back.frames), fr, r)
			}
			if utf8.Valid(stream) && back.frames[0] != fr {
				t.Fatalf("frame %d does not survive rendering: %s -> %q -> %s", i, fr, r, back.frames[0])
			}
		}
	})
}
