package replay

import (
	"github.com/stepfork/stepfork/internal/vouch"
	"github.com/stepfork/stepfork/trace"
)

// A recording of this process knows two things about each event it made
// that the first replay or fork of the run would otherwise establish again,
// event by event: the payload hashes it stored are the hashes of the
// payloads (stampLocked computed them from the payloads), and whether the
// event held anything to redact (addLocked's redaction pass found
// nothing). The session notes both for every event it adds, and its
// finish vouches for the events array (package vouch), so that [Prepare]
// of it takes the stored hashes and the clean events as they are instead
// of hashing and scanning every payload. A base that sftest.Load verified
// is vouched for the same way.

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
	s.sums = append(s.sums, vouch.Digest(ev))
}
