// Package view renders runs, forks, diffs and sweeps as self-contained HTML
// pages, for `stepfork view` and for the failure reports of package sftest.
//
// A page is one HTML document with its styles, script and data inside: no
// network, no CDN, it opens from file://. Without JavaScript it reads as a
// static document (nested <details> blocks and tables); with it the
// timelines and aligned steps become virtual lists (only the rows on screen
// exist, so a run of 100k events opens at once), rows are selectable with
// the mouse and the keyboard, and a selected call shows its input and output
// as a collapsible JSON tree with its event ids and steps. The rows are
// embedded as JSON in <script type="application/json"> blocks: the first
// screen of them before the script, so it is drawn before the browser has
// read the rest of a large page, the others after it; payloads sit in a last
// block that is parsed only when something is first selected.
//
// Every string and payload a page shows passes through trace's redaction
// (trace.RedactString, trace.RedactValue) once, right before rendering,
// whatever the source: bundles are redacted when saved, and pages redact
// again, as every output of stepfork does.
//
// The views:
//   - a run: its nodes as nested blocks, the calls inside them in order,
//     concurrent calls (calls under one parent whose lifetimes overlap) side
//     by side, each with kind, name, status, duration, tokens and cost;
//   - a fork: the served prefix and the live tail, the fork point, each
//     change and where it applied, what the side-effect guard held back,
//     what the tail was served from the recording, the incurred cost;
//   - two runs: the aligned steps of the run diff (the same alignment, the
//     same first divergence), changed fields side by side with the window
//     where long strings differ highlighted, state, status, token and cost
//     deltas;
//   - a sweep: one row per variant, sortable, each opening its diff, and a
//     chart of incurred cost against outcome.
//
// `stepfork view` serves pages through [Loopback], the one place of the
// limits of stepfork's page servers (the explore page's too): 127.0.0.1
// only, requests in origin form naming the server's own address,
// timeouts on reading, writing and idle connections, and a cap on
// connections served at once. A [Site] renders each page once and serves
// it from memory to every client.
package view
