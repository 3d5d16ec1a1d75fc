package engine

import (
	"context"
	"math"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/bench"
	"github.com/perflab/perflab/internal/bench/benchtest"
	"github.com/perflab/perflab/internal/dataset"
)

// benchRuntime starts servers at one address; each fails during the
// benchmark with failAs when it is set.
type benchRuntime struct {
	url    string
	failAs FailureClass
	starts int
}

type benchHandle struct {
	idleHandle
	url    string
	failAs FailureClass
}

func (h *benchHandle) BaseURL() string      { return h.url }
func (h *benchHandle) LogTail(int) []string { return []string{"engine log"} }
func (h *benchHandle) Failure() *Failure {
	if h.failAs == "" {
		return nil
	}
	return &Failure{Class: h.failAs, Reason: "died"}
}

func (r *benchRuntime) Start(context.Context, Launch) (Handle, error) {
	r.starts++
	return &benchHandle{idleHandle: idleHandle{done: make(chan struct{})}, url: r.url, failAs: r.failAs}, nil
}

// TestFleetBench: one call takes a measurement through the engine: the
// command rendered, a server, the benchmark against it, the server's log
// after it, and the server kept for its config after a clean measurement
// (the next one reuses it) or stopped after a failure, the figures
// measured before it kept; a config that does not render starts nothing.
func TestFleetBench(t *testing.T) {
	hs := httptest.NewServer(benchtest.New(func(int, map[string]any) benchtest.Plan { return benchtest.Plan{Chunks: 2} }))
	defer hs.Close()
	cfg := Config{Engine: TRTLLM, Version: "1.0.0", Model: "m", PrefixCaching: new(bool)}
	b := bench.Config{Backend: "openai-chat", Endpoint: "/v1/chat/completions", Model: "m", RequestRate: math.Inf(1),
		Requests: []dataset.Request{{Prompt: "a", PromptLen: 1, OutputLen: 2}, {Prompt: "b", PromptLen: 1, OutputLen: 2}}}

	rt := &benchRuntime{url: hs.URL}
	f := &Fleet{Runtime: rt, GPUs: NewAllocator([]int{0})}
	defer f.Close()
	got, err := f.Bench(context.Background(), Want{Config: cfg, Key: "k", GPUs: 1}, b, "trial-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Failure != nil || got.Outcome == nil || len(got.Outcome.Records) != 2 || !got.EngineStart || got.Tail != "engine log" ||
		!strings.Contains(got.Command, "trtllm-serve") || got.Notes != "GPUs 0" {
		t.Fatalf("first measurement: %+v", got)
	}
	if f.GPUs.Free() != 0 {
		t.Error("a clean measurement's server was not kept for its config")
	}
	again, err := f.Bench(context.Background(), Want{Config: cfg, Key: "k", GPUs: 1}, b, "trial-2")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Reused || again.EngineStart || rt.starts != 1 ||
		again.Notes != "GPUs 0; on the server already up for this config (measurement 2)" {
		t.Errorf("second measurement: %+v, %d starts; want the first's server", again, rt.starts)
	}

	dying := &benchRuntime{url: hs.URL, failAs: ClassOOM}
	g := &Fleet{Runtime: dying, GPUs: NewAllocator([]int{0})}
	defer g.Close()
	got, err = g.Bench(context.Background(), Want{Config: cfg, Key: "k", GPUs: 1}, b, "trial-1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Failure == nil || got.Failure.Class != ClassOOM || got.Outcome == nil || len(got.Outcome.Records) != 2 || got.Tail != "engine log" {
		t.Errorf("a server that died during the benchmark: %+v", got)
	}
	if g.GPUs.Free() != 1 {
		t.Error("a failed measurement's server kept its GPU")
	}

	none := &benchRuntime{url: hs.URL}
	h := &Fleet{Runtime: none}
	got, err = h.Bench(context.Background(), Want{Config: Config{Engine: "tgi", Model: "m"}, Key: "x"}, b, "trial-1")
	if err != nil || got.Failure == nil || got.Failure.Class != ClassInvalidConfig || got.Command != "" || none.starts != 0 {
		t.Errorf("a config that does not render: %+v, %v, %d starts", got, err, none.starts)
	}
}
