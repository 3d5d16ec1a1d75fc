package lab

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// gateRuntime is a fake engine.Runtime: every server it starts stays
// "starting" until the test opens its gate, then fails readiness (so the
// trial ends without a benchmark). It logs starts and stops in order.
type gateRuntime struct {
	mu     sync.Mutex
	events []string
	gpus   map[string][]int // by model
	gates  map[string]chan struct{}
	start  chan string // model of each started server
}

var _ engine.Runtime = (*gateRuntime)(nil)

func newGateRuntime() *gateRuntime {
	return &gateRuntime{gpus: map[string][]int{}, gates: map[string]chan struct{}{}, start: make(chan string, 16)}
}

func (g *gateRuntime) gate(model string) chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.gates[model]
	if !ok {
		c = make(chan struct{})
		g.gates[model] = c
	}
	return c
}

func (g *gateRuntime) log(e string) {
	g.mu.Lock()
	g.events = append(g.events, e)
	g.mu.Unlock()
}

func (g *gateRuntime) Start(_ context.Context, l engine.Launch) (engine.Handle, error) {
	m := l.Config.Model
	g.mu.Lock()
	g.gpus[m] = slices.Clone(l.GPUs)
	g.mu.Unlock()
	g.log("start " + m)
	h := &gateHandle{rt: g, model: m, gate: g.gate(m), done: make(chan struct{})}
	g.start <- m
	return h, nil
}

type gateHandle struct {
	rt    *gateRuntime
	model string
	gate  chan struct{}
	once  sync.Once
	done  chan struct{}
}

var _ engine.Handle = (*gateHandle)(nil)

func (h *gateHandle) BaseURL() string { return "http://127.0.0.1:1" }
func (h *gateHandle) Ready(ctx context.Context) error {
	select {
	case <-h.gate:
		return &engine.Failure{Class: engine.ClassStartupCrash, Reason: "fake engine exits"}
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (h *gateHandle) Done() <-chan struct{}    { return h.done }
func (h *gateHandle) LogTail(int) []string     { return []string{"fake"} }
func (h *gateHandle) Failure() *engine.Failure { return nil }
func (h *gateHandle) MarkBenchmarking()        {}
func (h *gateHandle) Pid() int                 { return 0 }
func (h *gateHandle) Stop(context.Context) error {
	h.once.Do(func() {
		close(h.done)
		h.rt.log("stop " + h.model)
	})
	return nil
}

func oneRequest(labspec.Workload) ([]dataset.Request, error) {
	return []dataset.Request{{Prompt: "hi", PromptLen: 1, OutputLen: 1}}, nil
}

func gateTrial(model string, tp int) TrialSpec {
	return TrialSpec{Key: "t/" + model, Name: model, Workload: labspec.Workload{Name: "w"},
		Config: engine.Config{Engine: "vllm", Version: "0.11.0", Model: model, TensorParallel: tp}}
}

// TestLiveRunnerGPUAssignment: on two GPUs a 1-GPU trial gets one device,
// a 2-GPU trial waits until both are free (the first server is stopped
// before the second starts), a trial wider than the node fails as an
// invalid config, and a canceled wait leaks nothing.
func TestLiveRunnerGPUAssignment(t *testing.T) {
	rt := newGateRuntime()
	alloc := engine.NewAllocator([]int{0, 1})
	r := &LiveRunner{Runtime: rt, Requests: oneRequest, GPUs: alloc}
	ctx := context.Background()

	type out struct {
		rec store.Trial
		err error
	}
	run := func(t TrialSpec) chan out {
		c := make(chan out, 1)
		go func() {
			rec, err := runTrial(ctx, r, t)
			c <- out{rec, err}
		}()
		return c
	}
	waitStart := func(want string) {
		t.Helper()
		select {
		case m := <-rt.start:
			if m != want {
				t.Fatalf("started %s, want %s", m, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not start", want)
		}
	}

	a := run(gateTrial("one", 1))
	waitStart("one")
	if got := rt.gpus["one"]; !slices.Equal(got, []int{0}) {
		t.Fatalf("1-GPU trial got GPUs %v, want [0]", got)
	}
	b := run(gateTrial("two", 2))
	select {
	case m := <-rt.start:
		t.Fatalf("%s started while GPU 0 is still held", m)
	case <-time.After(200 * time.Millisecond):
	}
	if f := alloc.Free(); f != 1 {
		t.Fatalf("free GPUs while the 2-GPU trial waits = %d, want 1 (it must not hold one)", f)
	}
	close(rt.gate("one"))
	ra := <-a
	if ra.err != nil || ra.rec.Status != "failed" || ra.rec.FailureClass != FailStartupCrash {
		t.Fatalf("trial one: %+v %v, want failed startup_crash", ra.rec.Status, ra.err)
	}
	waitStart("two")
	if got := rt.gpus["two"]; !slices.Equal(got, []int{0, 1}) {
		t.Fatalf("2-GPU trial got GPUs %v, want [0 1]", got)
	}
	rt.mu.Lock()
	ev := slices.Clone(rt.events)
	rt.mu.Unlock()
	if want := []string{"start one", "stop one", "start two"}; !slices.Equal(ev, want) {
		t.Fatalf("events %v, want %v", ev, want)
	}

	// While "two" holds both GPUs, a canceled waiter returns the context's
	// error and takes nothing.
	cctx, cancel := context.WithCancel(ctx)
	c := make(chan error, 1)
	go func() {
		_, err := r.Run(cctx, gateTrial("three", 1))
		c <- err
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	if err := <-c; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled trial: err %v, want context.Canceled", err)
	}
	close(rt.gate("two"))
	if rb := <-b; rb.err != nil || rb.rec.Status != "failed" {
		t.Fatalf("trial two: %+v %v", rb.rec.Status, rb.err)
	}
	if f := alloc.Free(); f != 2 {
		t.Fatalf("free GPUs after every trial = %d, want 2", f)
	}

	// Wider than the node: failed at once, no server started.
	rec, err := runTrial(ctx, r, gateTrial("four", 4))
	if err != nil || rec.Status != "failed" || rec.FailureClass != FailInvalidConfig {
		t.Fatalf("4-GPU trial on 2 GPUs: %s/%s %v, want failed invalid_config", rec.Status, rec.FailureClass, err)
	}
	select {
	case m := <-rt.start:
		t.Fatalf("%s started", m)
	default:
	}
}
