package labspec

import (
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
