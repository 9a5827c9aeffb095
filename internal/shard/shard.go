// Package shard implements Bazel's test-sharding protocol for work that a
// single test splits itself: the bundles of a corpus, the variants of a sweep.
//
// A test runner that shards sets TEST_TOTAL_SHARDS (how many shards run the
// same test binary) and TEST_SHARD_INDEX (this one, from 0), and may set
// TEST_SHARD_STATUS_FILE, a file the test touches to say that it honours the
// protocol. Bazel sets them for a target with shard_count; any CI matrix can
// set the first two by hand. Work is assigned to a shard by its name alone
// (FNV-1a of the name modulo the number of shards), so the assignment is
// stable: adding or removing one item moves no other, every shard computes
// the same split with no coordinator, and every item lands in exactly one
// shard.
package shard

import (
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
)

// The environment variables of the protocol.
const (
	envTotal  = "TEST_TOTAL_SHARDS"
	envIndex  = "TEST_SHARD_INDEX"
	envStatus = "TEST_SHARD_STATUS_FILE"
)

// Shard is one shard of a split: Index of Total (0 ≤ Index < Total). The
// zero Shard, and any with Total 1, owns everything.
type Shard struct {
	Index, Total int
}

// FromEnv returns the shard the environment names, and touches
// TEST_SHARD_STATUS_FILE when it is set. Without TEST_TOTAL_SHARDS it returns
// the zero Shard. Values that are not numbers, a total below 1, or an index
// outside [0, total) are an error naming the variable, never a silent
// fallback: a misconfigured shard would run nothing or everything.
func FromEnv() (Shard, error) {
	total, index := os.Getenv(envTotal), os.Getenv(envIndex)
	if total == "" && index == "" {
		return Shard{}, nil
	}
	if total == "" {
		return Shard{}, fmt.Errorf("%s=%q is set but %s is not: set both, or neither", envIndex, index, envTotal)
	}
	n, err := strconv.Atoi(total)
	if err != nil || n < 1 {
		return Shard{}, fmt.Errorf("%s=%q: want a whole number of shards, at least 1", envTotal, total)
	}
	i := 0
	if index != "" {
		if i, err = strconv.Atoi(index); err != nil || i < 0 || i >= n {
			return Shard{}, fmt.Errorf("%s=%q: want a shard index from 0 to %d (%s=%d)", envIndex, index, n-1, envTotal, n)
		}
	} else if n > 1 {
		return Shard{}, fmt.Errorf("%s=%d is set but %s is not: set both, or neither", envTotal, n, envIndex)
	}
	if p := os.Getenv(envStatus); p != "" {
		f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			return Shard{}, fmt.Errorf("%s: touching %s: %w", envStatus, p, err)
		}
		f.Close()
	}
	return Shard{Index: i, Total: n}, nil
}

// Sharded reports whether s splits work at all (more than one shard).
func (s Shard) Sharded() bool { return s.Total > 1 }

// Owns reports whether the item called name belongs to s.
func (s Shard) Owns(name string) bool {
	if s.Total <= 1 {
		return true
	}
	return Of(name, s.Total) == s.Index
}

// Of is the shard, of total, that owns the item called name.
func Of(name string, total int) int {
	if total <= 1 {
		return 0
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() % uint32(total))
}

// String is "2/4" (index/total, from 0) or "unsharded".
func (s Shard) String() string {
	if s.Total <= 1 {
		return "unsharded"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Total)
}
