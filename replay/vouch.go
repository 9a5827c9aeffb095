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
	sum   []uint64 // per event: eventDigest as the recording added it
	clean []uint64 // bit per event: nothing to redact (without scrubbers), hashes stamped
}

// vouches are the vouches of the recordings of this process, keyed by a
// weak pointer to the first event of their events array.
var vouches sync.Map // weak.Pointer[trace.Event] → *vouch

var vouchSeed = maphash.MakeSeed()

// eventDigest digests every field of ev that the payload hashes or the
// payload redaction read: each field's text hashed where it is (no copy),
// then the table of those hashes and of the fields' lengths hashed at once.
// A changed field changes its hash, and so the digest, but with the
// probability of a 64-bit maphash collision; the digest only has to be the
// same within one process (vouchSeed). Ids, statuses and the redactions
// list are left out: they are protected fields, where a credential makes a
// redaction pass refuse the event, which then is kept as it is whether it
// was taken for clean or not.
func eventDigest(ev *trace.Event) uint64 {
	fields := [...]string{string(ev.Type), ev.InputHash, ev.OutputHash,
		ev.Provider, ev.Model, ev.Name, ev.Key, ev.ErrorType, ev.Message,
		ev.Input.Canonical(), ev.Output.Canonical(), ev.Before.Canonical(), ev.After.Canonical(), ev.Details.Canonical()}
	var table [len(fields) * 12]byte // per field: its hash (0 when empty), its length
	for i, f := range fields {
		if len(f) > 0 {
			binary.LittleEndian.PutUint64(table[i*12:], maphash.String(vouchSeed, f))
			binary.LittleEndian.PutUint32(table[i*12+8:], uint32(len(f)))
		}
	}
	return maphash.Bytes(vouchSeed, table[:])
}

// vouchFor records what the recorder established about evs: sum[i] is
// event i's digest when it was added, and clean[i] says its hashes were
// stamped from its payloads and it held nothing to redact.
func vouchFor(evs []trace.Event, sum, clean []uint64) {
	if len(evs) == 0 || len(sum) != len(evs) {
		return
	}
	v := &vouch{n: len(evs), sum: sum, clean: clean}
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
func (v *vouch) holds(i int, ev *trace.Event) bool { return eventDigest(ev) == v.sum[i] }

// isClean reports whether the recorder found nothing to redact in event i.
func (v *vouch) isClean(i int) bool { return v.clean[i/64]&(1<<(i%64)) != 0 }

// noteVouchLocked notes, for the event ev just stamped in a recording,
// whether it is vouched for (see addLocked) and its digest.
func (s *session) noteVouchLocked(ev *trace.Event, ok bool) {
	i := ev.Step
	for i/64 >= len(s.cleanBits) {
		s.cleanBits = append(s.cleanBits, 0)
	}
	if ok {
		s.cleanBits[i/64] |= 1 << (i % 64)
	}
	s.sums = append(s.sums, eventDigest(ev))
}
