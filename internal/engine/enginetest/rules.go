// Package enginetest holds checks every runtime's handles must pass, run
// from each runtime's own tests with its own fakes.
package enginetest

import (
	"context"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// Subject is a handle of a runtime under test that reports to an
// engine.Lifecycle (engine.ReadinessSource). Start returns a fresh,
// started handle whose server keeps running until Stop; the runtime's test
// cleans it up.
type Subject func(t *testing.T) engine.Handle

// FailureRules runs the failure rules of engine.Lifecycle against handles
// of one runtime: each rule on a fresh handle, through the handle's own
// Failure, MarkBenchmarking, LogTail and Stop, so a runtime that kept a
// failure of its own, or a state the lifecycle does not see, fails here.
func FailureRules(t *testing.T, start Subject) {
	lc := func(t *testing.T, h engine.Handle) *engine.Lifecycle {
		t.Helper()
		src, ok := h.(engine.ReadinessSource)
		if !ok {
			t.Fatalf("%T is not an engine.ReadinessSource", h)
		}
		return src.Lifecycle()
	}
	stop := func(t *testing.T, h engine.Handle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := h.Stop(ctx); err != nil {
			t.Fatalf("stop: %v", err)
		}
	}
	exit := engine.Exit{Code: 1, What: "exited (status 1)"}
	for _, tc := range []struct {
		name string
		// do acts on the handle and returns the class its Failure must
		// then have ("" for none).
		do func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass
	}{
		{"the first failure is the cause", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			l.Fail(&engine.Failure{Class: engine.ClassHung, Reason: "first"})
			l.Fail(&engine.Failure{Class: engine.ClassStartupCrash, Reason: "second"})
			l.Exited(exit)
			select {
			case <-l.Failed():
			default:
				t.Error("Failed not closed after a failure")
			}
			return engine.ClassHung
		}},
		{"no failure once Stop has begun", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			stop(t, h)
			if got := l.Fail(&engine.Failure{Class: engine.ClassHung, Reason: "after stop"}); got != nil {
				t.Errorf("Fail after Stop kept %+v", got)
			}
			l.Exited(exit)
			return ""
		}},
		{"a death during a benchmark", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			l.MarkReady()
			engine.MarkBenchmarking(h)
			if s := l.State(); s != engine.StateBenchmarking {
				t.Errorf("state %s after MarkBenchmarking, want benchmarking", s)
			}
			l.Exited(exit)
			return engine.ClassCrashDuringBench
		}},
		{"a death after ready", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			l.MarkReady()
			l.Exited(exit)
			return engine.ClassUnhealthy
		}},
		{"a death before ready", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			l.Exited(exit)
			return engine.ClassStartupCrash
		}},
		{"the engine's own OOM words, even when ready", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			l.Note("torch.OutOfMemoryError: CUDA out of memory.")
			l.MarkReady()
			l.Exited(exit)
			return engine.ClassOOM
		}},
		{"killed for memory, even mid-benchmark", func(t *testing.T, h engine.Handle, l *engine.Lifecycle) engine.FailureClass {
			engine.MarkBenchmarking(h)
			l.Exited(engine.Exit{Code: 137, What: "container exited (status 137)", Killed: "killed for memory (OOMKilled)"})
			return engine.ClassOOM
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t)
			l := lc(t, h)
			want := tc.do(t, h, l)
			f := h.Failure()
			switch {
			case want == "" && f != nil:
				t.Fatalf("failure %+v, want none", f)
			case want == "":
				return
			case f == nil:
				t.Fatalf("no failure, want %s", want)
			case f.Class != want:
				t.Fatalf("class %s (%s), want %s", f.Class, f.Reason, want)
			}
			if f != l.Failure() {
				t.Error("the handle's Failure is not its lifecycle's")
			}
			if len(f.LogTail) == 0 && len(h.LogTail(50)) > 0 {
				t.Errorf("no log tail in the failure; the handle's is %q", h.LogTail(50))
			}
			stop(t, h)
			if h.Failure() != f {
				t.Errorf("Stop changed the failure to %+v", h.Failure())
			}
		})
	}
}
