package sim

import (
	"io/fs"
	"math"
	"strings"
	"testing"
)

// TestCatalogConfigs: every embedded config.json parses, and the catalog
// serves each one under its file name, so no model is left out silently.
func TestCatalogConfigs(t *testing.T) {
	ents, err := fs.ReadDir(modelConfigs, "models")
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) == 0 {
		t.Fatal("no embedded model configs")
	}
	for _, e := range ents {
		b, err := fs.ReadFile(modelConfigs, "models/"+e.Name())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := parseModelConfig(b); err != nil {
			t.Errorf("models/%s: %v", e.Name(), err)
		}
		name := strings.TrimSuffix(e.Name(), ".json")
		if _, err := LookupModel("Qwen/" + name); err != nil {
			t.Errorf("LookupModel(%q): %v", name, err)
		}
	}
	if len(archCatalog) != len(ents) {
		t.Errorf("catalog holds %d models, %d configs embedded", len(archCatalog), len(ents))
	}
}

// TestStreamBytes: a step reads every weight but an untied input
// embedding (a lookup of a row per token) and the weights outside the
// decoder; a tied embedding is read whole, as the LM head.
func TestStreamBytes(t *testing.T) {
	for _, tc := range []struct {
		model string
		fp8   bool
	}{{"Qwen3-8B", false}, {"Qwen3-8B", true}, {"Qwen3.5-9B", false}, {"Qwen3-235B-A22B", false}} {
		a, err := LookupModel(tc.model)
		if err != nil {
			t.Fatal(err)
		}
		a.FP8Weights = tc.fp8
		embed := float64(a.VocabSize) * float64(a.HiddenSize)
		want := a.weightBytes() - a.ExtraParams*a.linearBytesPerParam()
		if !a.TieEmbeddings {
			want -= 2 * embed // the input embedding, at 16 bits in either precision
		}
		if got := a.streamBytes(); math.Abs(got-want) > 1 {
			t.Errorf("%s fp8=%v: streams %.4g bytes, want %.4g (weights %.4g)", tc.model, tc.fp8, got, want, a.weightBytes())
		}
	}
	// Qwen3-8B's untied embedding is 151936 × 4096 at 16 bits.
	a, _ := LookupModel("Qwen3-8B")
	if d := a.weightBytes() - a.streamBytes(); math.Abs(d-151936*4096*2) > 1 {
		t.Errorf("Qwen3-8B: a step skips %.4g bytes, want its input embedding's %d", d, 151936*4096*2)
	}
	tied := a
	tied.TieEmbeddings = true
	if tied.streamBytes() != tied.weightBytes() {
		t.Errorf("tied embeddings: streams %.4g of %.4g bytes, want all", tied.streamBytes(), tied.weightBytes())
	}
}
