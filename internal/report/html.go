package report

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// WriteHTML writes a self-contained HTML version of the report: the charts
// (written by WriteCharts into chartDir) are inlined as SVG, so the file can
// be mailed or opened anywhere without its directory.
func WriteHTML(w io.Writer, r *Report, chartDir string) error {
	charts := make([]inlineChart, 0, len(r.Charts))
	for _, c := range r.Charts {
		b, err := os.ReadFile(filepath.Join(chartDir, c.SVG))
		if err != nil {
			return fmt.Errorf("report: inline chart %s: %w", c.SVG, err)
		}
		svg := string(b)
		if i := strings.Index(svg, "<svg"); i > 0 {
			svg = svg[i:] // drop the XML prolog, invalid inside HTML
		}
		charts = append(charts, inlineChart{Title: c.Title, SVG: template.HTML(svg)})
	}
	data := struct {
		R      *Report
		Charts []inlineChart
	}{r, charts}
	if err := htmlTmpl.Execute(w, data); err != nil {
		return fmt.Errorf("report: html: %w", err)
	}
	return nil
}

type inlineChart struct {
	Title string
	SVG   template.HTML
}

var htmlTmpl = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":       pct,
	"f2":        func(x float64) string { return fmt.Sprintf("%.2f", x) },
	"engine":    engineTitle,
	"hardware":  hardwareLine,
	"gpus":      gpuPhrase,
	"objective": objectiveSentence,
	"runtime":   runtimeNote,
	"first":     firstLine,
	"notes":     stageNotes,
	"changed": func(st Stage) bool {
		return st.Winner != nil && st.Incumbent != nil && st.Winner.Key != st.Incumbent.Key
	},
	"up":     func(x float64) bool { return x > 0 },
	"mul100": func(x float64) float64 { return 100 * x },
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.R.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.7em}h2{border-bottom:1px solid #ddd;padding-bottom:.2em;margin-top:1.6em}
table{border-collapse:collapse;margin:1em 0;width:100%}th,td{border:1px solid #ccc;padding:.35em .6em;text-align:left;vertical-align:top}
th{background:#f4f6f8}pre{background:#f6f8fa;padding:.8em;overflow-x:auto;font-size:.85em}
code{background:#f6f8fa;padding:0 .2em}.up{background:#c7f0c2}.down{background:#f6c8c8}
.note{color:#555;font-size:.9em}.chart svg{max-width:100%;height:auto}details{margin:.4em 0}
.failed{color:#a00}
</style></head><body>
<h1>{{.R.Title}}</h1>
<h2 id="conclusion">Conclusion</h2>
{{range .Charts}}{{if eq .Title "Baseline vs optimized"}}<div class="chart" title="{{.Title}}">{{.SVG}}</div>{{end}}{{end}}
{{with .R.Recommended}}<p>Recommended configuration for {{$.R.Model}} on {{gpus $.R}}:</p>
<pre><code>{{.Command}}</code></pre>{{else}}<p>No configuration finished successfully, so there is no recommendation.</p>{{end}}
{{if .R.Cases}}<table><tr><th>Benchmark Case</th><th>baseline (vLLM without any optimizations)</th><th>Optimized</th></tr>
{{range .R.Cases}}<tr><td><b>{{.Workload}}</b></td>
<td>{{with .Baseline}}{{if eq .Status "ok"}}Total TPS: {{f2 .Metrics.TotalTPS}}<br>Mean TPOT(ms): {{f2 .Metrics.MeanTPOTMs}}{{else}}<span class="failed">failed: {{.Failure}}</span>{{end}}{{else}}-{{end}}</td>
<td>{{with .Optimized}}{{if eq .Status "ok"}}Total TPS: {{f2 .Metrics.TotalTPS}}{{end}}{{end}}
{{if and .Baseline .Optimized}}{{if and (eq .Baseline.Status "ok") (eq .Optimized.Status "ok")}} <span class="{{if up .Change}}up{{else}}down{{end}}">({{pct .Change}}{{if .PerGPU}} per GPU{{end}})</span>{{end}}{{end}}
{{with .Optimized}}{{if eq .Status "ok"}}<br>Mean TPOT(ms): {{f2 .Metrics.MeanTPOTMs}}{{else}}<span class="failed">failed: {{.Failure}}</span>{{end}}{{end}}</td></tr>
{{end}}</table>{{end}}
{{if gt .R.NoiseFloor 0.0}}<p class="note">Gains had to exceed the measured run-to-run noise floor of ±{{f2 (mul100 .R.NoiseFloor)}}%.</p>{{end}}

<h2>Optimization Objective</h2><p>{{objective .R.Objective}}</p>

<h2>Experimental Setup</h2>
<h3>Model</h3><p>{{.R.Model}}</p><h3>Hardware</h3><p>{{hardware .R}}</p>
<h3>Engine Version</h3><ul>{{range .R.Engines}}<li>{{engine .Name}}: v{{.Version}}</li>{{end}}</ul>
{{if .R.Runtime}}<p class="note">Runtime: <code>{{.R.Runtime}}</code>{{runtime .R.Runtime}}</p>{{end}}
<h3>Benchmark Dataset</h3><ol>{{range .R.Workloads}}<li>{{.Name}}: {{.Description}}</li>{{end}}</ol>
<h3>Benchmark Script</h3>
{{range .R.Workloads}}<pre><code># {{.Name}}
{{.Perflab}}
# vLLM equivalent
{{.VLLM}}</code></pre>{{end}}

<h2>Experiment Results</h2>
{{range .R.Stages}}<h3>{{.Index}}. {{.Title}}</h3>
{{range .Candidates}}<h4>{{.Name}}</h4><pre><code>{{.Command}}</code></pre>
{{if eq .Status "ok"}}<details><summary>Benchmark result</summary><pre>{{.Block}}</pre></details>{{else}}<p class="failed">Failed: {{.Failure}} — {{first .Reason}}</p>{{end}}
{{if .Decision}}<p class="note">Decision: {{.Decision}}</p>{{end}}{{end}}
{{if .Ranking}}<p>Result: {{.Ranking}}</p>{{end}}{{if .Summary}}<p>Summary: {{.Summary}}</p>{{end}}
{{end}}
<h3>Summary of Optimization Options</h3>
<table><tr><th>Optimization Option</th><th>Throughput Improvement</th><th>Kept configuration</th><th>Notes</th></tr>
{{range .R.Stages}}<tr><td>{{.Name}}</td>{{if changed .}}<td><span class="up">{{pct .Gain}}</span></td><td>{{.Winner.Name}}</td>{{else}}<td>-</td><td>-</td>{{end}}<td>{{notes .}}</td></tr>{{end}}
</table>

{{range .Charts}}{{if ne .Title "Baseline vs optimized"}}<h3>{{.Title}}</h3><div class="chart">{{.SVG}}</div>{{end}}{{end}}
{{with .R.Search}}<h3>Search beyond the greedy pass</h3><p>Greedy pass: {{f2 .GreedyBest}} tok/s; after the joint search: {{f2 .FinalBest}} tok/s, {{.Trials}} trials in all.
{{if .GridTrials}} Exhaustive grid ({{.GridTrials}} configurations): best {{f2 .GridBest}} tok/s ({{.GridBestConfig}}).{{end}} {{.Note}}</p>{{end}}
{{if .R.Warnings}}<h3>Warnings</h3><ul>{{range .R.Warnings}}<li>{{.}}</li>{{end}}</ul>{{end}}
</body></html>
`))
