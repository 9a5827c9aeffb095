// Package hostile makes the inputs that an attacker, a crash or a careless
// copy hand to stepfork's readers: packed bundles whose archives hold
// members of every tar type, in every wrong place, or bombs by size and by
// ratio; bundle directories whose files are FIFOs, devices, links to
// /dev/zero or sparse gigabytes, whose extras are too many or too large,
// whose lines are too long or too many. The tests of every command
// (cmd/stepfork) and of every sftest entry point run on all of them, so
// that each refusal is checked where it is made and where it is read.
//
// It is test support: it has no exported surface outside the module.
package hostile
