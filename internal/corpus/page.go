package corpus

import (
	"html/template"
	"io"
	"sync"

	"github.com/stepfork/stepfork/internal/usd"
)

// pageTmpl is the self-contained page of a merged report: no script, no
// style sheet or font from elsewhere, readable from file://. It is parsed
// on first use, not when every program that links this package starts.
var pageTmpl = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{"usd": usd.Format}).Parse(pageText))
})

const pageText = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>stepfork corpus report</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem;color:#1d2330;background:#fbfbfd}
h1{font-size:1.3rem}h2{font-size:1.1rem;margin-top:2rem}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #e3e6ee;padding:.35rem .6rem;text-align:left;vertical-align:top}
th{background:#f1f3f8;font-weight:600}
.counts span{display:inline-block;margin:0 .8rem .4rem 0;padding:.15rem .55rem;border-radius:1rem;background:#eef1f7}
.FAIL{color:#b42318;font-weight:600}.ok{color:#067647}
td.div{font-family:ui-monospace,Menlo,monospace;font-size:12px;word-break:break-word}
.problem{border:1px solid #f2b8b5;background:#fef3f2;padding:.6rem .9rem;border-radius:.4rem;white-space:pre-wrap}
</style></head><body>
<h1>stepfork corpus report</h1>
{{if .Problem}}<p class="problem">{{.Problem}}</p>{{end}}
{{range .Corpora}}<section>
<h2>{{.Name}} — {{.Count}} bundle(s), {{.Passed}} passed, {{.Failed}} failed{{if .Summary}}: {{.Summary}}{{end}}{{if gt .Shards 1}} ({{.Shards}} shards){{end}}</h2>
<p class="counts">{{range .Outcomes}}<span>{{.Name}}: {{.N}}</span>{{end}}{{if .Cost}}<span>incurred {{usd .Cost}}</span>{{end}}{{if .Revisions}}<span>recorded by {{.Revisions}}</span>{{end}}</p>
<table><thead><tr><th>bundle</th><th>result</th><th>outcome</th><th>base → variant</th><th>incurred</th><th>first divergence</th><th>code</th></tr></thead><tbody>
{{range .Entries}}<tr><td>{{.Name}}</td><td class="{{.Mark}}">{{.Mark}}</td><td>{{.Outcome}}{{if .Healed}}, healed{{end}}</td><td>{{.BaseStatus}}{{if .Status}} → {{.Status}}{{end}}</td><td>{{if .Cost}}{{usd .Cost}}{{end}}{{if .LiveCalls}} ({{.LiveCalls}} live call(s), {{.Tokens}} tokens){{end}}</td><td class="div">{{.Divergence}}{{if .Tail}}<br>{{.Tail}}{{end}}</td><td>{{if .Revision}}<code>{{.Code}}</code>{{end}}</td></tr>
{{end}}</tbody></table></section>
{{end}}{{if .Unused}}<section><h2>{{len .Unused}} bundle(s) no test used</h2><ul>{{range .Unused}}<li>{{.}}</li>{{end}}</ul></section>{{end}}
</body></html>
`

type pageCorpus struct {
	Name                  string
	Count, Passed, Failed int
	Shards                int
	Cost                  float64
	Summary, Revisions    string // Counts and Revisions of the entries
	Outcomes              []struct {
		Name Outcome
		N    int
	}
	Entries []pageEntry
}

type pageEntry struct {
	Record
	Mark string
	Code string // the revision, cut to 12 digits
}

// HTML writes the report as one self-contained page: per corpus the counts
// by outcome and one row per bundle, with problem (a merge error) and unused
// (bundles no test used) when given. clean is applied to every text shown
// (the caller's redaction), before it is escaped.
func (r *Report) HTML(w io.Writer, problem string, unused []string, clean func(string) string) error {
	data := struct {
		Problem string
		Corpora []pageCorpus
		Unused  []string
	}{Problem: clean(problem)}
	for _, u := range unused {
		data.Unused = append(data.Unused, clean(u))
	}
	for _, c := range r.Corpora {
		pc := pageCorpus{Name: clean(c.Name), Count: len(c.Entries), Shards: c.Total, Summary: Counts(c.Entries), Revisions: Revisions(c.Entries)}
		counts := map[Outcome]int{}
		for _, e := range c.Entries {
			counts[e.Outcome]++
			pc.Cost = usd.Sum(pc.Cost, e.Cost)
			mark := "FAIL"
			if e.Passed {
				pc.Passed++
				mark = "ok"
			}
			e.Name, e.Divergence, e.Tail, e.Path, e.Corpus = clean(e.Name), clean(e.Divergence), clean(e.Tail), "", ""
			e.Module, e.Version = clean(e.Module), clean(e.Version)
			code := e.Revision
			if len(code) > 12 {
				code = code[:12]
			}
			pc.Entries = append(pc.Entries, pageEntry{Record: e, Mark: mark, Code: code})
		}
		pc.Failed = pc.Count - pc.Passed
		for _, o := range outcomeOrder {
			if n := counts[o]; n > 0 {
				pc.Outcomes = append(pc.Outcomes, struct {
					Name Outcome
					N    int
				}{o, n})
			}
		}
		data.Corpora = append(data.Corpora, pc)
	}
	return pageTmpl().Execute(w, data)
}
