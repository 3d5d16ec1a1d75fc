package sim

import (
	"errors"
	"fmt"

	"github.com/perflab/perflab/internal/engine"
)

// ErrCrashed is the Event error of every request the engine held when it
// crashed, and of every request sent after.
var ErrCrashed = errors.New("sim: engine crashed")

// A knownFault is an engine bug documented upstream that kills the engine
// under load. The simulator reproduces it so that a search does not
// recommend a configuration the real engine cannot serve; Params.NoFaults
// turns them off.
type knownFault struct {
	// Issue is the upstream report.
	Issue string
	// Engine is the engine (Params.Engine) that has the bug.
	Engine string
	// Applies tells whether the fault can hit this deployment.
	Applies func(p Params, a Arch) bool
	// MinRunning is the batch size that exposes it, and After the engine
	// time spent at or above it before the crash.
	MinRunning int
	After      float64
	// Log is the engine's last log line.
	Log string
}

// knownFaults lists the reproduced bugs.
var knownFaults = []knownFault{{
	// MTP on the Gated-DeltaNet hybrids (Qwen3.5) hits an illegal memory
	// access under high concurrency: reported for Qwen3.5 with torch 2.10
	// and flashinfer 0.6.4 (vLLM's 0.17 line) and still open there; a fix
	// for a race in the MTP draft loop was proposed against 0.20.1/0.20.2
	// (vllm-project/vllm PR 42603), so versions up to 0.20.2 are treated
	// as affected. The Qwen3.5-9B report's MTP run died after 12 s at 512
	// concurrent requests with 514 of 1,000 done; the onset time and the
	// batch size are read from that one run (on the shared ShareGPT sample
	// the simulated run stops after 11 s with 535 done), so treat them as
	// an order of magnitude.
	Issue:  "vllm-project/vllm#36613",
	Engine: engine.VLLM,
	Applies: func(p Params, a Arch) bool {
		return p.SpecMethod == "mtp" && p.SpecTokens > 0 && a.Hybrid() &&
			engine.VersionAtLeast(p.Version, "0.16.0") && !engine.VersionAtLeast(p.Version, "0.20.3")
	},
	MinRunning: 256,
	After:      5,
	Log:        "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
}}

// faultFor is the known fault that can hit p, or nil.
func faultFor(p Params, a Arch) *knownFault {
	if p.NoFaults {
		return nil
	}
	for i := range knownFaults {
		if knownFaults[i].Engine == p.Engine && knownFaults[i].Applies(p, a) {
			return &knownFaults[i]
		}
	}
	return nil
}

// exposeFault accounts a step of d seconds against the fault and crashes
// the engine at t when its time is up.
func (e *Engine) exposeFault(running int, d, t float64) {
	if e.fault == nil || e.crashed != nil || running < e.fault.MinRunning {
		return
	}
	e.faultTime += d
	if e.faultTime < e.fault.After {
		return
	}
	e.crash(t, fmt.Errorf("%w: %s (known engine bug %s, with %d requests running)", ErrCrashed, e.fault.Log, e.fault.Issue, running))
}

// crash fails every request the engine holds at t; later submissions fail
// on arrival.
func (e *Engine) crash(t float64, err error) {
	e.crashed = err
	for _, s := range e.running {
		if !s.done {
			s.done = true
			e.emit(s, t, 0, true, err)
		}
	}
	for _, s := range e.waiting {
		s.done = true
		e.emit(s, t, 0, true, err)
	}
	clear(e.running)
	clear(e.waiting)
	clear(e.inbox)
	e.inbox = e.inbox[:0]
	e.running, e.waiting = e.running[:0], e.waiting[:0]
	e.inflight = nil
	e.stats.Running, e.stats.Waiting = 0, 0
}

// Crashed returns the error the engine crashed with, or nil.
func (e *Engine) Crashed() error { return e.crashed }
