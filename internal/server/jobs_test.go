package server

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/shareddata"
)

// TestEndedJobsPruned: after many benchmarks end, the server holds the
// event hubs and handles of the latest KeepEnded only, and no more list
// figures than its cache's bound; the store still answers every run, its
// page and its stream (from the store). The server used to keep them all
// for as long as it ran.
func TestEndedJobsPruned(t *testing.T) {
	fake := benchtest.New(func(i int, body map[string]any) benchtest.Plan {
		return benchtest.Plan{TTFT: time.Millisecond, Chunks: 2, Gap: time.Millisecond}
	})
	hs := httptest.NewServer(fake)
	defer hs.Close()
	// Two kept of four: a bound above one and two jobs pruned, which is
	// all the claim needs; each benchmark loads the 11 MB Qwen3 tokenizer,
	// what this test spends its time on (8 of them took 205 s under -race
	// on the loaded 2-core VM).
	const keep, n = 2, 4
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{DataRoot: shareddata.Path(t, "data"), KeepEnded: keep})
	var ids []int64
	for i := range n {
		body := fmt.Sprintf(`{"name": "b%d", "base_url": %q, "model": "Qwen/Qwen3-8B", "tokenizer": "tokenizers/qwen3", "profile": "short", "num_prompts": 2}`, i, hs.URL)
		code, b := ts.do(t, "POST", "/api/v1/benchmarks", "application/json", strings.NewReader(body))
		if code != 202 {
			t.Fatalf("POST /benchmarks: %d %s", code, b)
		}
		var s started
		json.Unmarshal(b, &s)
		evs := ts.follow(t, s.ID, 0, nil)
		if end := evs[len(evs)-1].data; end.Status != "done" {
			t.Fatalf("benchmark %d ended %s: %s", i, end.Status, end.Error)
		}
		ids = append(ids, s.ID)
		var trials struct{ Trials []trialInfo }
		ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d/trials", s.ID), &trials)
	}
	if got := ts.jobs.held(); got > keep {
		t.Errorf("the server holds %d ended jobs after %d, want at most KeepEnded=%d", got, n, keep)
	}
	if ts.jobs.get(ids[n-1]) == nil {
		t.Error("the latest ended job was pruned")
	}
	if ts.jobs.get(ids[0]) != nil {
		t.Error("the oldest ended job is still held")
	}
	// Pruned from memory, not from the store.
	var run struct{ Status string }
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", ids[0]), &run)
	if run.Status != "done" {
		t.Errorf("pruned run %d: status %q, want done from the store", ids[0], run.Status)
	}
	if evs := ts.follow(t, ids[0], 0, nil); len(evs) != 1 || evs[0].typ != "end" || evs[0].data.Status != "done" {
		t.Errorf("pruned run's stream: %v, want one end event, done", types(evs))
	}
}

// TestJobsPruneByAge: an ended job older than KeepEndedFor is dropped at
// the next end, however few are held; a running one never is.
func TestJobsPruneByAge(t *testing.T) {
	now := time.Unix(1e9, 0)
	j := newJobs(10, time.Hour)
	j.now = func() time.Time { return now }
	old, _, _ := j.begin(1, t.Context(), nil)
	j.finish(old, "done", nil)
	running, _, _ := j.begin(2, t.Context(), nil)
	now = now.Add(2 * time.Hour)
	ended, _, _ := j.begin(3, t.Context(), nil)
	j.finish(ended, "done", nil)
	if j.get(1) != nil || j.get(2) != running || j.get(3) != ended {
		t.Errorf("held: 1 %v, 2 %v, 3 %v; want the 2-hour-old job dropped, the running and the new one kept", j.get(1), j.get(2), j.get(3))
	}
	if _, _, err := j.begin(2, t.Context(), nil); err != errBusy {
		t.Errorf("begin on a running job: %v, want errBusy", err)
	}
	running.cancel()
}

// TestFigureCacheBounded: the list figures cache keeps its latest size
// entries.
func TestFigureCacheBounded(t *testing.T) {
	c := newFigureCache(100)
	for i := range 1000 {
		c.put(figureKey{run: int64(i), key: "k"}, figures{total: float64(i)})
	}
	if c.len() != 100 {
		t.Errorf("cache holds %d, want 100", c.len())
	}
	if f, ok := c.get(figureKey{run: 999, key: "k"}); !ok || f.total != 999 {
		t.Errorf("latest entry: %v %v", f, ok)
	}
	if _, ok := c.get(figureKey{run: 0, key: "k"}); ok {
		t.Error("oldest entry still held")
	}
}

// TestEndedJobsMemory (PERFLAB_MEMPROBE=1) logs the heap the registry
// holds after 2000 ended jobs of 200 events each, their hubs compacted:
// pruned at the default bound, and unbounded as the server was before
// the registry (figures for docs/benchmarks.md).
func TestEndedJobsMemory(t *testing.T) {
	if os.Getenv("PERFLAB_MEMPROBE") != "1" {
		t.Skip("PERFLAB_MEMPROBE=1 measures")
	}
	// The steady state: each ended hub compacted, as a minute after its end.
	defer func(d time.Duration) { compactDelay = d }(compactDelay)
	compactDelay = time.Millisecond
	for _, keep := range []int{DefaultKeepEnded, 1 << 30} {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		j := newJobs(keep, 0)
		for id := range int64(2000) {
			lr, _, _ := j.begin(id, t.Context(), nil)
			for range 200 {
				lr.hub.Event(labprogress.Event{Type: labprogress.EventTrialEnded, Time: time.Now(), Stage: "stage", Trial: &labprogress.TrialEvent{Key: "k", Name: "a configuration name"}})
			}
			j.finish(lr, "done", nil)
		}
		time.Sleep(500 * time.Millisecond)
		runtime.GC()
		runtime.ReadMemStats(&after)
		t.Logf("keep %d: %d jobs held, heap %+.1f MiB", keep, j.held(), float64(int64(after.HeapAlloc)-int64(before.HeapAlloc))/(1<<20))
		runtime.KeepAlive(j)
	}
}
