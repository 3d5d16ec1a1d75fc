// Package kernels answers how long one GPU kernel of a given shape takes on a
// given GPU: a dense GEMM (BF16 or FP8), decode or prefill attention, or a
// MoE grouped GEMM. It reads the tables that tools/kernels/collect.py
// measures on a real GPU (format perflab-kernels/1) and interpolates between
// their shapes; for a GPU with no table it carries a measured table over by
// a shape-aware efficiency model (Transfer).
//
// It exists because one fitted efficiency per engine, applied to datasheet
// peaks, cannot be right for both a 4-token decode GEMM (which streams its
// weights at about 90% of the HBM bandwidth) and a full-cache decode step,
// nor carry from an H100 to another GPU (issue 26).
package kernels

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"sort"
	"strings"
)

// Format is the format string of the tables this package reads.
const Format = "perflab-kernels/1"

// DType is the operand type of a GEMM.
type DType string

// The GEMM operand types the collector measures.
const (
	BF16 DType = "bf16"
	FP8  DType = "fp8"
)

// Provenance says where and with what a table was measured.
type Provenance struct {
	GPU               string `json:"gpu"`
	Date              string `json:"date"`
	Driver            string `json:"driver"`
	CUDA              string `json:"cuda"`
	Torch             string `json:"torch"`
	ComputeCapability string `json:"compute_capability"`
	SMCount           int    `json:"sm_count"`
	L2Bytes           int64  `json:"l2_bytes"`
	MemoryBytes       int64  `json:"memory_bytes"`
	Collector         string `json:"collector"`
}

// Memory is the bandwidth and compute ceilings the collector measured.
type Memory struct {
	CopyGBps float64 `json:"copy_gbps"`
	ReadGBps float64 `json:"read_gbps"`
	// BF16TFLOPS is an 8192³ BF16 GEMM's rate.
	BF16TFLOPS float64 `json:"bf16_8192_tflops"`
}

// GEMMRow is one timed GEMM: C[m×n] = A[m×k]·B[k×n].
type GEMMRow struct {
	DType DType   `json:"dtype"`
	Kind  string  `json:"kind"`
	M     int     `json:"m"`
	N     int     `json:"n"`
	K     int     `json:"k"`
	US    float64 `json:"us"`
}

// DecodeRow is one timed decode attention: batch sequences, one query token
// each, against context tokens of KV cache.
type DecodeRow struct {
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	HeadDim int     `json:"head_dim"`
	Batch   int     `json:"batch"`
	Context int     `json:"context"`
	US      float64 `json:"us"`
}

// PrefillRow is one timed causal self-attention over one sequence.
type PrefillRow struct {
	Heads   int     `json:"heads"`
	KVHeads int     `json:"kv_heads"`
	HeadDim int     `json:"head_dim"`
	Seq     int     `json:"seq"`
	US      float64 `json:"us"`
}

// MoERow is one timed grouped GEMM: tokens routed to topk of experts, each
// expert an [k×n] weight.
type MoERow struct {
	Experts int     `json:"experts"`
	TopK    int     `json:"topk"`
	N       int     `json:"n"`
	K       int     `json:"k"`
	Tokens  int     `json:"tokens"`
	Rows    int     `json:"rows"`
	Active  int     `json:"active_experts"`
	US      float64 `json:"us"`
}

// StepRow is one whole decode step the collector timed: every layer of a
// dense full-attention model at TP 1, batch sequences at context tokens of
// KV each, captured in one CUDA graph. KernelsUS chains the layers' GEMMs
// and decode attention and the LM head; StepUS adds the glue kernels an
// engine runs between them (GlueKernels per layer, each a small in-place
// kernel over the tensor the engine's fused kernel touches) and the
// sampling argmax. AttnProxyUS and AttnFlashUS are one layer's decode
// attention as the table's two-GEMM stand-in and as SDPA's FlashAttention
// kernel (which does not split the context).
type StepRow struct {
	Model       string  `json:"model"`
	DType       DType   `json:"dtype"`
	Batch       int     `json:"batch"`
	Context     int     `json:"context"`
	Layers      int     `json:"layers"`
	KernelsUS   float64 `json:"kernels_us"`
	StepUS      float64 `json:"step_us"`
	GlueKernels int     `json:"glue_kernels_per_layer"`
	FloorUS     float64 `json:"floor_us"`
	AttnProxyUS float64 `json:"attn_proxy_us"`
	AttnFlashUS float64 `json:"attn_flash_us,omitempty"`
}

// Table is one GPU's measured kernels.
type Table struct {
	Format     string       `json:"format"`
	Provenance Provenance   `json:"provenance"`
	Memory     Memory       `json:"memory"`
	GEMMs      []GEMMRow    `json:"gemm"`
	Decodes    []DecodeRow  `json:"attn_decode"`
	Prefills   []PrefillRow `json:"attn_prefill"`
	MoEs       []MoERow     `json:"moe"`
	// Steps are whole decode steps; tables collected before 2026-11-27
	// have none.
	Steps     []StepRow `json:"decode_step"`
	Truncated []string  `json:"truncated"`

	gemm   map[gemmKey][]point
	decode map[headKey][]DecodeRow
	// decodeGrid is decode per head set as context curves at each
	// measured batch, batches ascending: built once, since a step model
	// reads it every simulated step.
	decodeGrid map[headKey][]batchCurve
	prefill    map[headKey][]point
	moe        map[moeKey][]point
	// fp8TFLOPS is the best FP8 rate in the table: the collector measures
	// no FP8 ceiling of its own.
	fp8TFLOPS float64
}

type gemmKey struct {
	dt   DType
	n, k int
}

type headKey struct{ heads, kv, dim int }

// batchCurve is decode time along context at one measured batch.
type batchCurve struct {
	batch float64
	ctx   []point
}

type moeKey struct{ experts, topk, n, k int }

// point is one measurement along the axis a shape is interpolated on.
type point struct{ x, us float64 }

// ErrFormat is wrapped by Load for a document that is not a kernel table.
var ErrFormat = errors.New("kernels: not a perflab-kernels/1 table")

// maxTableBytes bounds what Load reads: the collector writes about 400 KB.
const maxTableBytes = 64 << 20

// Load reads and checks a table; every timing must be finite and positive,
// and every shape positive, so that interpolation never meets a zero.
func Load(r io.Reader) (*Table, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxTableBytes+1))
	if err != nil {
		return nil, fmt.Errorf("kernels: read: %w", err)
	}
	if len(data) > maxTableBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrFormat, maxTableBytes)
	}
	var t Table
	if err := json.Unmarshal(data, &t); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	if t.Format != Format {
		return nil, fmt.Errorf("%w: format %q", ErrFormat, t.Format)
	}
	if err := t.index(); err != nil {
		return nil, err
	}
	return &t, nil
}

func bad(us float64, dims ...int) bool {
	if !(us > 0) || math.IsInf(us, 0) {
		return true
	}
	for _, d := range dims {
		if d <= 0 {
			return true
		}
	}
	return false
}

func (t *Table) index() error {
	if !(t.Memory.ReadGBps > 0) || !(t.Memory.BF16TFLOPS > 0) {
		return fmt.Errorf("%w: %s: no measured bandwidth or BF16 rate", ErrFormat, t.Provenance.GPU)
	}
	t.gemm = map[gemmKey][]point{}
	for i, r := range t.GEMMs {
		if bad(r.US, r.M, r.N, r.K) || (r.DType != BF16 && r.DType != FP8) {
			return fmt.Errorf("%w: gemm row %d: %+v", ErrFormat, i, r)
		}
		key := gemmKey{r.DType, r.N, r.K}
		t.gemm[key] = append(t.gemm[key], point{float64(r.M), r.US})
		if r.DType == FP8 {
			t.fp8TFLOPS = math.Max(t.fp8TFLOPS, 2*float64(r.M)*float64(r.N)*float64(r.K)/r.US/1e6)
		}
	}
	if t.fp8TFLOPS == 0 {
		t.fp8TFLOPS = 2 * t.Memory.BF16TFLOPS
	}
	t.decode = map[headKey][]DecodeRow{}
	for i, r := range t.Decodes {
		if bad(r.US, r.Heads, r.KVHeads, r.HeadDim, r.Batch, r.Context) {
			return fmt.Errorf("%w: attn_decode row %d: %+v", ErrFormat, i, r)
		}
		key := headKey{r.Heads, r.KVHeads, r.HeadDim}
		t.decode[key] = append(t.decode[key], r)
	}
	t.decodeGrid = map[headKey][]batchCurve{}
	for key, rows := range t.decode {
		batches := map[int][]point{}
		for _, r := range rows {
			batches[r.Batch] = append(batches[r.Batch], point{float64(r.Context), r.US})
		}
		keys := make([]int, 0, len(batches))
		for b := range batches {
			keys = append(keys, b)
		}
		slices.Sort(keys)
		for _, b := range keys {
			p := batches[b]
			sortPoints(p)
			t.decodeGrid[key] = append(t.decodeGrid[key], batchCurve{float64(b), p})
		}
	}
	t.prefill = map[headKey][]point{}
	for i, r := range t.Prefills {
		if bad(r.US, r.Heads, r.KVHeads, r.HeadDim, r.Seq) {
			return fmt.Errorf("%w: attn_prefill row %d: %+v", ErrFormat, i, r)
		}
		key := headKey{r.Heads, r.KVHeads, r.HeadDim}
		t.prefill[key] = append(t.prefill[key], point{float64(r.Seq), r.US})
	}
	t.moe = map[moeKey][]point{}
	for i, r := range t.MoEs {
		if bad(r.US, r.Experts, r.TopK, r.N, r.K, r.Tokens) {
			return fmt.Errorf("%w: moe row %d: %+v", ErrFormat, i, r)
		}
		key := moeKey{r.Experts, r.TopK, r.N, r.K}
		t.moe[key] = append(t.moe[key], point{float64(r.Tokens), r.US})
	}
	for i, r := range t.Steps {
		if bad(r.StepUS, r.Batch, r.Context, r.Layers) || bad(r.KernelsUS) || r.Model == "" ||
			(r.DType != BF16 && r.DType != FP8) {
			return fmt.Errorf("%w: decode_step row %d: %+v", ErrFormat, i, r)
		}
	}
	for k := range t.gemm {
		sortPoints(t.gemm[k])
	}
	for k := range t.prefill {
		sortPoints(t.prefill[k])
	}
	for k := range t.moe {
		sortPoints(t.moe[k])
	}
	return nil
}

func sortPoints(p []point) {
	sort.Slice(p, func(i, j int) bool { return p[i].x < p[j].x })
}

// interp reads a curve at x, linear in log-log between measured points.
// Below the first point the time is the first point's (small shapes are
// bound by a fixed cost and by the weight stream, not by x); above the last
// it grows as x^grow from the last point (1 for GEMM rows, 2 for causal
// attention over the sequence).
func interp(p []point, x, grow float64) float64 {
	if len(p) == 0 {
		return math.NaN()
	}
	if x <= p[0].x {
		return p[0].us
	}
	last := p[len(p)-1]
	if x >= last.x {
		return last.us * math.Pow(x/last.x, grow)
	}
	i := sort.Search(len(p), func(i int) bool { return p[i].x >= x })
	a, b := p[i-1], p[i]
	f := (math.Log(x) - math.Log(a.x)) / (math.Log(b.x) - math.Log(a.x))
	return math.Exp(math.Log(a.us) + f*(math.Log(b.us)-math.Log(a.us)))
}

// Peak is the best rate (TFLOP/s) the table measured for dt: the 8192³
// GEMM for BF16, the fastest FP8 row for FP8.
func (t *Table) Peak(dt DType) float64 { return t.peakTFLOPS(dt) }

func (t *Table) peakTFLOPS(dt DType) float64 {
	if dt == FP8 {
		return t.fp8TFLOPS
	}
	return t.Memory.BF16TFLOPS
}

// gemmRoof is the roofline time (µs) of a GEMM on the table's own measured
// ceilings.
func (t *Table) gemmRoof(dt DType, m, n, k float64) float64 {
	elt := 2.0
	if dt == FP8 {
		elt = 1
	}
	flops := 2 * m * n * k
	bytes := n*k*elt + m*k*elt + m*n*2
	return math.Max(flops/(t.peakTFLOPS(dt)*1e6), bytes/(t.Memory.ReadGBps*1e3))
}

// GEMM is the time in seconds of one [m×k]·[k×n] product. exact says the
// table holds this (n, k); otherwise the nearest measured shape's
// efficiency against the roofline, at the same m, is applied to this
// shape's roofline.
func (t *Table) GEMM(dt DType, m, n, k int) (sec float64, exact bool) {
	if m <= 0 || n <= 0 || k <= 0 {
		return 0, true
	}
	if p, ok := t.gemm[gemmKey{dt, n, k}]; ok {
		return interp(p, float64(m), 1) / 1e6, true
	}
	best, bestD := gemmKey{}, math.Inf(1)
	for key := range t.gemm {
		if key.dt != dt {
			continue
		}
		d := math.Abs(math.Log(float64(key.n)/float64(n))) + math.Abs(math.Log(float64(key.k)/float64(k)))
		if d < bestD || (d == bestD && (key.n < best.n || (key.n == best.n && key.k < best.k))) {
			best, bestD = key, d
		}
	}
	if math.IsInf(bestD, 1) {
		return t.gemmRoof(dt, float64(m), float64(n), float64(k)) / 1e6, false
	}
	ratio := interp(t.gemm[best], float64(m), 1) / t.gemmRoof(dt, float64(m), float64(best.n), float64(best.k))
	return ratio * t.gemmRoof(dt, float64(m), float64(n), float64(k)) / 1e6, false
}

// kvBytes is the KV cache a decode attention reads (BF16 K and V).
func kvBytes(kv, dim, batch, ctx int) float64 {
	return 2 * float64(batch) * float64(kv) * float64(ctx) * float64(dim) * 2
}

// DecodeAttention is the time in seconds of one layer's decode attention for
// batch sequences of ctx tokens each. For a measured head set it is read off
// the batch × context grid (log-log); otherwise from the bandwidth the
// table's decode rows reach at this many bytes.
func (t *Table) DecodeAttention(heads, kv, dim, batch, ctx int) (sec float64, exact bool) {
	if batch <= 0 || ctx <= 0 {
		return 0, true
	}
	bytes := kvBytes(kv, dim, batch, ctx)
	if grid, ok := t.decodeGrid[headKey{heads, kv, dim}]; ok {
		// Along context at each measured batch, then along batch.
		var buf [16]point
		byBatch := buf[:0]
		for _, c := range grid {
			byBatch = append(byBatch, point{c.batch, interp(c.ctx, float64(ctx), 1)})
		}
		return interp(byBatch, float64(batch), 1) / 1e6, true
	}
	return bytes / (t.decodeGBps(dim, bytes) * 1e3) / 1e6, false
}

// decodeGBps is the bandwidth decode rows of this head size reach at about
// this many bytes (log-interpolated over bytes), the launch floor included.
func (t *Table) decodeGBps(dim int, bytes float64) float64 {
	var p []point
	for _, r := range t.Decodes {
		if r.HeadDim == dim {
			b := kvBytes(r.KVHeads, r.HeadDim, r.Batch, r.Context)
			p = append(p, point{b, b / r.US / 1e3})
		}
	}
	if len(p) == 0 {
		return t.Memory.ReadGBps
	}
	sortPoints(p)
	return smoothCurve(p, bytes)
}

// smoothCurve reads y(x) from scattered points by the median of the points
// within a factor of two of x (the nearest point where none is).
func smoothCurve(p []point, x float64) float64 {
	var near []float64
	for _, q := range p {
		if q.x >= x/2 && q.x <= x*2 {
			near = append(near, q.us)
		}
	}
	if len(near) == 0 {
		best := p[0]
		for _, q := range p {
			if math.Abs(math.Log(q.x/x)) < math.Abs(math.Log(best.x/x)) {
				best = q
			}
		}
		return best.us
	}
	slices.Sort(near)
	return near[len(near)/2]
}

// prefillFlops is causal attention's work for q new tokens after ctx cached
// ones, in one layer.
func prefillFlops(heads, dim, q, ctx int) float64 {
	return 4 * float64(heads) * float64(dim) * float64(q) * (float64(ctx) + float64(q)/2)
}

// PrefillAttention is the time in seconds of one layer's causal attention
// for q new tokens of one sequence after ctx cached ones. The table times
// whole sequences (ctx 0); a chunk after a cached prefix runs at the rate a
// whole sequence of the same total length reaches.
func (t *Table) PrefillAttention(heads, kv, dim, q, ctx int) (sec float64, exact bool) {
	if q <= 0 {
		return 0, true
	}
	flops := prefillFlops(heads, dim, q, ctx)
	total := q + ctx
	if p, ok := t.prefill[headKey{heads, kv, dim}]; ok {
		whole := interp(p, float64(total), 2)
		return whole * flops / prefillFlops(heads, dim, total, 0) / 1e6, true
	}
	var p []point
	for _, r := range t.Prefills {
		if r.HeadDim == dim {
			p = append(p, point{float64(r.Seq), prefillFlops(r.Heads, dim, r.Seq, 0) / r.US / 1e6})
		}
	}
	if len(p) == 0 {
		return flops / (t.Memory.BF16TFLOPS * 1e12), false
	}
	sortPoints(p)
	return flops / (smoothCurve(p, float64(total)) * 1e12), false
}

// MoE is the time in seconds of one grouped expert GEMM for tokens routed to
// topk of experts experts, each an [k×n] weight.
func (t *Table) MoE(experts, topk, n, k, tokens int) (sec float64, exact bool) {
	if tokens <= 0 {
		return 0, true
	}
	if p, ok := t.moe[moeKey{experts, topk, n, k}]; ok {
		return interp(p, float64(tokens), 1) / 1e6, true
	}
	// The nearest measured expert shape's time against its roofline.
	best, bestD := moeKey{}, math.Inf(1)
	for key := range t.moe {
		d := math.Abs(math.Log(float64(key.n*key.k)/float64(n*k))) +
			math.Abs(math.Log(float64(key.experts*key.topk)/float64(experts*topk)))
		if d < bestD {
			best, bestD = key, d
		}
	}
	roof := func(key moeKey) float64 {
		active := float64(key.experts) * (1 - math.Pow(1-float64(key.topk)/float64(key.experts), float64(tokens)))
		rows := float64(tokens * key.topk)
		flops := 2 * rows * float64(key.n) * float64(key.k)
		bytes := active*float64(key.n*key.k)*2 + rows*float64(key.n+key.k)*2
		return math.Max(flops/(t.Memory.BF16TFLOPS*1e6), bytes/(t.Memory.ReadGBps*1e3))
	}
	self := moeKey{experts, topk, n, k}
	if math.IsInf(bestD, 1) {
		return roof(self) / 1e6, false
	}
	return interp(t.moe[best], float64(tokens), 1) / roof(best) * roof(self) / 1e6, false
}

//go:embed *.json
var embedded embed.FS

// ErrNoTable is returned by Embedded for a GPU nobody measured.
var ErrNoTable = errors.New("kernels: no measured table for this GPU")

// Embedded returns the table measured on gpu ("H100", "H200"; the
// simulator's catalog names).
func Embedded(gpu string) (*Table, error) {
	t, err := open(embedded, strings.ToLower(gpu)+".json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", ErrNoTable, gpu)
	}
	if err != nil {
		return nil, fmt.Errorf("kernels: embedded table %s: %w", gpu, err)
	}
	return t, nil
}

// open loads the table at name in fsys.
func open(fsys fs.FS, name string) (*Table, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Load(f)
}

//go:embed runs/*.json
var runs embed.FS

// Run returns the latest embedded collection run on gpu that timed whole
// decode steps (runs/<gpu>-<date>.json, the collector's document as it
// came back). The simulator's tables (Embedded) are the first run on each
// GPU; later runs are kept whole, for their decode steps and to show how
// far two runs of the collector agree.
func Run(gpu string) (*Table, error) {
	ents, err := runs.ReadDir("runs")
	if err != nil {
		return nil, fmt.Errorf("kernels: runs: %w", err)
	}
	prefix := strings.ToLower(gpu) + "-"
	name := ""
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && e.Name() > name {
			name = e.Name()
		}
	}
	if name == "" {
		return nil, fmt.Errorf("%w: no run with decode steps on %s", ErrNoTable, gpu)
	}
	t, err := open(runs, "runs/"+name)
	if err != nil {
		return nil, fmt.Errorf("kernels: run %s: %w", name, err)
	}
	return t, nil
}

// GPUs lists the GPUs with an embedded table.
func GPUs() []string {
	ents, _ := embedded.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.ToUpper(strings.TrimSuffix(e.Name(), ".json")))
	}
	return out
}
