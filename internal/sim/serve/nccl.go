package serve

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// ShmEnv names the variable of the simulated engine's environment that
// sets the bytes free in the /dev/shm its NCCL sees (unset: enough). A
// container's default /dev/shm (64 MiB) is what a multi-GPU server without
// --ipc=host or a memory-backed volume gets.
const ShmEnv = "PERFLAB_SIM_SHM_BYTES"

// ncclVersion is the NCCL the pinned images' PyTorch ships (vLLM 0.11's
// logs: "vLLM is using nccl==2.27.3").
const ncclVersion = "2.27.3"

// ncclShmSegment is one NCCL shared-memory segment as NCCL 2.27 sizes it
// for the SHM transport (the figure in its "failed to extend" warnings:
// src/transport/shm.cc, src/misc/shmutils.cc at v2.27.3-1 72d24320).
const ncclShmSegment = 9637892

// ncclShmNeed is what the simulated NCCL asks of /dev/shm: a segment per
// pair of ranks (a simplification: which transport NCCL picks, P2P or
// SHM, depends on the topology, which the simulator does not model).
func ncclShmNeed(tp int) int64 { return int64(tp) * int64(tp-1) * ncclShmSegment }

// shmFree is the /dev/shm the env says the server has, or -1 (enough).
func shmFree(env map[string]string) (int64, error) {
	v, ok := env[ShmEnv]
	if !ok || v == "" {
		return -1, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("serve: %s=%q: want a byte count", ShmEnv, v)
	}
	return n, nil
}

// distributed prints the tensor-parallel start-up of TP > 1 ranks in the
// engine's words, and NCCL's failure when /dev/shm cannot hold its
// segments (shm free bytes, -1 for enough). It returns the failure's last
// line ("" when it started). The words:
//   - vLLM: "Found nccl from library libnccl.so.2" and "vLLM is using
//     nccl==X" (vllm/distributed/device_communicators/pynccl.py), "rank R
//     in world size W is assigned as DP rank 0, PP rank 0, TP rank R"
//     (vllm/distributed/parallel_state.py), each from a worker,
//     "(Worker_TP<R> pid=N)";
//   - SGLang: "Init torch distributed begin." / "Init torch distributed
//     ends. mem usage=X GB" (python/sglang/srt/model_executor/
//     model_runner.py, ModelRunner.init_torch_distributed), "TP<R>" in
//     the time stamp;
//   - the failure: PyTorch's DistBackendError with NCCL's error string
//     ("unhandled system error (run with NCCL_DEBUG=INFO for details)",
//     NCCL src/init.cc ncclGetErrorString) and its last warning ("Error:
//     failed to extend %s to %ld bytes, error: %s (%d)", src/misc/
//     shmutils.cc), both at v2.27.3-1 (72d24320);
//   - TensorRT-LLM prints none of these at the default log level.
func (l *startupLog) distributed(shm int64) string {
	tp := max(l.p.TP, 1)
	if tp < 2 || !l.style.tpStartup() {
		return ""
	}
	now := time.Now()
	fail := shm >= 0 && shm < ncclShmNeed(tp)
	for r := 0; r < tp; r++ {
		l.style.rankBegin(l, now, r)
	}
	if fail {
		last := fmt.Sprintf("Error: failed to extend /dev/shm/nccl-%06d to %d bytes, error: No space left on device (28)", os.Getpid()%1000000, ncclShmSegment)
		pre := l.style.ncclFailBegin(l, now)
		fmt.Fprintf(l.w, "%storch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version %s\n", pre, ncclVersion)
		fmt.Fprintf(l.w, "%sncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n", pre)
		fmt.Fprintf(l.w, "%sLast error:\n%s%s\n", pre, pre, last)
		l.style.ncclFailEnd(l)
		return last
	}
	for r := 0; r < tp; r++ {
		l.style.rankEnd(l, now, r, tp)
	}
	return ""
}
