package simargs

import (
	"encoding/json"
	"errors"
	goflag "flag"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"

	"github.com/perflab/perflab/internal/sim"
)

var update = goflag.Bool("update", false, "rewrite golden files under testdata/")

func words(s string) []string {
	s = strings.ReplaceAll(s, "\\\n", " ")
	s = strings.ReplaceAll(s, " \\ ", " ")
	var out []string
	var cur strings.Builder
	in, quote := false, byte(0)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case quote != 0:
			if ch == quote {
				quote = 0
			} else {
				cur.WriteByte(ch)
			}
		case ch == '\'' || ch == '"' && !strings.Contains(cur.String(), "{"):
			quote, in = ch, true
		case ch == ' ' || ch == '\t' || ch == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteByte(ch)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func TestWords(t *testing.T) {
	got := words(`vllm serve M \
  --speculative-config={"method":"mtp","num_speculative_tokens":4} --x 'a b'`)
	want := []string{"vllm", "serve", "M", `--speculative-config={"method":"mtp","num_speculative_tokens":4}`, "--x", "a b"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("words = %q, want %q", got, want)
	}
}

func TestAccept(t *testing.T) {
	tru, fls := true, false
	cases := []struct {
		name, engine, version, cmd string
		env                        map[string]string
		check                      func(t *testing.T, r *Result)
	}{
		{"vllm plain", "vllm", "0.11.0", "vllm serve Qwen/Qwen3-14B", nil, func(t *testing.T, r *Result) {
			want := sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B"}
			if !equalParams(r.Params, want) {
				t.Errorf("params = %+v, want %+v", r.Params, want)
			}
			if r.Server.Port != 8000 || r.Server.ServedModelNames[0] != "Qwen/Qwen3-14B" {
				t.Errorf("server = %+v", r.Server)
			}
		}},
		{"vllm knobs space and equals", "vllm", "0.17.1",
			`vllm serve Qwen/Qwen3.5-9B --max-num-seqs 512 --max-num-batched-tokens=32768 --max-model-len 32k --gpu-memory-utilization=0.85 -tp 2 --data-parallel-size=2 --enable-expert-parallel --kv-cache-dtype fp8_e4m3 --no-enable-prefix-caching --enable-chunked-prefill --performance-mode=throughput --attention-backend flashinfer --enforce-eager --no-async-scheduling --port 8123 --host 127.0.0.1 --served-model-name a b`,
			nil, func(t *testing.T, r *Result) {
				want := sim.Params{Engine: "vllm", Version: "0.17.1", Model: "Qwen/Qwen3.5-9B", MaxNumSeqs: 512, MaxNumBatchedTokens: 32768,
					MaxModelLen: 32000, MemFraction: 0.85, TP: 2, DP: 2, EP: true, KVCacheDtype: "fp8", PrefixCaching: &fls, ChunkedPrefill: &tru,
					PerformanceMode: "throughput", AttentionBackend: "FLASHINFER", EnforceEager: true, AsyncScheduling: &fls}
				if !equalParams(r.Params, want) {
					t.Errorf("params =\n %+v\nwant\n %+v", r.Params, want)
				}
				if r.Server.Port != 8123 || r.Server.Host != "127.0.0.1" || strings.Join(r.Server.ServedModelNames, ",") != "a,b" {
					t.Errorf("server = %+v", r.Server)
				}
			}},
		{"vllm underscores and abbreviation", "vllm", "0.11.0", "vllm serve M --max_model_len=4K --max-num-seq 8", nil, func(t *testing.T, r *Result) {
			if r.Params.MaxModelLen != 4096 || r.Params.MaxNumSeqs != 8 {
				t.Errorf("params = %+v", r.Params)
			}
		}},
		{"vllm 0.11 env backend", "vllm", "0.11.0", "vllm serve M", map[string]string{"VLLM_ATTENTION_BACKEND": "XFORMERS"}, func(t *testing.T, r *Result) {
			if r.Params.AttentionBackend != "XFORMERS" {
				t.Errorf("backend = %q", r.Params.AttentionBackend)
			}
		}},
		{"vllm fp8 name", "vllm", "0.11.0", "vllm serve Qwen/Qwen3-14B-FP8", nil, func(t *testing.T, r *Result) {
			if r.Params.Quantization != "fp8" {
				t.Errorf("quantization = %q", r.Params.Quantization)
			}
		}},
		{"vllm online fp8 and --model", "vllm", "0.11.0", "vllm serve --model Qwen/Qwen3-14B --quantization fp8", nil, func(t *testing.T, r *Result) {
			if r.Params.Quantization != "fp8" || r.Params.Model != "Qwen/Qwen3-14B" || len(r.Warnings) == 0 {
				t.Errorf("result = %+v", r)
			}
		}},
		{"vllm spec mtp", "vllm", "0.17.1", `vllm serve Qwen/Qwen3.5-9B --speculative-config {"method":"qwen3_next_mtp","num_speculative_tokens":2}`, nil, func(t *testing.T, r *Result) {
			if r.Params.SpecMethod != "mtp" || r.Params.SpecTokens != 2 {
				t.Errorf("spec = %q %d", r.Params.SpecMethod, r.Params.SpecTokens)
			}
		}},
		{"vllm dotted json and -O3", "vllm", "0.17.1", "vllm serve M --speculative-config.method=mtp --speculative_config.num_speculative_tokens 3 -O3", nil, func(t *testing.T, r *Result) {
			if r.Params.SpecMethod != "mtp" || r.Params.SpecTokens != 3 {
				t.Errorf("spec = %q %d", r.Params.SpecMethod, r.Params.SpecTokens)
			}
		}},
		{"vllm python module", "vllm", "0.11.0", "python3 -m vllm.entrypoints.openai.api_server --model M --port 9000", nil, func(t *testing.T, r *Result) {
			if r.Params.Model != "M" || r.Server.Port != 9000 {
				t.Errorf("result = %+v", r)
			}
		}},
		{"vllm ignored real flags", "vllm", "0.11.0", "vllm serve M --trust-remote-code --reasoning-parser qwen3 --disable-log-requests --enable-auto-tool-choice --tool-call-parser hermes --dtype bfloat16", nil, nil},
		{"sglang plain", "sglang", "0.5.5.post1", "python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8", nil, func(t *testing.T, r *Result) {
			want := sim.Params{Engine: "sglang", Version: "0.5.5.post1", Model: "Qwen/Qwen3-14B-FP8", Quantization: "fp8", Route: sim.RouteRoundRobin}
			if !equalParams(r.Params, want) {
				t.Errorf("params = %+v", r.Params)
			}
			if r.Server.Port != 30000 || r.Server.Host != "127.0.0.1" {
				t.Errorf("server = %+v", r.Server)
			}
		}},
		{"sglang knobs", "sglang", "0.5.9",
			"python3 -m sglang.launch_server --model Qwen/Qwen3-32B --tp 2 --dp-size 2 --ep 2 --attention-backend=fa3 --max-running-requests 256 --chunked-prefill-size 4096 --disable-radix-cache --mem-fraction-static 0.8 --context-length 32768 --kv-cache-dtype fp8_e5m2 --disable-cuda-graph --disable-overlap-schedule --speculative-algorithm EAGLE3 --speculative-num-steps 3 --port 31000",
			nil, func(t *testing.T, r *Result) {
				want := sim.Params{Engine: "sglang", Version: "0.5.9", Model: "Qwen/Qwen3-32B", TP: 2, DP: 2, EP: true, AttentionBackend: "fa3", MaxNumSeqs: 256,
					MaxNumBatchedTokens: 4096, ChunkedPrefill: &tru, PrefixCaching: &fls, MemFraction: 0.8, MaxModelLen: 32768, KVCacheDtype: "fp8",
					EnforceEager: true, AsyncScheduling: &fls, SpecMethod: "eagle3", SpecTokens: 3, Route: sim.RouteRoundRobin}
				if !equalParams(r.Params, want) {
					t.Errorf("params =\n %+v\nwant\n %+v", r.Params, want)
				}
			}},
		{"sglang chunked off", "sglang", "0.5.9", "python3 -m sglang.launch_server --model-path M --chunked-prefill-size -1", nil, func(t *testing.T, r *Result) {
			if r.Params.ChunkedPrefill == nil || *r.Params.ChunkedPrefill {
				t.Errorf("chunked = %v", r.Params.ChunkedPrefill)
			}
		}},
		{"sglang mixed chunk", "sglang", "0.5.9", "python3 -m sglang.launch_server --model-path M --enable-mixed-chunk", nil, func(t *testing.T, r *Result) {
			if !r.Params.MixedChunk {
				t.Error("--enable-mixed-chunk did not set MixedChunk")
			}
		}},
		{"trtllm plain", "trtllm", "1.2.0rc1", "trtllm-serve Qwen/Qwen3-14B", nil, func(t *testing.T, r *Result) {
			want := sim.Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen/Qwen3-14B"}
			if !equalParams(r.Params, want) || r.Server.Port != 8000 {
				t.Errorf("result = %+v", r)
			}
		}},
		{"trtllm flags", "trtllm", "1.2.0rc1", "trtllm-serve serve Qwen/Qwen3-32B-FP8 --backend pytorch --max_seq_len=40960 --enable_chunked_prefill --max_batch_size 512 --max_num_tokens 8192 --tp_size 2 --kv_cache_free_gpu_memory_fraction 0.85 --port 8001", nil, func(t *testing.T, r *Result) {
			want := sim.Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen/Qwen3-32B-FP8", Quantization: "fp8", MaxModelLen: 40960, ChunkedPrefill: &tru,
				MaxNumSeqs: 512, MaxNumBatchedTokens: 8192, TP: 2, MemFraction: 0.85}
			if !equalParams(r.Params, want) || r.Server.Port != 8001 {
				t.Errorf("params =\n %+v\nwant\n %+v", r.Params, want)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := ParseAll(tc.engine, tc.version, words(tc.cmd), tc.env)
			if err != nil {
				t.Fatalf("ParseAll: %v", err)
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestTRTLLMExtraOptions(t *testing.T) {
	dir := t.TempDir()
	yml := filepath.Join(dir, "extra.yaml")
	os.WriteFile(yml, []byte(`attn_backend: FLASHINFER
kv_cache_config:
  dtype: fp8
  free_gpu_memory_fraction: 0.7
  enable_block_reuse: false
cuda_graph_config: null
enable_chunked_prefill: true
disable_overlap_scheduler: true
max_batch_size: 128
speculative_config:
  decoding_type: MTP
  num_nextn_predict_layers: 3
`), 0o644)
	p, err := Parse("trtllm", "1.2.0rc1", []string{"trtllm-serve", "Qwen/Qwen3-14B", "--max_batch_size", "512", "--extra_llm_api_options", yml}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tru, fls := true, false
	want := sim.Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen/Qwen3-14B", AttentionBackend: "FLASHINFER", KVCacheDtype: "fp8", MemFraction: 0.7,
		PrefixCaching: &fls, EnforceEager: true, ChunkedPrefill: &tru, AsyncScheduling: &fls, MaxNumSeqs: 128, SpecMethod: "mtp", SpecTokens: 3}
	if !equalParams(p, want) {
		t.Errorf("params =\n %+v\nwant\n %+v", p, want)
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("attn_backend: TRTLLM\nkv_cache_config:\n  dtype: fp8\n  free_gpu_mem: 0.5\nfoo_bar: 1\n"), 0o644)
	_, err = Parse("trtllm", "1.2.0rc1", []string{"trtllm-serve", "M", "--extra_llm_api_options", bad}, nil)
	if err == nil || !strings.Contains(err.Error(), "foo_bar") || !strings.Contains(err.Error(), "Extra inputs are not permitted") {
		t.Errorf("err = %v, want pydantic extra_forbidden naming foo_bar", err)
	}
	_, err = Parse("trtllm", "1.2.0rc1", []string{"trtllm-serve", "M", "--extra_llm_api_options", filepath.Join(dir, "missing.yaml")}, nil)
	if err == nil || !strings.Contains(err.Error(), "FileNotFoundError") {
		t.Errorf("err = %v, want FileNotFoundError", err)
	}
}

func TestReject(t *testing.T) {
	cases := []struct {
		name, engine, version, cmd string
		env                        map[string]string
		want                       string
	}{
		{"vllm unknown", "vllm", "0.11.0", "vllm serve M --foo", nil, "vllm serve: error: unrecognized arguments: --foo"},
		{"vllm unknown with value", "vllm", "0.11.0", "vllm serve M --foo 3 --bar", nil, "vllm serve: error: unrecognized arguments: --foo 3 --bar"},
		{"vllm perf mode in 0.11", "vllm", "0.11.0", "vllm serve M --performance-mode throughput", nil, "vllm serve: error: unrecognized arguments: --performance-mode throughput"},
		{"vllm attention flag in 0.11", "vllm", "0.11.0", "vllm serve M --attention-backend FLASHINFER", nil, "vllm serve: error: unrecognized arguments: --attention-backend FLASHINFER"},
		{"vllm xformers gone in 0.17", "vllm", "0.17.1", "vllm serve M --attention-backend XFORMERS", nil, "vllm serve: error: argument --attention-backend: invalid choice: 'XFORMERS'"},
		{"vllm xformers env gone in 0.17", "vllm", "0.17.1", "vllm serve M", map[string]string{"VLLM_ATTENTION_BACKEND": "XFORMERS"}, "ValueError: Invalid attention backend: 'XFORMERS'"},
		{"vllm bad env backend", "vllm", "0.11.0", "vllm serve M", map[string]string{"VLLM_ATTENTION_BACKEND": "FOO"}, "ValueError: Invalid attention backend: 'FOO'"},
		{"vllm bad perf mode", "vllm", "0.17.1", "vllm serve M --performance-mode latency", nil, "vllm serve: error: argument --performance-mode: invalid choice: 'latency' (choose from 'balanced', 'interactivity', 'throughput')"},
		{"vllm bad int", "vllm", "0.11.0", "vllm serve M --max-num-seqs abc", nil, "vllm serve: error: argument --max-num-seqs: invalid int value: 'abc'"},
		{"vllm float for int", "vllm", "0.11.0", "vllm serve M --max-num-seqs 1.5", nil, "invalid int value: '1.5'"},
		{"vllm missing value", "vllm", "0.11.0", "vllm serve M --max-num-seqs", nil, "vllm serve: error: argument --max-num-seqs: expected one argument"},
		{"vllm flag as value", "vllm", "0.11.0", "vllm serve M --port --host x", nil, "argument --port: expected one argument"},
		{"vllm bool with value", "vllm", "0.11.0", "vllm serve M --enable-prefix-caching=false", nil, "argument --enable-prefix-caching/--no-enable-prefix-caching: ignored explicit argument 'false'"},
		{"vllm bad kv dtype", "vllm", "0.11.0", "vllm serve M --kv-cache-dtype fp4", nil, "argument --kv-cache-dtype: invalid choice: 'fp4'"},
		{"vllm bad quantization", "vllm", "0.11.0", "vllm serve M -q fp9", nil, "argument --quantization/-q: invalid choice: 'fp9'"},
		{"vllm ambiguous", "vllm", "0.11.0", "vllm serve M --max-num 4", nil, "vllm serve: error: ambiguous option: --max-num could match"},
		{"vllm extra positional", "vllm", "0.11.0", "vllm serve M N", nil, "unrecognized arguments: N"},
		{"vllm no model", "vllm", "0.11.0", "vllm serve --port 8000", nil, "the following arguments are required: model_tag"},
		{"vllm bad json", "vllm", "0.17.1", "vllm serve M --speculative-config {method:mtp}", nil, "argument --speculative-config: invalid loads value"},
		{"vllm bad spec method", "vllm", "0.17.1", `vllm serve M --speculative-config {"method":"magic","num_speculative_tokens":2}`, nil, "Input should be 'ngram'"},
		{"vllm gpu util", "vllm", "0.11.0", "vllm serve M --gpu-memory-utilization 1.5", nil, "gpu_memory_utilization"},
		{"vllm not serve", "vllm", "0.11.0", "vllm bench serve --model M", nil, "is not `vllm serve"},
		{"sglang unknown", "sglang", "0.5.5.post1", "python3 -m sglang.launch_server --model-path M --max-num-seqs 8", nil, "launch_server.py: error: unrecognized arguments: --max-num-seqs 8"},
		{"sglang vllm spelling", "sglang", "0.5.5.post1", "python3 -m sglang.launch_server --model-path M --enable-prefix-caching", nil, "unrecognized arguments: --enable-prefix-caching"},
		{"sglang no model", "sglang", "0.5.9", "python3 -m sglang.launch_server --port 1", nil, "launch_server.py: error: the following arguments are required: --model-path/--model"},
		{"sglang bad backend", "sglang", "0.5.9", "python3 -m sglang.launch_server --model-path M --attention-backend=fa9", nil, "argument --attention-backend: invalid choice: 'fa9'"},
		{"sglang 0.5.9 flag in 0.5.5", "sglang", "0.5.5.post1", "python3 -m sglang.launch_server --model-path M --disable-prefill-cuda-graph", nil, "unrecognized arguments: --disable-prefill-cuda-graph"},
		{"sglang underscores", "sglang", "0.5.9", "python3 -m sglang.launch_server --model_path M", nil, "unrecognized arguments: --model_path M"},
		{"trtllm unknown", "trtllm", "1.2.0rc1", "trtllm-serve M --max-batch-size 8", nil, "Error: No such option: --max-batch-size"},
		{"trtllm no model", "trtllm", "1.2.0rc1", "trtllm-serve --port 8000", nil, "Error: Missing argument 'MODEL'."},
		{"trtllm bad int", "trtllm", "1.2.0rc1", "trtllm-serve M --max_batch_size many", nil, "Error: Invalid value for '--max_batch_size': 'many' is not a valid integer."},
		{"trtllm bad backend", "trtllm", "1.2.0rc1", "trtllm-serve M --backend onnx", nil, "Error: Invalid value for '--backend': 'onnx' is not one of"},
		{"trtllm flag value", "trtllm", "1.2.0rc1", "trtllm-serve M --enable_chunked_prefill=true", nil, "Error: Option '--enable_chunked_prefill' does not take a value."},
		{"trtllm extra arg", "trtllm", "1.2.0rc1", "trtllm-serve M N", nil, "Error: Got unexpected extra argument (N)"},
		{"trtllm abbreviation", "trtllm", "1.2.0rc1", "trtllm-serve M --max_seq 5", nil, "No such option: --max_seq"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.engine, tc.version, words(tc.cmd), tc.env)
			if err == nil {
				t.Fatalf("Parse accepted %q", tc.cmd)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %q\nwant it to contain %q", err, tc.want)
			}
			var e *Error
			if strings.Contains(tc.want, "error:") && (!errors.As(err, &e) || e.ExitCode != 2 || !strings.HasPrefix(e.Stderr, "usage: ")) {
				t.Errorf("want an argparse *Error with exit 2 and a usage line, got %#v", err)
			}
		})
	}
}

func equalParams(a, b sim.Params) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// refCommand is one serving command from the reference reports.
type refCommand struct {
	Source, Engine, Version string
	Argv                    []string
}

// sharedDir finds ../shared relative to the module root.
func sharedDir(t testing.TB) string {
	t.Helper()
	return shareddata.Dir(t)
}

var (
	reVersion = map[string]*regexp.Regexp{
		"vllm":   regexp.MustCompile(`vLLM:? v(\d[\w.]*)`),
		"sglang": regexp.MustCompile(`SGLang:? v(\d[\w.]*)`),
		"trtllm": regexp.MustCompile(`TensorRT-LLM:? v(\d[\w.]*)`),
	}
	reBlock   = regexp.MustCompile("(?s)```bash\\s*(.*?)```|#{2,4} (\\w+)")
	reComment = regexp.MustCompile(`(?m)^\s*#.*$`)
)

// referenceCommands extracts every serving command of the reference
// reports: full commands, and the bare "Backend Parameters" blocks of the
// Qwen3.5 report (which belong to the engine of the heading above them and
// to that report's model).
func referenceCommands(t testing.TB) []refCommand {
	files, _ := filepath.Glob(filepath.Join(sharedDir(t), "reference", "*.md"))
	var out []refCommand
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		versions := map[string]string{}
		for e, re := range reVersion {
			if m := re.FindStringSubmatch(text); m != nil {
				versions[e] = strings.TrimSuffix(m[1], ".")
			}
		}
		model := ""
		if m := regexp.MustCompile(`vllm serve (\S+)`).FindStringSubmatch(text); m != nil {
			model = m[1]
		}
		heading := "vllm"
		for _, m := range reBlock.FindAllStringSubmatch(text, -1) {
			if m[2] != "" {
				// A section heading: the engine named by an "#### SGLang"
				// heading holds until the next heading.
				heading = "vllm"
				if m[2] == "SGLang" {
					heading = "sglang"
				}
				continue
			}
			body := strings.TrimSpace(reComment.ReplaceAllString(m[1], ""))
			var engine string
			var argv []string
			switch {
			case strings.HasPrefix(body, "vllm serve"):
				engine = "vllm"
			case strings.HasPrefix(body, "python3 -m sglang"):
				engine = "sglang"
			case strings.HasPrefix(body, "trtllm-serve"):
				engine = "trtllm"
			case strings.HasPrefix(body, "--"):
				engine = heading
				if engine == "vllm" {
					argv = []string{"vllm", "serve", model}
				} else {
					argv = []string{"python3", "-m", "sglang.launch_server", "--model-path", model}
				}
			default:
				continue // benchmark commands, dataset preparation
			}
			argv = append(argv, words(body)...)
			out = append(out, refCommand{Source: filepath.Base(f), Engine: engine, Version: versions[engine], Argv: argv})
		}
	}
	return out
}

// TestReferenceCommands parses every serving command in ../shared/reference
// and compares the result with a golden file.
func TestReferenceCommands(t *testing.T) {
	cmds := referenceCommands(t)
	if len(cmds) < 20 {
		t.Fatalf("found only %d reference commands", len(cmds))
	}
	type row struct {
		Source, Engine, Version, Command string
		Params                           sim.Params
		Port                             int
	}
	var rows []row
	seen := map[string]bool{}
	for _, c := range cmds {
		if c.Version == "" {
			t.Errorf("%s: no %s version found", c.Source, c.Engine)
		}
		key := c.Engine + c.Version + strings.Join(c.Argv, " ")
		if seen[key] {
			continue
		}
		seen[key] = true
		r, err := ParseAll(c.Engine, c.Version, c.Argv, nil)
		if err != nil {
			t.Errorf("%s: %s %s: %q: %v", c.Source, c.Engine, c.Version, c.Argv, err)
			continue
		}
		rows = append(rows, row{c.Source, c.Engine, c.Version, strings.Join(c.Argv, " "), r.Params, r.Server.Port})
	}
	got, _ := json.MarshalIndent(rows, "", "  ")
	golden := filepath.Join("testdata", "reference.golden.json")
	if *update {
		if err := os.WriteFile(golden, append(got, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run with -update)", err)
	}
	if strings.TrimSpace(string(want)) != strings.TrimSpace(string(got)) {
		t.Errorf("reference parse differs from %s (run with -update and review the diff):\n%s", golden, got)
	}
}

func FuzzParse(f *testing.F) {
	seeds := []string{
		"vllm serve Qwen/Qwen3-14B",
		"vllm serve M --max-model-len 32k --no-enable-prefix-caching --speculative-config {\"method\":\"mtp\"}",
		"python3 -m sglang.launch_server --model-path Qwen/Qwen3-14B-FP8 --attention-backend=fa3 --chunked-prefill-size -1",
		"trtllm-serve Qwen/Qwen3-32B-FP8 --max_seq_len=40960 --enable_chunked_prefill",
		"vllm serve -- --x", "vllm serve M --max -", "vllm serve M -tp=2 -q",
	}
	for _, s := range seeds {
		for _, e := range []string{"vllm", "sglang", "trtllm"} {
			f.Add(e, "0.11.0", s)
			f.Add(e, "", s)
		}
	}
	f.Fuzz(func(t *testing.T, engine, version, cmd string) {
		argv := strings.Fields(cmd)
		r, err := ParseAll(engine, version, argv, map[string]string{"VLLM_ATTENTION_BACKEND": version})
		if err == nil && r.Params.Model == "" {
			t.Errorf("accepted %q without a model", cmd)
		}
	})
}

// The in-process predictor has no work dir: the rendered side files come in
// memory, and must steer the parse exactly as the file on disk would.
func TestParseFilesInMemory(t *testing.T) {
	argv := []string{"trtllm-serve", "Qwen/Qwen3-14B", "--backend", "pytorch", "--extra_llm_api_options=extra.yaml"}
	files := map[string]string{"extra.yaml": "attn_backend: FLASHINFER\nkv_cache_config:\n  dtype: fp8\n"}
	p, err := ParseFiles("trtllm", "1.2.0rc1", argv, nil, files)
	if err != nil {
		t.Fatal(err)
	}
	if p.AttentionBackend != "FLASHINFER" || p.KVCacheDtype != "fp8" {
		t.Fatalf("params = %+v", p)
	}
	// Without the file, the engine's own error.
	if _, err := ParseFiles("trtllm", "1.2.0rc1", argv, nil, nil); err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("missing file: err = %v", err)
	}
}

// Attention DP is read from both engines' spellings, so that the simulator
// refuses it rather than price it as plain TP (issue 26: accepted and
// ignored).
func TestAttentionDPIsRead(t *testing.T) {
	p, err := Parse("sglang", "0.5.9", []string{"python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Qwen3-14B", "--tp", "2", "--enable-dp-attention"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.AttentionDP {
		t.Error("SGLang --enable-dp-attention: AttentionDP not set")
	}
	yml := filepath.Join(t.TempDir(), "extra.yaml")
	if err := os.WriteFile(yml, []byte("enable_attention_dp: true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = Parse("trtllm", "1.2.0rc1", []string{"trtllm-serve", "Qwen/Qwen3-14B", "--tp_size", "2", "--extra_llm_api_options", yml}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !p.AttentionDP {
		t.Error("TensorRT-LLM enable_attention_dp: AttentionDP not set")
	}
	p.GPU = "H100"
	if _, err := sim.New(p, nil); !errors.Is(err, sim.ErrBadParams) {
		t.Errorf("the simulator took attention DP: err = %v, want ErrBadParams", err)
	}
}

// TestTRTLLMGraphConfig: cuda_graph_config's sizes, as TorchLlmArgs'
// validator settles them; a batch between them runs eagerly unless
// enable_padding is on.
func TestTRTLLMGraphConfig(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml string
		sizes      []int
		padding    bool
		eager      bool
		err        string
	}{
		{name: "empty mapping: the default 128", yaml: "cuda_graph_config: {}", sizes: sim.TRTLLMGraphSizes(128, false)},
		{name: "max batch size", yaml: "cuda_graph_config:\n  max_batch_size: 256", sizes: sim.TRTLLMGraphSizes(256, false)},
		{name: "padding", yaml: "cuda_graph_config:\n  enable_padding: true\n  max_batch_size: 64", sizes: []int{1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64}, padding: true},
		{name: "explicit sizes sorted", yaml: "cuda_graph_config:\n  batch_sizes: [64, 1, 8]", sizes: []int{1, 8, 64}},
		{name: "both, agreeing", yaml: "cuda_graph_config:\n  batch_sizes: [1, 2, 4, 8]\n  max_batch_size: 8\n  enable_padding: true", sizes: []int{1, 2, 4, 8}, padding: true},
		{name: "null disables graphs", yaml: "cuda_graph_config: null", eager: true},
		{name: "both, disagreeing", yaml: "cuda_graph_config:\n  batch_sizes: [1, 8]\n  max_batch_size: 8", err: "both,_disagreeing.yaml: Please don't set both cuda_graph_config.batch_sizes and cuda_graph_config.max_batch_size.\ncuda_graph_config.batch_sizes: [1, 8], cuda_graph_config.max_batch_size: 8"},
		{name: "unknown key", yaml: "cuda_graph_config:\n  padding_enabled: true", err: "cuda_graph_config.padding_enabled"},
		{name: "size zero", yaml: "cuda_graph_config:\n  batch_sizes: [0, 4]", err: "cuda_graph_config.batch_sizes.0"},
		{name: "negative max", yaml: "cuda_graph_config:\n  max_batch_size: -1", err: "greater than or equal to 0"},
		{name: "not a list", yaml: "cuda_graph_config:\n  batch_sizes: 8", err: "a valid list"},
		{name: "not a mapping", yaml: "cuda_graph_config: 8", err: "CudaGraphConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yml := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_")+".yaml")
			if err := os.WriteFile(yml, []byte(tc.yaml+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := Parse("trtllm", "1.2.0rc1", []string{"trtllm-serve", "Qwen/Qwen3-14B", "--extra_llm_api_options", yml}, nil)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(p.GraphBatchSizes, tc.sizes) || p.GraphPadding != tc.padding || p.EnforceEager != tc.eager {
				t.Errorf("sizes %v padding %v eager %v, want %v %v %v", p.GraphBatchSizes, p.GraphPadding, p.EnforceEager, tc.sizes, tc.padding, tc.eager)
			}
		})
	}
}

// FuzzTRTLLMOptions feeds the options file arbitrary YAML: it parses or
// fails with an error, and any CUDA-graph sizes it accepts are ascending and
// at least 1, as the simulated engine needs them.
func FuzzTRTLLMOptions(f *testing.F) {
	for _, s := range []string{
		"cuda_graph_config: {}",
		"cuda_graph_config:\n  batch_sizes: [64, 1, 8]\n  enable_padding: true",
		"cuda_graph_config:\n  max_batch_size: 300",
		"cuda_graph_config:\n  batch_sizes: [1, 8]\n  max_batch_size: 8",
		"cuda_graph_config: null\nkv_cache_config:\n  dtype: fp8",
		"cuda_graph_config:\n  batch_sizes: [1.5, -2]",
	} {
		f.Add(s)
	}
	argv := []string{"trtllm-serve", "Qwen/Qwen3-14B", "--extra_llm_api_options", "x.yaml"}
	f.Fuzz(func(t *testing.T, yml string) {
		p, err := ParseFiles("trtllm", "1.2.0rc1", argv, nil, map[string]string{"x.yaml": yml})
		if err != nil {
			return
		}
		if !slices.IsSorted(p.GraphBatchSizes) || (len(p.GraphBatchSizes) > 0 && p.GraphBatchSizes[0] < 1) {
			t.Errorf("accepted CUDA-graph sizes %v from %q", p.GraphBatchSizes, yml)
		}
	})
}
