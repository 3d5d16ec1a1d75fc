package lab

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/metrics"
)

// TestObjectiveRegistry checks each objective the spec accepts through the
// registry alone: its score of one measurement, its unit, and that a spec
// naming it parses to it.
func TestObjectiveRegistry(t *testing.T) {
	o := Measurement{Result: &metrics.Result{TotalTokenThroughput: 1200, RequestGoodput: 3.5, GoodputConfigured: true}, SustainableLoad: 7}
	cases := []struct {
		name  string
		obj   labspec.Objective
		score float64
		unit  string
	}{
		{labspec.ObjectiveTotalThroughput, labspec.Objective{Metric: labspec.ObjectiveTotalThroughput}, 1200, "tok/s"},
		{labspec.ObjectiveThroughputPerGPU, labspec.Objective{Metric: labspec.ObjectiveThroughputPerGPU}, 300, "tok/s/GPU"},
		{labspec.ObjectiveGoodput, labspec.Objective{Metric: labspec.ObjectiveGoodput, SLO: labspec.SLO{TPOTMs: 50}}, 3.5, "req/s within SLO"},
		{labspec.ObjectiveMaxLoadUnderSLO, labspec.Objective{Metric: labspec.ObjectiveMaxLoadUnderSLO, Load: &labspec.LoadObjective{SLO: "ttft_p99<=2s", Axis: "concurrency"}}, 7, "concurrent requests within SLO"},
	}
	if got := ObjectiveNames(); len(got) != len(cases) {
		t.Fatalf("registered %v, the test covers %d", got, len(cases))
	}
	// A spec may name exactly the objectives the lab can run: a name the
	// spec language accepts with no kind here would score as the default.
	if got, want := ObjectiveNames(), labspec.ObjectiveNames(); !slices.Equal(got, want) {
		t.Fatalf("lab's objective kinds %v, the spec language's objectives %v", got, want)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			k, ok := LookupObjective(tc.name)
			if !ok || k.Name() != tc.name {
				t.Fatalf("LookupObjective(%q) = %v, %v", tc.name, k, ok)
			}
			if got := scoreUnder(tc.obj, o, 4); got != tc.score {
				t.Errorf("score %v, want %v", got, tc.score)
			}
			if got := ObjectiveUnit(tc.obj); got != tc.unit {
				t.Errorf("unit %q, want %q", got, tc.unit)
			}
			if p, err := tc.obj.Check(); err != nil {
				t.Errorf("check: %s: %v", p, err)
			}
			// The kind runs its candidates its own way: only the load
			// search has an SLO of its own to show.
			if hasSLO := k.loadSLO(tc.obj) != nil; hasSLO != (tc.name == labspec.ObjectiveMaxLoadUnderSLO) {
				t.Errorf("loadSLO set = %v", hasSLO)
			}
		})
	}
}

// TestObjectiveUnknownNamesRegistry: an unknown objective is refused at its
// field, with every registered name offered.
func TestObjectiveUnknownNamesRegistry(t *testing.T) {
	_, err := labspec.ParseSpec("x.yaml", []byte(`
name: x
model: Qwen/Qwen3-14B
engines: [{name: vllm}]
objective: {metric: latency}
`))
	var se *labspec.SpecError
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

// fixedPredictor predicts the same result JSON for every config.
type fixedPredictor struct{ result []byte }

func (p fixedPredictor) Predict(context.Context, engine.Config, labspec.Hardware, []dataset.Request, labspec.Workload) (Prediction, error) {
	return Prediction{Command: "vllm serve m", Result: p.result}, nil
}

// TestScaleResultTyped: sim-predict's noise scales the typed result's rates
// and times and, once encoded for the store, adds no key the prediction did
// not have (the analytic model writes no perflab section).
func TestScaleResultTyped(t *testing.T) {
	in := []byte(`{"completed": 90, "num_prompts": 100, "duration": 50, "total_input_tokens": 1000, "total_output_tokens": 500,
		"request_throughput": 1.8, "output_throughput": 10, "total_token_throughput": 30,
		"mean_ttft_ms": 400, "p99_ttft_ms": 900, "mean_tpot_ms": 20, "p99_tpot_ms": 60}`)
	noise := labspec.Noise{Sigma: 0.2, Seed: 7}
	noReqs := func(labspec.Workload) ([]dataset.Request, error) { return nil, nil }
	r := &PredictRunner{Predictor: fixedPredictor{in}, Requests: noReqs, Noise: noise}
	ts := TrialSpec{Key: "s/c/w/r0", Name: "c", Workload: labspec.Workload{Name: "w"}}
	m, err := r.Run(context.Background(), ts)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := trialRecord(ts, m, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	f := noiseFactor(noise, measurementKey(ts.Key))
	if f == 1 {
		t.Fatal("noise factor is 1: the test would not see a scale")
	}
	var a, b map[string]float64
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rec.Result, &b); err != nil {
		t.Fatalf("%v: %s", err, rec.Result)
	}
	if len(a) != len(b) {
		t.Fatalf("keys %d -> %d: %s", len(a), len(b), rec.Result)
	}
	for k, v := range a {
		want := v
		switch k {
		case "request_throughput", "output_throughput", "total_token_throughput":
			want = v * f
		case "duration", "mean_ttft_ms", "p99_ttft_ms", "mean_tpot_ms", "p99_tpot_ms":
			want = v / f
		}
		if math.Abs(b[k]-want) > 1e-9*math.Abs(want) {
			t.Errorf("%s = %v, want %v", k, b[k], want)
		}
	}
	r.Predictor = fixedPredictor{[]byte(`[1]`)}
	if _, err := r.Run(context.Background(), ts); err == nil {
		t.Fatal("a result that is no object scaled without error")
	}
}
