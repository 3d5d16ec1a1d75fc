package sim

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"sort"
	"strings"
	"sync"

	"github.com/perflab/perflab/internal/dataset"
)

// Workload describes the benchmark of a reference case: enough to rebuild
// its requests (lengths matched to the reported token totals).
type Workload struct {
	// Kind is "sharegpt" or "random".
	Kind       string `json:"kind"`
	NumPrompts int    `json:"num_prompts"`
	// InputLen/OutputLen are the random dataset's lengths.
	InputLen  int `json:"input_len,omitempty"`
	OutputLen int `json:"output_len,omitempty"`
	// TotalInput/TotalOutput are the reported token totals; the rebuilt
	// requests are scaled to match them.
	TotalInput  int `json:"total_input"`
	TotalOutput int `json:"total_output"`
	// RequestRate 0 = inf. MaxConcurrency 0 = none.
	RequestRate    float64 `json:"request_rate,omitempty"`
	MaxConcurrency int     `json:"max_concurrency,omitempty"`
	// Arrivals is "constant" for a client that sends at even intervals
	// (guidellm's constant profile); "" is vllm bench serve's Poisson
	// arrivals.
	Arrivals string `json:"arrivals,omitempty"`
	// Client is "vllm" (vllm bench serve) or "guidellm" (GPUStack's
	// benchmark-runner); a guidellm block is scored on its per-token time
	// from the mean latency (Case.TPOTMs), not on the TPOT it prints.
	Client string `json:"client"`
}

// Load is the client side of the benchmark: its rate, concurrency cap and
// arrival schedule.
func (w Workload) Load() Load {
	l := Load{RequestRate: w.RequestRate, MaxConcurrency: w.MaxConcurrency}
	if w.Arrivals == "constant" {
		l.Burstiness = math.Inf(1) // even gaps: bench.ScheduleWith
	}
	return l
}

// Measured holds the figures a reference block printed.
type Measured struct {
	Completed  int     `json:"completed"`
	Duration   float64 `json:"duration_s"`
	TotalTPS   float64 `json:"total_tps"`
	OutputTPS  float64 `json:"output_tps"`
	MeanTTFTMs float64 `json:"mean_ttft_ms"`
	MedianTTFT float64 `json:"median_ttft_ms"`
	MeanTPOTMs float64 `json:"mean_tpot_ms"`
	MedianTPOT float64 `json:"median_tpot_ms"`
	MeanITLMs  float64 `json:"mean_itl_ms"`
	// MedianITLMs is the median gap between streamed chunks: in a block
	// whose steps are mostly decode-only, one decode step.
	MedianITLMs float64 `json:"median_itl_ms,omitempty"`
	// MeanLatencyS is the mean request latency, which guidellm's blocks
	// print ("Mean Latency(s)") and vllm bench's do not.
	MeanLatencyS float64 `json:"mean_latency_s,omitempty"`
	TotalInput   int     `json:"total_input"`
	TotalOutput  int     `json:"total_output"`
}

// Case is one measured result block of a reference report.
type Case struct {
	ID     string `json:"id"`
	Report string `json:"report"`
	// Block is the 1-based index of the result block in the report.
	Block    int      `json:"block"`
	Label    string   `json:"label"`
	Params   Params   `json:"params"`
	Workload Workload `json:"workload"`
	Measured Measured `json:"measured"`
	// Exclude, when set, says why the block is left out of the error
	// figures (it is still listed).
	Exclude string `json:"exclude,omitempty"`
	// NoTPOT says why the block's TPOT is not comparable.
	NoTPOT string `json:"no_tpot,omitempty"`
	// Note records a reading of the report (e.g. a typo resolved).
	Note string `json:"note,omitempty"`
}

// TPOTMs is the measured time per output token after the first that the
// case is scored on. For vllm bench it is the printed mean TPOT. guidellm's
// printed TPOT is, by its definitions, sum(last counted chunk - start) /
// sum(output tokens): every block's TTFT over its mean output plus the span
// of the chunks it counted, and the runner's handler did not count vLLM
// 0.17's thinking deltas (mean ITL 9.45 ms, median 0, against about 80 ms
// a token from the same block's mean latency). So a guidellm block is
// scored on (mean latency - mean TTFT) / (mean output - 1), what its
// printed latency says a token took (docs/sim-fidelity.md).
func (c Case) TPOTMs() float64 {
	m := c.Measured
	if c.Workload.Client == "guidellm" && m.MeanLatencyS > 0 && m.Completed > 0 {
		return perTokenMs(m.MeanLatencyS*1000, m.MeanTTFTMs, float64(m.TotalOutput)/float64(m.Completed))
	}
	return m.MeanTPOTMs
}

// perTokenMs is the decode time per token after the first, from a mean
// latency and mean TTFT (ms) and the mean output length.
func perTokenMs(latencyMs, ttftMs, meanOut float64) float64 {
	if meanOut <= 1 {
		return 0
	}
	return (latencyMs - ttftMs) / (meanOut - 1)
}

// Ordering is a published decision: Better beat Worse on total throughput.
type Ordering struct {
	Better string `json:"better"`
	Worse  string `json:"worse"`
	Why    string `json:"why"`
}

// Reference is the calibration data set.
type Reference struct {
	Cases     []Case     `json:"cases"`
	Orderings []Ordering `json:"orderings"`
}

//go:embed testdata/reference.json
var embeddedReference []byte

// ReferenceCases returns the embedded reference data (every result block of
// the three published reports).
func ReferenceCases() (*Reference, error) {
	var r Reference
	if err := json.Unmarshal(embeddedReference, &r); err != nil {
		return nil, fmt.Errorf("sim: embedded reference: %w", err)
	}
	return &r, nil
}

// Case looks a case up by id.
func (r *Reference) Case(id string) (Case, bool) {
	for _, c := range r.Cases {
		if c.ID == id {
			return c, true
		}
	}
	return Case{}, false
}

// ShareGPTLengthsPath is where the shared ShareGPT sample is looked for when
// rebuilding ShareGPT workloads; empty or missing means a synthetic
// heavy-tailed length distribution.
var ShareGPTLengthsPath = ""

// Requests rebuilds the workload's requests: exact lengths for the random
// dataset, the ShareGPT sample's length shape for ShareGPT, scaled so the
// totals equal the reported ones.
func (w Workload) Requests() ([]dataset.Request, error) {
	n := w.NumPrompts
	if n <= 0 {
		return nil, fmt.Errorf("sim: workload has no prompts")
	}
	var in, out []float64
	switch w.Kind {
	case "random":
		in, out = make([]float64, n), make([]float64, n)
		for i := range in {
			in[i], out[i] = float64(w.InputLen), float64(w.OutputLen)
		}
	case "sharegpt":
		if w.Client == "guidellm" {
			in, out = guidellmShareGPTShape(n)
		} else {
			in, out = sharegptShape(n)
		}
	default:
		return nil, fmt.Errorf("sim: unknown workload kind %q", w.Kind)
	}
	ins := scaleTo(in, w.TotalInput)
	outs := scaleTo(out, w.TotalOutput)
	reqs := make([]dataset.Request, n)
	for i := range reqs {
		reqs[i] = dataset.Request{PromptLen: ins[i], OutputLen: outs[i], IgnoreEOS: w.Kind == "random"}
	}
	return reqs, nil
}

type workloadKey struct {
	w    Workload
	path string
}

var (
	reqCacheMu sync.Mutex
	reqCache   = map[workloadKey][]dataset.Request{}
)

// cachedRequests is Requests memoized per workload (and ShareGPT path):
// the fit predicts every case many times and the rebuilt requests never
// change. Callers must not modify the returned slice.
func (w Workload) cachedRequests() ([]dataset.Request, error) {
	k := workloadKey{w, ShareGPTLengthsPath}
	reqCacheMu.Lock()
	r, ok := reqCache[k]
	reqCacheMu.Unlock()
	if ok {
		return r, nil
	}
	r, err := w.Requests()
	if err != nil {
		return nil, err
	}
	reqCacheMu.Lock()
	reqCache[k] = r
	reqCacheMu.Unlock()
	return r, nil
}

// scaleTo rescales xs to integers >= 1 summing to total (when total > 0),
// keeping the shape; the rounding remainder goes to the largest entries.
func scaleTo(xs []float64, total int) []int {
	out := make([]int, len(xs))
	var sum float64
	for _, x := range xs {
		sum += x
	}
	if total <= 0 || sum == 0 {
		for i, x := range xs {
			out[i] = max(1, int(math.Round(x)))
		}
		return out
	}
	k := float64(total) / sum
	got := 0
	for i, x := range xs {
		out[i] = max(1, int(math.Floor(x*k)))
		got += out[i]
	}
	idx := make([]int, len(xs))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return xs[idx[a]] > xs[idx[b]] })
	for j := 0; got != total && j < 10*len(xs); j++ {
		i := idx[j%len(idx)]
		if got < total {
			out[i]++
			got++
		} else if out[i] > 1 {
			out[i]--
			got--
		}
	}
	return out
}

// shareGPTTurn is one turn of a ShareGPT conversation.
type shareGPTTurn struct {
	From  string `json:"from"`
	Value string `json:"value"`
}

// sampleShape returns n (prompt, output) length pairs, ~4 bytes a token,
// from the first two turns of each conversation of the shared sample that
// keep accepts (lengths in tokens); ok is false without a usable sample.
func sampleShape(n int, keep func(q, a shareGPTTurn, p, o float64) bool) (in, out []float64, ok bool) {
	if ShareGPTLengthsPath == "" {
		return nil, nil, false
	}
	b, err := os.ReadFile(ShareGPTLengthsPath)
	if err != nil {
		return nil, nil, false
	}
	var convs []struct {
		Conversations []shareGPTTurn `json:"conversations"`
	}
	if json.Unmarshal(b, &convs) != nil {
		return nil, nil, false
	}
	var pi, po []float64
	for _, c := range convs {
		if len(c.Conversations) < 2 {
			continue
		}
		q, a := c.Conversations[0], c.Conversations[1]
		p := math.Max(1, float64(len(q.Value))/4)
		o := math.Max(1, float64(len(a.Value))/4)
		if keep(q, a, p, o) {
			pi, po = append(pi, p), append(po, o)
		}
	}
	if len(pi) == 0 {
		return nil, nil, false
	}
	in, out = make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		in[i], out[i] = pi[i%len(pi)], po[i%len(po)]
	}
	return in, out, true
}

// sharegptShape returns n (prompt, output) length pairs with ShareGPT's
// shape: from the shared sample when ShareGPTLengthsPath points at it
// (first two turns, vLLM's filters), else synthetic.
func sharegptShape(n int) (in, out []float64) {
	if in, out, ok := sampleShape(n, func(_, _ shareGPTTurn, p, o float64) bool {
		return p >= 4 && o >= 4 && p <= 1024 && p+o <= 2048
	}); ok {
		return in, out
	}
	// Synthetic: log-normal prompt and output lengths with ShareGPT's
	// spread, from a fixed low-discrepancy sequence (deterministic).
	in, out = make([]float64, n), make([]float64, n)
	for i := 0; i < n; i++ {
		u := (float64(i) + 0.5) / float64(n)
		v := math.Mod(float64(i)*0.6180339887+0.25, 1)
		in[i] = math.Min(1024, math.Exp(4.6+1.2*normInv(u)))
		out[i] = math.Min(2048-in[i], math.Exp(4.9+1.1*normInv(v)))
		in[i], out[i] = math.Max(in[i], 4), math.Max(out[i], 4)
	}
	return in, out
}

// guidellmShareGPTShape returns n (prompt, output) length pairs as
// GPUStack's benchmark-runner builds its guidellm ShareGPT set
// (benchmark_runner/sharegpt_to_guidellm.py): every conversation whose
// first two turns are a human's prompt and a gpt answer, both non-empty,
// with no length filter; the answer's token count is the request's
// output_tokens_count, which guidellm sends as the output budget with
// ignore_eos. Lengths are scaled to the block's totals by Requests; without
// the sample, the synthetic shape.
func guidellmShareGPTShape(n int) (in, out []float64) {
	if in, out, ok := sampleShape(n, func(q, a shareGPTTurn, _, _ float64) bool {
		return (q.From == "human" || q.From == "user") && (a.From == "gpt" || a.From == "assistant") && q.Value != "" && a.Value != ""
	}); ok {
		return in, out
	}
	return sharegptShape(n)
}

// normInv is the standard normal quantile (Acklam's rational approximation).
func normInv(p float64) float64 {
	a := []float64{-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00}
	b := []float64{-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01}
	c := []float64{-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00}
	d := []float64{7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00}
	switch {
	case p < 0.02425:
		q := math.Sqrt(-2 * math.Log(p))
		return (((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	case p > 1-0.02425:
		q := math.Sqrt(-2 * math.Log(1-p))
		return -(((((c[0]*q+c[1])*q+c[2])*q+c[3])*q+c[4])*q + c[5]) / ((((d[0]*q+d[1])*q+d[2])*q+d[3])*q + 1)
	default:
		q := p - 0.5
		r := q * q
		return (((((a[0]*r+a[1])*r+a[2])*r+a[3])*r+a[4])*r + a[5]) * q / (((((b[0]*r+b[1])*r+b[2])*r+b[3])*r+b[4])*r + 1)
	}
}

// modelOf returns the base model family of a case (for leave-one-model-out).
func modelOf(c Case) string {
	m := c.Params.Model
	if i := strings.LastIndex(m, "/"); i >= 0 {
		m = m[i+1:]
	}
	return strings.TrimSuffix(m, "-FP8")
}
