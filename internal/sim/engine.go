package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrOOM is wrapped by New when the model and its KV cache do not fit.
var ErrOOM = errors.New("sim: out of GPU memory")

// ErrContext is the Event error of a request longer than the context.
var ErrContext = errors.New("sim: request exceeds the context length")

const gib = 1024 * 1024 * 1024

// Req is one request submitted to the engine.
type Req struct {
	ID string
	// Arrival is when the request reached the server (seconds, engine clock).
	Arrival     float64
	PromptLen   int
	OutputLen   int
	PrefixGroup int
	PrefixLen   int
}

// Event reports what one engine step produced for one request: Tokens
// generated at Time, Done when it finished, Err when it was rejected.
type Event struct {
	ReqID  string
	Time   float64
	Tokens int
	Done   bool
	Err    error
}

// Stats is the engine's state as vLLM's /metrics reports it.
type Stats struct {
	Running, Waiting int
	// KVUsage is the used share of the KV cache (0..1).
	KVUsage          float64
	Preemptions      int64
	PromptTokens     int64
	GenerationTokens int64
}

type seq struct {
	id          string
	ready       float64 // when the scheduler can see it (after the frontend)
	prompt      int
	output      int
	group       int
	prefixLen   int
	target      int // tokens that must be in KV before decoding resumes
	computed    int // tokens in KV
	generated   int
	blocks      int // KV blocks held (state blocks included)
	reserved    int // blocks reserved up front (TRT-LLM no-evict)
	specCarry   float64
	feOutAt     float64 // when the API server sends this request's last queued output
	cached      int     // full-block tokens left in the prefix cache by a preemption
	freeBefore  int     // free blocks ahead of them in the LRU free queue
	allocMark   int64   // e.allocated when they were freed
	prefillDone bool
	done        bool
	user        int // index for Predict
}

type work struct {
	s      *seq
	n      int // tokens processed
	decode bool
}

type step struct {
	start, end float64
	items      []work
}

// Engine is one simulated deployment, advanced by discrete steps.
type Engine struct {
	p    Params
	kind *Kind // how the engine p names is imitated
	arch Arch
	hw   GPU
	c    Coef
	// carryBW is the source GPU's memory bandwidth over hw's when c was
	// carried from a calibration fitted on another GPU (carryCoef); 0
	// when it was fitted on hw or not carried.
	carryBW float64

	blockSize   int
	totalBlocks int
	freeBlocks  int
	allocated   int64 // blocks ever taken from the free pool (LRU eviction clock)
	stateBlocks int   // per-sequence fixed state (hybrid models), in blocks
	maxSeqs     int
	budget      int
	graphMax    int
	graphDQL    int // tokens per decoding sequence in a graph (vLLM: 1 + draft tokens)
	// graphSizes, when set, are the only batch sizes with a CUDA graph:
	// an engine that does not pad a batch up to the next captured size
	// runs any other size eagerly (TensorRT-LLM's default). nil: every
	// batch up to graphMax is padded into a graph (vLLM, SGLang).
	graphSizes []int

	// per-step roofline constants (per replica, per GPU)
	weightBytes   float64 // weights read per step
	weightBW      float64 // bytes/s of the weight stream (0: HBM × MemEff, as KV reads)
	expertBytes   float64 // one expert's bytes (MoE)
	flopsPerTok   float64 // 2 * active params / TP, LM head excluded
	headFlops     float64 // 2 * LM head params / TP, per sequence with logits
	kvBytesTok    float64 // per GPU
	stateBytesSeq float64
	scanChunk     float64 // seconds of one 64-token chunk of the linear-attention scan, all layers
	scanDecodes   bool    // decodes in a step with a prefill go through the chunked scan
	attnFlopsCoef float64 // 4 * fullLayers * heads*headDim / TP
	peak          float64 // FLOP/s for GEMMs (FP8 or BF16)
	gemmEff       float64
	commPerTok    float64 // seconds per token for TP all-reduces
	commFixed     float64
	bePrefill     float64 // attention backend speed, prefill
	beDecode      float64 // attention backend speed, decode
	specAccepted  float64 // expected tokens per decode step
	specCostTok   float64 // draft cost in equivalent target tokens per seq

	now      float64
	feFree   float64
	feOut    float64 // when the API server's output path is free (Kind.outputsApart)
	coreFree float64 // when the scheduler thread has taken its queued requests
	inbox    []*seq  // handed over by the API server, not yet taken by the scheduler thread
	waiting  []*seq
	running  []*seq
	inflight *step
	itemBuf  []work // reused by the next step once the one in flight ends
	stepBuf  step
	seen     map[int]int // prefix group -> cached tokens
	newRatio float64     // SGLang new_token_ratio

	ks *kernelStep // the kernel-table step model (nil: the roofline)

	fault     *knownFault
	faultTime float64 // engine time spent exposed to the fault
	crashed   error

	stats   Stats
	emit    func(s *seq, t float64, tokens int, done bool, err error)
	pending []Event
}

// New builds an engine for p (defaults applied) with calibration c (nil =
// the embedded calibration). It fails with an error wrapping ErrOOM when the
// weights and a minimal KV cache do not fit, as the engine would at start-up.
func New(p Params, c *Coefficients) (*Engine, error) {
	p, err := p.WithDefaults()
	if err != nil {
		return nil, err
	}
	if c == nil {
		c = DefaultCoefficients()
	}
	arch, err := p.arch()
	if err != nil {
		return nil, err
	}
	hw, _ := LookupGPU(p.GPU)
	coef, from := c.For(p)
	// Under the kernel model the shares carryCoef carries are replaced by
	// the target's table (useKernelTable); what it carries that counts
	// there is the loss KernelScale adds.
	coef, carryBW := carryCoef(coef, from, hw, arch)
	k, _ := KindOf(p.Engine) // WithDefaults refused an engine without one
	e := &Engine{p: p, kind: k, arch: arch, hw: hw, c: coef, carryBW: carryBW, seen: map[int]int{}, newRatio: 0.7, graphDQL: 1,
		fault: faultFor(p, arch)}
	e.emit = e.queueEvent
	if err := e.sizeMemory(); err != nil {
		return nil, err
	}
	if c.StepModel == StepKernels {
		if err := e.setupKernels(); err != nil {
			return nil, err
		}
	}
	e.setupRoofline()
	return e, nil
}

// Params returns the resolved parameters the engine runs with.
func (e *Engine) Params() Params { return e.p }

// KVCapacityTokens is the KV cache size in tokens (all data-parallel replicas).
func (e *Engine) KVCapacityTokens() int { return e.totalBlocks * e.blockSize * e.p.DP }

// MaxSeqs is the effective maximum number of running sequences per replica.
func (e *Engine) MaxSeqs() int { return e.maxSeqs }

func (e *Engine) weightBytesPerGPU() float64 { return e.arch.weightBytes() / e.weightShard() }

// weightShard is how many GPUs share a replica's weights.
func (e *Engine) weightShard() float64 {
	if e.p.EP && e.arch.NumExperts > 0 {
		return float64(e.p.TP * e.p.DP)
	}
	return float64(e.p.TP)
}

func (e *Engine) sizeMemory() error {
	a, p := e.arch, e.p
	kvHeads := float64(a.NumKVHeads) / float64(p.TP)
	if kvHeads < 1 {
		kvHeads = 1 // KV heads are replicated when TP exceeds them
	}
	dt := 2.0
	if p.KVCacheDtype == "fp8" {
		dt = 1
	}
	e.kvBytesTok = 2 * float64(a.fullAttnLayers()) * kvHeads * float64(a.HeadDim) * dt
	e.stateBytesSeq = a.linearStateBytes() / float64(p.TP)
	total := e.hw.MemGiB * gib
	weights := e.weightBytesPerGPU()
	// Activation peak of the profiling run: the widest MLP/attention
	// intermediate at the token budget, plus the sampler's logits.
	budget := p.MaxNumBatchedTokens
	if budget <= 0 {
		budget = 8192
	}
	inter := a.IntermediateSize
	if a.NumExperts > 0 {
		inter = a.MoEIntermediateSize * a.TopK
	}
	act := float64(budget)*float64(2*inter/p.TP+4*a.HiddenSize)*2 + float64(min(max(p.MaxNumSeqs, 256), 1024))*float64(a.VocabSize)*4
	kv := e.kind.memory(e, total, weights, act)
	if p.EnforceEager {
		e.graphMax = 0
	}
	if weights > total*0.98 {
		return fmt.Errorf("%w: torch.OutOfMemoryError: CUDA out of memory. Loading %s weights needs %.2f GiB per GPU but the %s has %.2f GiB total (tp=%d)",
			ErrOOM, a.Name, weights/gib, e.hw.Name, e.hw.MemGiB, p.TP)
	}
	stateSeqs := 0
	if e.stateBytesSeq > 0 && e.kind.statePool != nil && kv > 0 {
		kv, stateSeqs = e.kind.statePool(e, kv)
		if stateSeqs < 1 {
			return e.kind.noCache(p, e.hw, weights)
		}
	}
	blockBytes := e.kvBytesTok * float64(e.blockSize)
	blocks := int(kv / blockBytes)
	if e.stateBytesSeq > 0 && e.kind.statePool == nil {
		e.stateBlocks = int(math.Ceil(e.stateBytesSeq / blockBytes))
	}
	if kv <= 0 || blocks < 1 {
		return e.kind.noCache(p, e.hw, weights)
	}
	tokens := blocks * e.blockSize
	need := p.MaxModelLen + e.stateBlocks*e.blockSize
	if e.kind.maxLenFits && tokens < need {
		return fmt.Errorf("%w: ValueError: To serve at least one request with the models's max seq len (%d), (%.2f GiB KV cache is needed, which is larger than the available KV cache memory (%.2f GiB). Based on the available memory, the estimated maximum model length is %d. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
			ErrOOM, p.MaxModelLen, float64(need)*e.kvBytesTok/gib, kv/gib, tokens-e.stateBlocks*e.blockSize)
	}
	e.totalBlocks = blocks
	e.freeBlocks = blocks
	e.maxSeqs = p.MaxNumSeqs
	if e.kind.poolMaxSeqs && e.maxSeqs == 0 {
		// max_running_requests derived from the pool, as SGLang's model
		// runner does, bounded to [2048, 4096].
		e.maxSeqs = min(max(int(float64(tokens)/float64(p.MaxModelLen)*512), 2048), 4096)
	}
	if e.stateBlocks > 0 {
		// Hybrid models hold one state slot per running sequence.
		e.maxSeqs = min(e.maxSeqs, max(1, blocks/e.stateBlocks))
	}
	if stateSeqs > 0 {
		e.maxSeqs = min(e.maxSeqs, stateSeqs)
	}
	e.budget = p.MaxNumBatchedTokens
	if e.budget <= 0 {
		e.budget = 8192
	}
	return nil
}

func (e *Engine) setupRoofline() {
	a, p := e.arch, e.p
	_, active, _ := a.paramCounts()
	tp := float64(p.TP)
	head := float64(a.VocabSize) * float64(a.HiddenSize)
	// Logits are computed only for the last position of each sequence in
	// the step (the sampled one), not for every prompt token.
	e.headFlops = 2 * head / tp
	e.flopsPerTok = 2*active/tp - e.headFlops
	e.peak = e.hw.BF16TFLOPS * 1e12
	e.gemmEff = e.c.GEMMEff
	switch {
	case a.weightOnly(e.hw) && e.kind.intGEMM != nil:
		// Weight-only INT4/INT8 (or FP8 without FP8 tensor cores): the
		// weights stream at their own size, but once the batch makes
		// the GEMM compute-bound the kernel that dequantizes them runs
		// below the 16-bit GEMM's rate.
		share, _ := e.kind.intGEMM(p, e.hw)
		e.gemmEff *= share
	case a.FP8Weights:
		e.peak = e.hw.FP8TFLOPS * 1e12
		e.gemmEff = e.c.FP8Eff
	}
	w := e.arch.streamBytes() / e.weightShard()
	e.weightBytes = w
	if e.c.WeightStreamEff > e.c.MemEff {
		e.weightBW = e.c.WeightStreamEff * e.hw.HBMGBps * 1e9
	}
	if a.NumExperts > 0 {
		mt, _ := a.mlpParams()
		bpp := a.linearBytesPerParam()
		allExperts := mt * float64(a.NumLayers) * bpp / tp
		e.expertBytes = allExperts / float64(a.NumExperts)
		e.weightBytes = w - allExperts
	}
	e.attnFlopsCoef = 4 * float64(a.fullAttnLayers()) * float64(a.NumHeads*a.HeadDim) / tp
	// Two all-reduces per layer, priced as the kernel-table model prices
	// them (allReduceTerms): over one direction of NVLink, or PCIe.
	e.commFixed, e.commPerTok = allReduceTerms(e.hw, a, p.TP)
	if p.EP && a.NumExperts > 0 && p.TP*p.DP > 1 {
		bw := e.hw.NVLinkGBps * 1e9
		if bw == 0 {
			bw = e.hw.PCIeGBps * 1e9
		}
		// Dispatch and combine all-to-all per MoE layer.
		e.commPerTok += 2 * float64(a.NumLayers) * float64(a.HiddenSize) * 2 * float64(a.TopK) / (0.5 * bw)
		e.commFixed += 2 * float64(a.NumLayers) * 15e-6
	}
	if a.Hybrid() {
		e.scanChunk = scanChunkFlops(a) / tp * float64(a.linearLayers()) / (e.hw.BF16TFLOPS * 1e12 * e.c.scanEff())
		// Whether a mixed step runs its decodes through the chunked scan
		// is the engine's (Kind.scanDecodes).
		e.scanDecodes = e.kind.scanDecodes != nil && e.kind.scanDecodes(e)
	}
	e.bePrefill = e.c.backend(p.AttentionBackend)
	e.beDecode = e.c.backendDecode(p.AttentionBackend)
	e.specAccepted = 1
	if p.SpecMethod != "" && p.SpecTokens > 0 {
		al := p.SpecAcceptance
		k := float64(p.SpecTokens)
		e.specAccepted = (1 - math.Pow(al, k+1)) / (1 - al)
		// Draft cost: MTP/EAGLE run a one-layer head per draft token;
		// n-gram is free; a draft model costs ~10% of the target.
		per := 1.0 / float64(max(a.NumLayers, 1))
		switch p.SpecMethod {
		case "ngram", "suffix":
			per = 0
		case "draft_model":
			per = 0.1
		}
		e.specCostTok = k * per
	}
}

// scanChunk is the chunk length of the gated-delta-rule scan kernels.
const scanChunk = 64

// scanChunkFlops is the work of one 64-token chunk of the chunked
// gated-delta-rule scan in one linear-attention layer (all value heads, no
// TP split): per head, the K·Kᵀ, Q·Kᵀ and WY products (C²·dk each), the w
// and u recomputation and the intra-chunk output (C²·dv, twice in all), and
// the state's read-out, correction and update (C·dk·dv, three times). The
// kernels do this work for a chunk whether it holds 64 tokens or one.
func scanChunkFlops(a Arch) float64 {
	c, dk, dv := float64(scanChunk), float64(a.LinearKeyHeadDim), float64(a.LinearValueHeadDim)
	return 2 * float64(a.LinearValueHeads) * (3*c*c*dk + 2*c*c*dv + 3*c*dk*dv)
}

// blocksFor is how many blocks n tokens of KV occupy.
func (e *Engine) blocksFor(n int) int { return (n + e.blockSize - 1) / e.blockSize }

// stepTime is the roofline time of one step (per replica).
func (e *Engine) stepTime(items []work) float64 {
	var tokens, decodeSeqs, seqs, prefills, logits float64
	var ctxSum, attnWork, chunks, prefillTok float64
	spec := e.p.SpecMethod != "" && e.p.SpecTokens > 0
	for _, w := range items {
		seqs++
		n := float64(w.n)
		tokens += n
		if w.decode {
			decodeSeqs++
			logits += n
			ctxSum += float64(w.s.computed) + n
		} else {
			prefills++
			prefillTok += n
			if w.s.computed+w.n >= w.s.target {
				logits++
			}
			c0 := float64(w.s.computed)
			attnWork += n * (c0 + n/2)
			chunks += float64((w.n + scanChunk - 1) / scanChunk)
		}
	}
	if seqs == 0 {
		return 0
	}
	gemmTok := tokens
	if spec {
		gemmTok += decodeSeqs * e.specCostTok
	}
	flops := e.flopsPerTok*gemmTok + e.headFlops*logits
	wb := e.weightBytes
	if e.expertBytes > 0 {
		en := float64(e.arch.NumExperts)
		touched := en * (1 - math.Pow(1-float64(e.arch.TopK)/en, gemmTok))
		wb += e.expertBytes * touched
	}
	bw := e.hw.HBMGBps * 1e9 * e.c.MemEff
	// The recurrent kernel reads and writes each decode's state in place.
	stateIO := decodeSeqs * 2
	if prefills > 0 && e.scanChunk > 0 {
		// The chunked scan gathers the states of the sequences it runs
		// into a contiguous copy and scatters the results back: six
		// passes over each one's state.
		scanSeqs := prefills
		if e.scanDecodes && !spec {
			chunks += decodeSeqs
			scanSeqs += decodeSeqs
			stateIO -= decodeSeqs * 2
		}
		stateIO += scanSeqs * 6
	}
	var gpu float64
	if e.ks != nil && e.ks.timed {
		gpu = e.ks.gpuTime(e, items, gemmTok, logits, decodeSeqs, ctxSum, tokens)*e.c.kernelScale() +
			stateIO*e.stateBytesSeq/(bw*e.beDecode) + chunks*e.scanChunk
	} else {
		// A kernel near the ridge point is slower than both roofline
		// bounds (the weight stream and the MMA pipes do not overlap
		// perfectly), so the two bounds are blended with a p-norm
		// instead of a hard max: a bigger decode batch still costs a
		// little more time, rather than nothing until the batch
		// reaches the ridge.
		wbw := bw
		if e.weightBW > 0 {
			wbw = e.weightBW
		}
		tGemm := smoothMax(flops/(e.peak*e.gemmEff), wb/wbw)
		tAttn := attnWork * e.attnFlopsCoef / (e.hw.BF16TFLOPS * 1e12 * e.c.AttnEff * e.bePrefill)
		tAttn += (ctxSum*e.kvBytesTok + stateIO*e.stateBytesSeq) / (bw * e.beDecode)
		tAttn += chunks * e.scanChunk
		tComm := 0.0
		if e.commPerTok > 0 {
			tComm = e.commFixed + e.commPerTok*tokens
		}
		gpu = tGemm + tAttn + tComm
	}
	cpu := (e.c.StepMs+e.c.SeqUs*seqs/1000)/1000 + e.c.PrefillUs*prefillTok/1e6
	if !e.graphed(int(seqs)) || (prefills > 0 && !e.kind.graphsPrefill) {
		// No CUDA graph for this batch: kernel launches are exposed.
		cpu += e.c.EagerMs / 1000
	}
	if *e.p.AsyncScheduling {
		return math.Max(gpu, cpu) + 0.15*math.Min(gpu, cpu)
	}
	return gpu + cpu
}

// graphed reports whether a decode step of n sequences replays a captured
// CUDA graph.
func (e *Engine) graphed(n int) bool {
	if n*e.graphDQL > e.graphMax {
		return false
	}
	if e.graphSizes == nil {
		return true
	}
	_, ok := slices.BinarySearch(e.graphSizes, n)
	return ok
}

func (e *Engine) queueEvent(s *seq, t float64, tokens int, done bool, err error) {
	e.pending = append(e.pending, Event{ReqID: s.id, Time: t, Tokens: tokens, Done: done, Err: err})
}

// frontendOut is when the client sees an output the engine produced at t
// for s: the API server handles outputs one at a time, in order, and in the
// same queue as its admissions unless the kind keeps them apart
// (Kind.outputsApart); an output that finds the same request's previous one
// still queued is merged into it (one chunk, no extra cost), as vLLM's
// output collector and SGLang's detokenizer coalesce a lagging stream.
func (e *Engine) frontendOut(s *seq, t float64) float64 {
	if e.c.OutputUs <= 0 {
		return t
	}
	cost := e.c.OutputUs / 1e6
	if t < s.feOutAt-cost {
		return s.feOutAt
	}
	free := &e.feFree
	if e.kind.outputsApart {
		free = &e.feOut
	}
	*free = math.Max(*free, t) + cost
	s.feOutAt = *free
	return *free
}

// Submit queues a request. Its arrival must not be earlier than the last
// Advance; an earlier one is treated as arriving now.
func (e *Engine) Submit(r Req) { e.submit(r, -1) }

func (e *Engine) submit(r Req, user int) {
	t := math.Max(r.Arrival, e.now)
	if e.inflight != nil {
		t = math.Max(r.Arrival, e.inflight.start)
	}
	s := &seq{id: r.ID, prompt: r.PromptLen, output: max(r.OutputLen, 1), group: r.PrefixGroup,
		prefixLen: min(r.PrefixLen, r.PromptLen), user: user}
	s.target = s.prompt
	if r.PromptLen <= 0 || r.PromptLen+max(r.OutputLen, 1) > e.p.MaxModelLen ||
		(e.kind.budgetCapsPrompt && !*e.p.ChunkedPrefill && r.PromptLen > e.budget) {
		s.done = true
		err := fmt.Errorf("%w: this model's maximum context length is %d tokens, but %d tokens were requested (%d in the messages, %d in the completion)",
			ErrContext, e.p.MaxModelLen, r.PromptLen+r.OutputLen, r.PromptLen, r.OutputLen)
		if r.PromptLen <= 0 {
			err = fmt.Errorf("%w: empty prompt", ErrContext)
		} else if r.PromptLen+max(r.OutputLen, 1) <= e.p.MaxModelLen {
			err = fmt.Errorf("%w: prompt of %d tokens exceeds max_num_tokens %d without chunked prefill", ErrContext, r.PromptLen, e.budget)
		}
		e.emit(s, t, 0, true, err)
		return
	}
	if e.crashed != nil {
		s.done = true
		e.emit(s, t, 0, true, e.crashed)
		return
	}
	fe := e.c.FrontendMs / 1000
	e.feFree = math.Max(e.feFree, t) + fe
	s.ready = e.feFree
	e.waiting = append(e.waiting, s)
	if e.c.CoreAddMs > 0 {
		e.inbox = append(e.inbox, s)
	}
	e.stats.Waiting = len(e.waiting)
}

// takeInbox is when the scheduler thread can schedule a step it would
// start at t: it first takes every request the API server has handed
// over, one at a time (CoreAddMs each), and goes on taking those that
// arrive meanwhile until its queue is empty. vLLM's EngineCoreProc does
// this in _process_input_queue before every step, SGLang's scheduler in
// recv_requests/process_input_requests, TensorRT-LLM's executor when it
// fetches new requests; a request is schedulable once taken. Under a
// burst faster than CoreAddMs the engine steps on nothing until the
// whole burst is in.
func (e *Engine) takeInbox(t float64) float64 {
	if e.c.CoreAddMs <= 0 {
		return t
	}
	cost := e.c.CoreAddMs / 1000
	t = math.Max(t, e.coreFree)
	n := 0
	for n < len(e.inbox) && e.inbox[n].ready <= t {
		s := e.inbox[n]
		n++
		if s.done {
			continue // cancelled while queued
		}
		t += cost
		s.ready = t
	}
	if n > 0 {
		clear(e.inbox[:n])
		e.inbox = e.inbox[n:]
	}
	e.coreFree = t
	return t
}

// NextEventTime is when the engine next has something to report or do:
// the end of the step in flight, or the start of the next one.
func (e *Engine) NextEventTime() (float64, bool) {
	if e.inflight != nil {
		return e.inflight.end, true
	}
	if len(e.running) > 0 {
		return math.Max(e.now, e.coreFree), true
	}
	if len(e.waiting) > 0 {
		r := math.Inf(1)
		for _, s := range e.waiting {
			r = math.Min(r, s.ready)
		}
		return math.Max(math.Max(r, e.now), e.coreFree), true
	}
	if len(e.pending) > 0 {
		return e.now, true
	}
	return 0, false
}

// Advance runs the engine up to time to and returns what happened.
func (e *Engine) Advance(to float64) []Event {
	// Rejections from Submit are reported by the next Advance.
	e.advance(to)
	out := make([]Event, len(e.pending))
	copy(out, e.pending)
	e.pending = e.pending[:0]
	return out
}

func (e *Engine) advance(to float64) {
	for {
		if e.inflight == nil {
			start := e.now
			if len(e.running) == 0 {
				if len(e.waiting) == 0 {
					e.now = math.Max(e.now, to)
					return
				}
				r := math.Inf(1)
				for _, s := range e.waiting {
					r = math.Min(r, s.ready)
				}
				start = math.Max(start, r)
			}
			if start > to {
				e.now = math.Max(e.now, to)
				return
			}
			if start = e.takeInbox(start); start > to {
				e.now = math.Max(e.now, to)
				return
			}
			st := e.schedule(start)
			if st == nil && e.stalled(start) {
				continue
			}
			if st == nil {
				// Nothing schedulable now (waiting for the frontend).
				nxt := math.Inf(1)
				for _, s := range e.waiting {
					if s.ready > start {
						nxt = math.Min(nxt, s.ready)
					}
				}
				if math.IsInf(nxt, 1) || nxt > to {
					e.now = math.Max(start, math.Min(to, nxt))
					return
				}
				e.now = nxt
				continue
			}
			e.inflight = st
		}
		if e.inflight.end > to {
			return
		}
		st := e.inflight
		e.finish(st)
		e.now = st.end
		e.itemBuf = st.items[:0]
		e.inflight = nil
		e.exposeFault(len(st.items), st.end-st.start, st.end)
	}
}

// rooflineP is the p-norm exponent that blends compute and memory bounds.
const rooflineP = 2.0

func smoothMax(a, b float64) float64 {
	if a <= 0 || b <= 0 {
		return math.Max(a, b)
	}
	return math.Pow(math.Pow(a, rooflineP)+math.Pow(b, rooflineP), 1/rooflineP)
}

func (e *Engine) schedule(start float64) *step {
	items := e.itemBuf[:0]
	items = e.kind.schedule(e, start)
	e.stats.Running = len(e.running)
	e.stats.Waiting = len(e.waiting)
	if len(items) == 0 {
		return nil
	}
	d := e.stepTime(items)
	e.stepBuf = step{start: start, end: start + d, items: items}
	return &e.stepBuf
}

// peekWaiting looks at the head of the waiting queue for admission at
// start: ok is false while the API server has not handed it over yet;
// otherwise its prefix-cache hit is applied, rem is the prompt left to
// prefill and n what a budget of budget tokens takes of it. Every engine's
// scheduler admits in this FIFO order; what it checks next is its own.
func (e *Engine) peekWaiting(start float64, budget int) (s *seq, rem, n int, ok bool) {
	s = e.waiting[0]
	if s.ready > start {
		return nil, 0, 0, false
	}
	e.prefixHit(s)
	rem = s.target - s.computed
	return s, rem, min(rem, budget), true
}

// prefixHit applies the prefix cache to a sequence about to start prefill.
func (e *Engine) prefixHit(s *seq) {
	if s.cached > 0 && s.computed == 0 {
		// A preempted request finds its own freed blocks still cached
		// (vLLM keeps freed blocks' hashes until they are evicted; SGLang
		// inserts retracted requests into the radix tree). The free queue
		// is LRU: allocations since the preemption first used the blocks
		// that were free before it, then evicted this request's blocks,
		// last block first.
		cb := s.cached / e.blockSize
		evicted := int(min(max(e.allocated-s.allocMark-int64(s.freeBefore), 0), int64(cb)))
		s.computed = min((cb-evicted)*e.blockSize, s.target-1)
		s.computed -= s.computed % e.blockSize
		// s.cached stays until the request is admitted: a request that
		// cannot be scheduled now finds the same blocks next step.
		return
	}
	if !*e.p.PrefixCaching || s.group == 0 || s.computed > 0 || s.generated > 0 {
		return
	}
	if c, ok := e.seen[s.group]; ok {
		hit := min(c, s.prefixLen, s.prompt-1)
		hit -= hit % e.blockSize
		if hit > 0 {
			s.computed = hit
		}
	}
}

func (e *Engine) grow(s *seq, tokens int) bool {
	need := e.blocksFor(tokens) - s.blocks
	if s.blocks == 0 {
		need += e.stateBlocks
	}
	if need <= 0 {
		return true
	}
	if s.reserved > 0 {
		// TRT-LLM reserved the whole sequence at admission.
		s.blocks += need
		return true
	}
	if need > e.freeBlocks {
		return false
	}
	e.freeBlocks -= need
	e.allocated += int64(need)
	s.blocks += need
	s.cached = 0
	return true
}

func (e *Engine) release(s *seq) {
	if s.reserved > 0 {
		e.freeBlocks += s.reserved
	} else {
		e.freeBlocks += s.blocks
	}
	s.blocks, s.reserved = 0, 0
}

func (e *Engine) preempt(s *seq) {
	s.freeBefore, s.allocMark = e.freeBlocks, e.allocated
	e.release(s)
	e.stats.Preemptions++
	s.cached = 0
	if *e.p.PrefixCaching && !e.arch.Hybrid() {
		s.cached = s.computed - s.computed%e.blockSize
	}
	s.computed = 0
	s.target = s.prompt + s.generated
	s.prefillDone = false
	s.specCarry = 0
}

func (e *Engine) removeRunning(i int) {
	copy(e.running[i:], e.running[i+1:])
	e.running[len(e.running)-1] = nil
	e.running = e.running[:len(e.running)-1]
}

func (e *Engine) popWaiting() *seq {
	s := e.waiting[0]
	e.waiting[0] = nil
	e.waiting = e.waiting[1:]
	return s
}

func (e *Engine) pushWaitingFront(s *seq) {
	e.waiting = append(e.waiting, nil)
	copy(e.waiting[1:], e.waiting)
	e.waiting[0] = s
}

func (e *Engine) decodeTokens() int {
	if e.p.SpecMethod != "" {
		return 1 + e.p.SpecTokens
	}
	return 1
}

// scheduleVLLM is vLLM V1's unified scheduler: running requests first
// (decodes and unfinished chunked prefills), then waiting ones FCFS, all in
// one token budget; when a block cannot be allocated the newest running
// request is preempted and recomputed later.
func (e *Engine) scheduleVLLM(start float64) []work {
	budget := e.budget
	chunked := *e.p.ChunkedPrefill
	items := e.itemBuf[:0]
	preempted := false
	for i := 0; i < len(e.running) && budget > 0; i++ {
		s := e.running[i]
		var n int
		dec := s.prefillDone
		if dec {
			n = min(e.decodeTokens(), budget)
		} else {
			rem := s.target - s.computed
			n = min(rem, budget)
			if !chunked && n < rem {
				continue
			}
		}
		ok := true
		for !e.grow(s, s.computed+n) {
			victim := len(e.running) - 1
			if e.running[victim] == s {
				ok = false
				break
			}
			v := e.running[victim]
			e.removeRunning(victim)
			e.preempt(v)
			e.pushWaitingFront(v)
			preempted = true
		}
		if !ok {
			e.removeRunning(i)
			e.preempt(s)
			e.pushWaitingFront(s)
			preempted = true
			break
		}
		items = append(items, work{s: s, n: n, decode: dec})
		budget -= n
	}
	if preempted {
		return items
	}
	for len(e.waiting) > 0 && len(e.running) < e.maxSeqs && budget > 0 {
		s, rem, n, ok := e.peekWaiting(start, budget)
		if !ok || !chunked && n < rem {
			break
		}
		if !e.grow(s, s.computed+n) {
			s.computed = 0
			break
		}
		e.popWaiting()
		e.running = append(e.running, s)
		items = append(items, work{s: s, n: n})
		budget -= n
	}
	return items
}

// mixedChunk reports whether SGLang mixes running decodes into prefill
// batches: --enable-mixed-chunk, with chunked prefill on and no
// speculative decoding.
func (e *Engine) mixedChunk() bool {
	return e.p.MixedChunk && *e.p.ChunkedPrefill && e.p.SpecMethod == ""
}

// scheduleSGLang alternates prefill batches (new requests, prioritized, up
// to the chunked-prefill size, admitted only if the pool can hold their
// prompt plus new_token_ratio of the outputs still to come) and decode
// batches of every running request; on a full pool it retracts requests.
func (e *Engine) scheduleSGLang(start float64) []work {
	items := e.itemBuf[:0]
	budget := e.budget
	if !*e.p.ChunkedPrefill {
		budget = math.MaxInt32
	}
	mixed := e.mixedChunk()
	if mixed {
		// The running decodes ride in the prefill batch, and their
		// tokens come out of its chunk budget (PrefillAdder's
		// mixed_with_decode_tokens).
		for _, s := range e.running {
			if s.prefillDone {
				budget--
			}
		}
	}
	// A chunked request in progress continues first.
	for _, s := range e.running {
		if !s.prefillDone {
			n := min(s.target-s.computed, budget)
			if e.grow(s, s.computed+n) {
				items = append(items, work{s: s, n: n})
				budget -= n
			}
		}
	}
	reserve := 0.0
	for _, s := range e.running {
		reserve += e.newRatio * float64(s.output-s.generated)
	}
	for len(e.waiting) > 0 && len(e.running) < e.maxSeqs && budget > 0 {
		s, rem, n, ok := e.peekWaiting(start, budget)
		if !ok {
			break
		}
		want := float64(rem) + e.newRatio*float64(s.output-s.generated)
		if float64(e.freeBlocks*e.blockSize)-reserve < want && len(e.running) > 0 {
			s.computed = 0
			break
		}
		if !e.grow(s, s.computed+n) {
			s.computed = 0
			break
		}
		reserve += e.newRatio * float64(s.output-s.generated)
		e.popWaiting()
		e.running = append(e.running, s)
		items = append(items, work{s: s, n: n})
		budget -= n
	}
	if len(items) > 0 {
		if mixed {
			// mix_with_running: one decode step of every running request
			// that has room for it (a mixed batch retracts nobody).
			for _, s := range e.running {
				if s.prefillDone && e.grow(s, s.computed+1) {
					items = append(items, work{s: s, n: 1, decode: true})
				}
			}
		}
		return items
	}
	// Decode batch.
	for i := 0; i < len(e.running); i++ {
		s := e.running[i]
		if !s.prefillDone {
			continue
		}
		n := e.decodeTokens()
		for !e.grow(s, s.computed+n) {
			// Retract the request with the fewest decoded tokens.
			vi := -1
			for j, v := range e.running {
				if v != s && (vi < 0 || v.generated < e.running[vi].generated) {
					vi = j
				}
			}
			if vi < 0 {
				break
			}
			v := e.running[vi]
			e.removeRunning(vi)
			e.preempt(v)
			e.pushWaitingFront(v)
			e.newRatio = 0.7
			if vi < i {
				i--
				// The victim's decode is already in this batch: it
				// leaves with it, or it would finish from the waiting
				// queue and be admitted again, done, forever.
				for k, w := range items {
					if w.s == v {
						items = append(items[:k], items[k+1:]...)
						break
					}
				}
			}
		}
		if s.blocks < e.blocksFor(s.computed+n) {
			continue
		}
		items = append(items, work{s: s, n: n, decode: true})
	}
	e.newRatio = math.Max(0.1, e.newRatio-0.0015)
	return items
}

// scheduleTRT is TensorRT-LLM's in-flight batching with the
// GUARANTEED_NO_EVICT capacity policy: a request is admitted only when the
// blocks for its whole prompt and output can be reserved, so nothing is
// ever preempted; context and generation requests share max_num_tokens.
func (e *Engine) scheduleTRT(start float64) []work {
	budget := e.budget
	chunked := *e.p.ChunkedPrefill
	items := e.itemBuf[:0]
	for _, s := range e.running {
		if s.prefillDone {
			n := e.decodeTokens()
			e.grow(s, s.computed+n)
			items = append(items, work{s: s, n: n, decode: true})
			budget -= n
		}
	}
	for _, s := range e.running {
		if !s.prefillDone && budget > 0 {
			n := min(s.target-s.computed, budget)
			if !chunked && n < s.target-s.computed {
				continue
			}
			e.grow(s, s.computed+n)
			items = append(items, work{s: s, n: n})
			budget -= n
		}
	}
	for len(e.waiting) > 0 && len(e.running) < e.maxSeqs && budget > 0 {
		s, rem, n, ok := e.peekWaiting(start, budget)
		if !ok || !chunked && n < rem {
			break
		}
		need := e.blocksFor(s.prompt+s.output) + e.stateBlocks
		if need > e.freeBlocks {
			s.computed = 0
			break
		}
		e.freeBlocks -= need
		s.reserved = need
		e.grow(s, s.computed+n)
		e.popWaiting()
		e.running = append(e.running, s)
		items = append(items, work{s: s, n: n})
		budget -= n
	}
	return items
}

// finish applies a step's results at its end time.
func (e *Engine) finish(st *step) {
	t := st.end
	anyDone := false
	for _, w := range st.items {
		s := w.s
		if s.done {
			continue
		}
		var tok int
		if !w.decode {
			s.computed += w.n
			e.stats.PromptTokens += int64(w.n)
			if s.computed >= s.target {
				s.prefillDone = true
				tok = 1
				if *e.p.PrefixCaching && s.group != 0 && s.prefixLen > e.seen[s.group] {
					e.seen[s.group] = s.prefixLen
				}
			}
		} else {
			acc := 1
			if e.specAccepted > 1 {
				s.specCarry += e.specAccepted
				acc = int(s.specCarry)
				s.specCarry -= float64(acc)
			}
			tok = acc
		}
		if tok == 0 {
			continue
		}
		tok = min(tok, s.output-s.generated)
		s.generated += tok
		if w.decode {
			s.computed += tok
		}
		e.stats.GenerationTokens += int64(tok)
		if s.generated >= s.output {
			s.done = true
			anyDone = true
			e.release(s)
		}
		e.emit(s, e.frontendOut(s, t), tok, s.done, nil)
	}
	if anyDone {
		k := 0
		for _, s := range e.running {
			if !s.done {
				e.running[k] = s
				k++
			}
		}
		for i := k; i < len(e.running); i++ {
			e.running[i] = nil
		}
		e.running = e.running[:k]
	}
	e.stats.Running = len(e.running)
	e.stats.Waiting = len(e.waiting)
}

// ResetPrefixCache forgets every cached prefix, as the engines' reset
// endpoints do between two measurements on one server. Like vLLM's, it
// refuses (false) while requests hold KV blocks: a reset then would free
// blocks still in use.
func (e *Engine) ResetPrefixCache() bool {
	if len(e.running) > 0 || len(e.waiting) > 0 {
		return false
	}
	clear(e.seen)
	return true
}

// Cancel drops a request whose client went away, as the engines abort a
// request on disconnect: a waiting one leaves the queue, a running one frees
// its KV blocks and its batch slot. A step already in flight still takes the
// time it was scheduled for. It reports whether the request was found.
func (e *Engine) Cancel(id string) bool {
	for i, s := range e.waiting {
		if s.id == id {
			copy(e.waiting[i:], e.waiting[i+1:])
			e.waiting[len(e.waiting)-1] = nil
			e.waiting = e.waiting[:len(e.waiting)-1]
			s.done = true
			e.release(s)
			e.stats.Waiting = len(e.waiting)
			return true
		}
	}
	for i, s := range e.running {
		if s.id == id && !s.done {
			s.done = true
			e.release(s)
			e.removeRunning(i)
			e.stats.Running = len(e.running)
			return true
		}
	}
	return false
}

// Stats reports the engine's current state.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.Running = len(e.running)
	s.Waiting = len(e.waiting)
	if e.totalBlocks > 0 {
		s.KVUsage = float64(e.totalBlocks-e.freeBlocks) / float64(e.totalBlocks)
	}
	return s
}

// stalled handles a schedule that can make no progress although work is
// ready: a request that cannot fit in the KV cache even alone. The engine
// rejects it (vLLM and SGLang would abort it) instead of spinning.
func (e *Engine) stalled(start float64) bool {
	ready := len(e.waiting) > 0 && e.waiting[0].ready <= start
	if len(e.running) > 0 {
		// Running requests that cannot grow: abort the newest.
		s := e.running[len(e.running)-1]
		e.removeRunning(len(e.running) - 1)
		e.release(s)
		s.done = true
		e.emit(s, start, 0, true, fmt.Errorf("%w: request %s needs more KV cache than the engine has (%d tokens)", ErrContext, s.id, e.totalBlocks*e.blockSize))
		return true
	}
	if ready {
		s := e.popWaiting()
		s.done = true
		e.emit(s, start, 0, true, fmt.Errorf("%w: request %s (%d prompt tokens) needs more KV cache than the engine has (%d tokens)", ErrContext, s.id, s.target, e.totalBlocks*e.blockSize))
		return true
	}
	return false
}
