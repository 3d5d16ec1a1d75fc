package lab

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
)

func TestPerformanceModeValues(t *testing.T) {
	const spec = `
name: pm
model: Qwen/Qwen3-14B
engines: [{name: vllm, version: 0.17.1}]
stages:
  - name: performance_mode
    values: [%s]
`
	cases := []struct {
		values  string
		wantErr string
	}{
		{"balanced, interactivity, throughput", ""},
		{"default", ""},
		{"latency", `test.yaml:7: stage "performance_mode": performance_mode "latency": want balanced, interactivity or throughput`},
	}
	for _, tc := range cases {
		_, err := labspec.ParseSpec("test.yaml", []byte(strings.Replace(spec, "%s", tc.values, 1)))
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", tc.values, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want %q", tc.values, err, tc.wantErr)
		}
	}
}

// recordingRunner remembers the configs it was asked to run.
type recordingRunner struct {
	inner Runner
	mu    sync.Mutex
	modes []string
}

func (r *recordingRunner) Run(ctx context.Context, t TrialSpec) (Measurement, error) {
	r.mu.Lock()
	r.modes = append(r.modes, t.Config.Engine+":"+t.Config.PerformanceMode)
	r.mu.Unlock()
	return r.inner.Run(ctx, t)
}

// TestUnsupportedSkippedBeforeLaunch: a value the engine package says the
// engine/version cannot run is a skipped candidate with the engine's reason,
// and no trial is spent on it.
func TestUnsupportedSkippedBeforeLaunch(t *testing.T) {
	const spec = `
name: pm
model: Qwen/Qwen3-14B
engines: [{name: vllm, version: %s}]
tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 100, seed: 42}
no_generalization: true
stages:
  - name: performance_mode
    values: [interactivity, throughput]
combinations: false
search: {disable: true}
repeats: 1
`
	cases := []struct {
		version   string
		wantWhy   string // start of each candidate's reason
		wantModes string // the trials run
	}{
		{"0.11.0", "unsupported: engine: vllm 0.11.0 does not support performance_mode", "vllm:"},
		{"0.17.1", "", "vllm:,vllm:interactivity,vllm:throughput"},
	}
	for _, tc := range cases {
		s := mustSpec(t, strings.Replace(spec, "%s", tc.version, 1))
		l := analyticLab(s, newMemStore())
		rr := &recordingRunner{inner: l.Runner}
		l.Runner = rr
		sum, err := l.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(sortedStrings(rr.modes), ","); got != tc.wantModes {
			t.Errorf("vLLM %s: ran %s, want %s", tc.version, got, tc.wantModes)
		}
		cs := sum.Stages[0].Candidates
		if len(cs) != 2 {
			t.Fatalf("vLLM %s: %d candidates, want 2: %+v", tc.version, len(cs), cs)
		}
		for _, c := range cs {
			if tc.wantWhy != "" && (c.Decision != "skipped" || !strings.HasPrefix(c.Reason, tc.wantWhy) || c.FailureClass != "") {
				t.Errorf("vLLM %s: %s: %s %q (failure %q), want skipped %q", tc.version, c.Name, c.Decision, c.Reason, c.FailureClass, tc.wantWhy)
			}
			if tc.wantWhy == "" && strings.HasPrefix(c.Reason, "unsupported") {
				t.Errorf("vLLM %s: %s skipped as %q", tc.version, c.Name, c.Reason)
			}
		}
	}
}

func sortedStrings(xs []string) []string {
	m := map[string]bool{}
	for _, x := range xs {
		m[x] = true
	}
	return sortedKeys(m)
}
