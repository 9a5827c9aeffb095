package replay

import (
	"reflect"
	"sync"

	"github.com/stepfork/stepfork/internal/buildinfo"
	"github.com/stepfork/stepfork/trace"
)

// Build sets the code a session records as having made its run (the
// trace's [trace.BuildFile]), instead of what the binary's build
// information says: for a binary built without it (Bazel, -buildvcs=false)
// whose version is stamped otherwise, with -ldflags -X for instance.
//
// Without it every session records the build of the agent's code: the
// module of the agent function's package (the main module for a function
// of package main, or one adapted by [Typed] or an adapter of this
// module), its version and VCS revision from [runtime/debug.ReadBuildInfo].
// go build stamps the main module's revision; go test does not (unless
// -buildvcs=true), so a test binary run inside the module's repository
// reads the revision from the repository's HEAD. The build of a binary
// without build information is not recorded.
func Build(b trace.Build) Option {
	return both(func(c *config) { c.build = &b })
}

// builds caches the encoded build.json of each agent function.
var builds sync.Map // uintptr (the function's entry) → []byte (nil: none)

// buildFile is the BuildFile of the session's run of agent, or nil.
func (s *session) buildFile(agent Agent) []byte {
	if s.cfg.build != nil {
		data, err := trace.MarshalBuild(*s.cfg.build)
		if err != nil {
			return nil // checked by checkBuild before the run
		}
		return data
	}
	if agent == nil {
		return nil
	}
	pc := reflect.ValueOf(agent).Pointer()
	if v, ok := builds.Load(pc); ok {
		return v.([]byte)
	}
	var data []byte
	if b, ok := buildinfo.Of(buildinfo.FuncName(pc)); ok {
		data, _ = trace.MarshalBuild(b)
	}
	v, _ := builds.LoadOrStore(pc, data)
	return v.([]byte)
}

// checkBuild reports a [Build] option that cannot be recorded.
func (c *config) checkBuild() error {
	if c.build == nil {
		return nil
	}
	if _, err := trace.MarshalBuild(*c.build); err != nil {
		return optionErrf("replay.Build: %v", err)
	}
	return nil
}
