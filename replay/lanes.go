package replay

import (
	"encoding/json"
	"runtime"
)

// stackGoid returns the id of the calling goroutine, read from the header
// runtime.Stack writes ("goroutine 42 [running]:"). It walks the whole
// stack, microseconds on a deep one; goid is the fast form.
func stackGoid() uint64 {
	var buf [32]byte
	n := runtime.Stack(buf[:], false)
	const prefix = "goroutine "
	if n <= len(prefix) {
		return 0
	}
	var id uint64
	for _, c := range buf[len(prefix):n] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}

// laneLocked is the lane of a call made on goroutine gid in scope sc: 0
// for the goroutine that opened the scope (or when either is unknown), n
// for the n-th other goroutine that called in it ([trace.Call.Lane]).
func (s *session) laneLocked(sc *scope, gid uint64) int {
	s.ownLocked(gid)
	if gid == 0 || sc.gid == 0 || gid == sc.gid {
		return 0
	}
	n, ok := sc.others[gid]
	if !ok {
		if sc.others == nil {
			sc.others = map[uint64]int{}
		}
		n = len(sc.others) + 1
		sc.others[gid] = n
	}
	return n
}

// tracksLanes reports whether every call's goroutine is looked up before it
// is dispatched: when recording, and when the base has concurrent groups to
// match against. Otherwise only calls whose bodies run are looked up (their
// lanes are recorded in the new trace); served calls of a base made on one
// goroutine are matched with the strict cursor and need none.
func (s *session) tracksLanes() bool { return s.plan == nil || s.plan.laned }

// noteLaneLocked records the lane of the call event id for the new trace's
// lanes file.
func (s *session) noteLaneLocked(id string, lane int) {
	if lane < 1 {
		return
	}
	if s.lanes == nil {
		s.lanes = map[string]int{}
	}
	s.lanes[id] = lane
}

// lanesFile is the new trace's [trace.LanesFile], nil when every call was
// made on its scope's own goroutine.
func (s *session) lanesFile() []byte {
	if len(s.lanes) == 0 {
		return nil
	}
	data, err := json.Marshal(s.lanes)
	if err != nil {
		return nil
	}
	return data
}

// joinsFile is the new trace's [trace.JoinsFile], nil when it has no join.
func (s *session) joinsFile() []byte {
	if len(s.joins) == 0 {
		return nil
	}
	data, err := json.Marshal(s.joins)
	if err != nil {
		return nil
	}
	return data
}

// pathLocked is sc's scope path, as Prepared.scopeOf computes it for the
// base ("/node:worker/tool:fetch", "" for the run), computed once.
func (sc *scope) pathLocked() string {
	if sc.up == nil || sc.pathDone {
		return sc.path
	}
	sc.path = sc.up.pathLocked() + "/" + sc.kind + ":" + sc.name
	sc.pathDone = true
	return sc.path
}
