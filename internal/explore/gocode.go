package explore

import (
	"bytes"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/stepfork/stepfork/assert"
	"github.com/stepfork/stepfork/fork"
	"github.com/stepfork/stepfork/trace"
)

// code is the Go that reproduces a run in the test: the sftest.Fork call
// and the assertions that held on what it observed.
type code struct {
	// Snippet is the call and the assertions, to paste into the test where
	// its base and agent are in scope.
	Snippet string `json:"snippet"`
	// Imports are the packages the snippet uses.
	Imports []string `json:"imports"`
	// File is a whole test file holding the snippet in a test function of
	// its own, with the statements of the test that the base and the agent
	// need; FileName is where "Write test file" puts it, next to the test.
	// NoFile says why there is no file, when there is none.
	File     string `json:"file,omitempty"`
	FileName string `json:"file_name,omitempty"`
	Func     string `json:"func,omitempty"`
	NoFile   string `json:"no_file,omitempty"`
}

// importPaths of the packages the code may use, by name.
var importPaths = map[string]string{
	"assert": "github.com/stepfork/stepfork/assert",
	"fork":   "github.com/stepfork/stepfork/fork",
	"replay": "github.com/stepfork/stepfork/replay",
	"sftest": "github.com/stepfork/stepfork/sftest",
	"trace":  "github.com/stepfork/stepfork/trace",
}

// snippet is the Go of run r: the fork, then the assertions that hold on
// its variant (others are the session's other runs). tparam, base and
// agent are the names the test gave them.
func snippet(r *run, others []*trace.Trace, tparam, base, agent string) (string, []string) {
	var b strings.Builder
	fmt.Fprintf(&b, "v := sftest.Fork(%s, %s, %s, %s", tparam, base, r.AtCode, agent)
	if len(r.ChangeCodes) == 0 {
		b.WriteString(")\n")
	} else {
		b.WriteString(",\n")
		for _, c := range r.ChangeCodes {
			b.WriteString("\t" + c + ",\n")
		}
		b.WriteString(")\n")
	}
	for _, a := range assertions(r.V, others, tparam) {
		b.WriteString(a + "\n")
	}
	text := b.String()
	var imports []string
	for name, path := range importPaths {
		if strings.Contains(text, name+".") {
			imports = append(imports, path)
		}
	}
	slices.Sort(imports)
	return text, imports
}

// assertions are the checks that hold on v, each verified with its
// checker before it is written: its status, whether its changes applied,
// every tool of the base, the variant and the other runs (others) called
// or not, what the guard held back, and its output when it completed.
func assertions(v *fork.Variant, others []*trace.Trace, t string) []string {
	var out []string
	add := func(ok error, format string, args ...any) {
		if ok == nil {
			out = append(out, fmt.Sprintf(format, args...))
		}
	}
	if v.Status == fork.StatusCompleted {
		add(assert.CheckCompleted(v), "assert.Completed(%s, v)", t)
	} else {
		add(assert.CheckStatus(v, v.Status), "assert.Status(%s, v, fork.%s)", t, statusName(v.Status))
	}
	if len(v.Changes) > 0 {
		add(assert.CheckChangeApplied(v), "assert.ChangeApplied(%s, v)", t)
	}
	for _, name := range toolNames(v, others) {
		q := strconv.Quote(name)
		if assert.CheckToolCalled(v, name) == nil {
			out = append(out, fmt.Sprintf("assert.ToolCalled(%s, v, %s)", t, q))
		} else {
			add(assert.CheckToolNotCalled(v, name), "assert.ToolNotCalled(%s, v, %s)", t, q)
		}
	}
	if len(v.Suppressed) == 0 {
		add(assert.CheckNoSuppressedEffects(v), "assert.NoSuppressedEffects(%s, v)", t)
	} else {
		for _, s := range v.Suppressed {
			out = append(out, fmt.Sprintf("// the guard held back %s '%s' at step %d", s.Kind, s.Tool, s.Step))
		}
	}
	if v.Status == fork.StatusCompleted {
		if o, ok := runOutput(v.Trace); ok {
			red, _ := trace.RedactValue(o)
			add(assert.CheckOutputEqual(v, red), "assert.OutputEqual(%s, v, %s)", t, goValue(red))
		}
	}
	return out
}

func statusName(s fork.Status) string {
	switch s {
	case fork.StatusCompleted:
		return "StatusCompleted"
	case fork.StatusFailed:
		return "StatusFailed"
	case fork.StatusBlocked:
		return "StatusBlocked"
	case fork.StatusCanceled:
		return "StatusCanceled"
	}
	return "Status(" + strconv.Quote(string(s)) + ")"
}

// toolNames are the tools the variant called, in order, then those only
// its base or the other runs called.
func toolNames(v *fork.Variant, others []*trace.Trace) []string {
	var names []string
	for _, tr := range append([]*trace.Trace{v.Trace, v.Base}, others...) {
		for _, c := range tr.Calls() {
			if tr.Events[c.Event].Type == trace.ToolCall && !slices.Contains(names, c.Label) {
				names = append(names, c.Label)
			}
		}
	}
	return names
}

// runOutput is the output of a run's run_end.
func runOutput(tr *trace.Trace) (trace.Value, bool) {
	for i := len(tr.Events) - 1; i >= 0; i-- {
		if ev := &tr.Events[i]; ev.Type == trace.RunEnd {
			if ev.Output.IsAbsent() {
				return trace.NullValue, true
			}
			return ev.Output, true
		}
	}
	return trace.Value{}, false
}

// gofmtStmts formats statements as gofmt formats the body of a function:
// each line indented by one tab, ready to paste into one.
func gofmtStmts(stmts string) (string, error) {
	src := "package p\n\nfunc _() {\n" + strings.TrimRight(stmts, "\n") + "\n}\n"
	out, err := format.Source([]byte(src))
	if err != nil {
		return "", err
	}
	body := out[bytes.Index(out, []byte("{\n"))+2 : bytes.LastIndex(out, []byte("}"))]
	return string(body), nil
}

// codeOf is the code of run id: its snippet, and the test file that holds
// it when the test's source is known.
func (s *session) codeOf(id int) (*code, error) {
	r, err := s.finished(id)
	if err != nil {
		return nil, err
	}
	tparam, base, agent := "t", "base", "agent"
	if site := s.cfg.Site; site != nil {
		tparam, base, agent = site.tparam, site.base, site.agent
	}
	s.mu.Lock()
	var others []*trace.Trace
	for _, o := range s.runs {
		if o != r && o.V != nil {
			others = append(others, o.V.Trace)
		}
	}
	text, imports := snippet(r, others, tparam, base, agent)
	s.mu.Unlock()
	body, err := gofmtStmts(text)
	if err != nil {
		return nil, fmt.Errorf("the code of run %d does not format: %v", id, err)
	}
	c := &code{Snippet: body, Imports: imports}
	if s.cfg.Site == nil {
		c.NoFile = "the test's source is not known, so only the snippet is offered"
	} else if fn, file, content, err := s.testFile(r, body, 1); err != nil {
		c.NoFile = err.Error()
	} else {
		c.File, c.FileName, c.Func = content, filepath.Base(file), fn
	}
	c.Snippet, _ = trace.RedactString(c.Snippet)
	c.File, _ = trace.RedactString(c.File)
	return c, nil
}

// testFile is the test file of run r, under the first free name from n on.
func (s *session) testFile(r *run, body string, n int) (fn, file, content string, err error) {
	site := s.cfg.Site
	if site.err != nil {
		return "", "", "", site.err
	}
	fn, file, err = site.freeName(n)
	if err != nil {
		return "", "", "", err
	}
	doc := fmt.Sprintf("%s reproduces run %d of the explore session of %s (go test -stepfork.explore): the fork at %s", fn, r.ID, site.Test, r.Point)
	if len(r.Changes) > 0 {
		doc += ", changing the " + strings.Join(r.Changes, "; the ")
	}
	doc += ". Its assertions are what held on that run."
	doc = wrap(doc, 76)
	content, err = site.testFile(fn, doc, body)
	return fn, file, content, err
}

// writeTest writes the test file of run id next to the test, under a
// name no file uses, and returns its path.
func (s *session) writeTest(id int) (string, error) {
	c, err := s.codeOf(id)
	if err != nil {
		return "", err
	}
	if c.File == "" {
		return "", errors.New("no test file can be written for this run: " + c.NoFile)
	}
	r, _ := s.finished(id)
	for n := 1; n < 1000; n++ {
		_, file, content, err := s.testFile(r, c.Snippet, n)
		if err != nil {
			return "", err
		}
		content, _ = trace.RedactString(content)
		err = writeNew(file, []byte(content))
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return "", err
		}
		s.mu.Lock()
		r.Wrote = file
		s.mu.Unlock()
		return file, nil
	}
	return "", errors.New("no free file name for the test")
}

// wrap breaks text into lines of at most width characters, at spaces.
func wrap(text string, width int) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n")
}
