package lab

import (
	"context"
	"encoding/json"
	"math"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/bench/benchtest"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// urlRuntime is a fake engine.Runtime whose one server is an in-process
// OpenAI-compatible stand-in (benchtest) already up: it replaces the sim
// serve process, so the test measures only the runner's scaling.
type urlRuntime struct{ url string }

func (u urlRuntime) Start(context.Context, engine.Launch) (engine.Handle, error) {
	return &urlHandle{url: u.url, done: make(chan struct{})}, nil
}

type urlHandle struct {
	url  string
	done chan struct{}
}

func (h *urlHandle) BaseURL() string             { return h.url }
func (h *urlHandle) Ready(context.Context) error { return nil }
func (h *urlHandle) Done() <-chan struct{}       { return h.done }
func (h *urlHandle) LogTail(int) []string        { return nil }
func (h *urlHandle) Failure() *engine.Failure    { return nil }
func (h *urlHandle) MarkBenchmarking()           {}
func (h *urlHandle) Pid() int                    { return 0 }
func (h *urlHandle) Stop(context.Context) error  { return nil }

var _ engine.Runtime = urlRuntime{}

// TestTimeScaleStretchesRecords (issue 11: time-scaled results were scaled
// by key name at the top level only, so the CDF quantiles of a sim-runtime
// run were off by K): at K=10 against a server with a 20 ms first token,
// every time figure (mean, median and the nested quantiles alike) reads
// about 200 ms, and a finite request rate is offered K times faster so the
// simulated run sees the spec's rate.
func TestTimeScaleStretchesRecords(t *testing.T) {
	srv := benchtest.New(func(int, map[string]any) benchtest.Plan {
		return benchtest.Plan{TTFT: 20 * time.Millisecond, Chunks: 4, Gap: 2 * time.Millisecond}
	})
	hs := httptest.NewServer(srv)
	defer hs.Close()
	const k, n, rate = 10.0, 12, 5.0
	reqs := make([]dataset.Request, n)
	for i := range reqs {
		reqs[i] = dataset.Request{Prompt: "hello", PromptLen: 1, OutputLen: 4}
	}
	r := &LiveRunner{Runtime: urlRuntime{hs.URL}, TimeScale: k,
		Requests: func(labspec.Workload) ([]dataset.Request, error) { return reqs, nil }}
	tr := TrialSpec{Key: "t/x/w/r0", Name: "x", Workload: labspec.Workload{Name: "w", RequestRate: rate},
		Config: engine.Config{Engine: "vllm", Version: "0.11.0", Model: "m"}}
	start := time.Now()
	rec, err := runTrial(context.Background(), r, tr)
	if err != nil || rec.Status != "ok" {
		t.Fatalf("run: %v, %+v", err, rec)
	}
	wall := time.Since(start)
	var res struct {
		Duration     float64 `json:"duration"`
		MeanTTFTMs   float64 `json:"mean_ttft_ms"`
		MedianTTFTMs float64 `json:"median_ttft_ms"`
		Perflab      struct {
			Quantiles map[string][]float64 `json:"quantiles_ms"`
		} `json:"perflab"`
	}
	if err := json.Unmarshal(rec.Result, &res); err != nil {
		t.Fatal(err)
	}
	if res.MeanTTFTMs < 0.9*k*20 || res.MeanTTFTMs > 3*k*20 {
		t.Errorf("mean TTFT %.1f ms, want about %.0f ms (20 ms stretched by %g)", res.MeanTTFTMs, k*20, k)
	}
	q := res.Perflab.Quantiles["ttft"]
	if len(q) == 0 {
		t.Fatalf("no TTFT quantiles in %s", rec.Result)
	}
	if mid := q[len(q)/2]; math.Abs(mid-res.MedianTTFTMs) > 0.25*res.MedianTTFTMs {
		t.Errorf("TTFT quantiles %v are not in the same time as the median %.1f ms", q, res.MedianTTFTMs)
	}
	// 12 requests at 5/s span 2.2 s of simulated schedule: the server saw
	// them within about 0.22 s of wall time.
	if res.Duration < 2 || wall > 2*time.Second {
		t.Errorf("duration %.2f s simulated, %s wall: the rate was not offered %g times faster", res.Duration, wall, k)
	}
}
