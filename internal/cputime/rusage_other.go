//go:build !unix

package cputime

import "time"

// Used is the CPU time the process has used; 0 where it is not known.
func Used() time.Duration { return 0 }

// MaxRSS is the process's peak resident set in bytes; 0 where it is not
// known.
func MaxRSS() int64 { return 0 }

// Faults is the number of minor page faults the process has taken; 0 where
// it is not known.
func Faults() int64 { return 0 }
