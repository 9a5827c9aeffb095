package trace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// How a bundle reaches its path (Save, BundleWriter.Close):
//
//  1. Everything is written into a temporary sibling directory
//     ".NAME.tmp-<hex>", every file synced. The writing process holds a lock
//     on that directory (flock, released by the kernel when the process
//     dies), which is how another save tells a live save from a dead one.
//  2. A new bundle is renamed into place; then the parent directory is
//     synced.
//  3. An existing bundle (Overwrite) is swapped with the temporary one in one
//     step on Linux (renameat2 with RENAME_EXCHANGE): at every instant the
//     path holds a complete bundle, the old or the new. The parent directory
//     is synced, then the old bundle, now under the temporary name, removed.
//     Elsewhere, or on a file system without the exchange, the old bundle is
//     renamed to ".NAME.bak-<hex>" and the new one into place: between the
//     two renames the path is missing, and a crash there leaves the old
//     bundle in the backup.
//
// Every save of a path first deals with what earlier saves of that path left
// behind when they were killed (recoverLeftovers): a backup is renamed back
// when the path is missing, and every temporary directory or backup of a
// dead save is removed. A failed fsync, of a file or of a directory, is an
// error like a failed write, and leaves the old bundle in place.

// commitHook, when not nil, is called before each step of writing a bundle
// that a crash may interrupt: every fsync and rename, and the removal of the
// old bundle. Tests set it to kill the process there; it is nil otherwise.
var commitHook func(step string)

// noExchange, set by tests, makes commitBundle use the two renames that
// stand in for the exchange where it is unavailable.
var noExchange bool

func atStep(step string) {
	if commitHook != nil {
		commitHook(step)
	}
}

// Leftovers of a save: the temporary directory a bundle is written into
// (the temporary file, for a packed bundle), and the backup of the bundle
// it replaces where the exchange is not available.
const (
	tmpInfix = ".tmp-"
	bakInfix = ".bak-"
)

// parentDir returns the directory that holds path.
func parentDir(path string) string {
	if dir := filepath.Dir(path); dir != "" {
		return dir
	}
	return "."
}

// makeTemp creates and locks the temporary sibling directory a bundle is
// written into. The lock is released (by release, or by the kernel when the
// process dies) once the save is over.
func makeTemp(path string) (string, *dirLock, error) {
	dir, base := parentDir(path), filepath.Base(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", nil, storageErr(err, "%s: %v", dir, err)
	}
	tmp := filepath.Join(dir, "."+base+tmpInfix+hexUUID())
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return "", nil, storageErr(err, "%s: %v", path, err)
	}
	lock, err := lockDir(tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return "", nil, storageErr(err, "%s: locking %s: %v", path, tmp, err)
	}
	return tmp, lock, nil
}

// leftoverMinAge is how old an empty temporary directory must be before it
// is taken for the leftover of a dead save: a save creates its directory
// and locks it a moment later.
const leftoverMinAge = time.Minute

// recoverLeftovers deals with the temporary directories and backups that
// saves of path killed before they finished left beside it. A leftover is
// dead when no process holds its lock (on systems without flock, when it is
// older than deadAge). When path is missing, the newest dead backup that is
// a complete bundle is renamed back to path; every other dead leftover is
// removed. Leftovers of live saves are left alone.
func recoverLeftovers(path string) error {
	dir, base := parentDir(path), filepath.Base(path)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // makeTemp reports what is wrong with dir
	}
	type leftover struct {
		path   string
		bak    bool
		mod    time.Time
		lock   *dirLock
		intact bool // a complete bundle
	}
	var dead []leftover
	defer func() {
		for _, l := range dead {
			l.lock.release()
		}
	}()
	for _, e := range entries {
		name := e.Name()
		rest, ok := strings.CutPrefix(name, "."+base)
		// A save leaves directories; a pack (of a packed bundle) leaves
		// temporary files.
		if !ok || !(e.IsDir() || e.Type().IsRegular() && strings.HasPrefix(rest, tmpInfix)) || (!strings.HasPrefix(rest, tmpInfix) && !strings.HasPrefix(rest, bakInfix)) {
			continue
		}
		p := filepath.Join(dir, name)
		st, err := os.Lstat(p)
		if err != nil || !st.IsDir() && !st.Mode().IsRegular() {
			continue
		}
		if st.IsDir() {
			if sub, err := os.ReadDir(p); err == nil && len(sub) == 0 && time.Since(st.ModTime()) < leftoverMinAge {
				continue // maybe a save that has not locked its directory yet
			}
		} else if st.Size() == 0 && time.Since(st.ModTime()) < leftoverMinAge {
			continue // maybe a pack that has not locked its file yet
		}
		lock, ok := tryLockDir(p, st.ModTime())
		if !ok {
			continue // a live save
		}
		dead = append(dead, leftover{path: p, bak: strings.HasPrefix(rest, bakInfix), mod: st.ModTime(), lock: lock, intact: isBundle(p)})
	}
	if len(dead) == 0 {
		return nil
	}
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		// The newest intact backup is the bundle that was at path.
		slices.SortFunc(dead, func(a, b leftover) int { return b.mod.Compare(a.mod) })
		for i, l := range dead {
			if !l.bak || !l.intact {
				continue
			}
			if err := os.Rename(l.path, path); err != nil {
				return storageErr(err, "%s: a save of this path was interrupted, and its backup %s could not be restored: %v", path, l.path, err)
			}
			if err := syncDir(dir); err != nil {
				return storageErr(err, "%s: syncing %s after restoring the backup of an interrupted save: %v", path, dir, err)
			}
			l.lock.release()
			dead = slices.Delete(dead, i, i+1)
			break
		}
	}
	for _, l := range dead {
		os.RemoveAll(l.path) // what cannot be removed now is tried again next time
	}
	return nil
}

// isBundle reports whether dir holds the three required files of a bundle.
func isBundle(dir string) bool {
	for _, name := range coreFiles {
		if st, err := os.Lstat(filepath.Join(dir, name)); err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// commitBundle moves the finished temporary directory tmp into place at
// path, as described at the top of this file. On failure the temporary
// directory is removed and the old bundle is at path, as it was.
func commitBundle(path, tmp string, overwrite bool) error {
	cleanup := func() { os.RemoveAll(tmp) }
	replace, err := checkDest(path, overwrite) // again: it may have changed
	if err != nil {
		cleanup()
		return err
	}
	dir := parentDir(path)
	atStep("fsync temporary directory")
	if err := syncDir(tmp); err != nil {
		cleanup()
		return storageErr(err, "%s: syncing %s: %v", path, tmp, err)
	}
	if !replace {
		atStep("rename")
		if err := os.Rename(tmp, path); err != nil {
			cleanup()
			return storageErr(err, "%s: %v", path, err)
		}
		atStep("fsync parent directory")
		if err := syncDir(dir); err != nil {
			// Nothing was at path before: take the new bundle away again.
			if os.Rename(path, tmp) == nil {
				cleanup()
			}
			return storageErr(err, "%s: syncing %s: %v", path, dir, err)
		}
		return nil
	}
	// The old bundle is locked while it is out of place, so that a
	// concurrent save does not take it for the leftover of a dead one.
	oldLock, err := lockDirWait(path)
	if err != nil {
		cleanup()
		return storageErr(err, "%s: locking the bundle to replace: %v", path, err)
	}
	defer oldLock.release()
	if !noExchange {
		atStep("exchange")
		err := exchange(tmp, path)
		if err == nil {
			// path holds the new bundle, tmp the old one.
			atStep("fsync parent directory")
			if err := syncDir(dir); err != nil {
				if exchange(tmp, path) == nil {
					cleanup()
				}
				return storageErr(err, "%s: syncing %s: %v", path, dir, err)
			}
			atStep("remove old")
			os.RemoveAll(tmp) // what is left is removed by the next save
			return nil
		}
		if !errors.Is(err, errNoExchange) {
			cleanup()
			return storageErr(err, "%s: %v", path, err)
		}
	}
	bak := filepath.Join(dir, "."+filepath.Base(path)+bakInfix+hexUUID())
	atStep("rename old")
	if err := os.Rename(path, bak); err != nil {
		cleanup()
		return storageErr(err, "%s: %v", path, err)
	}
	restore := func(err error) error {
		if rerr := os.Rename(bak, path); rerr != nil {
			return storageErr(err, "%s: %v; the previous bundle is kept at %s (the next save of %s restores it)", path, err, bak, path)
		}
		cleanup()
		return storageErr(err, "%s: %v", path, err)
	}
	atStep("rename new")
	if err := os.Rename(tmp, path); err != nil {
		return restore(err)
	}
	atStep("fsync parent directory")
	if err := syncDir(dir); err != nil {
		if os.Rename(path, tmp) != nil {
			return storageErr(err, "%s: syncing %s: %v", path, dir, err)
		}
		return restore(fmt.Errorf("syncing %s: %w", dir, err))
	}
	atStep("remove old")
	os.RemoveAll(bak)
	return nil
}

// lockDirWait locks the directory at path, trying again for up to a second
// while another process holds the lock: a process forked by this one holds
// copies of its descriptors, and so of its locks, until it executes its
// program.
func lockDirWait(path string) (*dirLock, error) {
	deadline := time.Now().Add(time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 50*time.Millisecond) {
		l, err := lockDir(path)
		if err == nil || time.Now().After(deadline) {
			return l, err
		}
		time.Sleep(wait)
	}
}

// errNoExchange is exchange's error where two directories cannot be swapped
// in one step.
var errNoExchange = errors.New("atomic exchange of two paths is not supported here")

// syncDir syncs a directory, so that the entries created or renamed in it
// survive a crash. Windows cannot sync a directory, and needs not.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writeFileSync writes a new file and syncs it.
func writeFileSync(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	atStep("fsync " + filepath.Base(name))
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
