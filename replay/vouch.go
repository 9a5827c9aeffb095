package replay

import (
	"encoding/binary"
	"hash/maphash"
	"runtime"
	"sync"
	"weak"

	"github.com/stepfork/stepfork/trace"
)

// A recording of this process knows two things about each event it made
// that the first replay or fork of the run would otherwise establish again,
// event by event: the payload hashes it stored are the hashes of the
// payloads (stampLocked computed them from the payloads), and whether the
// event held anything to redact (addLocked's redaction pass found
// nothing). A vouch keeps that knowledge for the events array of a
// recorded trace, so that [Prepare] of it takes the stored hashes and the
// clean events as they are instead of hashing and scanning every payload.
//
// An event changed in place after the recording (a test edits a payload, a
// hash or a name of a recorded trace) must not be vouched for: each event's
// vouch holds a digest of every field the hashes and the redaction pass
// read, seeded per process, and is used only while the event still has
// that digest. Anything else (another events array, a different length)
// finds no vouch and is computed as before.

// vouch is what a recording established about its events.
type vouch struct {
	n     int
	sum   []uint64 // per event: eventDigest when the recording ended
	clean []uint64 // bit per event: nothing to redact (without scrubbers)
}

// vouches are the vouches of the recordings of this process, keyed by a
// weak pointer to the first event of their events array.
var vouches sync.Map // weak.Pointer[trace.Event] → *vouch

var vouchSeed = maphash.MakeSeed()

// eventDigest digests every field of ev that the payload hashes or a
// redaction pass read: the strings one after the other, then their lengths.
func eventDigest(h *maphash.Hash, ev *trace.Event) uint64 {
	h.Reset()
	fields := [...]string{ev.ID, ev.RunID, ev.ParentID, string(ev.Type), string(ev.Status),
		string(ev.ReplayPolicy), ev.InputHash, ev.OutputHash, string(ev.RunStatus),
		ev.Provider, ev.Model, ev.Name, ev.Key, ev.ErrorType, ev.Message,
		ev.Input.Canonical(), ev.Output.Canonical(), ev.Before.Canonical(), ev.After.Canonical(), ev.Details.Canonical()}
	var lens [4 * (len(fields) + 1)]byte
	for i, f := range fields {
		h.WriteString(f)
		binary.LittleEndian.PutUint32(lens[4*i:], uint32(len(f)))
	}
	binary.LittleEndian.PutUint32(lens[4*len(fields):], uint32(len(ev.Redactions)))
	h.Write(lens[:])
	for _, r := range ev.Redactions {
		h.WriteString(r)
		binary.LittleEndian.PutUint32(lens[:4], uint32(len(r)))
		h.Write(lens[:4])
	}
	return h.Sum64()
}

// vouchFor records what the recorder established about evs: every event's
// stored hashes are its payloads' and clean[i] says event i held nothing to
// redact.
func vouchFor(evs []trace.Event, clean []uint64) {
	if len(evs) == 0 {
		return
	}
	v := &vouch{n: len(evs), sum: make([]uint64, len(evs)), clean: clean}
	var h maphash.Hash
	h.SetSeed(vouchSeed)
	for i := range evs {
		v.sum[i] = eventDigest(&h, &evs[i])
	}
	key := weak.Make(&evs[0])
	vouches.Store(key, v)
	runtime.AddCleanup(&evs[0], func(k weak.Pointer[trace.Event]) { vouches.Delete(k) }, key)
}

// vouchOf is the vouch for evs, nil when this process recorded no such
// events array.
func vouchOf(evs []trace.Event) *vouch {
	if len(evs) == 0 {
		return nil
	}
	v, ok := vouches.Load(weak.Make(&evs[0]))
	if !ok || v.(*vouch).n != len(evs) {
		return nil
	}
	return v.(*vouch)
}

// holds reports whether event i is as it was recorded.
func (v *vouch) holds(i int, ev *trace.Event) bool {
	var h maphash.Hash
	h.SetSeed(vouchSeed)
	return eventDigest(&h, ev) == v.sum[i]
}

// isClean reports whether the recorder found nothing to redact in event i.
func (v *vouch) isClean(i int) bool { return v.clean[i/64]&(1<<(i%64)) != 0 }

// noteVouchLocked notes whether the event just appended to a recording is
// vouched for (see addLocked); i is its step.
func (s *session) noteVouchLocked(i int, ok bool) {
	for i/64 >= len(s.cleanBits) {
		s.cleanBits = append(s.cleanBits, 0)
	}
	if ok {
		s.cleanBits[i/64] |= 1 << (i % 64)
	}
}
