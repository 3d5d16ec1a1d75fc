package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"image"
	"image/png"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/perflab/perflab/internal/browsertest"
	"github.com/perflab/perflab/internal/racetest"
	"github.com/perflab/perflab/internal/server"
	"github.com/perflab/perflab/internal/server/web"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

var updateShots = flag.Bool("update-screenshots", false, "write the dashboard's screenshots (runs list, live run, report, comparison) into docs/img")

// browserSpec is a small lab on the simulator: two engines, two stages, a
// short joint search and no generalization, so one lab takes seconds, not
// minutes, yet has the stages, repeats and incumbents the pages show.
// Its paths are relative to the server's data root (shared/data).
func browserSpec(name, gpu string, seed, maxTrials int) string {
	return fmt.Sprintf(`# A small lab for the dashboard's browser test.
name: %s
model: Qwen/Qwen3-14B
fp8_model: Qwen/Qwen3-14B-FP8
hardware:
  gpu: %s
  count: 1
engines:
  - name: vllm
    version: 0.11.0
  - name: sglang
    version: 0.5.5.post1
runtime: sim-predict
objective:
  metric: total_throughput
tokenizer: tokenizers/qwen3
tuning:
  name: ShareGPT
  dataset: sharegpt
  path: sharegpt/sharegpt_v3_sample_1000.json
  num_prompts: 1000
  request_rate: inf
no_generalization: true
stages:
  - name: engine
  - name: quantization
    values: [fp8-checkpoint]
search:
  knobs: [engine, quantization, max_num_seqs, max_num_batched_tokens]
repeats: 2
noise:
  sigma: 0.01
  seed: %d
budget:
  max_trials: %d
`, name, gpu, seed, maxTrials)
}

// TestDashboardInChromium drives the dashboard in headless Chromium
// against the real server (SQLite in a temporary directory, labs on the
// simulator), as a person would: a bad spec on the New-lab page (the
// server's message beside its line, nothing started), then a lab started
// from that page and watched live until it is done, its report and one of
// its trials, a second lab seen running in the runs list and on its live
// page, and the two runs compared. Each step checks the text on screen and
// takes a screenshot that must not be blank. With -update-screenshots the
// runs list, the live run, the report and the comparison are written into
// docs/img.
func TestDashboardInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two labs in a browser (about a minute)")
	}
	// The labs it drives run in this process: under -race they took 127 s
	// of the race step's 172 s for this package (27 s without it), and the
	// server's goroutines are the other tests' claim there.
	racetest.SkipCPUBound(t)
	bin := browsertest.Chromium(t)
	ts, _ := startServer(t, "")
	b := newBrowser(t, bin, ts.URL)
	// PERFLAB_SCREENSHOTS=DIR keeps every step's screenshot for a look.
	b.shots = os.Getenv("PERFLAB_SCREENSHOTS")
	if b.shots == "" {
		b.shots = t.TempDir()
	}
	if *updateShots {
		b.docs = filepath.Join(shareddata.RepoRoot(t), "docs", "img")
	}
	for _, d := range []string{b.shots, b.docs} {
		if d != "" {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}

	// New lab, a bad spec first: the server's message sits beside the
	// line it names, and nothing runs.
	b.open("/#/new")
	b.wait(`document.getElementById("spec") && document.getElementById("spec").value.includes("runtime: sim-predict")`)
	example := b.eval(`document.getElementById("spec").value`)
	line := lineOf(t, example, "  metric: total_throughput")
	b.setSpec(strings.Replace(example, "metric: total_throughput", "metric: fastest", 1))
	b.click("#start-lab")
	b.wait(`document.querySelector("#spec-notes .note")`)
	note := b.eval(`document.querySelector("#spec-notes .note").textContent`)
	if !strings.Contains(note, fmt.Sprintf("line %d", line)) || !strings.Contains(note, "fastest") {
		t.Errorf("the note beside the spec is %q, want line %d and the bad value", note, line)
	}
	if got := b.eval(`[...document.querySelectorAll(".gutter .err")].map(e => e.textContent).join(",")`); got != strconv.Itoa(line) {
		t.Errorf("lines flagged in the gutter: %q, want %d", got, line)
	}
	b.shot("new-lab-invalid.png", false)
	// A path outside the data root is refused, named on the page.
	b.setSpec(strings.Replace(example, "tokenizer: tokenizers/qwen3", "tokenizer: /etc", 1))
	b.click("#start-lab")
	b.wait(`document.querySelector("#problems li") !== null && document.querySelector("#problems").textContent.includes("/etc")`)
	if n := runCount(t, ts.URL); n != 0 {
		t.Fatalf("a bad spec started %d runs", n)
	}

	// A good spec starts the lab, and the page goes to its live view.
	b.setSpec(browserSpec("browser-a", "H100-SXM-80GB", 42, 14))
	b.click("#start-lab")
	b.wait(`/^#\/runs\/\d+$/.test(location.hash)`)
	idA := strings.TrimPrefix(b.eval(`location.hash`), "#/runs/")
	// Live: rows appear as trials end, with the page never reloaded.
	b.wait(`document.querySelectorAll("#trials-table tbody tr").length >= 1`)
	b.eval(`window.__sameDocument = "yes"`)
	first := b.count("#trials-table tbody tr")
	wasRunning := b.eval(`document.querySelector("h1 .badge").dataset.status`) == "running"
	// Rows are updated by trial, not rebuilt each frame: the oldest row's
	// node is still the one in the table once more trials have ended.
	b.eval(`window.__oldestRow = document.querySelector("#trials-table tbody tr:last-child"); ""`)
	b.waitFor(3*time.Minute, `document.querySelector("#winner") !== null || document.querySelectorAll("#trials-table tbody tr").length > `+strconv.Itoa(first))
	switch b.eval(`document.querySelector("#winner") !== null ? "ended" : String(window.__oldestRow.isConnected)`) {
	case "false":
		t.Error("the live table rebuilt a row whose trial had not changed")
	case "ended":
		t.Log("the lab ended before a second trial: row reuse not checked")
	}
	b.waitFor(3*time.Minute, `document.querySelector("#winner") !== null`)
	last := b.count("#trials-table tbody tr")
	if b.eval(`String(window.__sameDocument)`) != "yes" {
		t.Error("the live page reloaded instead of updating")
	}
	stored := trialCount(t, ts.URL, idA)
	if last != stored {
		t.Errorf("the page shows %d trials at the end; the run stored %d", last, stored)
	}
	// Seen running with trials still to come, the page must have grown.
	if wasRunning && first < stored && last <= first {
		t.Errorf("the live page showed %d trials while running and %d at the end", first, last)
	}
	if !wasRunning {
		t.Log("the lab ended before the page first looked: live updates not observed this time")
	}
	b.wait(`document.querySelector("h1 .badge").dataset.status === "done"`)
	winner := b.eval(`document.querySelector("#winner").innerText`)
	if !strings.Contains(winner, "tok/s") || !regexp.MustCompile(`[+-]\d+\.\d%`).MatchString(winner) {
		t.Errorf("the winner banner says %q: want its score and its gain", winner)
	}
	if dots := b.count("#score-chart circle"); dots < 5 {
		t.Errorf("the score chart has %d dots", dots)
	}
	if b.eval(`document.querySelector("#score-chart path.inc").getAttribute("d")`) == "" {
		t.Error("the score chart has no incumbent line")
	}
	b.shot("run-done.png", true)

	// The report: the HTML report itself, its charts, the downloads.
	b.click("#open-report")
	b.wait(`document.querySelectorAll("#charts img").length >= 2 && [...document.querySelectorAll("#charts img")].every(i => i.complete && i.naturalWidth > 0)`)
	b.wait(`document.getElementById("report-frame").contentDocument.body.innerText.includes("Qwen3-14B")`)
	if got := b.eval(`[...document.querySelectorAll("#downloads [data-format]")].map(e => e.dataset.format).join(",")`); got != "html,md,json,csv" {
		t.Errorf("report downloads: %q", got)
	}
	if txt := b.eval(`document.querySelector(".winner").innerText`); !strings.Contains(txt, "vs baseline") {
		t.Errorf("the report's headline says %q", txt)
	}
	b.shot("report.png", false)

	// A trial of the run: its command, result and log.
	b.open("/#/runs/" + idA)
	b.wait(`document.querySelectorAll("#trials-table tbody tr a").length > 0`)
	b.click("#trials-table tbody tr:last-child a")
	b.wait(`document.getElementById("result-block") !== null`)
	cmd := b.eval(`document.querySelector("[data-role=command]").textContent`)
	if !strings.Contains(cmd, "Qwen/Qwen3-14B") || !strings.Contains(cmd, "serve") {
		t.Errorf("the trial's serving command is %q", cmd)
	}
	if res := b.eval(`document.getElementById("result-block").textContent`); !strings.Contains(res, "Serving Benchmark Result") {
		t.Errorf("the trial's result block is %q", res)
	}
	b.shot("trial.png", false)

	// Two trials side by side: from this one, "Compare with…" another.
	b.click(`a[href^="#/compare?trials="]`)
	b.wait(`document.querySelectorAll("a[href*='%2C'], a[href*=',']").length > 0`)
	b.click(`main table tbody tr:first-child a`)
	b.wait(`document.getElementById("compare-table") !== null`)
	if n := b.count("#compare-table thead th"); n != 3 {
		t.Errorf("the trial comparison has %d header cells, want a label column and 2 trials", n)
	}
	if n := b.count(".cmd pre"); n != 2 {
		t.Errorf("%d trial commands side by side, want 2", n)
	}
	b.shot("compare-trials.png", false)

	// A second lab, on another GPU and longer (the test must catch it
	// midway): seen running in the list and live.
	b.open("/#/new")
	b.wait(`document.getElementById("spec") && document.getElementById("spec").value !== ""`)
	b.setSpec(browserSpec("browser-b", "H200-SXM-141GB", 7, 24))
	b.click("#start-lab")
	b.wait(`/^#\/runs\/\d+$/.test(location.hash) && location.hash !== "#/runs/` + idA + `"`)
	idB := strings.TrimPrefix(b.eval(`location.hash`), "#/runs/")
	b.waitFor(2*time.Minute, `document.querySelectorAll("#trials-table tbody tr").length >= 6 && document.querySelector("#cancel-run") !== null`)
	if eta := b.eval(`document.querySelector("[data-kpi=eta] .value").textContent`); eta == "–" {
		t.Errorf("a running lab shows no ETA")
	}
	b.shot("live-run.png", false)
	b.open("/#/runs")
	b.wait(`document.querySelectorAll("#runs-table tbody tr").length === 2`)
	rows := b.eval(`[...document.querySelectorAll("#runs-table tbody tr")].map(r => r.dataset.status + " " + r.innerText.replace(/\s+/g, " ").trim()).join("\n")`)
	if !strings.Contains(rows, "running browser-b") && !strings.Contains(rows, "done browser-b") {
		t.Errorf("the runs list shows:\n%s", rows)
	}
	if !regexp.MustCompile(`done browser-a .*\+\d+\.\d%`).MatchString(rows) {
		t.Errorf("the runs list does not show run A's gain:\n%s", rows)
	}
	b.shot("runs.png", false)

	// The next lab starts from a run's spec: "Edit as a new lab" puts it
	// in the editor.
	b.open("/#/runs/" + idA)
	b.wait(`document.querySelector("#edit-as-new") !== null`)
	b.eval(`document.querySelector("#run-spec").open = true; ""`)
	b.click("#edit-as-new")
	b.wait(`location.hash === "#/new" && document.getElementById("spec").value.includes("name: browser-a")`)

	// Compare the two runs, picked in the list, once B is done.
	b.open("/#/runs/" + idB)
	b.waitFor(3*time.Minute, `document.querySelector("#winner") !== null`)
	b.open("/#/runs")
	b.wait(`document.querySelectorAll("#runs-table tbody tr[data-status=done]").length === 2`)
	b.click(`#runs-table tr[data-run="` + idA + `"] input[type=checkbox]`)
	b.click(`#runs-table tr[data-run="` + idB + `"] input[type=checkbox]`)
	b.click("#compare-selected")
	b.wait(`document.getElementById("compare-table") !== null`)
	head := b.eval(`document.querySelector("#compare-table thead").innerText`)
	if !strings.Contains(head, "browser-a") || !strings.Contains(head, "browser-b") {
		t.Errorf("the comparison's columns are %q", head)
	}
	if gpus := b.eval(`document.querySelector("#compare-table tbody").innerText`); !strings.Contains(gpus, "H100-SXM-80GB") || !strings.Contains(gpus, "H200-SXM-141GB") {
		t.Errorf("the comparison does not show both GPUs:\n%s", gpus)
	}
	if d := b.eval(`document.querySelector("#compare-table tr[data-metric=total_tps] .delta").textContent`); !regexp.MustCompile(`^[+-]?\d+\.\d%$`).MatchString(d) {
		t.Errorf("the throughput delta is %q", d)
	}
	if n := b.count("#compare-table td.best"); n == 0 {
		t.Error("no figure is marked best")
	}
	if n := b.count(".cmd pre"); n != 2 {
		t.Errorf("%d commands side by side, want 2", n)
	}
	b.shot("compare.png", false)
}

// TestDashboardTokenInChromium: on a server with a token, the page asks
// for it (the API answered 401), and once given it lists the runs, starts
// a lab (the token as a header) and follows its event stream (read with
// fetch, the token as a header too) to the end.
func TestDashboardTokenInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lab in a browser")
	}
	// The labs it drives run in this process: under -race they took 127 s
	// of the race step's 172 s for this package (27 s without it), and the
	// server's goroutines are the other tests' claim there.
	racetest.SkipCPUBound(t)
	bin := browsertest.Chromium(t)
	const token = "s3cret-token-for-the-test"
	ts, _ := startServer(t, token)
	b := newBrowser(t, bin, ts.URL)
	b.shots = t.TempDir()

	b.open("/#/runs")
	b.wait(`!document.getElementById("token-bar").hidden && document.querySelector(".error-box") !== null`)
	if msg := b.eval(`document.querySelector(".error-box").textContent`); !strings.Contains(msg, "token") {
		t.Errorf("without the token the page says %q", msg)
	}
	b.shot("token-asked.png", false)
	b.eval(`document.getElementById("token-input").value = ` + strconv.Quote(token) + `; ""`)
	b.click("#token-save")
	b.wait(`document.querySelector(".empty") !== null && document.querySelector(".empty").textContent.includes("No runs yet")`)

	b.open("/#/new")
	b.wait(`document.getElementById("spec") && document.getElementById("spec").value !== ""`)
	b.setSpec(browserSpec("browser-token", "H100-SXM-80GB", 3, 10))
	b.click("#start-lab")
	b.wait(`/^#\/runs\/\d+$/.test(location.hash)`)
	b.waitFor(3*time.Minute, `document.querySelector("#winner") !== null`)
	if n := b.count("#trials-table tbody tr"); n == 0 {
		t.Error("the live page followed no trial with the token")
	}
	b.shot("token-run.png", false)
}

// TestDashboardCancelResumeInChromium: the live page's Cancel button stops
// the lab (the run interrupted, its trials kept, Resume offered), and
// Resume continues it on the same page, the trials already run still
// there. The lab is the 14B example, long enough to be stopped midway.
func TestDashboardCancelResumeInChromium(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a lab in a browser")
	}
	// The labs it drives run in this process: under -race they took 127 s
	// of the race step's 172 s for this package (27 s without it), and the
	// server's goroutines are the other tests' claim there.
	racetest.SkipCPUBound(t)
	bin := browsertest.Chromium(t)
	ts, _ := startServer(t, "")
	b := newBrowser(t, bin, ts.URL)
	b.shots = t.TempDir()

	b.open("/#/new")
	b.wait(`document.getElementById("spec") && document.getElementById("spec").value.includes("qwen3-14b-h100")`)
	b.click("#start-lab")
	b.wait(`/^#\/runs\/\d+$/.test(location.hash)`)
	id := strings.TrimPrefix(b.eval(`location.hash`), "#/runs/")
	b.waitFor(2*time.Minute, `document.querySelectorAll("#trials-table tbody tr").length >= 2`)
	// The page asks before cancelling; the test answers yes.
	b.eval(`window.confirm = () => true; ""`)
	b.click("#cancel-run")
	b.waitFor(2*time.Minute, `document.querySelector("h1 .badge").dataset.status === "interrupted" && document.querySelector("#resume-run") !== null`)
	kept := b.count("#trials-table tbody tr")
	if stored := trialCount(t, ts.URL, id); kept != stored || kept == 0 {
		t.Errorf("after cancel the page shows %d trials, the store %d", kept, stored)
	}
	if b.count("#cancel-run") != 0 {
		t.Error("an interrupted run still offers Cancel")
	}
	b.shot("cancelled.png", false)

	b.click("#resume-run")
	b.waitFor(2*time.Minute, `document.querySelector("h1 .badge").dataset.status === "running" && document.querySelectorAll("#trials-table tbody tr").length > `+strconv.Itoa(kept))
	// The rows are the run's trials, each once: resumed trials are not
	// shown twice.
	keys := b.eval(`[...document.querySelectorAll("#trials-table tbody tr")].map(r => r.dataset.key).join("\n")`)
	seen := map[string]bool{}
	for _, k := range strings.Split(keys, "\n") {
		if seen[k] {
			t.Errorf("trial %s shown twice after resume", k)
		}
		seen[k] = true
	}
	b.shot("resumed.png", false)
	b.eval(`window.confirm = () => true; ""`)
	b.click("#cancel-run")
	b.waitFor(2*time.Minute, `document.querySelector("h1 .badge").dataset.status === "interrupted"`)
}

// TestDashboardStaleRunInChromium: a run left "running" by a lab that is
// gone (a killed CLI lab) has no live stream here; its page offers Resume,
// not Cancel, and settles instead of reloading itself on the stream's
// immediate end.
func TestDashboardStaleRunInChromium(t *testing.T) {
	bin := browsertest.Chromium(t)
	ts, st := startServer(t, "")
	run, err := st.EnsureRun(context.Background(), "stale-run-key", "stale-lab", browserSpec("stale-lab", "H100-SXM-80GB", 1, 10), false)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != "running" {
		t.Fatalf("a new run is %q, want running", run.Status)
	}
	b := newBrowser(t, bin, ts.URL)
	b.shots = t.TempDir()
	b.open(fmt.Sprintf("/#/runs/%d", run.ID))
	b.wait(`document.querySelector("#resume-run") !== null`)
	b.eval(`window.__page = document.getElementById("run-page"); ""`)
	b.do(2*time.Second+time.Second, chromedp.Sleep(2*time.Second))
	if b.eval(`String(document.getElementById("run-page") === window.__page)`) != "true" {
		t.Error("the page of a run with no lab here redrew itself: it follows a stream that has ended")
	}
	if b.count("#cancel-run") != 0 {
		t.Error("a run with no lab here offers Cancel")
	}
	b.shot("stale-run.png", false)
}

// browser is one headless Chromium tab on the test server.
type browser struct {
	t    *testing.T
	ctx  context.Context
	base string
	// shots is where screenshots go; docs, when set, receives the ones
	// the documentation shows (docShots).
	shots, docs string
}

// docShots are the screenshots docs/img keeps.
var docShots = map[string]bool{"runs.png": true, "live-run.png": true, "report.png": true, "compare.png": true}

// startServer serves the real server on a loopback port: SQLite in a
// temporary directory, the shared data as the data root, the dashboard.
func startServer(t *testing.T, token string) (*httptest.Server, *store.Store) {
	t.Helper()
	data := shareddata.Path(t, "data")
	ctx := context.Background()
	st, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "perflab.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := server.New(server.Config{Store: st, DataRoot: data, Token: token, Dashboard: web.Handler()})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	// Cleanups run last-in first-out: the HTTP server, the labs, the store.
	t.Cleanup(func() { st.Close() })
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := srv.Close(cctx); err != nil {
			t.Error(err)
		}
	})
	t.Cleanup(ts.Close)
	return ts, st
}

func newBrowser(t *testing.T, bin, base string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1400, 1000),
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "profile")),
		chromedp.Env("TMPDIR="+browsertest.TempDir(t)),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("hide-scrollbars", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelB := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelB(); cancelA() })
	// The first action starts the browser; it must not run under a timeout
	// (the timeout would end the browser with it).
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank"), chromedp.EmulateViewport(1400, 1000)); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx, base: base}
}

func (b *browser) open(path string) {
	b.t.Helper()
	if err := b.do(30*time.Second, chromedp.Navigate(b.base+path)); err != nil {
		b.t.Fatalf("open %s: %v", path, err)
	}
}

func (b *browser) do(d time.Duration, a chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, d)
	defer cancel()
	return chromedp.Do(ctx, a)
}

func (b *browser) wait(cond string) { b.t.Helper(); b.waitFor(30*time.Second, cond) }

// waitFor polls a JavaScript condition; on timeout it fails with what the
// page showed.
func (b *browser) waitFor(d time.Duration, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, d+5*time.Second)
	defer cancel()
	expr := "(() => { try { return !!(" + cond + "); } catch (e) { return false; } })()"
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		text, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.hash + "\n" + document.body.innerText.slice(0, 3000)`))
		b.t.Fatalf("waiting for %s: %v\nthe page shows: %s", cond, err, text)
	}
}

func (b *browser) eval(expr string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[any](expr))
	if err != nil {
		b.t.Fatalf("eval %s: %v", expr, err)
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

func (b *browser) count(sel string) int {
	b.t.Helper()
	n, err := strconv.Atoi(b.eval(`String(document.querySelectorAll(` + strconv.Quote(sel) + `).length)`))
	if err != nil {
		b.t.Fatal(err)
	}
	return n
}

func (b *browser) click(sel string) {
	b.t.Helper()
	if err := b.do(30*time.Second, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		b.t.Fatalf("click %s: %v", sel, err)
	}
}

// setSpec replaces the editor's text as typing would (an input event, so
// the page's gutter follows).
func (b *browser) setSpec(spec string) {
	b.t.Helper()
	q, _ := json.Marshal(spec)
	b.eval(`(() => { const ta = document.getElementById("spec"); ta.value = ` + string(q) + `; ta.dispatchEvent(new Event("input")); return ""; })()`)
}

// shot saves a screenshot (the whole page with full) and checks that it
// shows something: enough dark text pixels and more than a few colours.
func (b *browser) shot(name string, full bool) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	var buf []byte
	var err error
	if full {
		buf, err = chromedp.Run(ctx, chromedp.FullScreenshot(100))
	} else {
		buf, err = chromedp.Run(ctx, chromedp.CaptureScreenshot())
	}
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dark, colours := ink(img)
	if dark < 3000 || colours < 20 {
		b.t.Errorf("screenshot %s looks blank: %d dark pixels, %d colours", name, dark, colours)
	}
	dir := b.shots
	if b.docs != "" && docShots[name] {
		dir = b.docs
	}
	if err := os.WriteFile(filepath.Join(dir, name), buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	b.t.Logf("screenshot %s: %v, %d dark pixels, %d colours", filepath.Join(dir, name), img.Bounds().Size(), dark, colours)
}

// ink counts the dark pixels (text) and the distinct colours (coarsely)
// of an image.
func ink(img image.Image) (dark, colours int) {
	seen := map[uint32]bool{}
	r := img.Bounds()
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			cr, cg, cb = cr>>8, cg>>8, cb>>8
			if cr < 90 && cg < 90 && cb < 90 {
				dark++
			}
			seen[(cr>>4)<<8|(cg>>4)<<4|cb>>4] = true
		}
	}
	return dark, len(seen)
}

func lineOf(t *testing.T, text, prefix string) int {
	t.Helper()
	for i, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return i + 1
		}
	}
	t.Fatalf("no line %q in the example", prefix)
	return 0
}

func runCount(t *testing.T, base string) int {
	t.Helper()
	var page struct {
		Total int `json:"total"`
	}
	getJSON(t, base+"/api/v1/runs", &page)
	return page.Total
}

func trialCount(t *testing.T, base, id string) int {
	t.Helper()
	var list struct {
		Trials []json.RawMessage `json:"trials"`
	}
	getJSON(t, base+"/api/v1/runs/"+id+"/trials", &list)
	return len(list.Trials)
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
