package trace

import (
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"
)

// renameat2 is the number of the renameat2 system call, which package
// syscall does not define on every architecture.
func renameat2() (uintptr, bool) {
	switch runtime.GOARCH {
	case "amd64":
		return 316, true
	case "386":
		return 353, true
	case "arm":
		return 382, true
	case "arm64", "riscv64", "loong64":
		return 276, true
	case "ppc64", "ppc64le":
		return 357, true
	case "s390x":
		return 347, true
	case "mips", "mipsle":
		return 4351, true
	case "mips64", "mips64le":
		return 5311, true
	}
	return 0, false
}

const renameExchange = 1 << 1 // RENAME_EXCHANGE

// exchange swaps the directories a and b, siblings in one directory, in one
// step: renameat2 with RENAME_EXCHANGE. It returns errNoExchange where the
// kernel or the file system cannot do it.
func exchange(a, b string) error {
	nr, ok := renameat2()
	if !ok {
		return errNoExchange
	}
	dir, err := os.Open(parentDir(b))
	if err != nil {
		return err
	}
	defer dir.Close()
	pa, err := syscall.BytePtrFromString(filepath.Base(a))
	if err != nil {
		return err
	}
	pb, err := syscall.BytePtrFromString(filepath.Base(b))
	if err != nil {
		return err
	}
	fd := dir.Fd()
	_, _, e := syscall.Syscall6(nr, fd, uintptr(unsafe.Pointer(pa)), fd, uintptr(unsafe.Pointer(pb)), renameExchange, 0)
	runtime.KeepAlive(dir)
	switch e {
	case 0:
		return nil
	case syscall.ENOSYS, syscall.EINVAL, syscall.EOPNOTSUPP:
		return errNoExchange
	}
	return &os.LinkError{Op: "renameat2", Old: a, New: b, Err: e}
}
