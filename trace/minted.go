package trace

import (
	"encoding/json"
	"fmt"
)

// MintedFile is the extra bundle file ([Trace.Extras]) that records the ids
// providers minted in the responses of a run's model calls: response ids
// (chatcmpl-…, resp_…, msg_…), tool-call ids (call_…, toolu_…), output item
// ids, and whatever an adapter reports. It is a JSON object from the
// llm_request event's id to the ids its response holds, in order:
//
//	{"evt_…": [{"kind": "response", "id": "chatcmpl-…"},
//	           {"kind": "call", "id": "call_…", "live": "call_…"}]}
//
// Kind says what the id names ("response", "call" for a tool call, "item"
// for an output item, or a kind of the adapter's own); ID is the id as the
// run's events hold it. Live, when present, is the id the provider really
// sent when the call ran live in a replay or a fork: it stands for ID, the
// id of the recorded response the call stood in for, which the run's
// events hold in its place (except in a raw HTTP response kept as it came).
// Package replay writes the file (see replay.ReportIDs); a run without
// model calls that minted ids has none. These ids change on every call of
// the same behavior, so renderings of a run show them as placeholders
// ([MintedIDs]). Like every extra file it is listed in, and verified by,
// integrity.json.
const MintedFile = "minted.json"

// MintedID is an id a provider minted in a model call's response (see
// [MintedFile]).
type MintedID struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
	Live string `json:"live,omitempty"`
}

// Minted decodes a [MintedFile]: llm_request event id → the ids its response
// minted. It reports an error for anything else than a JSON object of
// arrays of ids with a kind.
func Minted(data []byte) (map[string][]MintedID, error) {
	var m map[string][]MintedID
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", MintedFile, err)
	}
	if m == nil {
		return nil, fmt.Errorf("%s: not a JSON object", MintedFile)
	}
	for ev, ids := range m {
		for i, id := range ids {
			if id.Kind == "" || id.ID == "" {
				return nil, fmt.Errorf("%s: event %q: id %d has no kind or no id", MintedFile, ev, i)
			}
		}
	}
	return m, nil
}

// minMintedLen is the length under which an id is not taken for one a
// provider minted at random (see MintedIDs).
const minMintedLen = 8

// MintedIDs returns the ids providers minted in the runs trs, from their
// [MintedFile]s: id → kind, the live ids included (with the kind of the id
// they stand for). These are the ids a rendering of the runs shows as
// placeholders, numbered by kind in order of first appearance
// (<call-1>, <response-1>), so that a golden does not change between
// recordings of the same behavior. Ids shorter than 8 characters are left
// out: a provider that mints "call_0" mints it again, and replacing short
// strings would replace them wherever they occur. An unreadable file counts
// as absent; nil traces are skipped.
func MintedIDs(trs ...*Trace) map[string]string {
	var out map[string]string
	add := func(id, kind string) {
		if len(id) < minMintedLen {
			return
		}
		if out == nil {
			out = map[string]string{}
		}
		if _, ok := out[id]; !ok {
			out[id] = kind
		}
	}
	for _, tr := range trs {
		if tr == nil || len(tr.Extras[MintedFile]) == 0 {
			continue
		}
		m, err := Minted(tr.Extras[MintedFile])
		if err != nil {
			continue
		}
		for _, ids := range m {
			for _, id := range ids {
				add(id.ID, id.Kind)
				if id.Live != "" {
					add(id.Live, id.Kind)
				}
			}
		}
	}
	return out
}
