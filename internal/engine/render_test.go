package engine

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// golden compares got with testdata/<name>, rewriting it under -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from golden:\n--- got ---\n%s\n--- want ---\n%s", path, got, want)
	}
}

// describe is the golden form of a rendered command: the shell line, then
// each file under a header.
func describe(cmd Command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "$ %s\n", cmd)
	for _, name := range slices.Sorted(maps.Keys(cmd.Files)) {
		fmt.Fprintf(&b, "--- %s\n%s", name, cmd.Files[name])
	}
	return b.String()
}

func bp(b bool) *bool { return &b }

// referenceConfigs loads every testdata/reference/*.yaml by base name.
func referenceConfigs(t *testing.T) map[string]Config {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "reference", "*.yaml"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no reference configs: %v", err)
	}
	out := map[string]Config{}
	for _, p := range paths {
		c, err := LoadConfig(p)
		if err != nil {
			t.Fatalf("load %s: %v", p, err)
		}
		out[strings.TrimSuffix(filepath.Base(p), ".yaml")] = c
	}
	return out
}

func TestReferenceGolden(t *testing.T) {
	for name, c := range referenceConfigs(t) {
		t.Run(name, func(t *testing.T) {
			cmd, err := Render(c)
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			golden(t, filepath.Join("reference", name+".golden"), describe(cmd))
		})
	}
}

// sharedDir finds ../shared relative to the module root.
func sharedDir(t *testing.T) string {
	t.Helper()
	return shareddata.Dir(t)
}

// reportCommand is one serving command printed in a reference report.
type reportCommand struct {
	file     string
	section  string // nearest heading or engine label before the block
	words    []string
	argsOnly bool // GPUStack "Backend Parameters": flags without the launcher and model
}

var codeBlock = regexp.MustCompile("(?s)```bash(.*?)```")

// extractCommands pulls the serving commands out of a report: code blocks
// that start with a launcher, or the "Backend Parameters" blocks (flags
// only). Words are split on white space, not by shell rules, because the
// reports print --speculative-config={...} unquoted (a shell would brace-
// expand it) and we compare what the engine is meant to receive.
func extractCommands(file, text string) []reportCommand {
	var out []reportCommand
	for _, m := range codeBlock.FindAllStringSubmatchIndex(text, -1) {
		body := strings.ReplaceAll(text[m[2]:m[3]], "\\\n", " ")
		// Continuation backslashes: at line ends, or mid-line where a page
		// was flattened to one line.
		words := slices.DeleteFunc(strings.Fields(body), func(w string) bool { return w == "\\" })
		if len(words) == 0 {
			continue
		}
		before := text[:m[0]]
		rc := reportCommand{file: file, words: words, section: lastSection(before)}
		switch {
		case words[0] == "vllm" && len(words) > 1 && words[1] == "serve",
			words[0] == "python3" && slices.Contains(words, "sglang.launch_server"),
			words[0] == "trtllm-serve":
		case strings.HasPrefix(words[0], "--") && strings.HasSuffix(strings.TrimSpace(before), "Backend Parameters:"):
			rc.argsOnly = true
		default:
			continue // benchmark scripts, results
		}
		out = append(out, rc)
	}
	return out
}

var sectionRe = regexp.MustCompile(`(?m)(^|\s)(#{2,4} [^#\n]*?|vLLM|SGLang|TensorRT-LLM)(\s*\n|\s+- |\s+\?\?\?)`)

// lastSection is the last heading or bare engine label before a block.
func lastSection(before string) string {
	ms := sectionRe.FindAllStringSubmatch(before, -1)
	if len(ms) == 0 {
		return ""
	}
	return strings.TrimSpace(ms[len(ms)-1][2])
}

// engineOf names the engine a section heading speaks of, or "".
func engineOf(section string) string {
	switch {
	case strings.Contains(section, "TensorRT-LLM"):
		return TRTLLM
	case strings.Contains(section, "SGLang"):
		return SGLang
	case strings.Contains(section, "vLLM"):
		return VLLM
	}
	return ""
}

func commandEngine(words []string) string {
	switch {
	case words[0] == "vllm":
		return VLLM
	case words[0] == "trtllm-serve":
		return TRTLLM
	case words[0] == "python3":
		return SGLang
	}
	return ""
}

// launcherLen is how many argv words precede the flags: the launcher and
// the model.
func launcherLen(engine string) int {
	switch engine {
	case VLLM:
		return 3 // vllm serve MODEL
	case SGLang:
		return 5 // python3 -m sglang.launch_server --model-path MODEL
	default:
		return 2 // trtllm-serve MODEL
	}
}

// TestReferenceReportsRoundTrip checks that every serving command printed in
// /work/shared/reference/*.md is exactly what one of our reference configs
// renders, and that every reference config is used.
func TestReferenceReportsRoundTrip(t *testing.T) {
	shared := sharedDir(t)
	reports, _ := filepath.Glob(filepath.Join(shared, "reference", "*.md"))
	if len(reports) == 0 {
		t.Skip("no reference reports")
	}
	configs := referenceConfigs(t)
	rendered := map[string]Command{}
	for name, c := range configs {
		cmd, err := Render(c)
		if err != nil {
			t.Fatalf("render %s: %v", name, err)
		}
		rendered[name] = cmd
	}
	used := map[string]bool{}
	var mislabeled []string
	total := 0
	for _, path := range reports {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		file := filepath.Base(path)
		for _, rc := range extractCommands(file, string(data)) {
			total++
			want := strings.Join(rc.words, " ")
			if !rc.argsOnly {
				if he, ce := engineOf(rc.section), commandEngine(rc.words); he != "" && he != ce {
					// The 32B report prints an SGLang command under
					// "Quantization in TensorRT-LLM"; we render trtllm-serve
					// for that section (qwen3-32b-trtllm-fp8.yaml).
					mislabeled = append(mislabeled, fmt.Sprintf("%s [%s]: %s", file, rc.section, want))
					continue
				}
			}
			match := ""
			for _, name := range slices.Sorted(maps.Keys(rendered)) {
				cmd := rendered[name]
				if !strings.HasPrefix(name, strings.TrimSuffix(file, "-h100.md")+"-") || len(cmd.Env) > 0 || len(cmd.Files) > 0 {
					continue
				}
				got := cmd.Argv
				if rc.argsOnly {
					e := configs[name].Engine
					if engineOf(rc.section) == SGLang && e != SGLang || engineOf(rc.section) != SGLang && e != VLLM {
						continue
					}
					got = got[launcherLen(e):]
				}
				if slices.Equal(got, rc.words) {
					match = name
					break
				}
			}
			if match == "" {
				t.Errorf("%s [%s]: no reference config renders %q", file, rc.section, want)
				continue
			}
			used[match] = true
		}
	}
	if total < 40 {
		t.Errorf("found only %d serving commands in the reports; extraction is broken", total)
	}
	if len(mislabeled) != 1 || !strings.Contains(mislabeled[0], "qwen3-32b-h100.md") || !strings.Contains(mislabeled[0], "sglang.launch_server") {
		t.Errorf("want exactly the one known SGLang-under-TensorRT-LLM slip, got %q", mislabeled)
	}
	if got := rendered["qwen3-32b-trtllm-fp8"].String(); got != "trtllm-serve Qwen/Qwen3-32B-FP8" {
		t.Errorf("the mislabeled section renders %q, want trtllm-serve Qwen/Qwen3-32B-FP8", got)
	}
	for name := range configs {
		if !used[name] && name != "qwen3-32b-trtllm-fp8" {
			t.Errorf("reference config %s matches no command in the reports", name)
		}
	}
}

// knobCases is one config per knob (and per notable value), applied to
// every engine and version in the matrix.
var knobCases = []struct {
	name string
	set  func(*Config)
}{
	{"defaults", func(*Config) {}},
	{"served_model_name", func(c *Config) { c.ServedModelName = "qwen" }},
	{"quantization=fp8", func(c *Config) { c.Quantization = QuantFP8 }},
	{"quantization=fp8-checkpoint", func(c *Config) { c.Quantization = QuantFP8Checkpoint }},
	{"kv_cache_dtype=fp8", func(c *Config) { c.KVCacheDtype = "fp8" }},
	{"kv_cache_dtype=fp8_e5m2", func(c *Config) { c.KVCacheDtype = "fp8_e5m2" }},
	{"tensor_parallel=2", func(c *Config) { c.TensorParallel = 2 }},
	{"expert_parallel+tp=4", func(c *Config) { c.TensorParallel = 4; c.ExpertParallel = true }},
	{"data_parallel=2", func(c *Config) { c.DataParallel = 2 }},
	{"attention=FLASHINFER", func(c *Config) { c.AttentionBackend = "FLASHINFER" }},
	{"attention=XFORMERS", func(c *Config) { c.AttentionBackend = "XFORMERS" }},
	{"attention=fa3", func(c *Config) { c.AttentionBackend = "fa3" }},
	{"attention=TRTLLM", func(c *Config) { c.AttentionBackend = "TRTLLM" }},
	{"max_num_seqs=256", func(c *Config) { c.MaxNumSeqs = 256 }},
	{"max_num_batched_tokens=8192", func(c *Config) { c.MaxNumBatchedTokens = 8192 }},
	{"chunked_prefill=true", func(c *Config) { c.ChunkedPrefill = bp(true) }},
	{"chunked_prefill=false", func(c *Config) { c.ChunkedPrefill = bp(false) }},
	{"chunked_prefill=false+batched=8192", func(c *Config) { c.ChunkedPrefill = bp(false); c.MaxNumBatchedTokens = 8192 }},
	{"prefix_caching=true", func(c *Config) { c.PrefixCaching = bp(true) }},
	{"prefix_caching=false", func(c *Config) { c.PrefixCaching = bp(false) }},
	{"speculative=eagle", func(c *Config) {
		c.Speculative = &Speculative{Method: "eagle", DraftModel: "yuhuili/EAGLE-Qwen3-14B", NumSpeculativeTokens: 3}
	}},
	{"speculative=eagle3", func(c *Config) {
		c.Speculative = &Speculative{Method: "eagle3", DraftModel: "AngelSlim/Qwen3-14B_eagle3", NumSpeculativeTokens: 3}
	}},
	{"speculative=mtp", func(c *Config) { c.Speculative = &Speculative{Method: "mtp", NumSpeculativeTokens: 4} }},
	{"speculative=ngram", func(c *Config) { c.Speculative = &Speculative{Method: "ngram", NumSpeculativeTokens: 5} }},
	{"speculative=draft_model", func(c *Config) {
		c.Speculative = &Speculative{Method: "draft_model", DraftModel: "Qwen/Qwen3-0.6B", NumSpeculativeTokens: 4}
	}},
	{"max_model_len=32768", func(c *Config) { c.MaxModelLen = 32768 }},
	{"gpu_memory_fraction=0.85", func(c *Config) { c.GPUMemoryFraction = 0.85 }},
	{"enforce_eager", func(c *Config) { c.EnforceEager = true }},
	{"cuda_graph_padding=true", func(c *Config) { c.CUDAGraphPadding = bp(true) }},
	{"cuda_graph_padding=false", func(c *Config) { c.CUDAGraphPadding = bp(false) }},
	{"async_scheduling=true", func(c *Config) { c.AsyncScheduling = bp(true) }},
	{"async_scheduling=false", func(c *Config) { c.AsyncScheduling = bp(false) }},
	{"reasoning_parser=qwen3", func(c *Config) { c.ReasoningParser = "qwen3" }},
	{"performance_mode=throughput", func(c *Config) { c.PerformanceMode = "throughput" }},
	{"extra_args+env", func(c *Config) {
		c.ExtraArgs = []string{"--trust-remote-code"}
		c.Env = map[string]string{"HF_HUB_OFFLINE": "1"}
	}},
}

// matrix is every engine version the package was checked against.
var matrix = []struct{ engine, version string }{
	{VLLM, "0.11.0"}, {VLLM, "0.17.1"},
	{SGLang, "0.5.5.post1"}, {SGLang, "0.5.9"},
	{TRTLLM, "1.2.0rc1"},
}

// TestKnobMatrix renders every knob for every engine and version into one
// golden file per engine version; unsupported knobs record their error.
func TestKnobMatrix(t *testing.T) {
	for _, m := range matrix {
		t.Run(m.engine+"-"+m.version, func(t *testing.T) {
			var b strings.Builder
			for _, k := range knobCases {
				c := Config{Engine: m.engine, Version: m.version, Model: "Qwen/Qwen3-14B"}
				k.set(&c)
				fmt.Fprintf(&b, "## %s\n", k.name)
				cmd, err := Render(c)
				if err != nil {
					fmt.Fprintf(&b, "error: %v\n\n", err)
					continue
				}
				b.WriteString(describe(cmd) + "\n")
			}
			golden(t, filepath.Join("knobs", m.engine+"-"+m.version+".golden"), b.String())
		})
	}
}

// TestRenderFacts pins the spellings we looked up in each engine's parser,
// independently of the golden files (which -update would rewrite).
func TestRenderFacts(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		argv    string // substring of the joined argv
		env     string // "K=V" expected in Env
		file    string // substring of the options file
		unsupp  string // knob expected in an UnsupportedError
		invalid string // field expected in a ValidationError
		noFile  bool   // no options file is written
	}{
		{name: "vllm 0.11 attention via env", cfg: Config{Engine: VLLM, Version: "0.11.0", Model: "m", AttentionBackend: "FLASHINFER"}, env: "VLLM_ATTENTION_BACKEND=FLASHINFER"},
		{name: "vllm 0.17 attention via flag", cfg: Config{Engine: VLLM, Version: "0.17.1", Model: "m", AttentionBackend: "FLASHINFER"}, argv: "--attention-backend=FLASHINFER"},
		{name: "vllm 0.11 XFORMERS ok", cfg: Config{Engine: VLLM, Version: "0.11.0", Model: "m", AttentionBackend: "XFORMERS"}, env: "VLLM_ATTENTION_BACKEND=XFORMERS"},
		{name: "vllm 0.17 XFORMERS gone", cfg: Config{Engine: VLLM, Version: "0.17.1", Model: "m", AttentionBackend: "XFORMERS"}, unsupp: "attention_backend"},
		{name: "vllm 0.11 no performance mode", cfg: Config{Engine: VLLM, Version: "0.11.0", Model: "m", PerformanceMode: "throughput"}, unsupp: "performance_mode"},
		{name: "vllm 0.17 performance mode", cfg: Config{Engine: VLLM, Version: "0.17.1", Model: "m", PerformanceMode: "throughput"}, argv: "--performance-mode=throughput"},
		{name: "vllm model positional", cfg: Config{Engine: VLLM, Model: "Qwen/Qwen3-14B"}, argv: "vllm serve Qwen/Qwen3-14B"},
		{name: "vllm online fp8", cfg: Config{Engine: VLLM, Model: "Qwen/Qwen3-14B", Quantization: QuantFP8}, argv: "vllm serve Qwen/Qwen3-14B --quantization=fp8"},
		{name: "vllm fp8 checkpoint", cfg: Config{Engine: VLLM, Model: "Qwen/Qwen3-14B", Quantization: QuantFP8Checkpoint}, argv: "vllm serve Qwen/Qwen3-14B-FP8"},
		{name: "fp8 checkpoint already named", cfg: Config{Engine: VLLM, Model: "Qwen/Qwen3-14B-FP8", Quantization: QuantFP8Checkpoint}, argv: "vllm serve Qwen/Qwen3-14B-FP8"},
		{name: "sglang spellings", cfg: Config{Engine: SGLang, Model: "m", TensorParallel: 2, MaxNumSeqs: 128, MaxNumBatchedTokens: 4096, PrefixCaching: bp(false)},
			argv: "--tp-size=2 --disable-radix-cache --chunked-prefill-size=4096 --max-running-requests=128"},
		{name: "sglang chunked off", cfg: Config{Engine: SGLang, Model: "m", ChunkedPrefill: bp(false)}, argv: "--chunked-prefill-size=-1"},
		{name: "sglang eagle3", cfg: Config{Engine: SGLang, Model: "m", Speculative: &Speculative{Method: "eagle3", DraftModel: "d", NumSpeculativeTokens: 3}},
			argv: "--speculative-algorithm=EAGLE3 --speculative-draft-model-path=d --speculative-num-steps=3 --speculative-eagle-topk=1 --speculative-num-draft-tokens=4"},
		{name: "sglang memory", cfg: Config{Engine: SGLang, Model: "m", GPUMemoryFraction: 0.8, KVCacheDtype: "fp8", Quantization: QuantFP8},
			argv: "--quantization=fp8 --kv-cache-dtype=fp8_e4m3 --mem-fraction-static=0.8"},
		{name: "sglang no performance mode", cfg: Config{Engine: SGLang, Model: "m", PerformanceMode: "throughput"}, unsupp: "performance_mode"},
		{name: "trtllm flags", cfg: Config{Engine: TRTLLM, Model: "m", TensorParallel: 4, ExpertParallel: true, MaxNumSeqs: 64, MaxNumBatchedTokens: 8192, MaxModelLen: 4096, GPUMemoryFraction: 0.9},
			argv: "trtllm-serve m --tp_size=4 --ep_size=4 --max_batch_size=64 --max_num_tokens=8192 --max_seq_len=4096 --kv_cache_free_gpu_memory_fraction=0.9"},
		{name: "trtllm yaml knobs", cfg: Config{Engine: TRTLLM, Model: "m", AttentionBackend: "FLASHINFER", KVCacheDtype: "fp8", PrefixCaching: bp(false)},
			argv: "--extra_llm_api_options=extra_llm_api_options.yaml", file: "attn_backend: FLASHINFER\nkv_cache_config:\n  dtype: fp8\n  enable_block_reuse: false\n"},
		{name: "trtllm cuda graphs off", cfg: Config{Engine: TRTLLM, Model: "m", EnforceEager: true}, file: "cuda_graph_config: null\n"},
		{name: "trtllm cuda graph padding", cfg: Config{Engine: TRTLLM, Model: "m", CUDAGraphPadding: bp(true)},
			argv: "--extra_llm_api_options=extra_llm_api_options.yaml", file: "cuda_graph_config:\n  enable_padding: true\n"},
		{name: "trtllm padding off is its default", cfg: Config{Engine: TRTLLM, Model: "m", CUDAGraphPadding: bp(false)}, argv: "trtllm-serve m", noFile: true},
		{name: "sglang padding off", cfg: Config{Engine: SGLang, Model: "m", CUDAGraphPadding: bp(false)}, argv: "--disable-cuda-graph-padding"},
		{name: "vllm always pads", cfg: Config{Engine: VLLM, Model: "m", CUDAGraphPadding: bp(false)}, unsupp: "cuda_graph_padding"},
		{name: "padding without graphs", cfg: Config{Engine: TRTLLM, Model: "m", EnforceEager: true, CUDAGraphPadding: bp(true)}, unsupp: "cuda_graph_padding"},
		{name: "trtllm mtp", cfg: Config{Engine: TRTLLM, Model: "m", Speculative: &Speculative{Method: "mtp", NumSpeculativeTokens: 3}}, file: "decoding_type: MTP\n  num_nextn_predict_layers: 3\n"},
		{name: "trtllm no online fp8", cfg: Config{Engine: TRTLLM, Model: "m", Quantization: QuantFP8}, unsupp: "quantization"},
		{name: "trtllm no eagle1", cfg: Config{Engine: TRTLLM, Model: "m", Speculative: &Speculative{Method: "eagle", DraftModel: "d", NumSpeculativeTokens: 3}}, unsupp: "speculative.method"},
		{name: "missing model", cfg: Config{Engine: VLLM}, invalid: "model"},
		{name: "bad fraction", cfg: Config{Engine: VLLM, Model: "m", GPUMemoryFraction: 1.5}, invalid: "gpu_memory_fraction"},
		{name: "extra arg duplicates a knob", cfg: Config{Engine: VLLM, Model: "m", MaxNumSeqs: 8, ExtraArgs: []string{"--max-num-seqs=16"}}, invalid: "extra_args"},
		{name: "extra arg sets port", cfg: Config{Engine: VLLM, Model: "m", ExtraArgs: []string{"--port=1"}}, invalid: "extra_args"},
		{name: "env conflicts with rendered env", cfg: Config{Engine: VLLM, Version: "0.11.0", Model: "m", AttentionBackend: "FLASHINFER", Env: map[string]string{"VLLM_ATTENTION_BACKEND": "FLASH_ATTN"}}, invalid: "env"},
		{name: "spec needs draft", cfg: Config{Engine: VLLM, Model: "m", Speculative: &Speculative{Method: "eagle3", NumSpeculativeTokens: 2}}, invalid: "speculative.draft_model"},
		{name: "unknown engine", cfg: Config{Engine: "tgi", Model: "m"}, invalid: "engine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := Render(tt.cfg)
			switch {
			case tt.unsupp != "":
				var ue *UnsupportedError
				if !errors.As(err, &ue) || ue.Knob != tt.unsupp || !errors.Is(err, ErrUnsupported) {
					t.Fatalf("err = %v, want UnsupportedError for %s", err, tt.unsupp)
				}
				if ue.Engine != tt.cfg.Engine || ue.Version != tt.cfg.EffectiveVersion() {
					t.Errorf("error names %s %s, want %s %s", ue.Engine, ue.Version, tt.cfg.Engine, tt.cfg.EffectiveVersion())
				}
				return
			case tt.invalid != "":
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != tt.invalid {
					t.Fatalf("err = %v, want ValidationError on %s", err, tt.invalid)
				}
				return
			case err != nil:
				t.Fatalf("render: %v", err)
			}
			if got := strings.Join(cmd.Argv, " "); !strings.Contains(got, tt.argv) {
				t.Errorf("argv %q lacks %q", got, tt.argv)
			}
			if tt.env != "" {
				k, v, _ := strings.Cut(tt.env, "=")
				if cmd.Env[k] != v {
					t.Errorf("env %v lacks %s", cmd.Env, tt.env)
				}
			} else if _, ok := cmd.Env["VLLM_ATTENTION_BACKEND"]; ok {
				t.Errorf("unexpected env %v", cmd.Env)
			}
			if _, ok := cmd.Files[TRTLLMOptionsFile]; tt.noFile && ok {
				t.Errorf("options file written: %q", cmd.Files[TRTLLMOptionsFile])
			}
			if tt.file != "" && !strings.Contains(cmd.Files[TRTLLMOptionsFile], tt.file) {
				t.Errorf("options file %q lacks %q", cmd.Files[TRTLLMOptionsFile], tt.file)
			}
		})
	}
}

func TestRenderForLaunch(t *testing.T) {
	cmd, err := RenderForLaunch(Config{Engine: VLLM, Model: "Qwen/Qwen3-14B", MaxNumSeqs: 256}, "127.0.0.1", 8123)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"vllm", "serve", "Qwen/Qwen3-14B", "--max-num-seqs=256", "--host=127.0.0.1", "--port=8123"}
	if !slices.Equal(cmd.Argv, want) {
		t.Errorf("argv = %q, want %q", cmd.Argv, want)
	}
}

func TestCommandString(t *testing.T) {
	cmd := Command{
		Argv: []string{"vllm", "serve", "m", `--speculative-config={"method":"mtp","num_speculative_tokens":4}`, "it's", ""},
		Env:  map[string]string{"B": "x y", "A": "1"},
	}
	want := `A=1 B='x y' vllm serve m '--speculative-config={"method":"mtp","num_speculative_tokens":4}' 'it'\''s' ''`
	if got := cmd.String(); got != want {
		t.Errorf("String() = %s\nwant       %s", got, want)
	}
}

// TestCommandScript runs Script's text in bash (a real shell, in a
// scratch directory): the files come out byte for byte (a last line gets
// its newline), a body holding the here-document's delimiter as a line
// included, and the command line runs after them with its words intact.
func TestCommandScript(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	files := map[string]string{
		TRTLLMOptionsFile: "cuda_graph_config:\n  enable_padding: true\n",
		"odd name.yaml":   "a: $HOME `x`\nEOF\nb: 'q'",
	}
	cmd := Command{Argv: []string{"cat", TRTLLMOptionsFile, "odd name.yaml"}, Files: files, Env: map[string]string{"A": "1"}}
	script := cmd.Script()
	if !strings.HasSuffix(script, "\n"+cmd.String()) {
		t.Errorf("script does not end with the command line:\n%s", script)
	}
	run := exec.Command(bash, "-c", script)
	run.Dir = t.TempDir()
	out, err := run.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s\nscript:\n%s", err, out, script)
	}
	want := files[TRTLLMOptionsFile] + files["odd name.yaml"] + "\n"
	if string(out) != want {
		t.Errorf("files read back %q, want %q\nscript:\n%s", out, want, script)
	}
	if plain := (Command{Argv: []string{"vllm", "serve", "m"}}); plain.Script() != plain.String() {
		t.Errorf("Script() without files = %q, want String()", plain.Script())
	}
}

func TestVersionOrder(t *testing.T) {
	order := []string{"0.5.5", "0.5.5.post1", "0.5.9", "0.11.0", "v0.17.0", "0.17.1", "1.2.0rc1", "1.2.0", "1.2.0.post1"}
	for i := range order {
		for j := range order {
			a, err := parseVersion(order[i])
			if err != nil {
				t.Fatal(err)
			}
			b, _ := parseVersion(order[j])
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a.cmp(b); got != want {
				t.Errorf("cmp(%s, %s) = %d, want %d", order[i], order[j], got, want)
			}
		}
	}
	for _, bad := range []string{"", "x", "1..2", "1.2rcx"} {
		if _, err := parseVersion(bad); err == nil {
			t.Errorf("parseVersion(%q) accepted", bad)
		}
	}
}

func BenchmarkRender(b *testing.B) {
	cfg := Config{Engine: TRTLLM, Version: "1.2.0rc1", Model: "Qwen/Qwen3-32B", Quantization: QuantFP8Checkpoint,
		MaxModelLen: 40960, ChunkedPrefill: bp(true), AttentionBackend: "FLASHINFER", KVCacheDtype: "fp8",
		Speculative: &Speculative{Method: "eagle3", DraftModel: "d", NumSpeculativeTokens: 3}}
	for b.Loop() {
		if _, err := Render(cfg); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeConfig(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "reference", "qwen3.5-9b-vllm-mtp.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := DecodeConfig(data, "x"); err != nil {
			b.Fatal(err)
		}
	}
}
