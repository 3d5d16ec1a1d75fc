package engine

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// idleHandle is a server that stops at once.
type idleHandle struct{ done chan struct{} }

func (h *idleHandle) BaseURL() string             { return "http://127.0.0.1:1" }
func (h *idleHandle) Ready(context.Context) error { return nil }
func (h *idleHandle) Done() <-chan struct{}       { return h.done }
func (h *idleHandle) LogTail(int) []string        { return nil }
func (h *idleHandle) Failure() *Failure           { return nil }
func (h *idleHandle) Stop(context.Context) error {
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	return nil
}

var _ Handle = (*idleHandle)(nil)

// parkedServer is a server a measurement just parked, holding ids.
func parkedServer(ids []int) *Server {
	return &Server{Handle: &idleHandle{done: make(chan struct{})}, Config: Config{Engine: VLLM, Model: "m"}, key: "k", gpus: ids}
}

// TestCapacityWaitsEndOnTheEvent: a wait for capacity ends the moment a
// running measurement gives its GPUs up (releases them, or parks its
// server), not at the next tick of a poll. In a synctest bubble time is
// exact: a release 1.05 s in ends a wait at 1.05 s; the 200 ms polls this
// replaced (lab's makeRoom and acquireGPUs) ended three of these at 1.2 s.
func TestCapacityWaitsEndOnTheEvent(t *testing.T) {
	const at = 1050 * time.Millisecond
	room := func(f *Fleet) bool { return f.makeRoom(context.Background()) }
	acquire := func(f *Fleet) bool {
		ids, err := f.acquireGPUs(context.Background(), 1)
		return err == nil && len(ids) == 1
	}
	release := func(f *Fleet, ids []int) { f.GPUs.Release(ids) }
	park := func(f *Fleet, ids []int) { f.park(parkedServer(ids)) }
	for _, tc := range []struct {
		name string
		// wait is the wait under test; giveUp is what the running
		// measurement does at `at`.
		wait   func(f *Fleet) bool
		giveUp func(f *Fleet, ids []int)
	}{
		{"makeRoom: a measurement releases its GPUs", room, release},
		{"makeRoom: a measurement parks its server", room, park},
		{"acquireGPUs: a measurement releases its GPUs", acquire, release},
		{"acquireGPUs: a measurement parks its server", acquire, park},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &Fleet{GPUs: NewAllocator([]int{0})}
				ids, _ := f.GPUs.TryAcquire(1) // a running measurement holds the GPU
				go func() {
					time.Sleep(at)
					tc.giveUp(f, ids)
				}()
				start := time.Now()
				if !tc.wait(f) {
					t.Fatal("the wait freed nothing")
				}
				if took := time.Since(start); took != at {
					t.Errorf("the wait ended %v in, want %v (when the measurement gave its GPU up)", took, at)
				}
			})
		})
	}
}

// TestMakeRoomWithNothingHeld: with no GPU of the fleet's held, there is
// nothing to wait for: an unschedulable server fits nowhere.
func TestMakeRoomWithNothingHeld(t *testing.T) {
	f := &Fleet{GPUs: NewAllocator([]int{0, 1})}
	if f.makeRoom(context.Background()) {
		t.Error("makeRoom freed something with nothing held")
	}
}

// flakyRuntime starts servers whose first `fail` starts fail with class.
type flakyRuntime struct {
	fail   int
	class  FailureClass
	starts int
}

type flakyHandle struct {
	idleHandle
	err error
}

func (h *flakyHandle) Ready(context.Context) error { return h.err }
func (h *flakyHandle) LogTail(int) []string        { return []string{"engine log"} }

func (r *flakyRuntime) Start(_ context.Context, l Launch) (Handle, error) {
	r.starts++
	h := &flakyHandle{idleHandle: idleHandle{done: make(chan struct{})}}
	if r.starts <= r.fail {
		h.err = &Failure{Class: r.class, Reason: "try " + string(rune('0'+r.starts))}
	}
	return h, nil
}

// TestFleetServe: one call gives a measurement its server: a new one
// (after the capacity waits its failures' class allows), or the failure,
// with the failed server's log and what happened on the way.
func TestFleetServe(t *testing.T) {
	// An engine with no reset endpoint and no salt, caching nothing: kept
	// without a word to the server.
	cfg := Config{Engine: TRTLLM, Version: "1.0.0", Model: "m", PrefixCaching: new(bool)}
	for _, tc := range []struct {
		name   string
		rt     *flakyRuntime
		starts int
		failed FailureClass
		notes  string
	}{
		{"ready at once", &flakyRuntime{}, 1, "", ""},
		{"gpu busy once, then ready", &flakyRuntime{fail: 1, class: ClassGPUBusy}, 2, "", "GPU not yet free at start (try 1); started again"},
		{"gpu busy throughout", &flakyRuntime{fail: 100, class: ClassGPUBusy}, 4, ClassGPUBusy,
			"GPU not yet free at start (try 1); started again; GPU not yet free at start (try 2); started again; GPU not yet free at start (try 3); started again"},
		{"an oom is not waited on", &flakyRuntime{fail: 1, class: ClassOOM}, 1, ClassOOM, ""},
		// Nothing of the fleet's holds a GPU: an unplaced server fits
		// nowhere, at once.
		{"unschedulable with nothing held", &flakyRuntime{fail: 1, class: ClassUnschedulable}, 1, ClassUnschedulable, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Fleet{Runtime: tc.rt, GPUs: NewAllocator([]int{0}), GPUBusyWait: time.Millisecond}
			defer f.Close()
			got, err := f.Serve(context.Background(), Want{Config: cfg, Key: "k", GPUs: 1})
			if err != nil {
				t.Fatal(err)
			}
			if tc.rt.starts != tc.starts || got.Notes != tc.notes || !got.EngineStart {
				t.Errorf("%d starts, notes %q, engine start %v; want %d, %q", tc.rt.starts, got.Notes, got.EngineStart, tc.starts, tc.notes)
			}
			if tc.failed == "" {
				if got.Failure != nil || got.Server == nil || got.Cache != ReuseFresh {
					t.Fatalf("served %+v", got)
				}
				f.Release(got.Server, true)
				again, _ := f.Serve(context.Background(), Want{Config: cfg, Key: "k", GPUs: 1})
				if !again.Reused || again.Server != got.Server || again.Cache != ReuseOff || again.EngineStart {
					t.Errorf("second measurement %+v, want the first's server reused", again)
				}
				f.Release(again.Server, false)
				if f.GPUs.Free() != 1 {
					t.Error("a released server kept its GPU")
				}
				return
			}
			if got.Failure == nil || got.Failure.Class != tc.failed || got.Server != nil || len(got.LogTail) != 1 {
				t.Fatalf("served %+v, want a %s failure with the server's log", got, tc.failed)
			}
			if f.GPUs.Free() != 1 {
				t.Error("a failed server kept its GPU")
			}
		})
	}
}
