package report

import (
	"encoding/json"
	stdhtml "html"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/store"
)

// richFixture is the fixture with everything a report can show switched
// on: repeats, engine metrics, a joint search, a warning.
func richFixture(t *testing.T) (store.Run, []store.Trial) {
	t.Helper()
	run, trials := fixture(t)
	rep := trials[0]
	rep.Key, rep.Result = "engine/a/ShareGPT/r1", synthResult(t, 100, 2.0, 0.048, 200)
	trials = append(trials, rep)
	trials[1].EngineMetrics = map[string]float64{"vllm:kv_cache_usage_perc": 0.42, "vllm:num_requests_running": 12}
	var sum map[string]any
	if err := json.Unmarshal(run.Summary, &sum); err != nil {
		t.Fatal(err)
	}
	sum["stopped"] = "budget | time"
	sum["staged"] = map[string]any{"name": "SGLang + FP8", "trial_key": "quant/c/ShareGPT/r0", "score": 5000.0}
	sum["joint"] = map[string]any{"knobs": []string{"engine"}, "space": 4, "stop_reason": "space exhausted",
		"tried": []any{map[string]any{"name": "vLLM again", "trial_key": "engine/a/ShareGPT/r0", "decision": "skipped", "reason": "not better"}}}
	raw, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	run.Summary = raw
	return run, trials
}

var (
	mdHeadingRe = regexp.MustCompile(`(?m)^(##|###) (.+)$`)
	htmlHeadRe  = regexp.MustCompile(`(?s)<h([23])[^>]*>(.*?)</h[23]>`)
	htmlTableRe = regexp.MustCompile(`(?s)<table>(.*?)</table>`)
	htmlRowRe   = regexp.MustCompile(`(?s)<tr>(.*?)</tr>`)
	htmlCellRe  = regexp.MustCompile(`(?s)<t[hd]>(.*?)</t[hd]>`)
	tagRe       = regexp.MustCompile(`<[^>]+>`)
)

// plainMD reduces a Markdown fragment to the text a reader sees.
func plainMD(s string) string {
	s = strings.ReplaceAll(s, "<br>", " ")
	s = strings.ReplaceAll(s, "**", "")
	return strings.TrimSpace(strings.ReplaceAll(s, "`", ""))
}

// plainHTML reduces an HTML fragment to the text a reader sees.
func plainHTML(s string) string {
	s = strings.ReplaceAll(s, "<br>", " ")
	return strings.TrimSpace(stdhtml.UnescapeString(tagRe.ReplaceAllString(s, "")))
}

// mdTables returns each pipe table of md as rows of plain cells, the
// |---| separator left out.
func mdTables(md string) [][][]string {
	var tables [][][]string
	var cur [][]string
	for _, line := range strings.Split(md+"\n", "\n") {
		if !strings.HasPrefix(line, "|") {
			if cur != nil {
				tables, cur = append(tables, cur), nil
			}
			continue
		}
		if strings.HasPrefix(line, "|--") || strings.HasPrefix(line, "|---") {
			continue
		}
		line = strings.ReplaceAll(strings.TrimSpace(line), `\|`, "\x00")
		parts := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|"), "|")
		row := make([]string, len(parts))
		for i, p := range parts {
			row[i] = plainMD(strings.ReplaceAll(p, "\x00", "|"))
		}
		cur = append(cur, row)
	}
	return tables
}

func htmlTables(h string) [][][]string {
	var tables [][][]string
	for _, tm := range htmlTableRe.FindAllStringSubmatch(h, -1) {
		var rows [][]string
		for _, rm := range htmlRowRe.FindAllStringSubmatch(tm[1], -1) {
			var row []string
			for _, cm := range htmlCellRe.FindAllStringSubmatch(rm[1], -1) {
				row = append(row, plainHTML(cm[1]))
			}
			rows = append(rows, row)
		}
		tables = append(tables, rows)
	}
	return tables
}

// TestHTMLCarriesTheMarkdown checks that the HTML report is the Markdown
// report: the same ## and ### headings in the same order, the same tables
// cell for cell, every code block, and the charts inlined.
func TestHTMLCarriesTheMarkdown(t *testing.T) {
	run, trials := richFixture(t)
	reports := map[string]func(t *testing.T) *Report{
		"lab run": func(t *testing.T) *Report {
			r, err := Build(run, trials)
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		"imported 9B reference": func(t *testing.T) *Report {
			items, err := ImportFile(filepath.Join(sharedDir(t), "reference", "qwen3.5-9b-h100.md"))
			if err != nil {
				t.Fatal(err)
			}
			its, err := ToTrials(1, items)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Build(store.Run{ID: 1, Name: "import"}, its)
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
	}
	for name, build := range reports {
		t.Run(name, func(t *testing.T) {
			r := build(t)
			dir := t.TempDir()
			if _, err := WriteAll(r, dir, "md", "html"); err != nil {
				t.Fatal(err)
			}
			mdb, err := os.ReadFile(filepath.Join(dir, "report.md"))
			if err != nil {
				t.Fatal(err)
			}
			hb, err := os.ReadFile(filepath.Join(dir, "report.html"))
			if err != nil {
				t.Fatal(err)
			}
			md, h := string(mdb), string(hb)

			var want, got []string
			for _, m := range mdHeadingRe.FindAllStringSubmatch(md, -1) {
				want = append(want, m[1]+" "+plainMD(m[2]))
			}
			for _, m := range htmlHeadRe.FindAllStringSubmatch(h, -1) {
				got = append(got, strings.Repeat("#", int(m[1][0]-'0'))+" "+plainHTML(m[2]))
			}
			if strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Errorf("headings differ:\nmarkdown:\n%s\nhtml:\n%s", strings.Join(want, "\n"), strings.Join(got, "\n"))
			}
			if len(want) < 10 {
				t.Errorf("only %d headings: the fixture shows too little", len(want))
			}

			mt, ht := mdTables(md), htmlTables(h)
			if len(mt) != len(ht) {
				t.Fatalf("%d tables in the markdown, %d in the html", len(mt), len(ht))
			}
			for i := range mt {
				if a, b := flatten(mt[i]), flatten(ht[i]); a != b {
					t.Errorf("table %d differs:\nmarkdown: %s\nhtml:     %s", i+1, a, b)
				}
			}
			if fences, pres := strings.Count(md, "\n```")/2, strings.Count(h, "<pre>"); fences != pres {
				t.Errorf("%d code blocks in the markdown, %d in the html", fences, pres)
			}
			if n := strings.Count(h, "<svg"); n != len(r.Charts) || strings.Contains(h, ".png") {
				t.Errorf("%d inline SVGs for %d charts (png links left: %v)", n, len(r.Charts), strings.Contains(h, ".png"))
			}
		})
	}
	// The sections the separate HTML template used to leave out.
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := WriteAll(r, dir, "html"); err != nil {
		t.Fatal(err)
	}
	hb, _ := os.ReadFile(filepath.Join(dir, "report.html"))
	h := plainHTML(string(hb))
	for _, want := range []string{"Other Benchmark Cases", "Configurations tried and not kept", "Engine metrics at the end of each run",
		"42.0%", "Repeats (Total TPS):", "noise floor of 1.20%", "the lab stopped early: budget | time"} {
		if !strings.Contains(h, want) {
			t.Errorf("html lacks %q", want)
		}
	}
}

func flatten(rows [][]string) string {
	parts := make([]string, len(rows))
	for i, r := range rows {
		parts[i] = strings.Join(r, " | ")
	}
	return strings.Join(parts, " // ")
}
