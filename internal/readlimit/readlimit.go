// Package readlimit bounds what stepfork reads besides bundles, and lowers
// for the commands of stepfork what package trace reads of one.
//
// [ReadFile] reads a file given by path (a results file, a golden file,
// trajectory expectations, a file of overrides) as package trace reads the
// files of a bundle: a regular file only, never a FIFO or a device (opened
// without blocking, refused before a byte is read), and within a size limit
// checked before it is read and while it is read.
//
// [SetMaxLine] lowers, for the whole process, the longest line of
// events.jsonl package trace reads: the library accepts lines up to
// trace.MaxLineBytes; a command of stepfork reads less, so that a
// hostile bundle made of one huge line is refused at once rather than
// read into hundreds of megabytes. Package trace registers the
// implementation when it is initialized.
package readlimit

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrTooLarge is matched by the error of a file above its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads the regular file at path, of at most limit bytes.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|openNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "read", Path: path, Err: fmt.Errorf("not a regular file (%s)", describe(st.Mode()))}
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, more than the limit of %d bytes: %w", path, st.Size(), limit, ErrTooLarge)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s grew past the limit of %d bytes while it was read: %w", path, limit, ErrTooLarge)
	}
	return data, nil
}

func describe(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a named pipe"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	}
	return "not a regular file"
}

var setMaxLine func(n int, hint string)

// RegisterMaxLine is called by package trace's init with its setter.
func RegisterMaxLine(set func(n int, hint string)) { setMaxLine = set }

// SetMaxLine makes package trace refuse lines of events.jsonl longer than
// n bytes (at most trace.MaxLineBytes; 0 restores it) for the rest of the
// process, saying hint after its message ("set STEPFORK_MAX_LINE_BYTES to
// read longer lines", say).
func SetMaxLine(n int, hint string) { setMaxLine(n, hint) }
