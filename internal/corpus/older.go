package corpus

import (
	"fmt"
	"strings"
	"time"
)

// VCS answers what a report cannot tell from its records alone: whether
// one commit is an ancestor of another, and when a commit was made. ok is
// false when it cannot tell (no repository, an unknown commit).
type VCS interface {
	IsAncestor(older, newer string) (yes, ok bool)
	CommitTime(rev string) (t time.Time, ok bool)
}

// OlderThan lists the entries whose bundles were recorded by code older
// than rev (a commit hash or a prefix of one of at least 7 digits, or an
// RFC 3339 time): code whose revision is an ancestor of rev, as vcs (when
// not nil) says, or else whose commit time is before rev's. rev's time is
// the time of an entry recorded at rev, else vcs's, else rev itself read as
// a time. Entries recorded at rev are not older; entries whose code is
// unknown, or cannot be compared with rev, are listed apart. Both lists
// are in report order (corpus, then name).
func (r *Report) OlderThan(rev string, vcs VCS) (older, unknown []Record, err error) {
	rev = strings.TrimSpace(rev)
	if rev == "" {
		return nil, nil, fmt.Errorf("the revision is empty: give a commit hash (at least 7 digits) or an RFC 3339 time")
	}
	var at time.Time
	byTime := false
	if t, err := time.Parse(time.RFC3339, rev); err == nil {
		at, byTime = t, true
	} else if !isHex(rev) || len(rev) < 7 {
		return nil, nil, fmt.Errorf("%q is neither a commit hash (at least 7 hexadecimal digits) nor an RFC 3339 time", rev)
	}
	same := func(e Record) bool {
		return !byTime && e.Revision != "" && (strings.HasPrefix(e.Revision, rev) || strings.HasPrefix(rev, e.Revision))
	}
	if !byTime {
		for _, c := range r.Corpora {
			for _, e := range c.Entries {
				if same(e) && e.RevisionTime != "" {
					if t, err := time.Parse(time.RFC3339, e.RevisionTime); err == nil {
						at = t
					}
				}
			}
		}
		if at.IsZero() && vcs != nil {
			if t, ok := vcs.CommitTime(rev); ok {
				at = t
			}
		}
	}
	for _, c := range r.Corpora {
		for _, e := range c.Entries {
			switch {
			case e.Revision == "":
				unknown = append(unknown, e)
				continue
			case same(e):
				continue
			}
			if !byTime && vcs != nil {
				if yes, ok := vcs.IsAncestor(e.Revision, rev); ok {
					if yes {
						older = append(older, e)
					}
					continue
				}
			}
			t, err := time.Parse(time.RFC3339, e.RevisionTime)
			if err != nil || at.IsZero() {
				unknown = append(unknown, e)
				continue
			}
			if t.Before(at) {
				older = append(older, e)
			}
		}
	}
	return older, unknown, nil
}

func isHex(s string) bool {
	for _, r := range s {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}
