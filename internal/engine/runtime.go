package engine

// Runtimes. A Runtime starts a rendered command somewhere and hands back a
// Handle that knows when the server is ready, why it died, and how to tear it
// down. Process (a local process group) and Sim (`perflab sim serve` as a
// local process) are implemented here; the container runtime lives in
// engine/docker, behind the same interface, and a cluster runtime would sit
// beside it. Nothing in Launch or Handle assumes a local process: a process
// id (PIDer), the benchmark marker (Benchmarker) and the removal of a killed
// perflab's leftovers (Sweeper) are optional capabilities.

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Runtime starts engine servers.
type Runtime interface {
	// Start launches the server and returns at once; call Handle.Ready to
	// wait for it. The ctx bounds the start itself, not the server's life.
	Start(ctx context.Context, l Launch) (Handle, error)
}

// Launch is everything a runtime needs to start one server.
type Launch struct {
	// Config is the engine config; it names the model /v1/models must list.
	Config Config
	// Command is Render(Config) without host and port (the runtime picks
	// them). If Argv is empty the runtime renders Config itself.
	Command Command
	// GPUs are the device indices assigned to this server; they become
	// CUDA_VISIBLE_DEVICES. Nil leaves the variable as inherited.
	GPUs []int
	// WorkDir is the server's working directory, where Command.Files are
	// written. Empty means a fresh temporary directory, removed when the
	// server has exited unless KeepWorkDir is set.
	WorkDir     string
	KeepWorkDir bool
	// LogPath receives stdout and stderr. Empty means WorkDir/engine.log.
	LogPath string
	// Host to bind; empty means 127.0.0.1. Port 0 means a free port.
	Host string
	Port int
	// ReadyTimeout caps the whole wait for readiness (0 = no cap beyond the
	// stall timeout). StallTimeout is how long the log may stay silent
	// before the server counts as hung; log output resets it (0 = 5 min).
	ReadyTimeout, StallTimeout time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL
	// (0 = 10 s).
	StopGrace time.Duration
	// Labels name what the server is for (LabelTrial: the trial that
	// started it). A runtime whose servers outlive perflab (containers,
	// pods) tags them with these, so a leftover can be found and told
	// apart; a local process, which the reaper ends with perflab, ignores
	// them.
	Labels map[string]string
}

// Label keys perflab tags the servers it starts with, where a runtime can
// (containers, pods): one filter then finds every one of them, or a run's.
const (
	// LabelManaged is "true" on everything perflab starts.
	LabelManaged = "perflab.managed"
	// LabelConfig is a hash of the rendered command; LabelEngine,
	// LabelVersion and LabelModel say what the server runs.
	LabelConfig  = "perflab.config"
	LabelEngine  = "perflab.engine"
	LabelVersion = "perflab.engine-version"
	LabelModel   = "perflab.model"
	// LabelRun is the run key of the lab that started the server.
	LabelRun = "perflab.run"
	// LabelTrial is the key of the trial that started it (a reused server
	// serves later trials of its config too).
	LabelTrial = "perflab.trial"
)

// Sweeper is a Runtime whose servers can outlive a perflab killed with -9
// (a container keeps running without its client): Sweep removes the
// servers of this runtime's run that are still there, before a lab that
// holds the run starts its own, and returns their names.
type Sweeper interface {
	Sweep(ctx context.Context) ([]string, error)
}

// Handle is one started server.
type Handle interface {
	// BaseURL is http://host:port of the OpenAI-compatible server.
	BaseURL() string
	// Ready blocks until /health answers 200 and /v1/models lists the
	// model, the process exits (at once: startup_crash or oom), the log
	// stalls (hung) or the timeout passes. On failure it returns a *Failure.
	Ready(ctx context.Context) error
	// Done is closed when the server process has exited.
	Done() <-chan struct{}
	// LogTail returns up to the last n lines of output.
	LogTail(n int) []string
	// Stop tears the server down: SIGTERM, then SIGKILL, to the whole
	// process group. It is idempotent and safe to call at any time.
	Stop(ctx context.Context) error
	// Failure says why the server failed, or nil if it did not (a server
	// stopped by Stop has not failed).
	Failure() *Failure
}

// What only some runtimes' handles have, as optional capabilities rather
// than methods every runtime must stub (a container or a pod has no local
// process id).

// Benchmarker is a Handle that can tell a death during a benchmark from
// one outside it (crash_during_bench against unhealthy).
type Benchmarker interface {
	// MarkBenchmarking records that a benchmark is running against the
	// server, so that a death from now on is a crash_during_bench.
	MarkBenchmarking()
}

// PIDer is a Handle backed by a local process group.
type PIDer interface {
	// Pid is the server's process group id.
	Pid() int
}

// Placer is a Handle that can say where its server runs and how perflab
// reaches it (a pod's node and address, by port-forward or by pod IP), for
// the trial's record.
type Placer interface {
	Where() string
}

// WhereOf is h's Where, or "" for a handle that cannot say.
func WhereOf(h Handle) string {
	if p, ok := h.(Placer); ok {
		return p.Where()
	}
	return ""
}

// MarkBenchmarking tells h that a benchmark starts, if h can hear it.
func MarkBenchmarking(h Handle) {
	if b, ok := h.(Benchmarker); ok {
		b.MarkBenchmarking()
	}
}

// PidOf is h's process group id, or 0 for a server without a local
// process.
func PidOf(h Handle) int {
	if p, ok := h.(PIDer); ok {
		return p.Pid()
	}
	return 0
}

// FailureClass names why a server failed.
type FailureClass string

// Failure classes.
const (
	// ClassStartupCrash: the process exited before it was ready.
	ClassStartupCrash FailureClass = "startup_crash"
	// ClassOOM: it ran out of GPU memory at load, by the engine's own words.
	ClassOOM FailureClass = "oom"
	// ClassGPUBusy: the server refused to start because its GPU was not
	// yet free: vLLM's start-up memory guard, which compares the free
	// memory with gpu_memory_utilization × total before loading anything
	// (e.g. while the previous server still releases its memory). Unlike
	// an OOM, the config may well fit once the GPU is free: a wait and a
	// second start may cure it.
	ClassGPUBusy FailureClass = "gpu_busy"
	// ClassHung: no progress before the timeout.
	ClassHung FailureClass = "hung"
	// ClassCrashDuringBench: the server died while a benchmark ran.
	ClassCrashDuringBench FailureClass = "crash_during_bench"
	// ClassUnhealthy: it answers HTTP but is not healthy, or died after
	// being ready outside a benchmark.
	ClassUnhealthy FailureClass = "unhealthy"
	// ClassLowSuccess: the server stayed up but too few requests of the
	// benchmark succeeded.
	ClassLowSuccess FailureClass = "low_success"
	// ClassInvalidConfig: the config cannot be rendered or launched as
	// written (no process was started).
	ClassInvalidConfig FailureClass = "invalid_config"
	// ClassImageUnavailable: the container image is missing and could not
	// be pulled (refused, unknown, no registry); no server was started.
	ClassImageUnavailable FailureClass = "image_unavailable"
	// ClassUnschedulable: the cluster's scheduler cannot place the server
	// (no node has the GPUs, or the other resources, the node selector,
	// the tolerations it asks for); the reason carries its message.
	ClassUnschedulable FailureClass = "unschedulable"
)

// Transient says whether a failure of this class may not happen again on
// a second try (a crash mid-benchmark, a hang, a server that went
// unhealthy), as opposed to one the config itself causes every time.
func (c FailureClass) Transient() bool {
	switch c {
	case ClassCrashDuringBench, ClassHung, ClassUnhealthy, ClassGPUBusy:
		return true
	}
	return false
}

// Failure records a failed server: its class, a one-line reason and the
// tail of its log. It is an error.
type Failure struct {
	Class    FailureClass `json:"class"`
	Reason   string       `json:"reason"`
	LogTail  []string     `json:"log_tail,omitempty"`
	ExitCode int          `json:"exit_code,omitempty"`
}

func (f *Failure) Error() string {
	return fmt.Sprintf("engine: %s: %s", f.Class, f.Reason)
}

// oomMarkers are the engines' own out-of-memory messages, lower-cased:
// PyTorch/CUDA, vLLM's KV-cache checks, SGLang's memory-pool check and
// TensorRT-LLM's allocator errors.
var oomMarkers = []string{
	"cuda out of memory",
	"outofmemoryerror",
	"out of memory",
	"no available memory for the cache blocks",
	"larger than the available kv cache memory",
	"not enough memory. please try to increase --mem-fraction-static",
	"cudaerrormemoryallocation",
	"cuda_error_out_of_memory",
	"insufficient gpu memory",
}

// OOMLine returns the first log line that reports an out-of-memory error in
// an engine's own words, or "": the rule every runtime classifies by.
func OOMLine(lines []string) string {
	for _, l := range lines {
		low := strings.ToLower(l)
		for _, m := range oomMarkers {
			if strings.Contains(low, m) {
				return strings.TrimSpace(l)
			}
		}
	}
	return ""
}

// gpuBusyMarkers are the engines' own words for a GPU that is not free
// enough to start on, lower-cased. vLLM's guard, in
// vllm/v1/worker/gpu_worker.py (Worker.init_device) at v0.11.0 and
// v0.17.1: "Free memory on device (X/Y GiB) on startup is less than
// desired GPU memory utilization (U, Z GiB). Decrease GPU memory
// utilization or reduce GPU memory used by other processes." SGLang's,
// with tensor parallelism, in python/sglang/srt/model_executor/
// model_runner.py (ModelRunner.init_torch_distributed; a ValueError at
// 0.5.5, a RuntimeError later, read at 0005834c): "The memory capacity is
// unbalanced. Some GPUs may be occupied by other processes." Only the
// raised error counts ("…Error: " before it): where
// SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK is off the same words are a
// warning, and the server goes on.
var gpuBusyMarkers = []string{
	"on startup is less than desired gpu memory utilization",
	"error: the memory capacity is unbalanced. some gpus may be occupied by other processes",
}

// GPUBusyLine returns the first log line in which the engine refuses to
// start because its GPU is not yet free (ClassGPUBusy), or "". Runtimes
// check it before OOMLine: the guard fires before anything is allocated.
func GPUBusyLine(lines []string) string {
	for _, l := range lines {
		low := strings.ToLower(l)
		for _, m := range gpuBusyMarkers {
			if strings.Contains(low, m) {
				return strings.TrimSpace(l)
			}
		}
	}
	return ""
}

// LastLine is the last non-blank line, shortened, for one-line reasons.
func LastLine(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			if len(s) > 300 {
				s = s[:300] + "…"
			}
			return s
		}
	}
	return ""
}
