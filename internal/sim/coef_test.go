package sim

import (
	"fmt"
	"strings"
	"testing"
)

func TestLookupFallback(t *testing.T) {
	c := &Coefficients{Entries: map[string]Coef{
		"*":                       {GEMMEff: 0.1},
		"H100/vllm/0.9.2":         {GEMMEff: 0.2},
		"H100/vllm/0.11.0":        {GEMMEff: 0.3},
		"H200/sglang/0.5.5":       {GEMMEff: 0.4},
		"H100/sglang/0.5.5.post1": {GEMMEff: 0.5},
		"H200":                    {GEMMEff: 0.6},
	}}
	tests := []struct {
		gpu, engine, version, want string
	}{
		{"H100", "vllm", "0.11.0", "H100/vllm/0.11.0"},
		{"H100", "vllm", "0.10.1", "H100/vllm/0.9.2"},    // newest not above
		{"H100", "vllm", "0.17.1", "H100/vllm/0.11.0"},   // newest below
		{"H100", "vllm", "0.8.0", "H100/vllm/0.9.2"},     // oldest above
		{"H100", "vllm", "", "H100/vllm/0.11.0"},         // newest
		{"A100", "vllm", "0.11.0", "H100/vllm/0.11.0"},   // same engine, other GPU
		{"H200", "sglang", "0.5.9", "H200/sglang/0.5.5"}, // same GPU first
		{"H100", "trtllm", "1.2.0rc1", "*"},
		{"H200", "trtllm", "1.2.0rc1", "H200"}, // the GPU's pool
		{"H200", "vllm", "0.11.0", "H200"},     // the GPU's pool before another GPU's vLLM
		// One version order (engine.CompareVersions): a release
		// candidate is below its release and post-releases above it, so
		// 0.11.0rc2 is not yet 0.11.0 (the old string comparison put
		// "0rc2" above "0"), and rc10 follows rc2.
		{"H100", "vllm", "0.11.0rc2", "H100/vllm/0.9.2"},
		{"H100", "vllm", "0.11.0.post1", "H100/vllm/0.11.0"},
		{"H100", "sglang", "0.5.5", "H100/sglang/0.5.5.post1"}, // oldest above
		{"H100", "sglang", "v0.5.5.post1", "H100/sglang/0.5.5.post1"},
	}
	for _, tt := range tests {
		t.Run(tt.gpu+"/"+tt.engine+"/"+tt.version, func(t *testing.T) {
			if _, got := c.Lookup(tt.gpu, tt.engine, tt.version); got != tt.want {
				t.Errorf("Lookup = %s, want %s", got, tt.want)
			}
		})
	}
	if _, got := (&Coefficients{Entries: map[string]Coef{}}).Lookup("H100", "vllm", "0.11.0"); got != "prior" {
		t.Errorf("empty calibration: got %s, want prior", got)
	}
}

// TestLookupEmbeddedExact: the one version order leaves the embedded
// calibration's choice alone for every version it was fitted to (each finds
// its own entry) and for each engine's default version.
func TestLookupEmbeddedExact(t *testing.T) {
	c := DefaultCoefficients()
	n := 0
	for k := range c.Entries {
		parts := strings.SplitN(k, "/", 3)
		if len(parts) != 3 {
			continue
		}
		n++
		if _, got := c.Lookup(parts[0], parts[1], parts[2]); got != k {
			t.Errorf("Lookup(%s) = %s", k, got)
		}
	}
	if n == 0 {
		t.Fatal("the embedded calibration has no gpu/engine/version entry")
	}
	for _, e := range []string{EngineVLLM, EngineSGLang, EngineTRTLLM} {
		if _, got := c.Lookup("H100", e, DefaultVersion(e)); got != Key("H100", e, DefaultVersion(e)) {
			t.Errorf("%s at its default version %s: Lookup = %s", e, DefaultVersion(e), got)
		}
	}
}

// TestFingerprint: the fingerprint names the model revision and changes
// with any coefficient, so a lab run keyed by it never mixes calibrations.
func TestFingerprint(t *testing.T) {
	def := Fingerprint(nil)
	if def != Fingerprint(DefaultCoefficients()) {
		t.Errorf("nil and the embedded calibration differ: %s", def)
	}
	if want := fmt.Sprintf("r%d-", ModelRevision); !strings.HasPrefix(def, want) {
		t.Errorf("fingerprint %s does not start with %s", def, want)
	}
	c := DefaultCoefficients()
	for k, e := range c.Entries {
		e.StepMs *= 1.01
		c.Entries[k] = e
		break
	}
	if Fingerprint(c) == def {
		t.Error("a changed coefficient kept the fingerprint")
	}
}

// TestParseCoefficientsRejects: figures no engine has are refused with the
// entry and the field named, not simulated into infinite or NaN timings.
func TestParseCoefficientsRejects(t *testing.T) {
	good := `"gemm_eff":0.6,"fp8_eff":0.45,"mem_eff":0.75,"attn_eff":0.4,"step_ms":4,"seq_us":20,"frontend_ms":1,"eager_ms":8`
	if _, err := ParseCoefficients([]byte(`{"entries":{"*":{` + good + `}}}`)); err != nil {
		t.Fatalf("good entry: %v", err)
	}
	for _, tc := range []struct{ extra, want string }{
		{`,"gemm_eff":1e-300`, "gemm_eff"},
		{`,"mem_eff":2`, "mem_eff"},
		{`,"scan_eff":-0.1`, "scan_eff"},
		{`,"step_ms":-1`, "step_ms"},
		{`,"output_us":1e300`, "output_us"},
		{`,"kernel_scale":-1`, "kernel_scale"},
		{`,"kernel_scale":50`, "kernel_scale"},
		{`,"backend":{"fa3":-1}`, "fa3"},
		{`,"backend_decode":{"triton":0}`, "triton"},
		{`,"no_such_field":1`, "unknown field"},
	} {
		_, err := ParseCoefficients([]byte(`{"entries":{"H100/vllm/0.11.0":{` + good + tc.extra + `}}}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "H100/vllm/0.11.0") && tc.want != "unknown field" {
			t.Errorf("%s: error %v, want one naming the entry and %q", tc.extra, err, tc.want)
		}
	}
}

// TestForAttentionKind: an engine version calibrated only on models of one
// attention kind is passed over for a model of the other, for the same
// engine's nearest version on that GPU calibrated on the model's kind;
// where the engine has none, the version's own calibration stays. An entry
// with no record of its models serves every kind.
func TestForAttentionKind(t *testing.T) {
	c := &Coefficients{
		Entries: map[string]Coef{
			"*":                       {GEMMEff: 0.1},
			"H100/sglang/0.5.5.post1": {GEMMEff: 0.2},
			"H100/sglang/0.5.9":       {GEMMEff: 0.3},
			"H100/vllm/0.17.1":        {GEMMEff: 0.4},
			"H100/trtllm/1.2.0rc1":    {GEMMEff: 0.5},
		},
		Models: map[string][]string{
			"H100/sglang/0.5.5.post1": {"Qwen3-14B", "Qwen3-32B-FP8"},
			"H100/sglang/0.5.9":       {"Qwen3.5-9B"},
			"H100/vllm/0.17.1":        {"Qwen3.5-9B"},
		},
	}
	tests := []struct {
		engine, version, model, want string
		borrowed, passed             bool
	}{
		{EngineSGLang, "0.5.9", "Qwen3.5-9B", "H100/sglang/0.5.9", false, false},
		{EngineSGLang, "0.5.9", "Qwen3-14B", "H100/sglang/0.5.5.post1", true, true},
		{EngineSGLang, "0.6.0", "Qwen3-14B", "H100/sglang/0.5.5.post1", true, false},
		{EngineSGLang, "0.6.0", "Qwen3.5-9B", "H100/sglang/0.5.9", true, false},
		{EngineSGLang, "0.5.5.post1", "Qwen3.5-9B", "H100/sglang/0.5.9", true, true},
		{EngineSGLang, "0.5.5.post1", "Llama-3.1-8B", "H100/sglang/0.5.5.post1", false, false},
		// No vLLM version was calibrated on a full-attention model: the
		// hybrid one is all there is.
		{EngineVLLM, "0.17.1", "Qwen3-14B", "H100/vllm/0.17.1", false, false},
		{EngineTRTLLM, "1.2.0rc1", "Qwen3.5-9B", "H100/trtllm/1.2.0rc1", false, false},
	}
	// On a GPU with no calibration the kind still decides (sim predict of
	// an A100 took the hybrid-fitted version across GPUs).
	if _, got := c.For(Params{GPU: "A100", Engine: EngineSGLang, Version: "0.5.9", Model: "Qwen3-14B"}); got != "H100/sglang/0.5.5.post1" {
		t.Errorf("SGLang 0.5.9 on an A100 for a full-attention model: For = %s, want H100/sglang/0.5.5.post1", got)
	}
	for _, tt := range tests {
		t.Run(tt.engine+"/"+tt.version+"/"+tt.model, func(t *testing.T) {
			p := Params{GPU: "H100", Engine: tt.engine, Version: tt.version, Model: tt.model}
			if _, got := c.For(p); got != tt.want {
				t.Errorf("For = %s, want %s", got, tt.want)
			}
			if from, b := c.Borrowed(p); b != tt.borrowed || from != tt.want {
				t.Errorf("Borrowed = %s, %v; want %s, %v", from, b, tt.want, tt.borrowed)
			}
			if _, passed := c.passedOver(p); passed != tt.passed {
				t.Errorf("passedOver = %v, want %v", passed, tt.passed)
			}
		})
	}
	// The version passed over stands among the siblings: the range holds
	// the run on the only calibration of the deployment's own version.
	p := Params{GPU: "H100", Engine: EngineSGLang, Version: "0.5.9", Model: "Qwen3-14B"}
	sib := c.siblings(p)
	if len(sib) != 1 {
		t.Fatalf("siblings of SGLang 0.5.9 for a full-attention model: %d, want 1", len(sib))
	}
	if g := sib[0].Entries["H100/sglang/0.5.9"].GEMMEff; g != 0.3 {
		t.Errorf("the sibling runs 0.5.9 on gemm_eff %g, want its own calibration's 0.3", g)
	}
}

// TestFitRecordsModels: a fit records, per group, the models its blocks ran,
// and keeps the start's record of a group it leaves alone.
func TestFitRecordsModels(t *testing.T) {
	start := &Coefficients{Entries: map[string]Coef{"*": defaultCoef, "H100/sglang/0.5.9": defaultCoef},
		Models: map[string][]string{"H100/sglang/0.5.9": {"Qwen3.5-9B"}}}
	var cases []Case
	for i, m := range []string{"Qwen3-32B", "Qwen3-14B", "Qwen3-14B"} {
		cases = append(cases, Case{ID: fmt.Sprint(i), Params: Params{Engine: EngineVLLM, Version: "0.11.0", Model: m, GPU: "H100"},
			Workload: Workload{Kind: "random", NumPrompts: 4, InputLen: 200, OutputLen: 20, TotalInput: 800, TotalOutput: 80, Client: "vllm"},
			Measured: Measured{TotalTPS: 5000, MeanTTFTMs: 100, MeanTPOTMs: 20}})
	}
	c, err := Fit(cases, start, FitOptions{Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(c.Models["H100/vllm/0.11.0"], ","); got != "Qwen3-14B,Qwen3-32B" {
		t.Errorf("models of the fitted group: %s", got)
	}
	if got := strings.Join(c.Models["H100/sglang/0.5.9"], ","); got != "Qwen3.5-9B" {
		t.Errorf("models of the group left alone: %s", got)
	}
}
