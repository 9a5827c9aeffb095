//go:build unix

package readlimit

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestReadFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ok := filepath.Join(dir, "ok.json")
	os.WriteFile(ok, []byte("{}"), 0o644)
	if b, err := ReadFile(ok, 10); err != nil || string(b) != "{}" {
		t.Errorf("ReadFile = %q, %v", b, err)
	}
	big := filepath.Join(dir, "big.json")
	os.WriteFile(big, []byte("{}"), 0o644)
	os.Truncate(big, 1<<30)
	if _, err := ReadFile(big, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a sparse gigabyte: %v", err)
	}
	fifo := filepath.Join(dir, "fifo")
	syscall.Mkfifo(fifo, 0o644)
	if _, err := ReadFile(fifo, 10); err == nil || !strings.Contains(err.Error(), "named pipe") {
		t.Errorf("a FIFO: %v", err)
	}
	zero := filepath.Join(dir, "zero")
	os.Symlink("/dev/zero", zero)
	if _, err := ReadFile(zero, 10); err == nil || !strings.Contains(err.Error(), "character device") {
		t.Errorf("/dev/zero: %v", err)
	}
}
