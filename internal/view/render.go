package view

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"html/template"
	"strings"
	"sync"

	"github.com/stepfork/stepfork/internal/usd"
	"github.com/stepfork/stepfork/trace"
)

//go:embed assets/page.html assets/view.css assets/view.js
var assets embed.FS

// The style sheet, the script and the page's template are read and parsed
// on first use, not when every program that links this package starts
// (parsing the template was the largest part of the stepfork CLI's start,
// for every command).
var (
	css          = sync.OnceValue(func() template.CSS { return template.CSS(mustRead("assets/view.css")) })
	js           = sync.OnceValue(func() template.JS { return template.JS(mustRead("assets/view.js")) })
	pageTemplate = sync.OnceValue(func() *template.Template {
		return template.Must(template.New("page.html").Funcs(funcs).ParseFS(assets, "assets/page.html"))
	})
)

func mustRead(name string) string {
	b, err := assets.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// pageData is what the template renders.
type pageData struct {
	*Page
	Data     template.JS // the first rows and steps, JSON
	Rest     template.JS // the other rows and steps, JSON
	Payloads template.JS // payloads, JSON, parsed on first selection
	CSS      template.CSS
	JS       template.JS
}

type runArgs struct {
	I int
	R *runSection
}

// maxStaticPayload is the longest payload written out in the markup; the
// script shows longer ones in full.
const maxStaticPayload = 16 << 10

var funcs = template.FuncMap{
	"cost":      usd.Format,
	"costDelta": usd.Delta,
	"signed": func(n int64) string {
		if n > 0 {
			return fmt.Sprintf("+%d", n)
		}
		return fmt.Sprint(n)
	},
	"dur": durString,
	"pretty": func(v trace.Value) string {
		if v.IsAbsent() {
			return ""
		}
		var b bytes.Buffer
		if err := json.Indent(&b, v.Bytes(), "", "  "); err != nil {
			return v.Canonical()
		}
		if b.Len() > maxStaticPayload {
			return string(b.Bytes()[:maxStaticPayload]) + "\n… (cut; open the page with JavaScript to see all of it)"
		}
		return b.String()
	},
	"has":   func(v trace.Value) bool { return !v.IsAbsent() },
	"add":   func(a, b int) int { return a + b },
	"pct":   func(a, b int) string { return fmt.Sprintf("%.2f%%", 100*float64(a)/float64(max(a+b, 1))) },
	"steps": stepList,
	"mark": func(k string) string {
		return map[string]string{"added": "+", "removed": "−", "changed": "~", "unchanged": "="}[k]
	},
	"failed": func(it *item) bool {
		return it.failed()
	},
	"kindIcon": kindIcon,
	"limit": func(n int, steps []*diffStep) []*diffStep {
		if len(steps) > n {
			return steps[:n]
		}
		return steps
	},
	"maxStatic": func() int { return maxStaticRows },
	"runArgs":   func(i int, r *runSection) runArgs { return runArgs{i, r} },
	"join":      strings.Join,
	"path":      pathBreaks,
}

// pathBreaks is a field path with a line break allowed after each '.' and
// before each '[', and nowhere else: a long path wraps between its keys,
// never inside one ("output.boo king_ref").
func pathBreaks(p string) template.HTML {
	var b strings.Builder
	for i, r := range p {
		if r == '[' && i > 0 {
			b.WriteString("<wbr>")
		}
		b.WriteString(template.HTMLEscapeString(string(r)))
		if r == '.' {
			b.WriteString("<wbr>")
		}
	}
	return template.HTML(b.String())
}

func durString(ms *int64) string {
	if ms == nil {
		return ""
	}
	switch d := *ms; {
	case d < 1000:
		return fmt.Sprintf("%d ms", d)
	case d < 60_000:
		return fmt.Sprintf("%.1f s", float64(d)/1000)
	default:
		return fmt.Sprintf("%dm%02ds", d/60_000, d/1000%60)
	}
}

// kindIcon is the short tag shown before an item's name.
func kindIcon(kind string) string {
	switch kind {
	case "tool":
		return "tool"
	case "llm":
		return "model"
	case "node":
		return "node"
	case "state":
		return "state"
	case "decision", "approval":
		return kind
	case "param":
		return "param"
	case "error":
		return "error"
	case "start":
		return "start"
	case "run":
		return "end"
	case "group":
		return "‖"
	}
	return kind
}
