package sim

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/safeyaml"
)

// Coef holds the fitted efficiency and overhead figures of one engine
// version on one GPU. The roofline gives ideal times; these turn them into
// what that software stack achieves.
type Coef struct {
	// GEMMEff is the share of the dense BF16 peak that compute-bound GEMMs reach.
	GEMMEff float64 `json:"gemm_eff"`
	// FP8Eff is the share of the dense FP8 peak that FP8 GEMMs reach.
	FP8Eff float64 `json:"fp8_eff"`
	// MemEff is the share of HBM bandwidth that weight and KV reads reach.
	MemEff float64 `json:"mem_eff"`
	// AttnEff is the share of the BF16 peak that prefill attention reaches.
	AttnEff float64 `json:"attn_eff"`
	// StepMs is the fixed CPU/launch cost of one engine step.
	StepMs float64 `json:"step_ms"`
	// SeqUs is the per-sequence cost of one step (scheduling, sampling,
	// detokenizing and streaming).
	SeqUs float64 `json:"seq_us"`
	// FrontendMs is the serialized API-server cost of admitting one request
	// (parsing, chat template, tokenization).
	FrontendMs float64 `json:"frontend_ms"`
	// OutputUs is the serialized API-server cost of one streamed output
	// (detokenizing and writing a chunk for one request after one step).
	// Outputs are served one at a time, in the admissions' queue unless the
	// engine keeps them apart (Kind.outputsApart, vLLM); in one queue the
	// first tokens of a burst wait behind its admissions.
	OutputUs float64 `json:"output_us,omitempty"`
	// CoreAddMs is the scheduler thread's cost of taking one new request
	// off its input queue, paid between steps and not overlapped with
	// them: the engine drains its whole queue before each step, so a
	// burst is taken in full before the first step that holds it.
	CoreAddMs float64 `json:"core_add_ms,omitempty"`
	// ScanEff is the share of the dense BF16 peak that the chunked scan of
	// the linear-attention (Gated DeltaNet) layers reaches, per 64-token
	// chunk. Zero means the prior (defaultScanEff).
	ScanEff float64 `json:"scan_eff,omitempty"`
	// WeightStreamEff, when above MemEff, is the share of HBM bandwidth the
	// weight stream reaches, apart from the KV reads MemEff prices. Zero
	// in every fitted calibration: PredictSpan sets it to what measured
	// whole decode steps reach, for the range's small-batch bound.
	WeightStreamEff float64 `json:"weight_stream_eff,omitempty"`
	// PrefillUs is the per-prompt-token cost of a step beyond its kernels
	// (input preparation, and what the measured kernels miss of the
	// engine's own). Fitted under the kernel-table step model only.
	PrefillUs float64 `json:"prefill_us,omitempty"`
	// KernelScale is the engine's GPU time per step over what the kernel
	// table prices for the same kernels (StepKernels only; zero means 1):
	// the glue between them, their launch gaps, and what a campaign's GPU
	// does apart from the one the table was measured on. A ratio, not a
	// host cost, so that a batch of four pays it in proportion to its
	// kernels rather than a whole large batch's fixed cost.
	KernelScale float64 `json:"kernel_scale,omitempty"`
	// EagerMs is the extra cost of a step that runs without a CUDA graph
	// (batch above the captured sizes, or enforce-eager).
	EagerMs float64 `json:"eager_ms"`
	// Backend scales prefill attention speed per attention backend (1 =
	// the engine's default backend).
	Backend map[string]float64 `json:"backend,omitempty"`
	// BackendDecode scales decode attention (KV reads) per backend.
	BackendDecode map[string]float64 `json:"backend_decode,omitempty"`
}

// Coefficients is the calibration: Coef per "GPU/engine/version", with
// fallbacks "GPU/engine", "engine", the same engine's nearest version, the
// GPU's pool ("H100": what the engines measured on it share) and "*".
type Coefficients struct {
	// Source says where the figures came from.
	Source string `json:"source,omitempty"`
	// StepModel is the step model the coefficients were fitted under
	// (empty: the roofline).
	StepModel StepModel `json:"step_model,omitempty"`
	// Entries maps a key to its coefficients.
	Entries map[string]Coef `json:"entries"`
	// Held names, per key, the coefficients the fit kept at their prior
	// because that group's blocks did not pin them (FitOptions.MinInfluence).
	Held map[string][]string `json:"held,omitempty"`
	// Models names, per key, the models its group's blocks ran. An engine
	// version fitted on one attention kind only (hybrid linear attention,
	// or full attention) is passed over for a model of the other kind
	// (For): what one block of a hybrid model shows of an engine version
	// is no evidence of its full-attention path, and the reverse.
	Models map[string][]string `json:"models,omitempty"`
}

//go:embed coefficients.json
var embeddedCoefficients []byte

// defaultCoef is the prior: typical Hopper serving efficiencies.
var defaultCoef = Coef{GEMMEff: 0.6, FP8Eff: 0.45, MemEff: 0.75, AttnEff: 0.4, StepMs: 4, SeqUs: 20, FrontendMs: 1, EagerMs: 8}

// defaultScanEff is the prior for Coef.ScanEff, from vllm#44700's kernel
// timings: 953 one-token decodes plus 7,239 prompt tokens through the chunked
// scan took 4,362 µs on B200 (Qwen3.5-397B, 64 value heads), about 4.1 µs per
// chunk and layer: 738 MFLOP by scanChunkFlops, 8% of that GPU's dense BF16
// peak.
const defaultScanEff = 0.08

func (c Coef) kernelScale() float64 {
	if c.KernelScale > 0 {
		return c.KernelScale
	}
	return 1
}

func (c Coef) scanEff() float64 {
	if c.ScanEff > 0 {
		return c.ScanEff
	}
	return defaultScanEff
}

// DefaultCoefficients returns the embedded calibration, fitted to the
// reference reports.
func DefaultCoefficients() *Coefficients {
	c, err := ParseCoefficients(embeddedCoefficients)
	if err != nil {
		// The embedded file is tested; a broken build falls back to priors.
		return &Coefficients{Source: "prior", Entries: map[string]Coef{"*": defaultCoef}}
	}
	return c
}

// ParseCoefficients decodes a coefficients JSON document.
func ParseCoefficients(b []byte) (*Coefficients, error) {
	if err := safeyaml.CheckJSON(b, safeyaml.Defaults); err != nil {
		return nil, fmt.Errorf("sim: coefficients: %w", err)
	}
	var c Coefficients
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("sim: coefficients: %w", err)
	}
	if c.Entries == nil {
		c.Entries = map[string]Coef{}
	}
	if err := c.StepModel.check(); err != nil {
		return nil, fmt.Errorf("sim: coefficients: step_model: %w", err)
	}
	for k, e := range c.Entries {
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("sim: coefficients: entry %q: %w", k, err)
		}
	}
	return &c, nil
}

// check rejects figures no engine has: an efficiency outside [0.001, 1.5]
// (scan_eff may be 0, the prior, and weight_stream_eff 0, unset), an
// overhead that is negative or above 100 s, and a backend speed outside
// (0, 100].
func (e Coef) check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"gemm_eff", e.GEMMEff}, {"fp8_eff", e.FP8Eff}, {"mem_eff", e.MemEff}, {"attn_eff", e.AttnEff}, {"scan_eff", e.ScanEff}, {"weight_stream_eff", e.WeightStreamEff}} {
		if (f.name == "scan_eff" || f.name == "weight_stream_eff") && f.v == 0 {
			continue
		}
		if !(f.v >= 0.001 && f.v <= 1.5) {
			return fmt.Errorf("%s %g: efficiencies must be in [0.001, 1.5]", f.name, f.v)
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"step_ms", e.StepMs}, {"seq_us", e.SeqUs}, {"frontend_ms", e.FrontendMs}, {"output_us", e.OutputUs}, {"core_add_ms", e.CoreAddMs}, {"eager_ms", e.EagerMs}, {"prefill_us", e.PrefillUs}} {
		if !(f.v >= 0 && f.v <= 1e5) {
			return fmt.Errorf("%s %g: overheads must be in [0, 100000]", f.name, f.v)
		}
	}
	if e.KernelScale != 0 && !(e.KernelScale >= 0.1 && e.KernelScale <= 10) {
		return fmt.Errorf("kernel_scale %g: must be 0 (unset) or in [0.1, 10]", e.KernelScale)
	}
	for name, m := range map[string]map[string]float64{"backend": e.Backend, "backend_decode": e.BackendDecode} {
		for b, v := range m {
			if !(v > 0 && v <= 100) {
				return fmt.Errorf("%s %q %g: a backend's speed must be in (0, 100]", name, b, v)
			}
		}
	}
	return nil
}

// LoadCoefficients reads a coefficients JSON file (as `perflab sim
// calibrate` writes it).
func LoadCoefficients(path string) (*Coefficients, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sim: read coefficients: %w", err)
	}
	c, err := ParseCoefficients(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Key is the Entries key of one GPU/engine/version.
func Key(gpu, engine, version string) string { return gpu + "/" + engine + "/" + version }

// Lookup returns the coefficients for a deployment, falling back from the
// exact version to the engine on that GPU, the engine anywhere, the same
// engine's nearest version on that GPU, the GPU's pool of the engines
// measured on it, the same engine's nearest version on any GPU, then "*".
func (c *Coefficients) Lookup(gpu, eng, version string) (Coef, string) {
	if c != nil {
		for _, k := range []string{Key(gpu, eng, version), gpu + "/" + eng, eng} {
			if e, ok := c.Entries[k]; ok {
				return e, k
			}
		}
		if k := c.nearest(gpu, eng, version, nil); k != "" {
			return c.Entries[k], k
		}
		if e, ok := c.Entries[gpu]; ok && gpu != "" {
			return e, gpu
		}
		if k := c.nearest("", eng, version, nil); k != "" {
			return c.Entries[k], k
		}
		if e, ok := c.Entries["*"]; ok {
			return e, "*"
		}
	}
	return defaultCoef, "prior"
}

// nearest is the key of the same engine's nearest fitted version on gpu
// (any GPU when gpu is empty) that keep accepts (nil: any): the newest one
// not above version, else the oldest above it. Empty when there is none.
func (c *Coefficients) nearest(gpu, eng, version string, keep func(key string) bool) string {
	var keys []string
	for k := range c.Entries {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) == 3 && parts[1] == eng && (gpu == "" || parts[0] == gpu) && (keep == nil || keep(k)) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	ver := func(k string) string { return strings.SplitN(k, "/", 3)[2] }
	sort.Slice(keys, func(i, j int) bool {
		if c := engine.CompareVersions(ver(keys[i]), ver(keys[j])); c != 0 {
			return c < 0
		}
		return keys[i] < keys[j]
	})
	best := keys[0]
	for _, k := range keys {
		if version == "" || engine.VersionAtLeast(version, ver(k)) {
			best = k
		}
	}
	return best
}

// For returns the coefficients deployment p (defaults applied) runs on and
// the key they come from: Lookup's, except that an engine version fitted
// only on models of the other attention kind than p's is passed over for
// the same engine's nearest version fitted on p's kind, on that GPU first,
// then on any, where there is one.
func (c *Coefficients) For(p Params) (Coef, string) {
	if c == nil {
		c = DefaultCoefficients()
	}
	gpu := gpuName(p.GPU)
	e, from := c.Lookup(gpu, p.Engine, p.Version)
	a, err := p.arch()
	if err != nil || !c.otherKind(from, a.Hybrid()) {
		return e, from
	}
	// In Lookup's order: this GPU first, then any GPU (a GPU with no
	// calibration of its own borrows another's, the kind still matters).
	keep := func(k string) bool { return !c.otherKind(k, a.Hybrid()) }
	for _, g := range []string{gpu, ""} {
		if k := c.nearest(g, p.Engine, p.Version, keep); k != "" {
			return c.Entries[k], k
		}
	}
	return e, from
}

// otherKind reports whether the entry key was fitted only on models whose
// attention kind is not the one hybrid says. An entry with no record of
// its models (a pool, the prior, a hand-written file) or with a model the
// catalog does not know is taken as fitted on both.
func (c *Coefficients) otherKind(key string, hybrid bool) bool {
	models := c.Models[key]
	if len(models) == 0 {
		return false
	}
	for _, m := range models {
		a, err := LookupModel(m)
		if err != nil || a.Hybrid() == hybrid {
			return false
		}
	}
	return true
}

// gpuName is the catalog's name for gpu, or gpu itself when the catalog
// does not know it.
func gpuName(gpu string) string {
	if hw, err := LookupGPU(gpu); err == nil {
		return hw.Name
	}
	return gpu
}

// Borrowed reports whether deployment p (defaults applied) runs on
// coefficients fitted to something else (another version of the engine,
// the same version on models of the other attention kind, another GPU, the
// GPU's pool or the generic prior) and names what they were fitted to:
// such a prediction carries an error the calibration never measured, and
// says so.
func (c *Coefficients) Borrowed(p Params) (from string, borrowed bool) {
	if c == nil {
		c = DefaultCoefficients()
	}
	_, from = c.For(p)
	return from, from != Key(gpuName(p.GPU), p.Engine, p.Version)
}

// passedOver reports whether p's own engine version has an entry that For
// passed over because it was fitted on the other attention kind only, and
// the models it was fitted on.
func (c *Coefficients) passedOver(p Params) (models []string, ok bool) {
	if c == nil {
		c = DefaultCoefficients()
	}
	k := Key(gpuName(p.GPU), p.Engine, p.Version)
	if _, own := c.Entries[k]; !own {
		return nil, false
	}
	if _, from := c.For(p); from == k {
		return nil, false
	}
	return c.Models[k], true
}

// siblings returns, for a deployment whose coefficients are borrowed,
// calibrations in which each other fitted version of the same engine
// stands in for it: how far apart the versions the calibration has seen
// are is the least a version it has not seen may differ by. A version
// passed over for the other attention kind is among them: the deployment's
// own version, on the only evidence there is of it.
func (c *Coefficients) siblings(p Params) []*Coefficients {
	if c == nil {
		c = DefaultCoefficients()
	}
	from, borrowed := c.Borrowed(p)
	if !borrowed {
		return nil
	}
	var keys []string
	for k := range c.Entries {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) == 3 && parts[1] == p.Engine && k != from {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	own := Key(gpuName(p.GPU), p.Engine, p.Version)
	out := make([]*Coefficients, 0, len(keys))
	for _, k := range keys {
		alt := &Coefficients{Source: c.Source, StepModel: c.StepModel, Entries: map[string]Coef{}, Held: c.Held}
		for kk, v := range c.Entries {
			alt.Entries[kk] = v
		}
		alt.Entries[own] = c.Entries[k]
		out = append(out, alt)
	}
	return out
}

// ModelRevision numbers the simulator's step model. Bump it when a change
// moves predictions without a refit (a refit changes the coefficients, which
// Fingerprint hashes anyway).
const ModelRevision = 4

// Fingerprint identifies the simulator that predictions come from: the
// model revision and a hash of the calibration (nil: the embedded one). A
// lab run keys its stored trials by it, so a recalibrated or remodelled
// simulator starts a new run instead of mixing old and new figures.
func Fingerprint(c *Coefficients) string {
	if c == nil {
		c = DefaultCoefficients()
	}
	h := sha256.Sum256(c.JSON())
	return fmt.Sprintf("r%d-%s", ModelRevision, hex.EncodeToString(h[:6]))
}

// JSON encodes the coefficients, indented, keys sorted.
func (c *Coefficients) JSON() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}

func (c Coef) backend(name string) float64 {
	if v, ok := c.Backend[name]; ok && v > 0 {
		return v
	}
	return 1
}

func (c Coef) backendDecode(name string) float64 {
	if v, ok := c.BackendDecode[name]; ok && v > 0 {
		return v
	}
	return 1
}
