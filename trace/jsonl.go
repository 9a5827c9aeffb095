package trace

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unsafe"
)

// MaxLineBytes is the longest line of events.jsonl that the readers accept
// (64 MiB, not counting the line ending). A longer line is refused with an error naming its line number
// instead of being buffered without bound.
const MaxLineBytes = 64 << 20

// errInvalidEvent marks an event line that is valid JSON but not a valid event.
var errInvalidEvent = errors.New("invalid event")

// eventField identifies a key of an event object.
type eventField uint8

const (
	fID eventField = iota
	fRunID
	fParentID
	fStep
	fType
	fTimestamp
	fDuration
	fStatus
	fPolicy
	fInputHash
	fOutputHash
	fRedactions
	fProvider
	fModel
	fName
	fKey
	fInput
	fOutput
	fBefore
	fAfter
	fDetails
	fPromptTokens
	fCompletionTokens
	fTotalTokens
	fCost
	fErrorType
	fMessage
	fRunStatus
	numFields
)

var fieldNames = [numFields]string{
	"id", "run_id", "parent_id", "step", "type", "timestamp", "duration_ms", "status",
	"replay_policy", "input_hash", "output_hash", "redactions", "provider", "model", "name",
	"key", "input", "output", "before", "after", "details", "prompt_tokens",
	"completion_tokens", "total_tokens", "cost_usd", "error_type", "message", "run_status",
}

// lookupField returns the field a key names. A switch on the key compiles
// to a search on length and bytes, which is cheaper than a map lookup on
// every key of every line.
func lookupField(key []byte) (eventField, bool) {
	switch string(key) {
	case "id":
		return fID, true
	case "run_id":
		return fRunID, true
	case "parent_id":
		return fParentID, true
	case "step":
		return fStep, true
	case "type":
		return fType, true
	case "timestamp":
		return fTimestamp, true
	case "duration_ms":
		return fDuration, true
	case "status":
		return fStatus, true
	case "replay_policy":
		return fPolicy, true
	case "input_hash":
		return fInputHash, true
	case "output_hash":
		return fOutputHash, true
	case "redactions":
		return fRedactions, true
	case "provider":
		return fProvider, true
	case "model":
		return fModel, true
	case "name":
		return fName, true
	case "key":
		return fKey, true
	case "input":
		return fInput, true
	case "output":
		return fOutput, true
	case "before":
		return fBefore, true
	case "after":
		return fAfter, true
	case "details":
		return fDetails, true
	case "prompt_tokens":
		return fPromptTokens, true
	case "completion_tokens":
		return fCompletionTokens, true
	case "total_tokens":
		return fTotalTokens, true
	case "cost_usd":
		return fCost, true
	case "error_type":
		return fErrorType, true
	case "message":
		return fMessage, true
	case "run_status":
		return fRunStatus, true
	}
	return 0, false
}

// typeFields lists, per event type, the type-specific keys in the order
// Pydantic writes them.
var typeFields = map[EventType][]eventField{
	RunStart:    {fInput},
	LLMRequest:  {fProvider, fModel, fInput},
	LLMResponse: {fModel, fOutput, fPromptTokens, fCompletionTokens, fTotalTokens, fCost},
	ToolCall:    {fName, fInput},
	ToolResult:  {fName, fOutput},
	StateChange: {fKey, fBefore, fAfter},
	ErrorEvent:  {fErrorType, fMessage, fDetails},
	RunEnd:      {fRunStatus, fOutput},
}

// eventDecoder parses event lines. It is reusable and keeps its scratch
// buffers between lines.
type eventDecoder struct {
	c       canonicalizer
	buf     []byte
	scratch []byte
	// intern holds the strings that repeat from line to line (types,
	// statuses, run ids, tool and model names), so that each is allocated
	// once rather than once per event.
	intern map[string]string
	last   [numFields]string // the last interned value of each field
	// hashOnly makes payload fields hash their canonical bytes into sums
	// (input side, output side) instead of keeping them: the event then
	// carries elidedPayload in their place. ValidateBundle uses it to
	// check payload hashes without allocating the payloads.
	hashOnly bool
	sums     [2]payloadSum
	// sum makes payload fields hash their canonical bytes into sums, as
	// hashOnly does, and keep them too.
	sum bool
	// track makes the decoder note what savedForm needs: each payload's
	// digest, its bytes in the line (spans, by the slot of sums), whether
	// those bytes are already the payload's file form (exact), and, in
	// the canonicalizer, whether any object key is sensitive.
	track bool
	spans [2][2]int
	exact [2]bool
	ff    []byte // scratch for the file form of a payload
	enc   []byte // scratch for re-encoding a line
	// digest makes a hash-only decoder note what ReadBehavior needs to
	// know that a payload's digest stands for its behavior: whether
	// redaction could change anything in the line (a sensitive key, noted
	// by the canonicalizer, or what may be a credential in a payload's
	// canonical form: mayRedact) and whether a payload has a "headers" key
	// or a key that starts with "usage" (http, by the slot of sums), which
	// the behavior of an HTTP response or of a model's answer leaves out.
	digest    bool
	mayRedact bool
	http      [2]bool
	// typ is the type of the event being decoded, once read; dropped
	// says that a payload of it was left out (elidedPayload), and
	// hashSpans where its payload hashes are in the line ({-1}: null,
	// {-2}: escaped), for elide to keep an event whole without decoding
	// it again.
	typ       EventType
	dropped   bool
	hashSpans [2][2]int
	// noScan makes every payload take the canonicalizer, never
	// savedValue: tests compare the two.
	noScan bool
	// borrow makes the id, the parent id and the payload hashes of an
	// event strings that share the bytes of its line instead of copies
	// (unless they hold escapes): they are valid while the line is, which
	// is all that ValidateBundle needs (decodeEvents).
	borrow bool
}

// elidedPayload stands in for a payload that a hash-only decoder did not
// keep. It never leaves the package.
var elidedPayload = Value{`"(payload elided by hash-only decoding)"`}

// maxInterned bounds the intern table of an eventDecoder.
const maxInterned = 512

// decode parses one line of events.jsonl into ev. Errors are either
// *CanonicalError (not valid JSON) or wrap errInvalidEvent.
func (d *eventDecoder) decode(line []byte, ev *Event) error {
	*ev = Event{}
	d.sums = [2]payloadSum{}
	d.spans, d.exact = [2][2]int{}, [2]bool{}
	d.mayRedact, d.http = false, [2]bool{}
	d.typ, d.dropped, d.hashSpans = "", false, [2][2]int{{-1}, {-1}}
	c := &d.c
	c.checkKeys, c.sensitive = d.track || d.digest, false
	c.noteBehaviorKeys = d.digest
	c.in, c.pos, c.depth = line, 0, 0
	defer func() { c.in = nil }()
	c.skipSpace()
	if c.pos >= len(line) || line[c.pos] != '{' {
		if err := d.validJSON(line); err != nil {
			return err
		}
		return fmt.Errorf("%w: an event must be a JSON object", errInvalidEvent)
	}
	c.pos++
	var seen [numFields]bool
	var evType string
	first := true
	for {
		c.skipSpace()
		if c.pos >= len(line) {
			return c.errf("invalid JSON: unterminated object")
		}
		if first && line[c.pos] == '}' {
			c.pos++
			break
		}
		first = false
		if line[c.pos] != '"' {
			return c.errf("invalid JSON: expected a string key")
		}
		key, err := d.readBytes()
		if err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(line) || line[c.pos] != ':' {
			return c.errf("invalid JSON: expected ':' after object key")
		}
		c.pos++
		c.skipSpace()
		f, known := lookupField(key)
		if !known {
			if err := d.skip(); err != nil {
				return err
			}
			return fmt.Errorf("%w: unknown field %q", errInvalidEvent, key)
		}
		if seen[f] {
			return c.errf("invalid JSON: duplicate object key %q", key)
		}
		seen[f] = true
		if err := d.field(f, ev, &evType); err != nil {
			return err
		}
		c.skipSpace()
		if c.pos >= len(line) {
			return c.errf("invalid JSON: unterminated object")
		}
		if line[c.pos] == ',' {
			c.pos++
			continue
		}
		if line[c.pos] != '}' {
			return c.errf("invalid JSON: expected ',' or '}' in object")
		}
		c.pos++
		break
	}
	c.skipSpace()
	if c.pos != len(line) {
		return c.errf("invalid JSON: extra data after the value")
	}
	// Model checks, in the spirit of Pydantic's: required keys, known type,
	// type-specific keys only, field constraints.
	if !seen[fType] {
		return fmt.Errorf("%w: type is required", errInvalidEvent)
	}
	ev.Type = EventType(evType)
	allowed, ok := typeFields[ev.Type]
	if !ok {
		return fmt.Errorf("%w: unknown event type %q", errInvalidEvent, evType)
	}
	for f := fProvider; f < numFields; f++ {
		if seen[f] && !fieldIn(f, allowed) {
			return fmt.Errorf("%w: unknown field %q for type %s", errInvalidEvent, fieldNames[f], ev.Type)
		}
	}
	for _, f := range [...]eventField{fID, fRunID, fTimestamp} {
		if !seen[f] {
			// Python invents a random id, run id or "now"; a reader that
			// must never repair input refuses instead.
			return fmt.Errorf("%w: %s is required", errInvalidEvent, fieldNames[f])
		}
	}
	if !seen[fStatus] {
		ev.Status = StatusOK
		if ev.Type == ErrorEvent {
			ev.Status = StatusError
		}
	}
	if !seen[fPolicy] {
		ev.ReplayPolicy = PolicyFrozen
	}
	if err := ev.checkFields(); err != nil {
		return fmt.Errorf("%w: %v", errInvalidEvent, err)
	}
	return nil
}

func fieldIn(f eventField, fs []eventField) bool {
	for _, x := range fs {
		if x == f {
			return true
		}
	}
	return false
}

// validJSON reports whether the rest of the line is valid JSON, so that a
// non-object line reports a JSON error before an event error.
func (d *eventDecoder) validJSON(line []byte) error {
	var c canonicalizer
	_, err := c.run(line, nil)
	return err
}

// skip canonicalizes (and discards) the value at the cursor.
func (d *eventDecoder) skip() error {
	c := &d.c
	save := c.out
	c.out = d.buf[:0]
	err := c.value()
	d.buf, c.out = c.out, save
	return err
}

// readBorrowed reads the string at the cursor, as a string that shares
// the bytes of the line when it holds no escape.
func (d *eventDecoder) readBorrowed() (string, error) {
	c := &d.c
	start := c.pos + 1
	if c.plainString() {
		return unsafe.String(unsafe.SliceData(c.in[start:]), c.pos-1-start), nil
	}
	b, err := d.readBytes()
	return string(b), err
}

// readString reads the string at the cursor.
func (d *eventDecoder) readString() (string, error) {
	b, err := d.readBytes()
	return string(b), err
}

// readBytes reads the string at the cursor and returns its decoded bytes,
// which are valid until the next call.
func (d *eventDecoder) readBytes() ([]byte, error) {
	c := &d.c
	start := c.pos + 1
	if c.plainString() {
		return c.in[start : c.pos-1], nil
	}
	d.scratch = d.scratch[:0]
	var escaped bool
	if err := c.stringBodyEsc(&escaped, func(b []byte) { d.scratch = append(d.scratch, b...) }); err != nil {
		return nil, err
	}
	if !escaped {
		return c.in[start : c.pos-1], nil
	}
	return d.scratch, nil
}

// internable reports whether a field's values repeat across events.
func internable(f eventField) bool {
	switch f {
	case fRunID, fType, fStatus, fPolicy, fProvider, fModel, fName, fKey, fErrorType, fRunStatus:
		return true
	}
	return false
}

// internString returns b as a string, shared with earlier lines that held
// the same bytes.
func (d *eventDecoder) internString(f eventField, b []byte) string {
	if s := d.last[f]; s == string(b) { // most lines repeat the last value
		return s
	}
	if s, ok := d.intern[string(b)]; ok {
		d.last[f] = s
		return s
	}
	s := string(b)
	if d.intern == nil {
		d.intern = make(map[string]string)
	}
	if len(d.intern) < maxInterned {
		d.intern[s] = s
	}
	d.last[f] = s
	return s
}

func (d *eventDecoder) isNull() bool {
	c := &d.c
	if len(c.in)-c.pos >= 4 && string(c.in[c.pos:c.pos+4]) == "null" {
		c.pos += 4
		return true
	}
	return false
}

func (d *eventDecoder) typeErr(f eventField, want string) error {
	if err := d.skip(); err != nil {
		return err
	}
	return fmt.Errorf("%w: %s must be %s", errInvalidEvent, fieldNames[f], want)
}

// str reads a string field; nullable fields accept null (returned as "").
// Non-nullable and nullable strings of the format must be non-empty.
func (d *eventDecoder) str(f eventField, nullable bool) (string, error) {
	c := &d.c
	if nullable && d.isNull() {
		return "", nil
	}
	if c.pos >= len(c.in) || c.in[c.pos] != '"' {
		if nullable {
			return "", d.typeErr(f, "a string or null")
		}
		return "", d.typeErr(f, "a string")
	}
	if d.borrow && (f == fID || f == fParentID || f == fInputHash || f == fOutputHash) {
		s, err := d.readBorrowed()
		if err == nil && s == "" {
			err = fmt.Errorf("%w: %s must be a non-empty string", errInvalidEvent, fieldNames[f])
		}
		return s, err
	}
	b, err := d.readBytes()
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%w: %s must be a non-empty string", errInvalidEvent, fieldNames[f])
	}
	if internable(f) {
		return d.internString(f, b), nil
	}
	return string(b), nil
}

// hashStr reads a payload hash field, as str(f, true) does; a decoder
// noting digests checks it but does not keep it (elide decodes again in
// full what it does not leave out, and drops the hashes of the rest).
func (d *eventDecoder) hashStr(f eventField) (string, error) {
	if !d.digest {
		return d.str(f, true)
	}
	c := &d.c
	if d.isNull() {
		return "", nil
	}
	if c.pos >= len(c.in) || c.in[c.pos] != '"' {
		return "", d.typeErr(f, "a string or null")
	}
	// Where the hash is in the line, for elide to keep it after all.
	slot := 0
	if f == fOutputHash {
		slot = 1
	}
	start := c.pos + 1
	if c.plainString() {
		if c.pos-1 == start {
			return "", fmt.Errorf("%w: %s must be a non-empty string", errInvalidEvent, fieldNames[f])
		}
		d.hashSpans[slot] = [2]int{start, c.pos - 1}
		return "", nil
	}
	d.hashSpans[slot] = [2]int{-2} // escaped: elide decodes the line again
	b, err := d.readBytes()
	if err == nil && len(b) == 0 {
		err = fmt.Errorf("%w: %s must be a non-empty string", errInvalidEvent, fieldNames[f])
	}
	return "", err
}

// intLit reads an integer field. Floats, strings and booleans are refused.
func (d *eventDecoder) intLit(f eventField, nullable bool) (*int64, error) {
	c := &d.c
	if nullable && d.isNull() {
		return nil, nil
	}
	start := c.pos
	if c.pos >= len(c.in) || !(c.in[c.pos] == '-' || c.in[c.pos] >= '0' && c.in[c.pos] <= '9') {
		return nil, d.typeErr(f, "an integer")
	}
	save := c.out
	c.out = d.buf[:0]
	err := c.number()
	d.buf, c.out = c.out, save
	if err != nil {
		return nil, err
	}
	lit := c.in[start:c.pos]
	n, perr := strconv.ParseInt(string(lit), 10, 64)
	if perr != nil {
		return nil, fmt.Errorf("%w: %s must be an integer, got %s", errInvalidEvent, fieldNames[f], lit)
	}
	if n < 0 {
		return nil, fmt.Errorf("%w: %s must be >= 0", errInvalidEvent, fieldNames[f])
	}
	return &n, nil
}

// payloadOrSum reads a payload, or in hash-only mode records the SHA-256 of
// its canonical form in d.sums[slot] (0: the input_hash side, 1: the
// output_hash side, as Event.ExpectedHashes pairs them) and returns
// elidedPayload. When tracking or summing, it records the digest whether
// or not it keeps the payload, and when tracking also the payload's bytes
// in the line.
func (d *eventDecoder) payloadOrSum(slot int) (Value, error) {
	if !d.hashOnly && !d.track && !d.sum {
		return d.payload()
	}
	c := &d.c
	start := c.pos
	canon, saved, err := d.canonical()
	if err != nil {
		return Value{}, err
	}
	defer d.dropLarge()
	d.sums[slot] = payloadSum{ok: true, sum: sha256.Sum256(canon)}
	if d.digest {
		// In canonical form none of the characters of the credential
		// anchors is escaped, and keys are written as they are; a string
		// with an escape is read unescaped too.
		d.mayRedact = d.mayRedact || mayHoldCredentialJSON(unsafe.String(unsafe.SliceData(canon), len(canon)))
		// A payload whose behavior leaves some of it out: an HTTP response
		// (its headers), a model's usage.
		if saved {
			d.http[slot] = d.c.behaviorKey // noted as savedValue read the keys
		} else {
			d.http[slot] = partialBehavior(canon)
		}
	}
	if d.track {
		d.spans[slot] = [2]int{start, c.pos}
		// What savedValue accepts is in file form by construction.
		d.exact[slot] = saved || d.fileForm(c.in[start:c.pos])
	}
	if d.hashOnly && !(d.digest && !d.elidable(slot)) {
		d.dropped = true
		return elidedPayload, nil
	}
	return Value{string(canon)}, nil
}

// partialBehavior reports whether the payload canon (canonical JSON) may
// have a member that the behavior of its step leaves out: a "headers" key
// (an HTTP response's) or a key that starts with "usage" (a model's
// usage). It may say so of a payload that has none. savedValue notes the
// same keys as it reads them (behaviorKeyBytes), without this second pass.
func partialBehavior(canon []byte) bool {
	return bytes.Contains(canon, []byte(`"headers":`)) || bytes.Contains(canon, []byte(`"usage`))
}

// behaviorKeyBytes reports whether key is one partialBehavior looks for.
func behaviorKeyBytes(key []byte) bool {
	return string(key) == "headers" || bytes.HasPrefix(key, []byte("usage"))
}

// elidable reports whether elide may leave out the payload of the slot
// (0: input side, 1: output side) of the event being decoded by a decoder
// noting digests, as far as the line has been read: a payload that is not
// is kept, so that an event elide keeps whole needs no second decoding.
// What is read later can only make a payload not elidable.
func (d *eventDecoder) elidable(slot int) bool {
	if d.mayRedact || d.c.sensitive {
		return false
	}
	switch d.typ {
	case ToolCall:
		return slot == 0
	case LLMRequest:
		return slot == 0 && !d.http[0]
	case ToolResult, LLMResponse:
		return slot == 1 && !d.http[1]
	}
	return false
}

// canonical reads the JSON value at the cursor and returns its canonical
// bytes, valid until the next value is read: the value's own bytes in the
// line when it is in saved form (savedValue, saved true), else its
// canonical form built in d.buf.
func (d *eventDecoder) canonical() (canon []byte, saved bool, err error) {
	c := &d.c
	if !d.noScan {
		if canon, built, ok := c.savedValue(d.buf[:0]); ok {
			if built {
				d.buf = canon // keep the buffer's capacity for the next value
			}
			return canon, true, nil
		}
	}
	save := c.out
	c.out = d.payloadBuf()
	err = c.value()
	d.buf, c.out = c.out, save
	if err != nil {
		return nil, false, err
	}
	return d.buf, false, nil
}

// elide decodes line number n into ev for digestCalls: with the payload
// of a call (the input of a tool_call or llm_request) or of a result (the
// output of a tool_result or llm_response) left out, and its digest
// returned in its slot of the sums, when the digest stands for what the
// payload's behavior step holds: nothing in the line that redaction would
// change, and no "headers" key in a result's output (an HTTP response,
// whose behavior leaves out some of it) nor any key starting with "usage"
// in a model call's input or output (a model's usage, likewise). Any other event is decoded whole
// by full. d must be a hash-only decoder noting digests.
func (d *eventDecoder) elide(line []byte, n int, name string, ev *Event, full *eventDecoder) (payloadSums, error) {
	if err := d.decodeLine(line, n, name, ev); err != nil {
		return payloadSums{}, err
	}
	var sums payloadSums
	if !d.mayRedact && !d.c.sensitive {
		switch ev.Type {
		case ToolCall:
			sums.in = d.sums[0]
		case LLMRequest:
			if !d.http[0] {
				sums.in = d.sums[0]
			}
		case ToolResult, LLMResponse:
			if !d.http[1] {
				sums.out = d.sums[1]
			}
		}
	}
	if !sums.in.ok && !sums.out.ok {
		if d.dropped || d.hashSpans[0][0] == -2 || d.hashSpans[1][0] == -2 {
			return sums, full.decodeLine(line, n, name, ev)
		}
		// Every payload was kept: the event is what full would decode,
		// once its payload hashes are read from the line.
		if sp := d.hashSpans[0]; sp[0] >= 0 {
			ev.InputHash = string(line[sp[0]:sp[1]])
		}
		if sp := d.hashSpans[1]; sp[0] >= 0 {
			ev.OutputHash = string(line[sp[0]:sp[1]])
		}
		return sums, nil
	}
	ev.Input, ev.Output = Value{}, Value{}
	// The payload hashes the file records stand for the payloads left out;
	// they are not kept (the digests are the payloads' own).
	ev.InputHash, ev.OutputHash = "", ""
	return sums, nil
}

// fileForm reports whether raw, the text of a payload in a line, is the
// form Save writes for it: its canonical bytes (in d.buf), with floats in
// Pydantic's style. Only floats with a negative exponent differ between the
// two (1e-05 is written 0.00001), so a payload without "e-" needs just one
// comparison.
func (d *eventDecoder) fileForm(raw []byte) bool {
	if !bytes.Contains(d.buf, []byte("e-")) {
		return bytes.Equal(d.buf, raw)
	}
	d.ff = appendFileForm(d.ff[:0], Value{string(d.buf)})
	return bytes.Equal(d.ff, raw)
}

// savedForm reports whether line, just decoded into ev by a tracking
// decoder, is byte for byte what Save writes for ev: Save would find
// nothing to redact (no sensitive key in a payload, nothing that may be a
// credential anywhere in the line), the stored payload hashes are those of
// the payloads, and re-encoding the event (its payloads taken from the line,
// once known to be in file form) gives the line back.
func (d *eventDecoder) savedForm(line []byte, ev *Event) bool {
	if !d.track || d.c.sensitive || mayHoldCredentialBytes(line) {
		return false
	}
	if sums := (payloadSums{in: d.sums[0], out: d.sums[1]}); !sums.stored(ev) {
		return false
	}
	var raw [2][]byte
	for slot, sp := range d.spans {
		if sp[1] > 0 {
			if !d.exact[slot] {
				return false
			}
			raw[slot] = line[sp[0]:sp[1]]
		}
	}
	d.enc = appendEventWith(slices.Grow(d.enc[:0], len(line)), ev, &raw)
	same := bytes.Equal(d.enc, line)
	if cap(d.enc) > 4*largePayload {
		d.enc = nil
	}
	return same
}

// stored reports whether ev's stored payload hashes are what Save would
// store for payloads with the digests s (storedAs, both sides).
func (s *payloadSums) stored(ev *Event) bool {
	return s.in.storedAs(ev.InputHash) && s.out.storedAs(ev.OutputHash)
}

// storedAs reports whether a stored payload hash is what Save would store:
// the digest's hex for a payload, "" without one.
func (p *payloadSum) storedAs(stored string) bool {
	if !p.ok {
		return stored == ""
	}
	return p.matches(stored)
}

// mayHoldCredentialBytes is mayHoldCredentialJSON over the bytes of a
// line.
func mayHoldCredentialBytes(b []byte) bool {
	return mayHoldCredentialJSON(unsafe.String(unsafe.SliceData(b), len(b)))
}

// payload reads any JSON value into its canonical form.
func (d *eventDecoder) payload() (Value, error) {
	canon, _, err := d.canonical()
	if err != nil {
		return Value{}, err
	}
	defer d.dropLarge()
	return Value{string(canon)}, nil
}

// largePayload is the size from which a payload's buffers are sized for it
// at once and not kept after it.
const largePayload = 1 << 20

// payloadBuf returns the buffer a payload's canonical form is written
// into. For what may be a large payload (the rest of the line is long) it
// has room for the rest of the line, which the canonical form of a payload
// seldom exceeds, so that it is not grown again and again: one line then
// costs a small multiple of its size in memory.
func (d *eventDecoder) payloadBuf() []byte {
	if rest := len(d.c.in) - d.c.pos; rest > largePayload && cap(d.buf) < rest {
		d.buf = make([]byte, 0, rest)
	}
	return d.buf[:0]
}

// dropLarge lets go of the buffers of a large payload, so that a decoder
// holds no memory for long lines past them.
func (d *eventDecoder) dropLarge() {
	if cap(d.buf) > 4*largePayload {
		d.buf = nil
	}
	if cap(d.ff) > 4*largePayload {
		d.ff = nil
	}
}

func (d *eventDecoder) field(f eventField, ev *Event, evType *string) (err error) {
	c := &d.c
	switch f {
	case fID:
		ev.ID, err = d.str(f, false)
	case fRunID:
		ev.RunID, err = d.str(f, false)
	case fParentID:
		ev.ParentID, err = d.str(f, true)
	case fType:
		*evType, err = d.str(f, false)
		d.typ = EventType(*evType)
	case fStep:
		var p *int64
		if p, err = d.intLit(f, false); err == nil {
			if *p > math.MaxInt32 {
				return fmt.Errorf("%w: step %d is out of range", errInvalidEvent, *p)
			}
			ev.Step = int(*p)
		}
	case fTimestamp:
		if c.pos >= len(c.in) || c.in[c.pos] != '"' {
			return d.typeErr(f, "a string")
		}
		var b []byte
		if b, err = d.readBytes(); err != nil {
			return err
		}
		if len(b) == 0 {
			return fmt.Errorf("%w: %s must be a non-empty string", errInvalidEvent, fieldNames[f])
		}
		// Parsed from the line's bytes without a copy: neither the time
		// nor the error keeps them.
		ev.Timestamp, err = parseTimestamp("timestamp", unsafe.String(unsafe.SliceData(b), len(b)))
	case fDuration:
		ev.DurationMS, err = d.intLit(f, true)
	case fStatus:
		var s string
		if s, err = d.str(f, false); err == nil {
			ev.Status = Status(s)
		}
	case fPolicy:
		var s string
		if s, err = d.str(f, false); err == nil {
			ev.ReplayPolicy = Policy(s)
		}
	case fInputHash:
		ev.InputHash, err = d.hashStr(f)
	case fOutputHash:
		ev.OutputHash, err = d.hashStr(f)
	case fRedactions:
		if c.pos >= len(c.in) || c.in[c.pos] != '[' {
			return d.typeErr(f, "a list of strings")
		}
		c.pos++
		ev.Redactions = []string{}
		c.skipSpace()
		if c.pos < len(c.in) && c.in[c.pos] == ']' {
			c.pos++
			return nil
		}
		for {
			c.skipSpace()
			if c.pos >= len(c.in) || c.in[c.pos] != '"' {
				return d.typeErr(f, "a list of strings")
			}
			s, err := d.readString()
			if err != nil {
				return err
			}
			ev.Redactions = append(ev.Redactions, s)
			c.skipSpace()
			if c.pos < len(c.in) && c.in[c.pos] == ',' {
				c.pos++
				continue
			}
			if c.pos < len(c.in) && c.in[c.pos] == ']' {
				c.pos++
				return nil
			}
			return c.errf("invalid JSON: expected ',' or ']' in array")
		}
	case fProvider:
		ev.Provider, err = d.str(f, true)
	case fModel:
		ev.Model, err = d.str(f, true)
	case fName:
		ev.Name, err = d.str(f, false)
	case fKey:
		ev.Key, err = d.str(f, true)
	case fInput:
		ev.Input, err = d.payloadOrSum(0)
	case fOutput:
		ev.Output, err = d.payloadOrSum(1)
	case fBefore:
		ev.Before, err = d.payloadOrSum(0)
	case fAfter:
		ev.After, err = d.payloadOrSum(1)
	case fDetails:
		ev.Details, err = d.payloadOrSum(1)
	case fPromptTokens:
		ev.PromptTokens, err = d.intLit(f, true)
	case fCompletionTokens:
		ev.CompletionTokens, err = d.intLit(f, true)
	case fTotalTokens:
		ev.TotalTokens, err = d.intLit(f, true)
	case fCost:
		if d.isNull() {
			return nil
		}
		var v Value
		if v, err = d.payload(); err != nil {
			return err
		}
		x, ok := v.Float()
		if !ok {
			return fmt.Errorf("%w: cost_usd must be a number or null", errInvalidEvent)
		}
		if x < 0 {
			return fmt.Errorf("%w: cost_usd must be >= 0", errInvalidEvent)
		}
		ev.CostUSD = &x
	case fErrorType:
		ev.ErrorType, err = d.str(f, false)
	case fMessage:
		ev.Message, err = d.str(f, false)
	case fRunStatus:
		var s string
		if s, err = d.str(f, false); err == nil {
			ev.RunStatus = RunStatus(s)
		}
	}
	return err
}

// parseTimestamp parses an RFC 3339 timestamp that must carry a time zone and
// at most microsecond precision (what a Python datetime holds).
func parseTimestamp(field, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		if _, nerr := time.Parse("2006-01-02T15:04:05.999999999", s); nerr == nil {
			return time.Time{}, fmt.Errorf("%w: %s must be timezone-aware", errInvalidEvent, field)
		}
		return time.Time{}, fmt.Errorf("%w: %s %q is not an RFC 3339 date-time", errInvalidEvent, field, s)
	}
	if t.Nanosecond()%1000 != 0 {
		return time.Time{}, fmt.Errorf("%w: %s %q has more than microsecond precision", errInvalidEvent, field, s)
	}
	return t, nil
}

// appendTimestamp appends t as Pydantic writes it: YYYY-MM-DDTHH:MM:SS, then
// .ffffff only when the microseconds are not zero, then Z for UTC or the
// offset (+05:45) otherwise.
func appendTimestamp(dst []byte, t time.Time) []byte {
	t = t.Truncate(time.Microsecond)
	_, off := t.Zone()
	if year, month, day := t.Date(); year >= 0 && year <= 9999 {
		// What AppendFormat writes for "2006-01-02T15:04:05", without
		// parsing the layout (a tenth of the cost of checking a saved line).
		hour, minute, sec := t.Clock()
		dst = append(dst, byte('0'+year/1000), byte('0'+year/100%10), byte('0'+year/10%10), byte('0'+year%10), '-',
			byte('0'+month/10), byte('0'+month%10), '-', byte('0'+day/10), byte('0'+day%10), 'T',
			byte('0'+hour/10), byte('0'+hour%10), ':', byte('0'+minute/10), byte('0'+minute%10), ':',
			byte('0'+sec/10), byte('0'+sec%10))
	} else {
		dst = t.AppendFormat(dst, "2006-01-02T15:04:05")
	}
	if us := t.Nanosecond() / 1000; us != 0 {
		dst = append(dst, '.', byte('0'+us/100000), byte('0'+us/10000%10), byte('0'+us/1000%10),
			byte('0'+us/100%10), byte('0'+us/10%10), byte('0'+us%10))
	}
	if off == 0 {
		return append(dst, 'Z')
	}
	return t.AppendFormat(dst, "-07:00")
}

// appendEvent appends ev as one compact line of events.jsonl (without the
// newline), with Pydantic's key order and number formats. Absent payloads are
// written as null, as Pydantic writes every field.
func appendEvent(dst []byte, ev *Event) []byte { return appendEventWith(dst, ev, nil) }

// appendEventWith is appendEvent, with the payloads of the slots that raw
// holds (0: input or before; 1: output, after or details) copied from raw
// instead of being encoded.
func appendEventWith(dst []byte, ev *Event, raw *[2][]byte) []byte {
	payload := func(dst []byte, v Value, slot int) []byte {
		if raw != nil && raw[slot] != nil {
			return append(dst, raw[slot]...)
		}
		return appendPayload(dst, v)
	}
	dst = append(dst, `{"id":`...)
	dst = appendQuoted(dst, ev.ID)
	dst = append(dst, `,"run_id":`...)
	dst = appendQuoted(dst, ev.RunID)
	dst = append(dst, `,"parent_id":`...)
	dst = appendNullableString(dst, ev.ParentID)
	dst = append(dst, `,"step":`...)
	dst = strconv.AppendInt(dst, int64(ev.Step), 10)
	dst = append(dst, `,"type":`...)
	dst = appendQuoted(dst, string(ev.Type))
	dst = append(dst, `,"timestamp":"`...)
	dst = appendTimestamp(dst, ev.Timestamp)
	dst = append(dst, `","duration_ms":`...)
	dst = appendNullableInt(dst, ev.DurationMS)
	dst = append(dst, `,"status":`...)
	dst = appendQuoted(dst, string(ev.Status))
	dst = append(dst, `,"replay_policy":`...)
	dst = appendQuoted(dst, string(ev.ReplayPolicy))
	dst = append(dst, `,"input_hash":`...)
	dst = appendNullableString(dst, ev.InputHash)
	dst = append(dst, `,"output_hash":`...)
	dst = appendNullableString(dst, ev.OutputHash)
	dst = append(dst, `,"redactions":[`...)
	for i, r := range ev.Redactions {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendQuoted(dst, r)
	}
	dst = append(dst, ']')
	for _, f := range typeFields[ev.Type] {
		dst = append(dst, ',', '"')
		dst = append(dst, fieldNames[f]...)
		dst = append(dst, '"', ':')
		switch f {
		case fProvider:
			dst = appendNullableString(dst, ev.Provider)
		case fModel:
			dst = appendNullableString(dst, ev.Model)
		case fName:
			dst = appendQuoted(dst, ev.Name)
		case fKey:
			dst = appendNullableString(dst, ev.Key)
		case fInput:
			dst = payload(dst, ev.Input, 0)
		case fOutput:
			dst = payload(dst, ev.Output, 1)
		case fBefore:
			dst = payload(dst, ev.Before, 0)
		case fAfter:
			dst = payload(dst, ev.After, 1)
		case fDetails:
			dst = payload(dst, ev.Details, 1)
		case fPromptTokens:
			dst = appendNullableInt(dst, ev.PromptTokens)
		case fCompletionTokens:
			dst = appendNullableInt(dst, ev.CompletionTokens)
		case fTotalTokens:
			dst = appendNullableInt(dst, ev.TotalTokens)
		case fCost:
			dst = appendNullableFloat(dst, ev.CostUSD)
		case fErrorType:
			dst = appendQuoted(dst, ev.ErrorType)
		case fMessage:
			dst = appendQuoted(dst, ev.Message)
		case fRunStatus:
			dst = appendQuoted(dst, string(ev.RunStatus))
		}
	}
	return append(dst, '}')
}

func appendPayload(dst []byte, v Value) []byte {
	if v.IsAbsent() {
		return append(dst, "null"...)
	}
	return appendFileForm(dst, v)
}

func appendNullableString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return appendQuoted(dst, s)
}

func appendNullableInt(dst []byte, p *int64) []byte {
	if p == nil {
		return append(dst, "null"...)
	}
	return strconv.AppendInt(dst, *p, 10)
}

func appendNullableFloat(dst []byte, p *float64) []byte {
	if p == nil {
		return append(dst, "null"...)
	}
	return appendFloatPydantic(dst, *p)
}
