package trace

import "github.com/stepfork/stepfork/internal/rawline"

// The fast path of a fork that copies its parent's lines as they are
// (package fork's streaming fork), kept out of this package's API.
func init() {
	rawline.Register(checkSavedForm(), (*Reader).rawLine, (*BundleWriter).writeRaw)
}
