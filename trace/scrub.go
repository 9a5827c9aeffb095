package trace

import "regexp"

// A Scrubber removes from a string what must not be kept but that
// redaction cannot know is secret: a customer's e-mail address, an account
// number, the text of a support ticket. It returns s with that replaced
// (by "[REDACTED]", say) and whether it replaced anything.
//
// Scrubbers are installed by the code that records (package replay's
// Scrubbers, on a session, a Transport or a Sampler) and are applied with
// the same guarantee as redaction: to every string of every payload, to
// every key of every object, to names, messages, error types and models,
// after the credential patterns and before anything is hashed, written,
// printed or compared; what a scrubber changes is listed in
// redactions.json with the reason [ReasonScrubber]. A string a scrubber
// would change in a field that cannot be redacted (an id, the run id) is
// [ErrProtectedField].
//
// A Scrubber must be safe to call from several goroutines and must leave
// its own output as it is (scrubbing twice changes nothing more), as the
// credential patterns do: a run is scrubbed when it is recorded, and what
// a replay compares with the recording is scrubbed the same way.
type Scrubber func(s string) (string, bool)

// ScrubPattern returns a [Scrubber] that replaces every match of re by
// "[REDACTED]". re must not match "[REDACTED]".
//
//	emails := trace.ScrubPattern(regexp.MustCompile(`[\w.+-]+@[\w-]+(\.[\w-]+)+`))
func ScrubPattern(re *regexp.Regexp) Scrubber {
	return func(s string) (string, bool) {
		if !re.MatchString(s) {
			return s, false
		}
		r := re.ReplaceAllLiteralString(s, Redacted)
		return r, r != s
	}
}

// scrubString applies the credential patterns and then each scrubber to
// s, and returns the result and the reason of the change ("" for none):
// ReasonCredentialPattern when a pattern changed it, else ReasonScrubber.
func scrubString(s string, scrub []Scrubber) (string, string) {
	out, hit := redactCredentials(s)
	reason := ""
	if hit {
		reason = ReasonCredentialPattern
	}
	for _, sc := range scrub {
		if sc == nil || out == Redacted {
			continue
		}
		if r, changed := sc(out); changed && r != out {
			out = r
			if reason == "" {
				reason = ReasonScrubber
			}
		}
	}
	return out, reason
}
