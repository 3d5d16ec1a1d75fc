package sim

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/perflab/perflab/internal/safeyaml"
)

// GPU is one accelerator of the hardware catalog. Compute figures are dense
// (no 2:4 sparsity), as serving kernels run them.
type GPU struct {
	Name string `json:"name"`
	// BF16TFLOPS and FP8TFLOPS are dense tensor-core peaks.
	BF16TFLOPS float64 `json:"bf16_tflops"`
	FP8TFLOPS  float64 `json:"fp8_tflops"`
	// HBMGBps is the memory bandwidth in GB/s.
	HBMGBps float64 `json:"hbm_gbps"`
	// MemGiB is the memory the driver reports as total.
	MemGiB float64 `json:"mem_gib"`
	// NVLinkGBps is the per-GPU NVLink bandwidth (0 = PCIe only).
	NVLinkGBps float64 `json:"nvlink_gbps"`
	// PCIeGBps is the host/peer link used when there is no NVLink.
	PCIeGBps float64 `json:"pcie_gbps"`
	// SM is the compute capability, major×10 + minor (90: Hopper): which
	// kernels an engine may pick (vLLM's Machete needs 90).
	SM int `json:"sm"`
	// SMs is the streaming-multiprocessor count (the kernel-table
	// transfer's wave quantization).
	SMs int `json:"sms"`
}

// gpuCatalog holds NVIDIA's datasheet figures, dense (a datasheet's
// "with sparsity" peaks halved; SM counts: H100 SXM5, H100 NVL and H200
// 132, H100 PCIe 114, every A100 108, L40S 142, L4 58, B200 148). MemGiB
// is what the driver reports as total (an "80GB" card's 81,920 MiB less
// the driver's reserve, as torch reads it).
var gpuCatalog = []GPU{
	{Name: "H100", BF16TFLOPS: 989, FP8TFLOPS: 1979, HBMGBps: 3350, MemGiB: 79.2, NVLinkGBps: 900, PCIeGBps: 64, SM: 90, SMs: 132},
	// The PCIe card: HBM2e at 2 TB/s and lower clocks on 114 SMs. Its
	// NVLink bridge joins two cards at most, so TP runs over PCIe.
	{Name: "H100-PCIe", BF16TFLOPS: 756, FP8TFLOPS: 1513, HBMGBps: 2039, MemGiB: 79.2, NVLinkGBps: 0, PCIeGBps: 64, SM: 90, SMs: 114},
	// H100 NVL: 94 GB of HBM3 at 3.9 TB/s, 835 dense BF16 TFLOPS. Its
	// NVLink bridge, like the PCIe card's, joins pairs only.
	{Name: "H100-NVL", BF16TFLOPS: 835, FP8TFLOPS: 1670, HBMGBps: 3900, MemGiB: 93.6, NVLinkGBps: 0, PCIeGBps: 64, SM: 90, SMs: 132},
	{Name: "H200", BF16TFLOPS: 989, FP8TFLOPS: 1979, HBMGBps: 4800, MemGiB: 139.8, NVLinkGBps: 900, PCIeGBps: 64, SM: 90, SMs: 132},
	// A100 has no FP8 tensor cores: FP8 checkpoints run weight-only
	// (half the weight bytes, BF16 math).
	{Name: "A100", BF16TFLOPS: 312, FP8TFLOPS: 312, HBMGBps: 2039, MemGiB: 79.2, NVLinkGBps: 600, PCIeGBps: 32, SM: 80, SMs: 108},
	// The 40 GB SXM4 card: HBM2 at 1.56 TB/s, the same chip and NVLink.
	{Name: "A100-40GB", BF16TFLOPS: 312, FP8TFLOPS: 312, HBMGBps: 1555, MemGiB: 39.4, NVLinkGBps: 600, PCIeGBps: 32, SM: 80, SMs: 108},
	// The 80 GB PCIe card: HBM2e at 1.94 TB/s; bridges join pairs only,
	// so TP runs over PCIe.
	{Name: "A100-PCIe", BF16TFLOPS: 312, FP8TFLOPS: 312, HBMGBps: 1935, MemGiB: 79.2, NVLinkGBps: 0, PCIeGBps: 32, SM: 80, SMs: 108},
	{Name: "L40S", BF16TFLOPS: 362, FP8TFLOPS: 733, HBMGBps: 864, MemGiB: 44.4, NVLinkGBps: 0, PCIeGBps: 32, SM: 89, SMs: 142},
	// L4: 24 GB of GDDR6 at 300 GB/s, Ada's FP8 cores.
	{Name: "L4", BF16TFLOPS: 121, FP8TFLOPS: 242, HBMGBps: 300, MemGiB: 22.5, NVLinkGBps: 0, PCIeGBps: 32, SM: 89, SMs: 58},
	{Name: "B200", BF16TFLOPS: 2250, FP8TFLOPS: 4500, HBMGBps: 8000, MemGiB: 178.4, NVLinkGBps: 1800, PCIeGBps: 64, SM: 100, SMs: 148},
}

var gpuAliases = map[string]string{
	"h100": "H100", "h100-sxm": "H100", "h100 sxm": "H100", "h100-80gb": "H100", "h100_sxm": "H100",
	"nvidia h100 80gb hbm3": "H100", "h100-sxm-80gb": "H100", "h100-sxm5": "H100", "h100 sxm5": "H100",
	"h100-pcie": "H100-PCIe", "h100 pcie": "H100-PCIe", "h100_pcie": "H100-PCIe", "h100-pcie-80gb": "H100-PCIe", "nvidia h100 pcie": "H100-PCIe",
	"h200": "H200", "h200-141gb": "H200", "nvidia h200": "H200",
	"h100-nvl": "H100-NVL", "h100 nvl": "H100-NVL", "h100_nvl": "H100-NVL", "nvidia h100 nvl": "H100-NVL",
	"a100": "A100", "a100-80gb": "A100", "a100-sxm": "A100", "a100_80gb": "A100", "nvidia a100-sxm4-80gb": "A100",
	"a100-sxm4-80gb": "A100",
	"a100-40gb":      "A100-40GB", "a100 40gb": "A100-40GB", "a100_40gb": "A100-40GB", "a100-sxm4-40gb": "A100-40GB",
	"nvidia a100-sxm4-40gb": "A100-40GB",
	"a100-pcie":             "A100-PCIe", "a100 pcie": "A100-PCIe", "a100_pcie": "A100-PCIe", "a100-pcie-80gb": "A100-PCIe",
	"nvidia a100 80gb pcie": "A100-PCIe", "nvidia a100-pcie-80gb": "A100-PCIe", "a100 80gb pcie": "A100-PCIe",
	"l40s": "L40S", "nvidia l40s": "L40S",
	"l4": "L4", "nvidia l4": "L4",
	"b200": "B200", "nvidia b200": "B200",
}

// LookupGPU finds a GPU by catalog name or common spelling ("H100",
// "h100-sxm", "NVIDIA H100 80GB HBM3", "H100 PCIe").
func LookupGPU(name string) (GPU, error) {
	key := strings.ToLower(strings.TrimSpace(name))
	if canon, ok := gpuAliases[key]; ok {
		key = strings.ToLower(canon)
	}
	for _, g := range gpuCatalog {
		if strings.ToLower(g.Name) == key {
			return g, nil
		}
	}
	return GPU{}, fmt.Errorf("unknown GPU %q (known: %s)", name, strings.Join(GPUNames(), ", "))
}

// fp8Cores reports whether g has FP8 tensor cores (Ada and Hopper on):
// without them an FP8 checkpoint runs weight-only, with 16-bit math.
func (g GPU) fp8Cores() bool { return g.FP8TFLOPS > g.BF16TFLOPS }

// GPUNames lists the hardware catalog.
func GPUNames() []string {
	out := make([]string, len(gpuCatalog))
	for i, g := range gpuCatalog {
		out[i] = g.Name
	}
	return out
}

// Arch is a model architecture, as its HF config.json describes it.
type Arch struct {
	Name                  string `json:"name"`
	HiddenSize            int    `json:"hidden_size"`
	NumLayers             int    `json:"num_hidden_layers"`
	NumHeads              int    `json:"num_attention_heads"`
	NumKVHeads            int    `json:"num_key_value_heads"`
	HeadDim               int    `json:"head_dim"`
	IntermediateSize      int    `json:"intermediate_size"`
	VocabSize             int    `json:"vocab_size"`
	MaxPositionEmbeddings int    `json:"max_position_embeddings"`
	TieEmbeddings         bool   `json:"tie_word_embeddings"`
	// MoE: NumExperts routed experts of MoEIntermediateSize, TopK per token.
	NumExperts          int `json:"num_experts,omitempty"`
	TopK                int `json:"num_experts_per_tok,omitempty"`
	MoEIntermediateSize int `json:"moe_intermediate_size,omitempty"`
	// Hybrid linear attention (Gated DeltaNet): every FullAttentionInterval-th
	// layer is full attention, the others keep a fixed per-sequence state.
	FullAttentionInterval int `json:"full_attention_interval,omitempty"`
	LinearKeyHeads        int `json:"linear_num_key_heads,omitempty"`
	LinearValueHeads      int `json:"linear_num_value_heads,omitempty"`
	LinearKeyHeadDim      int `json:"linear_key_head_dim,omitempty"`
	LinearValueHeadDim    int `json:"linear_value_head_dim,omitempty"`
	LinearConvKernel      int `json:"linear_conv_kernel_dim,omitempty"`
	// MTPLayers are the multi-token-prediction layers the checkpoint
	// carries (Qwen3.5's mtp_num_hidden_layers, DeepSeek's
	// num_nextn_predict_layers): without one, MTP has no draft.
	MTPLayers int `json:"mtp_num_hidden_layers,omitempty"`
	// ExtraParams counts weights outside the decoder (vision tower, MTP
	// head) that occupy memory but do not run per text token.
	ExtraParams float64 `json:"extra_params,omitempty"`
	// Vision is a multimodal checkpoint's vision tower (its config's
	// vision_config); nil for a text-only model.
	Vision *VisionTower `json:"vision_config,omitempty"`
	// FP8Weights is set for "-FP8" checkpoints.
	FP8Weights bool `json:"fp8_weights,omitempty"`
	// WeightBits is 4 or 8 for weight-only integer checkpoints (AWQ,
	// GPTQ): their linear layers stream that many bits per weight plus a
	// BF16 scale and zero point per group of 128, and multiply in BF16
	// (the Marlin kernels dequantize in registers). 0 for the others.
	WeightBits int `json:"weight_bits,omitempty"`
}

// VisionTower is the part of a vision_config an engine reads at start-up.
// Zero means the field is absent from the config: Qwen3.5's names its
// depth "depth", not "num_hidden_layers".
type VisionTower struct {
	NumHiddenLayers int `json:"num_hidden_layers,omitempty"`
	HiddenSize      int `json:"hidden_size,omitempty"`
}

// quantGroup is the group size of the AWQ and GPTQ checkpoints the Hub
// publishes (Qwen's, TheBloke's): one scale and one zero point, 2 bytes
// each, per 128 weights.
const quantGroup = 128

// linearBytesPerParam is what one weight of a linear layer costs to store
// and to stream.
func (a Arch) linearBytesPerParam() float64 {
	switch {
	case a.WeightBits > 0:
		return float64(a.WeightBits)/8 + 4.0/quantGroup
	case a.FP8Weights:
		return 1
	}
	return 2
}

// weightBytes is what the model's weights take, unsharded: linear layers
// in FP8 or weight-only INT4/INT8 at their own size; embeddings, LM head
// and norms in BF16.
func (a Arch) weightBytes() float64 {
	total, _, embed := a.paramCounts()
	bpp := a.linearBytesPerParam()
	if bpp == 2 {
		return total * 2
	}
	head := embed
	if a.TieEmbeddings {
		head = 0
	}
	return (total-embed-head)*bpp + (embed+head)*2
}

// streamBytes is what one forward step reads of the weights: every
// decoder layer and the LM head (the embedding itself when tied), but not
// an untied input embedding, of which a step looks up one row per token,
// nor the weights outside the decoder (ExtraParams), which text tokens do
// not run.
func (a Arch) streamBytes() float64 {
	total, _, embed := a.paramCounts()
	body := total - embed - a.ExtraParams
	if !a.TieEmbeddings {
		body -= embed // the LM head, read at 16 bits below
	}
	return body*a.linearBytesPerParam() + embed*2
}

// weightOnly reports whether a's linear layers run weight-only on hw: an
// INT4/INT8 checkpoint anywhere, an FP8 one on a GPU without FP8 tensor
// cores. Its weights stream at their own size and its GEMMs run 16-bit
// math through a kernel that dequantizes them.
func (a Arch) weightOnly(hw GPU) bool {
	return a.WeightBits > 0 || (a.FP8Weights && !hw.fp8Cores())
}

// quantSuffixes are the checkpoint suffixes that name a weight-only
// integer quantization of a base architecture, with its bits.
var quantSuffixes = []struct {
	suffix string
	bits   int
	name   string
}{
	{"-gptq-int4", 4, "-GPTQ-Int4"}, {"-gptq-int8", 8, "-GPTQ-Int8"}, {"-awq", 4, "-AWQ"}, {"-gptq", 4, "-GPTQ"},
}

// intQuant reads a quantization_config's method and bits: 4 or 8 for AWQ
// and GPTQ, 0 for anything else.
func intQuant(method string, bits int) int {
	m := strings.ToLower(method)
	if !strings.Contains(m, "awq") && !strings.Contains(m, "gptq") {
		return 0
	}
	if bits == 8 {
		return 8
	}
	return 4
}

// modelConfigs holds the config.json (the text decoder's fields, as the Hub
// publishes them) of each model the simulator knows offline: the catalog is
// data, read by the same parser as a user's --model-config, so no model has
// code of its own. One field is the simulator's, not the Hub's:
// extra_params, the weights outside the decoder (Qwen3.5-9B's vision tower
// and MTP head, 0.45e9) that occupy memory but run per text token never.
//
//go:embed models/*.json
var modelConfigs embed.FS

// archCatalog is modelConfigs parsed, by model name (the file name).
var archCatalog = func() map[string]Arch {
	out := map[string]Arch{}
	ents, err := fs.ReadDir(modelConfigs, "models")
	if err != nil {
		return out
	}
	for _, e := range ents {
		b, err := fs.ReadFile(modelConfigs, "models/"+e.Name())
		if err != nil {
			continue
		}
		a, err := parseModelConfig(b)
		if err != nil {
			// The embedded files are tested (TestCatalogConfigs); a
			// broken one is left out rather than served wrong.
			continue
		}
		out[strings.TrimSuffix(e.Name(), ".json")] = a
	}
	return out
}()

// ModelNames lists the embedded architectures.
func ModelNames() []string {
	out := make([]string, 0, len(archCatalog))
	for k := range archCatalog {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// releaseDate matches a release's date suffix ("-2507", "-0528").
var releaseDate = regexp.MustCompile(`-\d{4}$`)

// LookupModel resolves a catalog name or HF repo id ("Qwen/Qwen3-14B",
// "meta-llama/Llama-3.1-8B-Instruct", "Qwen3-32B-FP8"). A "-FP8" suffix
// means the base architecture with FP8 weights.
func LookupModel(name string) (Arch, error) {
	n := strings.TrimSpace(name)
	if i := strings.LastIndex(n, "/"); i >= 0 {
		n = n[i+1:]
	}
	low := strings.ToLower(n)
	fp8 := false
	for _, suf := range []string{"-fp8-dynamic", "-fp8"} {
		if strings.HasSuffix(low, suf) {
			fp8 = true
			low = strings.TrimSuffix(low, suf)
			break
		}
	}
	bits, quantName := 0, ""
	for _, q := range quantSuffixes {
		if !fp8 && strings.HasSuffix(low, q.suffix) {
			bits, quantName = q.bits, q.name
			low = strings.TrimSuffix(low, q.suffix)
			break
		}
	}
	// Release names add a tuning and a date to the architecture's name
	// ("Qwen3-235B-A22B-Instruct-2507", "-Thinking-2507"): the weights
	// differ, the shapes the simulator prices do not.
	for changed := true; changed; {
		changed = false
		if m := releaseDate.FindStringIndex(low); m != nil {
			low, changed = low[:m[0]], true
		}
		for _, suf := range []string{"-instruct", "-base", "-thinking", "-chat", "-it"} {
			if strings.HasSuffix(low, suf) {
				low, changed = strings.TrimSuffix(low, suf), true
			}
		}
	}
	low = strings.Replace(low, "meta-llama-", "llama-", 1)
	for k, a := range archCatalog {
		if strings.ToLower(k) == low {
			a.Name = k
			if fp8 {
				a.Name += "-FP8"
				a.FP8Weights = true
			}
			if bits > 0 {
				a.Name += quantName
				a.WeightBits = bits
			}
			return a, nil
		}
	}
	return Arch{}, fmt.Errorf("unknown model %q (known: %s; use --model-config for others)", name, strings.Join(ModelNames(), ", "))
}

// LoadModelConfig reads an HF config.json. Multimodal configs with a
// text_config take the text decoder's fields.
func LoadModelConfig(path string) (Arch, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Arch{}, fmt.Errorf("sim: read model config: %w", err)
	}
	a, err := parseModelConfig(b)
	if err != nil {
		return Arch{}, fmt.Errorf("sim: model config %s: %w", path, err)
	}
	return a, nil
}

func parseModelConfig(b []byte) (Arch, error) {
	if err := safeyaml.CheckJSON(b, safeyaml.Defaults); err != nil {
		return Arch{}, err
	}
	var raw struct {
		Arch
		NumLocalExperts    int             `json:"num_local_experts"`
		NRoutedExperts     int             `json:"n_routed_experts"`
		NextNLayers        int             `json:"num_nextn_predict_layers"`
		MaxSeqLen          int             `json:"max_seq_len"`
		LayerTypes         []string        `json:"layer_types"`
		TextConfig         json.RawMessage `json:"text_config"`
		QuantizationConfig *struct {
			QuantMethod string `json:"quant_method"`
			Bits        int    `json:"bits"`
		} `json:"quantization_config"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		return Arch{}, err
	}
	if len(raw.TextConfig) > 0 && raw.HiddenSize == 0 {
		a, err := parseModelConfig(raw.TextConfig)
		if err != nil {
			return Arch{}, fmt.Errorf("text_config: %w", err)
		}
		if q := raw.QuantizationConfig; q != nil {
			a.FP8Weights = a.FP8Weights || strings.Contains(strings.ToLower(q.QuantMethod), "fp8")
			if b := intQuant(q.QuantMethod, q.Bits); b > 0 {
				a.WeightBits = b
			}
		}
		if a.Vision == nil {
			a.Vision = raw.Vision
		}
		a.MTPLayers = max(a.MTPLayers, raw.MTPLayers, raw.NextNLayers)
		return a, nil
	}
	a := raw.Arch
	a.MTPLayers = max(a.MTPLayers, raw.NextNLayers)
	if a.NumExperts == 0 {
		a.NumExperts = max(raw.NumLocalExperts, raw.NRoutedExperts)
	}
	if a.NumKVHeads == 0 {
		a.NumKVHeads = a.NumHeads
	}
	if a.HeadDim == 0 && a.NumHeads > 0 {
		a.HeadDim = a.HiddenSize / a.NumHeads
	}
	if a.MaxPositionEmbeddings == 0 {
		a.MaxPositionEmbeddings = raw.MaxSeqLen
	}
	if a.FullAttentionInterval == 0 && len(raw.LayerTypes) > 0 {
		full := 0
		for _, t := range raw.LayerTypes {
			if t == "full_attention" {
				full++
			}
		}
		if full > 0 && full < len(raw.LayerTypes) {
			a.FullAttentionInterval = len(raw.LayerTypes) / full
		}
	}
	if q := raw.QuantizationConfig; q != nil {
		a.FP8Weights = a.FP8Weights || strings.Contains(strings.ToLower(q.QuantMethod), "fp8")
		a.WeightBits = intQuant(q.QuantMethod, q.Bits)
	}
	switch {
	case a.HiddenSize <= 0:
		return Arch{}, fmt.Errorf("hidden_size missing or not positive")
	case a.NumLayers <= 0:
		return Arch{}, fmt.Errorf("num_hidden_layers missing or not positive")
	case a.NumHeads <= 0:
		return Arch{}, fmt.Errorf("num_attention_heads missing or not positive")
	case a.IntermediateSize <= 0 && a.MoEIntermediateSize <= 0:
		return Arch{}, fmt.Errorf("intermediate_size missing")
	case a.VocabSize <= 0:
		return Arch{}, fmt.Errorf("vocab_size missing")
	case a.MaxPositionEmbeddings <= 0:
		return Arch{}, fmt.Errorf("max_position_embeddings missing")
	case a.NumExperts > 0 && a.TopK <= 0:
		return Arch{}, fmt.Errorf("num_experts_per_tok missing for an MoE model")
	}
	if err := a.checkCounts(); err != nil {
		return Arch{}, err
	}
	if a.NumExperts > 0 && a.MoEIntermediateSize == 0 {
		a.MoEIntermediateSize = a.IntermediateSize
	}
	return a, nil
}

// checkCounts rejects what no model has: a negative size or count, more
// experts per token than experts, and linear-attention layers without
// heads.
func (a Arch) checkCounts() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"num_key_value_heads", a.NumKVHeads}, {"head_dim", a.HeadDim},
		{"intermediate_size", a.IntermediateSize}, {"num_experts", a.NumExperts},
		{"num_experts_per_tok", a.TopK}, {"moe_intermediate_size", a.MoEIntermediateSize},
		{"full_attention_interval", a.FullAttentionInterval}, {"linear_num_key_heads", a.LinearKeyHeads},
		{"linear_num_value_heads", a.LinearValueHeads}, {"linear_key_head_dim", a.LinearKeyHeadDim},
		{"linear_value_head_dim", a.LinearValueHeadDim}, {"linear_conv_kernel_dim", a.LinearConvKernel},
	} {
		if f.v < 0 {
			return fmt.Errorf("%s is %d; it cannot be negative", f.name, f.v)
		}
	}
	switch {
	case a.NumKVHeads == 0 || a.HeadDim == 0:
		return fmt.Errorf("num_key_value_heads and head_dim must be positive")
	case a.NumExperts > 0 && a.TopK > a.NumExperts:
		return fmt.Errorf("num_experts_per_tok %d exceeds num_experts %d", a.TopK, a.NumExperts)
	case a.Hybrid() && (a.LinearKeyHeads == 0 || a.LinearValueHeads == 0 || a.LinearKeyHeadDim == 0 || a.LinearValueHeadDim == 0):
		return fmt.Errorf("linear-attention layers (full_attention_interval %d) need linear_num_key_heads, linear_num_value_heads, linear_key_head_dim and linear_value_head_dim", a.FullAttentionInterval)
	case a.ExtraParams < 0:
		return fmt.Errorf("extra_params cannot be negative")
	}
	return nil
}

// Hybrid reports whether the model mixes linear-attention layers (fixed
// state per sequence) with full-attention layers (KV per token).
func (a Arch) Hybrid() bool { return a.FullAttentionInterval > 1 }

// fullAttnLayers is the number of layers that keep a KV cache.
func (a Arch) fullAttnLayers() int {
	if !a.Hybrid() {
		return a.NumLayers
	}
	return a.NumLayers / a.FullAttentionInterval
}

func (a Arch) linearLayers() int { return a.NumLayers - a.fullAttnLayers() }

// attnParams is the weight count of one full-attention layer.
func (a Arch) attnParams() float64 {
	h, hd := float64(a.HiddenSize), float64(a.HeadDim)
	q := float64(a.NumHeads) * hd
	if a.Hybrid() {
		q *= 2 // gated attention output: q and gate projections
	}
	kv := 2 * float64(a.NumKVHeads) * hd
	o := float64(a.NumHeads) * hd * h
	return h*(q+kv) + o
}

// linearParams is the weight count of one Gated DeltaNet layer.
func (a Arch) linearParams() float64 {
	h := float64(a.HiddenSize)
	k := float64(a.LinearKeyHeads * a.LinearKeyHeadDim)
	v := float64(a.LinearValueHeads * a.LinearValueHeadDim)
	in := h * (2*k + 2*v + 2*float64(a.LinearValueHeads)) // q,k,v,z,b,a
	out := v * h
	return in + out
}

// mlpParams is the per-layer MLP weight count: all of it for dense models,
// and (total, active) for MoE.
func (a Arch) mlpParams() (total, active float64) {
	h := float64(a.HiddenSize)
	if a.NumExperts == 0 {
		p := 3 * h * float64(a.IntermediateSize)
		return p, p
	}
	e := 3 * h * float64(a.MoEIntermediateSize)
	router := h * float64(a.NumExperts)
	return e*float64(a.NumExperts) + router, e*float64(a.TopK) + router
}

// Params returns the total and per-token active weight counts (including
// embeddings and LM head), and the part of each that is embedding lookup.
func (a Arch) paramCounts() (total, active, embed float64) {
	mt, ma := a.mlpParams()
	attn := a.attnParams()*float64(a.fullAttnLayers()) + a.linearParams()*float64(a.linearLayers())
	embed = float64(a.VocabSize) * float64(a.HiddenSize)
	head := embed
	if a.TieEmbeddings {
		head = 0
	}
	total = attn + mt*float64(a.NumLayers) + embed + head + a.ExtraParams
	active = attn + ma*float64(a.NumLayers) + head
	return total, active, embed
}

// TotalParams is the model's weight count.
func (a Arch) TotalParams() float64 { t, _, _ := a.paramCounts(); return t }

// ActiveParams is the weight count that one token's forward pass multiplies
// (MoE: top-k experts only; embeddings excluded, LM head included).
func (a Arch) ActiveParams() float64 { _, x, _ := a.paramCounts(); return x }

// linearStateBytes is the fixed per-sequence state of the linear-attention
// layers (recurrent state in fp32 plus the conv window), over all layers.
func (a Arch) linearStateBytes() float64 {
	if !a.Hybrid() {
		return 0
	}
	rec := float64(a.LinearValueHeads*a.LinearKeyHeadDim*a.LinearValueHeadDim) * 4
	convDim := float64(2*a.LinearKeyHeads*a.LinearKeyHeadDim + a.LinearValueHeads*a.LinearValueHeadDim)
	conv := convDim * float64(max(a.LinearConvKernel-1, 1)) * 2
	return (rec + conv) * float64(a.linearLayers())
}
