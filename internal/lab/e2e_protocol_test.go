package lab_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

// protocolSpec runs all three engines on a model given as a local
// directory, with an FP8 KV cache, on the sim runtime whose simulator
// imitates each engine's real protocol (docs/protocols.md): TensorRT-LLM
// lists the directory by its last component, the FP8 KV cache puts a
// kv_cache_config block in its options file (which drops the fraction
// flag), each engine serves its metrics where and as it really
// does, and vLLM's repeat runs on a server whose reset was proven.
const protocolSpec = `
name: protocols
model: ./models/Qwen3-14B
hardware: {gpu: H100, count: 1}
engines:
  - {name: vllm, version: 0.11.0}
  - {name: sglang, version: 0.5.5.post1}
  - {name: trtllm, version: 1.2.0rc1}
base: {gpu_memory_fraction: 0.8, kv_cache_dtype: fp8}
runtime: sim
time_scale: 20
tokenizer: TOKENIZER
tuning: {name: rnd, dataset: random, input_len: 256, output_len: 32, num_prompts: 32, seed: 42}
generalization: []
stages:
  - name: engine
search: {disable: true}
combinations: false
repeats: 2
parallel: 1
`

func TestE2EProtocolsLocalModelDir(t *testing.T) {
	checkProtocolLab(t, e2eRoot(t))
}

// TestE2EDockerProtocolsLocalModelDir is the same lab on the docker
// runtime: the model directory is mounted at its own path in each
// container, where the simulated trtllm-serve lists it by its last
// component as the real one does.
func TestE2EDockerProtocolsLocalModelDir(t *testing.T) {
	_, image := dockerE2E(t)
	checkProtocolLab(t, e2eRoot(t), "--runtime", "docker", "--image", image)
}

// checkProtocolLab runs protocolSpec with perflab lab and extra arguments
// and checks what it must show.
func checkProtocolLab(t *testing.T, root string, extra ...string) {
	dir := t.TempDir()
	model := filepath.Join(dir, "models", "Qwen3-14B")
	if err := os.MkdirAll(model, 0o755); err != nil {
		t.Fatal(err)
	}
	hf, err := os.ReadFile(filepath.Join(root, "internal", "sim", "models", "Qwen3-14B.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(model, "config.json"), hf, 0o644); err != nil {
		t.Fatal(err)
	}
	spec := filepath.Join(dir, "protocols.yaml")
	text := strings.Replace(protocolSpec, "TOKENIZER", shareddata.Path(t, "data", "tokenizers", "qwen3"), 1)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	db, out := "sqlite:"+filepath.Join(dir, "lab.db"), filepath.Join(dir, "out")
	cmd := exec.Command(perflabBin, append([]string{"lab", spec, "--db", db, "--out", out, "--keep-workdir"}, extra...)...)
	cmd.Dir = root
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("perflab lab: %v\n%s", err, b)
	}

	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background())
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	trials, err := st.Trials(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	engines := map[string]bool{}
	verified := false
	for _, tr := range trials {
		var cfg engine.Config
		if err := json.Unmarshal(tr.Config, &cfg); err != nil {
			t.Fatal(err)
		}
		if tr.Status != "ok" {
			t.Errorf("%s (%s): %s %s: %s", tr.Key, cfg.Engine, tr.Status, tr.FailureClass, tr.Reason)
			continue
		}
		engines[cfg.Engine] = true
		if len(tr.EngineMetrics) == 0 {
			t.Errorf("%s (%s): no engine metrics", tr.Key, cfg.Engine)
		}
		if cfg.Engine == engine.VLLM && tr.Cache == lab.CacheResetVerified {
			verified = true
		}
		if tr.Cache == "" {
			t.Errorf("%s: no record of how its cache was cleared", tr.Key)
		}
	}
	if len(engines) != 3 {
		t.Errorf("engines that ran: %v, want all three", engines)
	}
	if !verified {
		t.Error("no vLLM repeat on a server whose reset was proven")
	}

	// The FP8-KV TensorRT-LLM server's options file carries the fraction
	// inside its kv_cache_config block, where trtllm-serve reads it.
	// (A process's working directory holds the file; a container's
	// mounts it from files/.)
	opts, _ := filepath.Glob(filepath.Join(out, "engines", "*", engine.TRTLLMOptionsFile))
	inFiles, _ := filepath.Glob(filepath.Join(out, "engines", "*", "files", engine.TRTLLMOptionsFile))
	opts = append(opts, inFiles...)
	found := false
	for _, p := range opts {
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), "kv_cache_config:\n  dtype: fp8\n  free_gpu_memory_fraction: 0.8\n") {
			found = true
		}
	}
	if !found {
		t.Errorf("no kept TensorRT-LLM options file with the fraction in its kv_cache_config (%v)", opts)
	}

	rep, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	table := string(rep)
	if i := strings.Index(table, "### Engine metrics"); i >= 0 {
		table = table[i:]
	} else {
		t.Fatalf("report has no engine-metrics table:\n%s", rep)
	}
	for _, name := range []string{"vLLM", "SGLang", "TensorRT-LLM"} {
		if !strings.Contains(table, "| "+name) {
			t.Errorf("engine-metrics table lacks %s:\n%s", name, table[:min(len(table), 1500)])
		}
	}
}
