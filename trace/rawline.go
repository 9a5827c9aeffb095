package trace

import "github.com/stepfork/stepfork/internal/rawline"

// What this package learns of the lines it reads, kept out of its API: the
// fast path of a fork that copies its parent's lines as they are (package
// fork's streaming fork), and which payload hashes a verified load found
// right, which package sftest vouches for.
func init() {
	rawline.Register(checkSavedForm(), (*Reader).rawLine, (*BundleWriter).writeRaw, loadHashed)
}
