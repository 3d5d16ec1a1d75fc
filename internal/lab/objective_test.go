package lab

import (
	"errors"
	"strings"
	"testing"
)

// TestObjectiveRegistry checks each objective the spec accepts through the
// registry alone: its score of one observation, its unit, and that a spec
// naming it parses to it.
func TestObjectiveRegistry(t *testing.T) {
	o := Observation{TotalThroughput: 1200, RequestGoodput: 3.5, SustainableLoad: 7}
	cases := []struct {
		name  string
		obj   Objective
		score float64
		unit  string
	}{
		{ObjectiveTotalThroughput, Objective{Metric: ObjectiveTotalThroughput}, 1200, "tok/s"},
		{ObjectiveThroughputPerGPU, Objective{Metric: ObjectiveThroughputPerGPU}, 300, "tok/s/GPU"},
		{ObjectiveGoodput, Objective{Metric: ObjectiveGoodput, SLO: SLO{TPOTMs: 50}}, 3.5, "req/s within SLO"},
		{ObjectiveMaxLoadUnderSLO, Objective{Metric: ObjectiveMaxLoadUnderSLO, Load: &LoadObjective{SLO: "ttft_p99<=2s", Axis: "concurrency"}}, 7, "concurrent requests within SLO"},
	}
	if got := ObjectiveNames(); len(got) != len(cases) {
		t.Fatalf("registered %v, the test covers %d", got, len(cases))
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := LookupObjective(tc.name)
			if !ok || k.Name() != tc.name {
				t.Fatalf("LookupObjective(%q) = %v, %v", tc.name, k, ok)
			}
			if got := tc.obj.Score(o, 4); got != tc.score {
				t.Errorf("score %v, want %v", got, tc.score)
			}
			if got := tc.obj.Unit(); got != tc.unit {
				t.Errorf("unit %q, want %q", got, tc.unit)
			}
			if p, err := tc.obj.check(); err != nil {
				t.Errorf("check: %s: %v", p, err)
			}
			// The kind runs its candidates its own way: only the load
			// search has an SLO of its own to show.
			if hasSLO := k.loadSLO(tc.obj) != nil; hasSLO != (tc.name == ObjectiveMaxLoadUnderSLO) {
				t.Errorf("loadSLO set = %v", hasSLO)
			}
		})
	}
}

// TestObjectiveUnknownNamesRegistry: an unknown objective is refused at its
// field, with every registered name offered.
func TestObjectiveUnknownNamesRegistry(t *testing.T) {
	_, err := ParseSpec("x.yaml", []byte(`
name: x
model: Qwen/Qwen3-14B
engines: [{name: vllm}]
objective: {metric: latency}
`))
	var se *SpecError
	if !errors.As(err, &se) || se.Field != "$.objective.metric" {
		t.Fatalf("err %v, want a SpecError at $.objective.metric", err)
	}
	for _, n := range ObjectiveNames() {
		if !strings.Contains(se.Msg, n) {
			t.Errorf("message %q does not offer %s", se.Msg, n)
		}
	}
	if _, ok := LookupObjective("latency"); ok {
		t.Fatal("latency is no objective")
	}
}
