package lab

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// idleHandle is a server that stops at once.
type idleHandle struct{ done chan struct{} }

func (h *idleHandle) BaseURL() string             { return "http://127.0.0.1:1" }
func (h *idleHandle) Ready(context.Context) error { return nil }
func (h *idleHandle) Done() <-chan struct{}       { return h.done }
func (h *idleHandle) LogTail(int) []string        { return nil }
func (h *idleHandle) Failure() *engine.Failure    { return nil }
func (h *idleHandle) Stop(context.Context) error {
	select {
	case <-h.done:
	default:
		close(h.done)
	}
	return nil
}

var _ engine.Handle = (*idleHandle)(nil)

// TestCapacityWaitsEndOnTheEvent: a wait for capacity ends the moment a
// running trial gives its GPUs up (releases them, or parks its server),
// not at the next tick of a poll. In a synctest bubble time is exact: a
// release 1.05 s in ends a wait at 1.05 s; the 200 ms polls this replaced
// ended it at 1.2 s.
func TestCapacityWaitsEndOnTheEvent(t *testing.T) {
	const at = 1050 * time.Millisecond
	for _, tc := range []struct {
		name string
		// wait is the wait under test; giveUp is what the running trial
		// does at `at`.
		wait   func(r *LiveRunner) bool
		giveUp func(r *LiveRunner, ids []int)
	}{
		{"makeRoom: a trial releases its GPUs",
			func(r *LiveRunner) bool { return r.makeRoom(context.Background()) },
			func(r *LiveRunner, ids []int) { r.GPUs.Release(ids) }},
		{"makeRoom: a trial parks its server",
			func(r *LiveRunner) bool { return r.makeRoom(context.Background()) },
			func(r *LiveRunner, ids []int) { r.park(parked(ids)) }},
		{"acquireGPUs: a trial releases its GPUs",
			func(r *LiveRunner) bool {
				ids, err := r.acquireGPUs(context.Background(), 1)
				return err == nil && len(ids) == 1
			},
			func(r *LiveRunner, ids []int) { r.GPUs.Release(ids) }},
		{"acquireGPUs: a trial parks its server",
			func(r *LiveRunner) bool {
				ids, err := r.acquireGPUs(context.Background(), 1)
				return err == nil && len(ids) == 1
			},
			func(r *LiveRunner, ids []int) { r.park(parked(ids)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := &LiveRunner{GPUs: engine.NewAllocator([]int{0})}
				ids, _ := r.GPUs.TryAcquire(1) // a running trial holds the GPU
				go func() {
					time.Sleep(at)
					tc.giveUp(r, ids)
				}()
				start := time.Now()
				if !tc.wait(r) {
					t.Fatal("the wait freed nothing")
				}
				if took := time.Since(start); took != at {
					t.Errorf("the wait ended %v in, want %v (when the trial gave its GPU up)", took, at)
				}
			})
		})
	}
}

// parked is a server a trial just parked, holding ids.
func parked(ids []int) *server {
	return &server{Server: engine.NewServer(&idleHandle{done: make(chan struct{})}, engine.Config{Engine: engine.VLLM, Model: "m"}), key: "k", gpus: ids}
}

// TestMakeRoomWithNothingHeld: with no GPU of the runner's held, there is
// nothing to wait for: an unschedulable server fits nowhere.
func TestMakeRoomWithNothingHeld(t *testing.T) {
	r := &LiveRunner{GPUs: engine.NewAllocator([]int{0, 1})}
	if r.makeRoom(context.Background()) {
		t.Error("makeRoom freed something with nothing held")
	}
}
