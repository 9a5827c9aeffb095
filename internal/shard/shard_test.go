package shard

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFromEnv(t *testing.T) {
	status := filepath.Join(t.TempDir(), "status")
	tests := []struct {
		name         string
		total, index string
		want         Shard
		wantErr      string
	}{
		{name: "unset", want: Shard{}},
		{name: "one shard", total: "1", want: Shard{Index: 0, Total: 1}},
		{name: "second of four", total: "4", index: "1", want: Shard{Index: 1, Total: 4}},
		{name: "index without total", index: "1", wantErr: "TEST_SHARD_INDEX=\"1\" is set but TEST_TOTAL_SHARDS is not"},
		{name: "total without index", total: "3", wantErr: "TEST_TOTAL_SHARDS=3 is set but TEST_SHARD_INDEX is not"},
		{name: "total not a number", total: "four", index: "0", wantErr: "TEST_TOTAL_SHARDS=\"four\": want a whole number"},
		{name: "total zero", total: "0", index: "0", wantErr: "TEST_TOTAL_SHARDS=\"0\""},
		{name: "index out of range", total: "4", index: "4", wantErr: "TEST_SHARD_INDEX=\"4\": want a shard index from 0 to 3"},
		{name: "negative index", total: "4", index: "-1", wantErr: "TEST_SHARD_INDEX=\"-1\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envTotal, tt.total)
			t.Setenv(envIndex, tt.index)
			os.Remove(status)
			t.Setenv(envStatus, status)
			got, err := FromEnv()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("FromEnv() = %v, %v; want %v", got, err, tt.want)
			}
			_, statErr := os.Stat(status)
			if touched := statErr == nil; touched != (tt.total != "") {
				t.Errorf("status file touched = %v, want %v", touched, tt.total != "")
			}
		})
	}
}

// TestOwnsPartitions checks that every name lands in exactly one of the
// shards, that the split is roughly even, and that it is stable: the shard of
// a name depends on nothing but the name and the total.
func TestOwnsPartitions(t *testing.T) {
	names := make([]string, 1000)
	for i := range names {
		names[i] = fmt.Sprintf("corpus/run-%04d", i)
	}
	for _, total := range []int{1, 2, 3, 4, 7} {
		counts := make([]int, total)
		for _, n := range names {
			owners := 0
			for i := range total {
				if (Shard{Index: i, Total: total}).Owns(n) {
					owners++
					counts[i]++
				}
			}
			if owners != 1 {
				t.Fatalf("total %d: %q owned by %d shards, want 1", total, n, owners)
			}
			if Of(n, total) != Of(n, total) {
				t.Fatalf("Of is not stable")
			}
		}
		for i, c := range counts {
			if want := len(names) / total; c < want*7/10 || c > want*13/10 {
				t.Errorf("total %d: shard %d owns %d of %d names, want about %d", total, i, c, len(names), want)
			}
		}
	}
}

func TestString(t *testing.T) {
	if got := (Shard{Index: 2, Total: 4}).String(); got != "2/4" {
		t.Errorf("String() = %q", got)
	}
	if got := (Shard{}).String(); got != "unsharded" {
		t.Errorf("String() = %q", got)
	}
}
