package labprogress

import (
	"bytes"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/report"
)

// TestLineProgress renders each kind of event the lines show, from the
// event alone: a display needs no lab to run.
func TestLineProgress(t *testing.T) {
	eta := 20.0
	top := &Score{Name: "sglang", Score: 1300, Unit: "tok/s"}
	tests := []struct {
		name string
		e    Event
		want string
	}{
		{"start", Event{Type: EventStart, Name: "x", Model: "m", GPUs: 2, GPU: "H100", Runtime: "sim", Objective: "total_throughput", Engines: "vllm 0.11.0", Planned: 9, Stored: 1},
			"lab x: m on 2x H100, runtime sim, objective total_throughput; engines vllm 0.11.0; at most 9 trials (--dry-run tells the path), 1 already stored\n"},
		{"stage", Event{Type: EventStage, Stage: "engine", Candidates: 3}, "== stage engine: 3 candidates\n"},
		{"stage of one", Event{Type: EventStage, Stage: "cuda_graph_padding", Candidates: 1}, "== stage cuda_graph_padding: 1 candidate\n"},
		{"stage with values not run", Event{Type: EventStage, Stage: "attention_backend", Candidates: 2, NotRun: []string{"SGLang + fa3: the incumbent's own server", "SGLang + x: unsupported"}},
			"== stage attention_backend: 2 candidates; not run: SGLang + fa3: the incumbent's own server; SGLang + x: unsupported\n"},
		{"stage skipped", Event{Type: EventStage, Stage: "cuda_graph_padding", Skipped: "no candidate vllm can run is left: x: unsupported"},
			"== stage cuda_graph_padding: skipped, no candidate vllm can run is left: x: unsupported\n"},
		{"trial", Event{Type: EventTrialEnded, Done: 2, Planned: 9, ETASeconds: &eta, Incumbent: &Score{Name: "vllm", Score: 1200.04, Unit: "tok/s"}, Top: top,
			Trial: &TrialEvent{Name: "sglang", Workload: "rnd", Repeat: 1, Status: "ok", Score: 1300}},
			"  [2/≤9] ran sglang (rnd, repeat 1): 1300.0; incumbent vllm 1200.0 tok/s; top measured sglang 1300.0 tok/s; ETA 20s\n"},
		{"failed, stored", Event{Type: EventTrialEnded, Done: 3, Planned: 9, Trial: &TrialEvent{Name: "trtllm", Workload: "rnd", Status: "failed", FailureClass: "oom", Reused: true}},
			"  [3/≤9] stored trtllm (rnd, repeat 0): FAILED oom; no incumbent yet; ETA -\n"},
		{"done", Event{Type: EventDone, Summary: &report.Summary{Unit: "tok/s", Winner: &report.SummaryCandidate{Name: "sglang", Score: 1300}, Gain: 0.0833, TuningTrials: 9, TrialsRun: 8, TrialsReused: 1}},
			"winner: sglang, 1300.0 tok/s (+8.3% over baseline); 9 tuning trials, 8 run now, 1 from the store, 0s\n"},
		{"done, unmeasured winner", Event{Type: EventDone, Summary: &report.Summary{Unit: "req/s within SLO", Stopped: "budget: max_trials",
			Winner: &report.SummaryCandidate{Name: "vllm", Score: 4, Why: report.WhyUnmeasured, Reason: "the client fell behind at 8 req/s"}}},
			"winner: vllm, 4.0 req/s within SLO (no score, no gain: the client fell behind at 8 req/s); 0 tuning trials, 0 run now, 0 from the store, 0s\nstopped early: budget: max_trials\n"},
		{"done, baseline without a score", Event{Type: EventDone, Summary: &report.Summary{Unit: "req/s within SLO",
			Baseline: &report.SummaryCandidate{Name: "vllm", Reason: "SLO: no load meets it"}, Winner: &report.SummaryCandidate{Name: "trtllm", Score: 4}}},
			"winner: trtllm, 4.0 req/s within SLO (no gain: the baseline has no score: SLO: no load meets it); 0 tuning trials, 0 run now, 0 from the store, 0s\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			(&LineProgress{W: &buf}).Event(tc.e)
			if got := buf.String(); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
	var buf bytes.Buffer
	(&LineProgress{W: &buf}).Event(Event{Type: EventBest})
	if strings.TrimSpace(buf.String()) != "" {
		t.Errorf("a best event printed %q: the lines show the incumbent on the trial lines", buf.String())
	}
}
