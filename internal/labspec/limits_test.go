package labspec

import (
	"errors"
	"strings"
	"testing"
)

// TestSpecRanges is issue 23's item 1: a number past its range is refused
// when the spec is read, naming the field, the value and the limit, at its
// line. The first three are the reproductions, each of which ran
// the server out of memory.
func TestSpecRanges(t *testing.T) {
	head := "name: x\nmodel: m\nengines: [{name: vllm}]\nno_generalization: true\n"
	for _, tc := range []struct {
		name, text, field, want string
		line                    int
	}{
		{"num_prompts", head + "tuning: {name: t, dataset: random, input_len: 10, output_len: 10, num_prompts: 1000000000000}\n",
			"$.tuning.num_prompts", "tuning.num_prompts 1000000000000 is out of range: want 0 to 100000", 5},
		{"input_len", head + "tuning:\n  name: t\n  dataset: random\n  input_len: 99999999999\n  output_len: 10\n",
			"$.tuning.input_len", "tuning.input_len 99999999999 is out of range: want 0 to 1048576", 8},
		{"repeats", head + "repeats: 1000000000\n", "$.repeats", "repeats 1000000000 is out of range: want 0 to 100", 5},
		{"workload tokens", head + "generalization:\n  - {name: g, dataset: random, input_len: 1000000, output_len: 10, num_prompts: 100}\n",
			"$.generalization[0].input_len", "num_prompts 100 × input_len 1000000 = 100000000 tokens, over the limit of 16777216", 6},
		{"default prompts count too", head + "tuning: {name: t, dataset: random, input_len: 20000, output_len: 10}\n",
			"$.tuning.input_len", "num_prompts 1000 × input_len 20000", 5},
		{"a profile's lengths count", head + "tuning: {name: t, profile: very-long, num_prompts: 100000}\n",
			"$.tuning.profile", "num_prompts 100000 × input_len 32000 = 3200000000 tokens", 5},
		{"gpus", head + "hardware: {gpu: H100-SXM-80GB, count: 100000}\n", "$.hardware.count", "want 0 to 1024", 5},
		{"hours", head + "budget: {max_hours: 1e308}\n", "$.budget.max_hours", "budget.max_hours 1e+308 is out of range: want 0 to 8784", 5},
		{"rate", head + "tuning: {name: t, request_rate: 1e12}\n", "$.tuning.request_rate", "want 0 to 1000000", 5},
		{"max_concurrency", head + "tuning: {name: t, max_concurrency: 100000000}\n", "$.tuning.max_concurrency", "want 0 to 100000", 5},
		{"slo NaN", head + "objective: {metric: goodput, slo: {tpot_ms: .nan}}\n", "$.objective.slo.tpot_ms", "tpot_ms NaN is out of range", 5},
		{"time_scale", head + "time_scale: 1e9\n", "$.time_scale", "want 0 to 1000", 5},
		{"parallel", head + "parallel: 5000\n", "$.parallel", "want 0 to 256", 5},
		{"search trials", head + "search: {max_trials: 1000000000}\n", "$.search.max_trials", "want 0 to 100000", 5},
		{"load max", head + "objective: {metric: max_load_under_slo, load: {slo: \"ttft_p99<=2s\", max: 1e300}}\n", "$.objective.load.max", "want 0 to 1000000", 5},
		{"load start", head + "objective: {metric: max_load_under_slo, load: {slo: \"ttft_p99<=2s\", start: 1e-300}}\n", "$.objective.load.start", "below the least 0.001", 5},
		{"lab tokens", head + "generalization:\n" + strings.Repeat("  - {name: g, dataset: random, input_len: 16000, output_len: 10, num_prompts: 1000}\n", 3), "$.generalization", "total 48000000 tokens, over the limit of 33554432", 6},
		{"generalization count", head + "generalization:\n" + strings.Repeat("  - {name: g, dataset: random, input_len: 1, output_len: 1}\n", 65), "$.generalization", "65 workloads, over the limit of 64", 6},
		{"negative", head + "budget: {max_trials: -1}\n", "$.budget.max_trials", "budget.max_trials -1 is out of range: want 0 to 100000", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("spec.yaml", []byte(tc.text))
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a SpecError", err)
			}
			if se.Field != tc.field || !strings.Contains(se.Msg, tc.want) || se.Line != tc.line {
				t.Errorf("got field %s line %d %q\nwant field %s line %d %q", se.Field, se.Line, se.Msg, tc.field, tc.line, tc.want)
			}
		})
	}
}

// TestSpecRangesAllowRealWork: the limits leave the examples and the
// reports' workloads alone, and the values at each limit are accepted.
func TestSpecRangesAllowRealWork(t *testing.T) {
	for _, w := range DefaultGeneralization() {
		s := &Spec{}
		if err := w.checkRanges(s, func(string) int { return 0 }, "$.generalization[0]"); err != nil {
			t.Errorf("%s: %v", w.Name, err)
		}
	}
	head := "name: x\nmodel: m\nengines: [{name: vllm}]\nno_generalization: true\n"
	spec := head + "repeats: 100\nparallel: 256\nhardware: {count: 1024}\nbudget: {max_trials: 100000, max_hours: 8784}\n" +
		"tuning: {name: t, dataset: random, input_len: 1048576, output_len: 16, num_prompts: 16}\n"
	if _, err := ParseSpec("spec.yaml", []byte(spec)); err != nil {
		t.Errorf("values at the limits: %v", err)
	}
}

// TestUnknownFieldsDeterministic: a spec with several unknown fields names
// them all, first to last, every time (the decoder named one at random).
func TestUnknownFieldsDeterministic(t *testing.T) {
	spec := "name: x\nmodel: m\nengines: [{name: vllm}]\nzeta: 1\nalpha: 2\nmid: 3\ntuning: {name: t, bogus: 4}\n"
	want := `unknown field "zeta"; also unknown: "alpha" (line 5), "mid" (line 6), "bogus" (line 7)`
	for range 20 {
		_, err := ParseSpec("spec.yaml", []byte(spec))
		var se *SpecError
		if !errors.As(err, &se) || se.Msg != want || se.Line != 4 {
			t.Fatalf("err = %v\nwant line 4: %s", err, want)
		}
	}
}

// TestUnknownFieldSuggestions: a mistyped key names the field of the same
// mapping it most likely meant; a key near none names none.
func TestUnknownFieldSuggestions(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"name: x\nmodel: m\nobjectve: {metric: total_throughput}\n", `unknown field "objectve" (did you mean "objective"?)`},
		{"name: x\nmodel: m\nhardware: {gpu: H100, Count: 2}\n", `unknown field "Count" (did you mean "count"?)`},
		{"name: x\nmodel: m\nstages: [{name: engine, valeus: [vllm]}]\n", `unknown field "valeus" (did you mean "values"?)`},
		{"name: x\nmodel: m\nfp8-model: m-FP8\n", `unknown field "fp8-model" (did you mean "fp8_model"?)`},
		{"name: x\nmodel: m\nworkloads: []\nnam: y\n", `unknown field "workloads"; also unknown: "nam" (line 4; did you mean "name"?)`},
		// Two letters are not a near miss of anything.
		{"name: x\nmodel: m\nzz: 1\n", `unknown field "zz"`},
	} {
		_, err := ParseSpec("spec.yaml", []byte(tc.spec))
		var se *SpecError
		if !errors.As(err, &se) || se.Msg != tc.want {
			t.Errorf("%q: err = %v\nwant %s", tc.spec, err, tc.want)
		}
	}
}
