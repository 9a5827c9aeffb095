package trace

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// StepDigest is the SHA-256 digest of what makes a behavior step what it
// is: its type, its label and its payload. Two steps have the same digest
// exactly when their Type, Label and Payload are equal (a SHA-256 collision
// aside). [ReadBehavior] gives one per step.
type StepDigest [sha256.Size]byte

// DigestedRun is the behavior of a bundle's run read by [ReadBehavior]: its
// steps with their digests, without the payloads of its calls.
type DigestedRun struct {
	Path     string            // the bundle's path, as given to ReadBehavior
	Manifest Manifest          // its manifest
	Extras   map[string][]byte // its extra files, as Load reads them (Trace.Extras)
	// Steps are the run's behavior steps, as [Trace.Behavior] gives them
	// for the loaded bundle, except that the Payload of a tool or llm step
	// is absent when a payload of its call was read as a digest only;
	// [DigestedRun.LoadPayloads] reads it.
	Steps []BehaviorStep
	// Digests holds the digest of each step: Digests[i] is that of
	// Steps[i] with its payload.
	Digests []StepDigest

	// where to read the payloads of the steps without one: calls[lineOf[i]]
	// for step i, when lineOf[i] is not -1
	lineOf []int32
	calls  []callLines
}

// callLines is where the events of a call step are in events.jsonl, and
// what the step's output is when no result answered the call.
type callLines struct {
	call, result lineSpan // result.n is 0 when no result answered the call
	output       Value    // without a result: Call.Output
	status       Status
}

// lineSpan is where a line is in a file, its line ending excluded.
type lineSpan struct {
	off int64
	n   int // line number
	len int
}

// ReadBehavior reads the run of the bundle at path in one pass and returns
// its behavior steps ([Trace.Behavior]) with their digests, keeping none
// of the payloads of tool and model calls: what a diff of two large runs
// needs to compare every step without holding both runs in memory
// ([DigestedRun.LoadPayloads] then reads the payloads of the steps that
// differ). visit, unless nil, is called with every event in file order; it
// must not keep or modify the event. Where a digest stands for a payload
// (the input of a tool_call or llm_request, the output of a tool_result
// or llm_response, unless redaction would change something in the event's
// line or the output has a "headers" key), that payload and the event's
// InputHash and OutputHash are absent.
//
// The digests are computed from the payloads as they are read (the SHA-256
// of each payload's canonical form); the input_hash and output_hash that
// the bundle records are not used, so a bundle whose recorded hashes do not
// match its payloads (one edited by hand) is compared by what its payloads
// hold. ReadBehavior checks every event as [Load] does and fails where Load
// fails; it does not check integrity.json. Lines are decoded on every core
// (as [Workers] does); the memory used is that of the events without those
// payloads, held until the steps are extracted.
func ReadBehavior(path string, visit func(*Event)) (*DigestedRun, error) {
	r, err := Open(path, digestCalls(), Workers(runtime.GOMAXPROCS(0)))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	// The events, their digests and lines are only needed until the steps
	// are extracted: the next ReadBehavior (of the other side of a diff)
	// reuses their memory.
	sk := takeSkeleton()
	defer sk.release()
	if n := r.manifest.Totals.Events; n > 0 && n < 1<<20 {
		sk.evs = slices.Grow(sk.evs, n)
		sk.sums = slices.Grow(sk.sums, n)
		sk.lines = slices.Grow(sk.lines, n)
	}
	evs, sums, lines := sk.evs, sk.sums, sk.lines
	for ev, err := range r.Events() {
		if err != nil {
			return nil, storageErr(err, "%s", err.Error())
		}
		evs = append(evs, *ev)
		sums = append(sums, r.payloadSums())
		lines = append(lines, lineSpan{off: r.lineOffset(), n: r.line(), len: len(r.cur)})
		if visit != nil {
			visit(&evs[len(evs)-1])
		}
	}
	run := &DigestedRun{Path: path, Manifest: r.manifest}
	if run.Extras, err = r.b.extras(); err != nil {
		return nil, err
	}
	sk.evs, sk.sums, sk.lines = evs, sums, lines
	// Not tr.Calls and tr.Nodes, which a trace keeps until it is collected.
	calls := pairCalls(evs)
	run.Steps = behaviorOf(evs, calls, matchNodes(evs), false)
	run.Digests = make([]StepDigest, len(run.Steps))
	run.lineOf = make([]int32, len(run.Steps))
	next := 0
	for i := range run.Steps {
		s := &run.Steps[i]
		run.lineOf[i] = -1
		if s.Type != StepTool && s.Type != StepLLM {
			run.Digests[i] = stepDigest(s)
			continue
		}
		c := &calls[next]
		next++
		in, out := sums[c.Event].in, payloadSum{}
		if c.Result >= 0 {
			out = sums[c.Result].out
		}
		if !in.ok && !out.ok {
			run.Digests[i] = stepDigest(s)
			continue
		}
		if !in.ok {
			in = payloadSum{ok: true, sum: sha256.Sum256([]byte(s.Payload.Get("input").raw))}
		}
		if !out.ok {
			out = payloadSum{ok: true, sum: sha256.Sum256([]byte(s.Payload.Get("output").raw))}
		}
		run.Digests[i] = callDigest(s.Type, s.Label, in.sum, out.sum, string(c.Status))
		s.Payload = Value{}
		cl := callLines{call: lines[c.Event], status: c.Status}
		if c.Result >= 0 {
			cl.result = lines[c.Result]
		} else {
			cl.output = c.Output
		}
		run.lineOf[i] = int32(len(run.calls))
		run.calls = append(run.calls, cl)
	}
	return run, nil
}

// skeleton is the memory ReadBehavior reads a run's events into.
type skeleton struct {
	evs   []Event
	sums  []payloadSums
	lines []lineSpan
}

// spare is the skeleton the last ReadBehavior released, held weakly: the
// next ReadBehavior reuses it if the garbage collector has not taken it
// back meanwhile (the two reads of a diff follow each other), and it costs
// no memory past the next collection (unlike a sync.Pool's, which outlives
// one).
var spare struct {
	sync.Mutex
	p weak.Pointer[skeleton]
}

// takeSkeleton returns the spare skeleton, or a new one.
func takeSkeleton() *skeleton {
	spare.Lock()
	defer spare.Unlock()
	sk := spare.p.Value()
	spare.p = weak.Pointer[skeleton]{}
	if sk == nil {
		sk = new(skeleton)
	}
	return sk
}

// release clears the skeleton (so that it holds on to no event's strings)
// and makes it the spare.
func (sk *skeleton) release() {
	clear(sk.evs)
	sk.evs, sk.sums, sk.lines = sk.evs[:0], sk.sums[:0], sk.lines[:0]
	spare.Lock()
	defer spare.Unlock()
	spare.p = weak.Make(sk)
}

// LoadPayloads sets the Payload of the steps of run.Steps at the given
// indexes that have none, reading the lines of their events again from
// events.jsonl. It reports an error when the file cannot be read again or
// no longer holds what ReadBehavior read.
func (run *DigestedRun) LoadPayloads(steps ...int) error {
	var b *bundle
	defer b.Close()
	var f io.Reader
	var d eventDecoder
	var buf []byte
	where := run.Path + string(filepath.Separator) + EventsFile
	// read decodes the line at sp again.
	read := func(sp lineSpan) (*Event, error) {
		if b == nil {
			var err error
			if b, err = openBundle(run.Path); err != nil {
				return nil, err
			}
			where = b.where(EventsFile)
			if f, err = b.events(); err != nil {
				return nil, err
			}
		}
		ra, ok := f.(io.ReaderAt)
		if !ok {
			return nil, fmt.Errorf("%s cannot be read again at an offset", where)
		}
		buf = slices.Grow(buf[:0], sp.len)[:sp.len]
		if _, err := ra.ReadAt(buf, sp.off); err != nil {
			return nil, fmt.Errorf("%s:%d: reading the line again: %w", where, sp.n, err)
		}
		ev := new(Event)
		if err := d.decodeLine(buf, sp.n, where, ev); err != nil {
			return nil, err
		}
		return ev, nil
	}
	for _, i := range steps {
		if i < 0 || i >= len(run.Steps) || run.lineOf[i] < 0 || !run.Steps[i].Payload.IsAbsent() {
			continue
		}
		cl := &run.calls[run.lineOf[i]]
		s := &run.Steps[i]
		call, err := read(cl.call)
		if err != nil {
			return err
		}
		output := cl.output
		if cl.result.n > 0 {
			res, err := read(cl.result)
			if err != nil {
				return err
			}
			output = res.Output
		}
		payload := callStepPayload(s.Type, call.Name, call.Input, output, cl.status, false)
		if stepDigest(&BehaviorStep{Type: s.Type, Label: s.Label, Payload: payload}) != run.Digests[i] {
			return fmt.Errorf("%s changed while it was read (the payloads of event %s are no longer those read)", where, s.EventID)
		}
		s.Payload = payload
	}
	return nil
}

// stepDigest returns the digest of s with its payload.
func stepDigest(s *BehaviorStep) StepDigest {
	if s.Type == StepTool || s.Type == StepLLM {
		status, _ := s.Payload.Get("status").Str()
		return callDigest(s.Type, s.Label, sha256.Sum256([]byte(s.Payload.Get("input").raw)),
			sha256.Sum256([]byte(s.Payload.Get("output").raw)), status)
	}
	h := sha256.New()
	b := appendDigestField(nil, string(s.Type))
	b = appendDigestField(b, s.Label)
	b = appendDigestField(b, s.Payload.raw)
	h.Write(b)
	var d StepDigest
	h.Sum(d[:0])
	return d
}

// callDigest returns the digest of a tool or llm step from the digests of
// the canonical forms of its payload's input and output.
func callDigest(t StepType, label string, in, out [sha256.Size]byte, status string) StepDigest {
	var buf [256]byte // on the stack unless the label is long
	b := appendDigestField(buf[:0], string(t))
	b = appendDigestField(b, label)
	b = append(b, in[:]...)
	b = append(b, out[:]...)
	b = appendDigestField(b, status)
	return sha256.Sum256(b)
}

// appendDigestField appends s with its length before it, so that the
// fields of a digest's input cannot run into each other.
func appendDigestField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}
