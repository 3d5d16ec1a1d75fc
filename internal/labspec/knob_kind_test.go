package labspec

import (
	"slices"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

// TestAttentionKnobFollowsKinds: the attention-backend knob accepts what
// each engine's Kind accepts (the lab kept a shorter copy of the lists
// before, refusing e.g. vLLM's FLASH_ATTN_MLA that engine.Config takes),
// applies a name only on its own engine, and the default stage's
// candidates are each Kind's.
func TestAttentionKnobFollowsKinds(t *testing.T) {
	kb := knobs[KnobAttentionBackend]
	for _, k := range engine.Kinds() {
		for _, b := range k.AttentionBackends {
			if err := kb.check(b); err != nil {
				t.Errorf("%s backend %s refused: %v", k.Name, b, err)
			}
			for _, other := range engine.Kinds() {
				cfg := engine.Config{Engine: other.Name}
				if got, want := kb.apply(&cfg, nil, b), other.HasAttentionBackend(b); got != want {
					t.Errorf("%s on %s: applies %v, want %v", b, other.Name, got, want)
				}
			}
		}
	}
	// An engine's fixed default backend, named, is the engine left at its
	// default: the candidate is the incumbent and is not run again.
	defaults := 0
	for _, k := range engine.Kinds() {
		if k.AttentionDefault == "" {
			continue
		}
		defaults++
		cfg := engine.Config{Engine: k.Name}
		if !kb.apply(&cfg, nil, k.AttentionDefault) || cfg.AttentionBackend != "" {
			t.Errorf("%s: its default %s set %q, want unset", k.Name, k.AttentionDefault, cfg.AttentionBackend)
		}
	}
	if defaults == 0 {
		t.Error("no engine has a fixed default backend: TensorRT-LLM's attn_backend defaults to TRTLLM")
	}
	if err := kb.check("NOT_A_BACKEND"); err == nil {
		t.Error("an unknown backend name passed")
	}
	for _, st := range DefaultStages() {
		if st.Knob != KnobAttentionBackend {
			continue
		}
		for _, k := range engine.Kinds() {
			if got := st.PerEngine[k.Name]; len(got) == 0 || len(got) != len(k.AttentionCandidates) {
				t.Errorf("%s: default candidates %v, want %v", k.Name, got, k.AttentionCandidates)
			}
		}
	}
}

// TestGraphPaddingKnobFollowsKinds: a cuda_graph_padding value equal to
// the engine's own default (Kind.PadsGraphs) leaves the config unset, so
// the candidate hashes as the incumbent does and is not measured twice;
// the other value is set and rendered by the engine package.
func TestGraphPaddingKnobFollowsKinds(t *testing.T) {
	kb := knobs[KnobCUDAGraphPadding]
	for _, k := range engine.Kinds() {
		for _, v := range []string{"true", "false", "default"} {
			cfg := engine.Config{Engine: k.Name}
			if !kb.apply(&cfg, nil, v) {
				t.Fatalf("%s: %s not applied", k.Name, v)
			}
			unset := v == "default" || (v == "true") == k.PadsGraphs
			if got := cfg.CUDAGraphPadding == nil; got != unset {
				t.Errorf("%s %s: unset %v, want %v", k.Name, v, got, unset)
			}
			if !unset && *cfg.CUDAGraphPadding != (v == "true") {
				t.Errorf("%s %s: set to %v", k.Name, v, *cfg.CUDAGraphPadding)
			}
		}
	}
	if err := kb.check("sometimes"); err == nil {
		t.Error("a non-boolean value passed")
	}
}

// TestStageWithoutValuesTriesDefaults: a stage that names only its knob
// gets the candidates it would have among the default stages (it used to
// pass validation and then try nothing).
func TestStageWithoutValuesTriesDefaults(t *testing.T) {
	s, err := ParseSpec("s.yaml", []byte(`
name: s
model: Qwen/Qwen3-14B
engines: [{name: vllm}, {name: trtllm}]
tuning: {name: rnd, dataset: random, input_len: 100, output_len: 10}
no_generalization: true
stages:
  - name: engine
  - name: quantization
  - name: attention_backend
  - name: cuda_graph_padding
  - name: max_num_seqs
    values: ["64"]
`))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string][]string{
		KnobQuantization:     {"vllm": {"fp8"}, "trtllm": {"fp8-checkpoint"}},
		KnobAttentionBackend: {"vllm": nil, "trtllm": nil},
		KnobCUDAGraphPadding: {"vllm": {"true"}, "trtllm": {"true"}},
		KnobMaxNumSeqs:       {"vllm": {"64"}, "trtllm": {"64"}},
	}
	for _, st := range s.Stages {
		w, ok := want[st.Knob]
		if !ok {
			continue
		}
		for eng, vs := range w {
			if st.Knob == KnobAttentionBackend {
				kd, _ := engine.KindOf(eng)
				vs = kd.AttentionCandidates
			}
			if got := s.StageValues(st, eng); !slices.Equal(got, vs) {
				t.Errorf("stage %s on %s: %v, want %v", st.Name, eng, got, vs)
			}
		}
	}
	// The normalized spec parses again to the same key: a stored run's
	// spec is read back to adopt it.
	again, err := ParseSpec("stored", []byte(s.YAML()))
	if err != nil {
		t.Fatalf("normalized spec does not parse: %v\n%s", err, s.YAML())
	}
	if again.Key() != s.Key() {
		t.Errorf("key %s after a round trip, was %s", again.Key(), s.Key())
	}
	// So does a spec on the default stages that lists fewer engines than
	// the default attention stage names.
	d, err := ParseSpec("d.yaml", []byte("name: d\nmodel: Qwen/Qwen3-14B\nengines: [{name: sglang}]\n"+
		"tuning: {name: rnd, dataset: random, input_len: 100, output_len: 10}\nno_generalization: true\n"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := ParseSpec("stored", []byte(d.YAML())); err != nil || again.Key() != d.Key() {
		t.Errorf("default stages: round trip %v (key %v)", err, again != nil && again.Key() == d.Key())
	}
}

// TestDefaultQuantizationRuns: each engine's default precision candidate is
// one its engine can run. The default stage tried online FP8 everywhere,
// which trtllm-serve refuses, so a TensorRT-LLM incumbent never got FP8.
func TestDefaultQuantizationRuns(t *testing.T) {
	s, err := ParseSpec("q.yaml", []byte(`
name: q
model: Qwen/Qwen3-14B
engines: [{name: vllm}, {name: sglang}, {name: trtllm}]
tuning: {name: rnd, dataset: random, input_len: 100, output_len: 10}
no_generalization: true
`))
	if err != nil {
		t.Fatal(err)
	}
	var st Stage
	for _, x := range s.Stages {
		if x.Knob == KnobQuantization {
			st = x
		}
	}
	for _, e := range s.Engines {
		vs := s.StageValues(st, e.Name)
		if len(vs) == 0 {
			t.Errorf("%s: no quantization candidate", e.Name)
		}
		for _, v := range vs {
			cfg, ok := s.Config(Point{KnobEngine: e.Name, KnobQuantization: v})
			if !ok {
				t.Errorf("%s %s: does not apply", e.Name, v)
				continue
			}
			if why := Unsupported(cfg); why != "" {
				t.Errorf("%s %s: %s", e.Name, v, why)
			}
		}
	}
}
