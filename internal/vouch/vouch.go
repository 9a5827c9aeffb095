// Package vouch keeps what the code that made or read a trace's events
// established about them, for the first replay or fork of that trace: that
// an event's stored payload hashes are the hashes of its payloads, and that
// it holds nothing a redaction pass would change. The first replay would
// otherwise establish both again, event by event, hashing and scanning
// every payload.
//
// Two places know it. A recording of this process stamped the hashes of
// its events from their payloads and ran its redaction pass on each
// (package replay): it vouches for both. A verified load hashed every
// payload it read and compared the stored hashes (package sftest's Load,
// through package rawline): it vouches for the hashes it found right.
//
// An event changed in place afterwards (a test edits a payload, a hash or a
// name of a trace) must not be vouched for: each event's vouch holds a
// digest of every field the hashes and the redaction pass read, seeded per
// process, and is used only while the event still has that digest.
// Anything else (another events array, a different length) finds no vouch
// and is computed as before.
package vouch

import (
	"encoding/binary"
	"hash/maphash"
	"runtime"
	"sync"
	"weak"

	"github.com/stepfork/stepfork/trace"
)

// Vouch is what was established about an events array.
type Vouch struct {
	n      int
	sum    []uint64 // per event: Digest as it was vouched for
	hashed []uint64 // bit per event: its stored payload hashes are its payloads'
	clean  []uint64 // bit per event: hashed, and nothing to redact (without scrubbers)
}

// vouches are the vouches of this process, keyed by a weak pointer to the
// first event of their events array.
var vouches sync.Map // weak.Pointer[trace.Event] → *Vouch

var seed = maphash.MakeSeed()

// Digest digests every field of ev that the payload hashes or the payload
// redaction read: each field's text hashed where it is (no copy), then the
// table of those hashes and of the fields' lengths hashed at once. A
// changed field changes its hash, and so the digest, but with the
// probability of a 64-bit maphash collision; the digest only has to be the
// same within one process. Ids, statuses and the redactions list are left
// out: they are protected fields, where a credential makes a redaction
// pass refuse the event, which then is kept as it is whether it was taken
// for clean or not.
func Digest(ev *trace.Event) uint64 {
	fields := [...]string{string(ev.Type), ev.InputHash, ev.OutputHash,
		ev.Provider, ev.Model, ev.Name, ev.Key, ev.ErrorType, ev.Message,
		ev.Input.Canonical(), ev.Output.Canonical(), ev.Before.Canonical(), ev.After.Canonical(), ev.Details.Canonical()}
	var table [len(fields) * 12]byte // per field: its hash (0 when empty), its length
	for i, f := range fields {
		if len(f) > 0 {
			binary.LittleEndian.PutUint64(table[i*12:], maphash.String(seed, f))
			binary.LittleEndian.PutUint32(table[i*12+8:], uint32(len(f)))
		}
	}
	return maphash.Bytes(seed, table[:])
}

// For records what was established about evs: sum[i] is event i's Digest
// when it was established, bit i of hashed says that its stored payload
// hashes were its payloads', and bit i of clean that they were and that it
// held nothing to redact (clean may be nil: nothing is vouched clean). It
// replaces any vouch for the same array. Sums or bits of another length
// than evs record nothing.
func For(evs []trace.Event, sum, hashed, clean []uint64) {
	words := (len(evs) + 63) / 64
	if len(evs) == 0 || len(sum) != len(evs) || len(hashed) != words || clean != nil && len(clean) != words {
		return
	}
	v := &Vouch{n: len(evs), sum: sum, hashed: hashed, clean: clean}
	key := weak.Make(&evs[0])
	vouches.Store(key, v)
	runtime.AddCleanup(&evs[0], func(k weak.Pointer[trace.Event]) { vouches.Delete(k) }, key)
}

// Sums returns the digests For needs of the events of evs whose bit is set
// in hashed (the others are never consulted, and stay 0).
func Sums(evs []trace.Event, hashed []uint64) []uint64 {
	sum := make([]uint64, len(evs))
	for i := range evs {
		if isSet(hashed, i) {
			sum[i] = Digest(&evs[i])
		}
	}
	return sum
}

// Of is the vouch for evs, nil when nothing was vouched for such an events
// array (the same backing array and length).
func Of(evs []trace.Event) *Vouch {
	if len(evs) == 0 {
		return nil
	}
	v, ok := vouches.Load(weak.Make(&evs[0]))
	if !ok || v.(*Vouch).n != len(evs) {
		return nil
	}
	return v.(*Vouch)
}

// Holds reports whether ev, event i of the vouched array, is as it was
// vouched for.
func (v *Vouch) Holds(i int, ev *trace.Event) bool { return Digest(ev) == v.sum[i] }

// IsHashed reports whether event i's stored payload hashes were its
// payloads' when it was vouched for.
func (v *Vouch) IsHashed(i int) bool { return isSet(v.hashed, i) }

// IsClean reports whether event i's stored hashes were its payloads' and it
// held nothing to redact, when it was vouched for.
func (v *Vouch) IsClean(i int) bool { return v.clean != nil && isSet(v.clean, i) }

func isSet(bits []uint64, i int) bool { return bits[i/64]&(1<<(i%64)) != 0 }
