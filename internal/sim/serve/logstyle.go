package serve

import (
	"fmt"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// logStyle is how one imitated engine's start-up log reads: its logger's
// line format and the lines it prints at each stage, in its own words
// (the sources are cited where startupLog's stages are). Each engine's
// style is registered with its face (protocol.go); startupLog asks it
// instead of switching on the engine's name.
type logStyle interface {
	// line prints one line of the engine's logger at now.
	line(l *startupLog, now time.Time, level, src, msg string)
	// begin prints the version banner (version resolved).
	begin(l *startupLog, version string)
	// loadBegin prints the start of weight loading.
	loadBegin(l *startupLog)
	// downloadBegin and downloadEnd frame a cold-cache download of
	// model time took.
	downloadBegin(l *startupLog)
	downloadEnd(l *startupLog, took time.Duration)
	// loaded prints the loaded model and the KV cache's size.
	loaded(l *startupLog, p sim.Params, kvTokens int)
	// serving prints the listening server's lines, uvicorn's
	// (l.uvicorn) among them.
	serving(l *startupLog, addr string)
	// oom prints the out-of-memory failure; detail is PyTorch's text.
	oom(l *startupLog, detail string)
	// tpStartup reports whether the engine logs its tensor-parallel
	// start-up at the default level, and so whether the simulator
	// imitates it and NCCL's /dev/shm failure (distributed).
	tpStartup() bool
	// rankBegin and rankEnd print rank r's start and end of the
	// distributed init (tp ranks).
	rankBegin(l *startupLog, now time.Time, r int)
	rankEnd(l *startupLog, now time.Time, r, tp int)
	// ncclFailBegin prints the engine's first line of NCCL's failure and
	// returns the prefix of the lines after it; ncclFailEnd its last.
	ncclFailBegin(l *startupLog, now time.Time) string
	ncclFailEnd(l *startupLog)
}

var (
	_ logStyle = vllmLog{}
	_ logStyle = sglangLog{}
	_ logStyle = trtllmLog{}
)

// vllmLog is vLLM's: its logger's format behind the API server's
// "(APIServer pid=N)" prefix, workers under "(Worker_TP<R> pid=N)".
type vllmLog struct{}

func (vllmLog) line(l *startupLog, now time.Time, level, src, msg string) {
	fmt.Fprintf(l.w, "(APIServer pid=%d) %s %s [%s] %s\n", l.pid, level, now.Format("01-02 15:04:05"), src, msg)
}

func (vllmLog) begin(l *startupLog, v string) {
	l.line("INFO", "api_server.py:1839", fmt.Sprintf("vLLM API server version %s (perflab sim on %s)", v, l.p.GPU))
	l.line("INFO", "utils.py:233", fmt.Sprintf("non-default args: {'model_tag': '%s'}", l.p.Model))
}

func (vllmLog) loadBegin(l *startupLog) {
	l.line("INFO", "gpu_model_runner.py:2602", "Starting to load model "+l.p.Model+"...")
}

func (vllmLog) downloadBegin(l *startupLog) {
	l.line("INFO", "weight_utils.py:392", "Using model weights format ['*.safetensors']")
}

func (vllmLog) downloadEnd(l *startupLog, took time.Duration) {
	l.line("INFO", "weight_utils.py:413", fmt.Sprintf("Time spent downloading weights for %s: %.6f seconds", l.p.Model, took.Seconds()))
}

func (vllmLog) loaded(l *startupLog, p sim.Params, kvTokens int) {
	l.line("INFO", "kv_cache_utils.py:1087", fmt.Sprintf("GPU KV cache size: %s tokens", commas(kvTokens)))
	if p.MaxModelLen > 0 {
		l.line("INFO", "kv_cache_utils.py:1091", fmt.Sprintf("Maximum concurrency for %s tokens per request: %.2fx", commas(p.MaxModelLen), float64(kvTokens)/float64(p.MaxModelLen)))
	}
}

func (vllmLog) serving(l *startupLog, addr string) {
	l.line("INFO", "api_server.py:1910", "Starting vLLM API server 0 on http://"+addr)
	l.uvicorn(addr)
}

func (vllmLog) oom(l *startupLog, detail string) {
	fmt.Fprintf(l.w, "torch.OutOfMemoryError: CUDA out of memory. %s\n", detail)
	fmt.Fprintf(l.w, "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}\n")
}

func (vllmLog) tpStartup() bool { return true }

func (vllmLog) rankBegin(l *startupLog, now time.Time, r int) {
	pre := fmt.Sprintf("(Worker_TP%d pid=%d) INFO %s", r, l.pid+1+r, now.Format("01-02 15:04:05"))
	fmt.Fprintf(l.w, "%s [__init__.py:1433] Found nccl from library libnccl.so.2\n", pre)
	fmt.Fprintf(l.w, "%s [pynccl.py:70] vLLM is using nccl==%s\n", pre, ncclVersion)
}

func (vllmLog) rankEnd(l *startupLog, now time.Time, r, tp int) {
	fmt.Fprintf(l.w, "(Worker_TP%d pid=%d) INFO %s [parallel_state.py:1165] rank %d in world size %d is assigned as DP rank 0, PP rank 0, TP rank %d, EP rank %d\n",
		r, l.pid+1+r, now.Format("01-02 15:04:05"), r, tp, r, r)
}

func (vllmLog) ncclFailBegin(l *startupLog, now time.Time) string {
	pre := fmt.Sprintf("(Worker_TP1 pid=%d) ", l.pid+2)
	fmt.Fprintf(l.w, "%sERROR %s [multiproc_executor.py:597] WorkerProc failed to start.\n", pre, now.Format("01-02 15:04:05"))
	return pre
}

func (vllmLog) ncclFailEnd(l *startupLog) {
	l.fatal("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}")
}

// sglangLog is SGLang's: "[time] msg", "TP<R>" in a rank's time stamp.
type sglangLog struct{}

func (sglangLog) line(l *startupLog, now time.Time, level, src, msg string) {
	fmt.Fprintf(l.w, "[%s] %s\n", now.Format("2006-01-02 15:04:05"), msg)
}

func (sglangLog) begin(l *startupLog, v string) {
	l.line("INFO", "", fmt.Sprintf("server_args=ServerArgs(model_path='%s', tp_size=%d, ...) (perflab sim, SGLang %s on %s)", l.p.Model, max(l.p.TP, 1), v, l.p.GPU))
}

func (sglangLog) loadBegin(l *startupLog) { l.line("INFO", "", "Load weight begin.") }

func (sglangLog) downloadBegin(*startupLog) {}

func (sglangLog) downloadEnd(*startupLog, time.Duration) {}

func (sglangLog) loaded(l *startupLog, p sim.Params, kvTokens int) {
	l.line("INFO", "", fmt.Sprintf("Load weight end. type=%s, dtype=torch.bfloat16", p.Model))
	l.line("INFO", "", fmt.Sprintf("KV Cache is allocated. #tokens: %d", kvTokens))
	l.line("INFO", "", fmt.Sprintf("max_total_num_tokens=%d, chunked_prefill_size=%d, max_running_requests=%d, context_len=%d", kvTokens, p.MaxNumBatchedTokens, p.MaxNumSeqs, p.MaxModelLen))
}

func (sglangLog) serving(l *startupLog, addr string) {
	l.uvicorn(addr)
	l.line("INFO", "", "The server is fired up and ready to roll!")
}

func (sglangLog) oom(l *startupLog, detail string) {
	fmt.Fprintf(l.w, "torch.OutOfMemoryError: CUDA out of memory. %s\n", detail)
	fmt.Fprintf(l.w, "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n")
}

func (sglangLog) tpStartup() bool { return true }

func (sglangLog) rankBegin(l *startupLog, now time.Time, r int) {
	fmt.Fprintf(l.w, "[%s TP%d] Init torch distributed begin.\n", now.Format("2006-01-02 15:04:05"), r)
}

func (sglangLog) rankEnd(l *startupLog, now time.Time, r, tp int) {
	fmt.Fprintf(l.w, "[%s TP%d] Init torch distributed ends. mem usage=0.54 GB\n", now.Format("2006-01-02 15:04:05"), r)
}

func (sglangLog) ncclFailBegin(l *startupLog, now time.Time) string {
	fmt.Fprintf(l.w, "[%s TP1] Scheduler hit an exception: Traceback (most recent call last):\n", now.Format("2006-01-02 15:04:05"))
	return ""
}

func (sglangLog) ncclFailEnd(*startupLog) {}

// trtllmLog is TensorRT-LLM's: "[time] [TRT-LLM] [L] msg".
type trtllmLog struct{}

func (trtllmLog) line(l *startupLog, now time.Time, level, src, msg string) {
	fmt.Fprintf(l.w, "[%s] [TRT-LLM] [%s] %s\n", now.Format("01/02/2006-15:04:05"), level[:1], msg)
}

func (trtllmLog) begin(l *startupLog, v string) {
	fmt.Fprintf(l.w, "[TensorRT-LLM] TensorRT-LLM version: %s (perflab sim on %s)\n", v, l.p.GPU)
}

func (trtllmLog) loadBegin(l *startupLog) { l.line("INFO", "", "Loading model "+l.p.Model) }

func (trtllmLog) downloadBegin(*startupLog) {}

func (trtllmLog) downloadEnd(*startupLog, time.Duration) {}

func (trtllmLog) loaded(l *startupLog, p sim.Params, kvTokens int) {
	l.line("INFO", "", fmt.Sprintf("max_seq_len=%d, max_num_requests=%d, max_num_tokens=%d", p.MaxModelLen, p.MaxNumSeqs, p.MaxNumBatchedTokens))
	l.line("INFO", "", fmt.Sprintf("[kv cache manager] max_tokens=%d", kvTokens))
}

func (trtllmLog) serving(l *startupLog, addr string) { l.uvicorn(addr) }

func (trtllmLog) oom(l *startupLog, detail string) {
	fmt.Fprintf(l.w, "[TensorRT-LLM][ERROR] tensorrt_llm::common::TllmException: [TensorRT-LLM][ERROR] CUDA runtime error in ::cudaMallocAsync: out of memory (%s)\n", detail)
	fmt.Fprintf(l.w, "torch.OutOfMemoryError: CUDA out of memory. %s\n", detail)
}

// tpStartup: TensorRT-LLM prints none of the distributed init at the
// default log level.
func (trtllmLog) tpStartup() bool { return false }

func (trtllmLog) rankBegin(*startupLog, time.Time, int) {}

func (trtllmLog) rankEnd(*startupLog, time.Time, int, int) {}

func (trtllmLog) ncclFailBegin(*startupLog, time.Time) string { return "" }

func (trtllmLog) ncclFailEnd(*startupLog) {}
