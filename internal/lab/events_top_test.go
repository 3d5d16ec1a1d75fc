package lab

import (
	"testing"

	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/store"
)

// eventLog keeps the events a lab emits.
type eventLog struct{ evs []labprogress.Event }

func (l *eventLog) Event(ev labprogress.Event) { l.evs = append(l.evs, ev) }

// TestTopIsTuningOnly: the progress line's "top measured" is the best
// tuning score so far; a generalization workload's figure (a short prompt
// at twice ShareGPT's tok/s) is on another scale and never takes it.
func TestTopIsTuningOnly(t *testing.T) {
	s := mustSpec(t, smallSpec)
	log := &eventLog{}
	e := NewEvents(log)
	e.Start(s, 3, 0)
	ok := store.Trial{Status: "ok"}
	e.Trial(TrialSpec{Name: "vLLM", Workload: *s.Tuning}, ok, 5000, false)
	e.Trial(TrialSpec{Name: "vLLM", Workload: s.Generalization[0]}, ok, 11000, false)
	e.Trial(TrialSpec{Name: "SGLang", Workload: *s.Tuning}, ok, 6000, false)
	var tops []float64
	for _, ev := range log.evs {
		if ev.Trial != nil && ev.Top != nil {
			tops = append(tops, ev.Top.Score)
		}
	}
	if len(tops) != 3 || tops[0] != 5000 || tops[1] != 5000 || tops[2] != 6000 {
		t.Errorf("top after each trial: %v, want [5000 5000 6000]", tops)
	}
}
