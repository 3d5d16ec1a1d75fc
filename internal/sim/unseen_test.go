package sim

import (
	"math"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
)

func TestModelFamily(t *testing.T) {
	for _, c := range []struct{ name, want string }{
		{"Qwen3-14B", "Qwen3"}, {"Qwen3-235B-A22B", "Qwen3"}, {"Qwen3.5-9B", "Qwen3.5"},
		{"meta-llama/Llama-3.1-70B-Instruct-FP8", "Llama-3.1"}, {"Llama-3.1-8B", "Llama-3.1"},
		{"Qwen3-14B-AWQ", "Qwen3"}, {"gpt2", "gpt2"},
	} {
		if got := modelFamily(c.name); got != c.want {
			t.Errorf("modelFamily(%q) = %q, want %q", c.name, got, c.want)
		}
	}
}

// TestUnseenWidening: the range widens, and says why, for what the
// calibration has not seen: a GPU with no fitted calibration (roofline) or
// no kernel table of its own (kernel model), and a model family no
// measured model belongs to; a measured family on the H100 is not widened.
func TestUnseenWidening(t *testing.T) {
	folds := &FoldSet{Folds: map[string]*Coefficients{"Qwen3-14B": nil, "Qwen3.5-9B": nil}}
	roof := &Coefficients{Entries: map[string]Coef{"H100/vllm/0.11.0": defaultCoef}}
	kern := &Coefficients{StepModel: StepKernels, Entries: roof.Entries}
	for _, c := range []struct {
		coef       *Coefficients
		gpu, model string
		want       float64
		notes      int
	}{
		{roof, "H100", "Qwen3-32B", 1, 0},
		{roof, "H200", "Qwen3-32B", 1 + unseenGPURoofline, 1},
		{roof, "H100", "Llama-3.1-8B", 1 + unseenFamily, 1},
		{roof, "A100", "Llama-3.1-8B", (1 + unseenGPURoofline) * (1 + unseenFamily), 2},
		{kern, "H200", "Qwen3-32B", 1, 0}, // a measured table
		{kern, "A100", "Qwen3-32B", 1 + unseenGPUTransfer, 1},
	} {
		notes, f := unseenWidening(Params{GPU: c.gpu, Model: c.model}, c.coef, folds)
		if math.Abs(f-c.want) > 1e-12 || len(notes) != c.notes {
			t.Errorf("%s %s step model %q: factor %.3f notes %q; want %.3f and %d notes", c.gpu, c.model, c.coef.StepModel, f, notes, c.want, c.notes)
		}
	}
}

// TestPredictSpanWidensUnseen: PredictSpan's range for a model family the
// embedded calibration never measured is the same run's range for a
// measured family's architecture, stretched by unseenFamily, and says so.
func TestPredictSpanWidensUnseen(t *testing.T) {
	reqs := make([]dataset.Request, 16)
	for i := range reqs {
		reqs[i] = dataset.Request{PromptLen: 200, OutputLen: 50}
	}
	p := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Llama-3.1-8B", GPU: "H100"}
	s, err := PredictSpan(p, nil, nil, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	// 16 requests run as one small batch, so the small-batch bound
	// (stepbound.go) widens the range too; its own test is
	// TestPredictSpanSmallBatchBound.
	if fam := withoutBound(s.Unseen); len(fam) != 1 || !strings.Contains(fam[0], "Llama-3.1") {
		t.Fatalf("Llama on H100: unseen %q, want the family", s.Unseen)
	}
	// Undo the widening: what is left is the envelope the folds gave.
	if r := s.Hi.TotalTPS / s.Lo.TotalTPS; r < (1+unseenFamily)*(1+unseenFamily) {
		t.Errorf("range %.0f..%.0f narrower than the family widening alone", s.Lo.TotalTPS, s.Hi.TotalTPS)
	}
	q := Params{Engine: EngineVLLM, Version: "0.11.0", Model: "Qwen3-8B", GPU: "H100"}
	s2, err := PredictSpan(q, nil, nil, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	if rest := withoutBound(s2.Unseen); len(rest) != 0 {
		t.Errorf("Qwen3-8B on H100 (Qwen3 measured): unseen %q", s2.Unseen)
	}
}

// withoutBound is notes less the small-batch bound's.
func withoutBound(notes []string) []string {
	var out []string
	for _, n := range notes {
		if !strings.HasPrefix(n, "small-batch steps:") {
			out = append(out, n)
		}
	}
	return out
}

// TestUnseenGPUSaysCarried: the note of a GPU with no fitted calibration
// says when a dense model's shares were carried to it (sim.New carries
// them; a MoE model's are not).
func TestUnseenGPUSaysCarried(t *testing.T) {
	roof := &Coefficients{Entries: map[string]Coef{"H100/vllm/0.11.0": defaultCoef}}
	for _, c := range []struct {
		model   string
		carried bool
	}{{"Qwen3-32B", true}, {"Qwen3-235B-A22B", false}} {
		notes, _ := unseenWidening(Params{GPU: "A100", Model: c.model}, roof, nil)
		if len(notes) != 1 || strings.Contains(notes[0], "carried") != c.carried {
			t.Errorf("%s on the A100: notes %q, want one that says carried: %v", c.model, notes, c.carried)
		}
	}
}

// TestAssumptions: a prediction says what it takes as given: a
// speculative acceptance the caller did not give, and an attention
// backend the calibration has no factor for. A given acceptance, the
// default backend and a fitted one assume nothing.
func TestAssumptions(t *testing.T) {
	for _, c := range []struct {
		name string
		p    Params
		want string
	}{
		{"plain", Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100"}, ""},
		{"eagle3 prior", Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100", SpecMethod: "eagle3", SpecTokens: 3},
			"speculative acceptance 0.68 per draft token is EAGLE-3 on MT-Bench"},
		{"acceptance given", Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100", SpecMethod: "eagle3", SpecTokens: 3, SpecAcceptance: 0.5}, ""},
		{"trtllm flashinfer", Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen3-14B", GPU: "H100", AttentionBackend: "FLASHINFER"},
			"attention backend FLASHINFER has no fitted factor on trtllm 1.2.0rc1: priced as the default, TRTLLM"},
		{"trtllm default named", Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen3-14B", GPU: "H100", AttentionBackend: "TRTLLM"}, ""},
		{"sglang fitted", Params{Engine: "sglang", Version: "0.5.5.post1", Model: "Qwen3-14B", GPU: "H100", AttentionBackend: "flashinfer"}, ""},
		{"unknown version", Params{Engine: "vllm", Version: "0.11.7", Model: "Qwen3-14B", GPU: "H100"},
			"no calibration of vllm 0.11.7 on H100 fits this deployment: it borrows H100/vllm/0.11.0's"},
	} {
		got := strings.Join(Assumptions(c.p, nil), "; ")
		if (c.want == "") != (got == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// TestAssumptionsReferenceBackend: the backend a calibration's own GPU
// runs by default is what its factors are relative to, so on another GPU
// it is priced from the calibration, not "as the default": SGLang's fa3 on
// an A100 (whose default is flashinfer) is the H100's fa3, faster than
// its flashinfer, and the assumption said it was priced as flashinfer.
func TestAssumptionsReferenceBackend(t *testing.T) {
	p := Params{Engine: "sglang", Version: "0.5.5.post1", Model: "Qwen3-14B", GPU: "A100", AttentionBackend: "fa3"}
	if got := strings.Join(Assumptions(p, nil), "; "); strings.Contains(got, "priced as the default") {
		t.Errorf("fa3 on the A100: %q, want no default-pricing claim", got)
	}
	reqs := fixedReqs(64, 1024, 256)
	tps := map[string]float64{}
	for _, be := range []string{"fa3", "flashinfer"} {
		q := p
		q.AttentionBackend = be
		pr, err := PredictWith(q, nil, reqs, Load{})
		if err != nil {
			t.Fatal(err)
		}
		tps[be] = pr.Result.TotalTokenThroughput
	}
	if !(tps["fa3"] > tps["flashinfer"]) {
		t.Errorf("SGLang on the A100: fa3 %.0f tok/s, flashinfer %.0f; want fa3 faster, as the H100 calibration measures", tps["fa3"], tps["flashinfer"])
	}
	// A backend no calibration measured is still said to be priced as
	// the default, on any GPU.
	q := Params{Engine: "trtllm", Version: "1.2.0rc1", Model: "Qwen3-14B", GPU: "A100", AttentionBackend: "FLASHINFER"}
	if got := strings.Join(Assumptions(q, nil), "; "); !strings.Contains(got, "priced as the default, TRTLLM") {
		t.Errorf("TensorRT-LLM FLASHINFER on the A100: %q, want it priced as the default", got)
	}
}

// TestSpanHoldsAcceptanceRange: with no acceptance given, the range holds
// the run at both ends of the method's published acceptance, and says so;
// without that, n-gram drafting at 8 requests in flight, where decode
// steps bound the run, would print a range that excludes a workload as
// repetitive as a translation set.
func TestSpanHoldsAcceptanceRange(t *testing.T) {
	reqs := fixedReqs(40, 300, 120)
	p := Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen3-14B", GPU: "H100", SpecMethod: "ngram", SpecTokens: 4}
	load := Load{MaxConcurrency: 8}
	s, err := PredictSpan(p, nil, nil, reqs, load)
	if err != nil {
		t.Fatal(err)
	}
	pri := acceptanceOf("ngram")
	for _, a := range []float64{pri.lo, pri.hi} {
		q := p
		q.SpecAcceptance = a
		pr, err := PredictWith(q, nil, reqs, load)
		if err != nil {
			t.Fatal(err)
		}
		if tps, _, _ := s.Contains(Figures{TotalTPS: pr.Result.TotalTokenThroughput}); !tps {
			t.Errorf("acceptance %.2f: %.1f tok/s outside the range %.1f..%.1f", a, pr.Result.TotalTokenThroughput, s.Lo.TotalTPS, s.Hi.TotalTPS)
		}
	}
	if !strings.Contains(strings.Join(s.Unseen, "; "), "the range holds 0.01 to 0.75") {
		t.Errorf("the range does not say why it is wide: %v", s.Unseen)
	}
}
