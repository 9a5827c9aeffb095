package trace

import "github.com/stepfork/stepfork/internal/sharedstart"

// The extraction of the behavior of a run's last events, which package
// diff uses for a variant whose first events are its base's, kept out of
// this package's API.
func init() {
	sharedstart.RegisterSteps(func(t *Trace, first, index0 int) ([]BehaviorStep, []int32) {
		return behaviorFrom(t.Events, first, index0, t.Calls(), t.Nodes(), false, true)
	})
}
