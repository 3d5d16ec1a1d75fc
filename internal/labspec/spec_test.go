package labspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseSpecErrors(t *testing.T) {
	head := "name: x\nmodel: m\nengines:\n  - {name: vllm}\n"
	tests := []struct {
		name, text, want string
		line             int
	}{
		{"unknown field", head + "bogus: 1\n", "unknown field", 5},
		{"bad engine", "name: x\nmodel: m\nengines:\n  - name: vlm\n", `engine "vlm"`, 4},
		{"unknown knob", head + "stages:\n  - name: turbo\n", `unknown knob "turbo"`, 6},
		{"unknown search knob lists the knobs", head + "search: {knobs: [max_num_batched_token]}\n", `search: unknown knob "max_num_batched_token" (want one of engine, quantization`, 5},
		{"unknown knob on its knob line", head + "stages:\n  - name: my stage\n    knob: max_num_seq\n    values: [128]\n", `unknown knob "max_num_seq"`, 7},
		{"bad value", head + "stages:\n  - name: max_num_seqs\n    values: [\"0\"]\n", "positive integer", 7},
		{"bad rate", head + "tuning: {name: t, request_rate: fast}\n", "request_rate", 5},
		{"goodput needs slo", head + "objective: {metric: goodput}\n", "needs an slo", 5},
		{"bad runtime", head + "runtime: gpu\n", `runtime "gpu"`, 5},
		{"missing model", "name: x\nengines: [{name: vllm}]\n", "model is required", 0},
		{"per_engine unknown", head + "stages:\n  - name: attention_backend\n    per_engine: {sglang: [fa3]}\n", "not in engines", 0},
		{"image of an unknown engine", head + "images: {tgi: x:1}\n", `unknown engine "tgi"`, 5},
		{"empty image", head + "images: {vllm: \"\"}\n", "not an image reference", 5},
		{"volume without container path", head + "volumes: [/data]\n", "HOST:CONTAINER", 5},
		{"relative container path", head + "volumes: [\"/data:data\"]\n", "must be absolute", 5},
		{"volume option", head + "volumes: [\"/data:/data:rx\"]\n", `unknown option "rx"`, 5},
		{"missing volume host", head + "volumes: [\"./nonexistent-dir:/data\"]\n", "no such file", 5},
		{"token in spec", head + "base: {env: {HF_TOKEN: hf_x}}\n", "HF_TOKEN does not belong", 0},
		{"speculative needs draft", head + "stages:\n  - name: speculative\n    values: [\"eagle3:4\"]\n", "needs a draft model", 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpec("spec.yaml", []byte(tc.text))
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a SpecError", err)
			}
			if !strings.Contains(se.Msg, tc.want) {
				t.Errorf("msg %q, want it to contain %q", se.Msg, tc.want)
			}
			if tc.line > 0 && se.Line != tc.line {
				t.Errorf("line %d, want %d (%v)", se.Line, tc.line, err)
			}
			if !strings.HasPrefix(err.Error(), "lab: spec.yaml:") {
				t.Errorf("error %q does not name the file", err)
			}
		})
	}
}

func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(smallSpec))
	f.Add([]byte("name: x\nmodel: m\nengines: [{name: vllm}]\ntuning: {name: t, request_rate: inf}\n"))
	f.Add([]byte("name: [\n"))
	f.Add([]byte(`{"name": "j", "model": "m", "engines": [{"name": "vllm"}], "repeats": 5, "tuning": {"name": "t", "dataset": "random", "input_len": 10, "output_len": 10}}`))
	f.Add([]byte("name: x\nmodel: m\nengines: [{name: vllm}]\nrepeats: 1000000000\n"))
	f.Add([]byte(strings.Repeat("[", 500) + strings.Repeat("]", 500)))
	f.Add([]byte("a:\n  b:\n    - - - {c: [d, {e: f}]}\n  g: |\n    text\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSpec("fuzz.yaml", data)
		if err != nil {
			return
		}
		if s.Name == "" || s.Tuning == nil || len(s.Stages) == 0 {
			t.Fatalf("accepted spec without defaults: %+v", s)
		}
		// What is accepted is within the limits (issue 23): the memory a
		// lab takes follows from them.
		for _, w := range append([]Workload{*s.Tuning}, s.Generalization...) {
			if w.NumPrompts > MaxNumPrompts || w.InputLen > MaxSeqLen || w.OutputLen > MaxSeqLen || w.NumPrompts*w.InputLen > MaxWorkloadTokens {
				t.Fatalf("accepted workload past the limits: %+v", w)
			}
		}
		if s.Repeats > MaxRepeats || s.Parallel > MaxParallel || s.Hardware.Count > MaxGPUs || s.Budget.MaxTrials > MaxTrials {
			t.Fatalf("accepted spec past the limits: %+v", s)
		}
	})
}

// A volume's relative host path resolves against the spec's directory, as
// every other path in it does, so the container sees the same files
// wherever perflab runs from.
func TestSpecVolumesResolve(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	s, err := ParseSpecIn("spec.yaml", []byte("name: x\nmodel: m\nengines: [{name: vllm}]\nruntime: docker\nimages: {vllm: perflab-sim:dev}\nvolumes: [\"data:/data:ro\"]\n"), dir)
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "data") + ":/data:ro"; len(s.Volumes) != 1 || s.Volumes[0] != want {
		t.Errorf("volumes %q, want [%s]", s.Volumes, want)
	}
	other, _ := ParseSpecIn("spec.yaml", []byte("name: x\nmodel: m\nengines: [{name: vllm}]\nruntime: docker\nimages: {vllm: vllm/vllm-openai:v0.11.0}\nvolumes: [\"data:/data:ro\"]\n"), dir)
	if other.Key() == s.Key() {
		t.Error("two specs that differ in their images share a run key")
	}
}
