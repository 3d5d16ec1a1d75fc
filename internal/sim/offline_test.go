package sim

import (
	"errors"
	"math"
	"reflect"
	"testing"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// overheadCoefs is the prior with the API server's two costs set: the
// offline mode must take exactly these away and nothing else.
func overheadCoefs(frontendMs, outputUs float64) *Coefficients {
	c := defaultCoef
	c.FrontendMs, c.OutputUs, c.CoreAddMs = frontendMs, outputUs, 0.05
	return &Coefficients{Entries: map[string]Coef{"*": c}}
}

func TestOfflineDropsOnlyTheAPIServer(t *testing.T) {
	// The engine core's share of the served loss is TestKeepLoss's; here
	// the offline run keeps all of it, so only the API server differs.
	defer func(old float64) { offlineLossShare = old }(offlineLossShare)
	offlineLossShare = 1
	p := Params{Engine: "vllm", Model: "Qwen3-8B", GPU: "H100"}
	reqs := fixedReqs(64, 200, 32)

	// Without API-server costs the served and the offline run are the same run.
	c0 := overheadCoefs(0, 0)
	served, err := PredictWith(p, c0, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	_, off, err := PredictOffline(p, c0, reqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	if served.Duration != off.DurationS {
		t.Errorf("no API-server cost: served %.6f s, offline %.6f s: want the same run", served.Duration, off.DurationS)
	}

	// With an admission cost f the served run's last request reaches the
	// scheduler only after n·f: the served run lasts longer than that,
	// the offline run does not pay it.
	const f = 20.0 // ms, far above the engine's own time for these requests
	cf := overheadCoefs(f, 50)
	served, err = PredictWith(p, cf, reqs, Load{})
	if err != nil {
		t.Fatal(err)
	}
	prOff, off, err := PredictOffline(p, cf, reqs, 0)
	if err != nil {
		t.Fatal(err)
	}
	admit := float64(len(reqs)) * f / 1000
	if served.Duration < admit {
		t.Errorf("served run %.3f s, shorter than its %d admissions at %g ms (%.3f s)", served.Duration, len(reqs), f, admit)
	}
	if off.DurationS >= admit {
		t.Errorf("offline run %.3f s pays the admissions (%.3f s)", off.DurationS, admit)
	}
	if d := served.Duration - off.DurationS; d < admit-off.DurationS {
		t.Errorf("served − offline = %.3f s, want at least the admissions not overlapped with the engine (%.3f s)", d, admit-off.DurationS)
	}
	// The offline run is the zero-overhead run: the engine core's time.
	if off.DurationS != prOff.Duration || math.Abs(off.DurationS-mustDuration(t, p, c0, reqs)) > 1e-9 {
		t.Errorf("offline with API-server costs %.6f s, without %.6f s: want equal", off.DurationS, mustDuration(t, p, c0, reqs))
	}
}

func mustDuration(t *testing.T, p Params, c *Coefficients, reqs []dataset.Request) float64 {
	t.Helper()
	pr, err := PredictWith(p, c, reqs, Load{Offline: true})
	if err != nil {
		t.Fatal(err)
	}
	return pr.Duration
}

func TestOfflineFigures(t *testing.T) {
	ok := func(in, out int, lat float64) metrics.Record {
		return metrics.Record{Success: true, PromptLen: in, OutputLen: out, Latency: lat}
	}
	for _, tc := range []struct {
		name string
		pr   Prediction
		want OfflineResult
	}{
		{
			name: "two requests on TP2 of a machine's 8 GPUs",
			pr: Prediction{Duration: 2, Params: Params{TP: 2, DP: 1, GPUs: 8}, Records: []metrics.Record{
				ok(100, 50, 1), ok(300, 150, 2)}},
			want: OfflineResult{Requests: 2, Completed: 2, DurationS: 2, PromptTokens: 400, OutputTokens: 200,
				RequestThroughput: 1, InputThroughput: 200, OutputThroughput: 100, TotalThroughput: 300,
				MeanLatencyMs: 1500, PerUserOutputTPS: 62.5, GPUs: 2, PerGPUOutputTPS: 50},
		},
		{
			name: "a rejected request counts as sent, not completed",
			pr: Prediction{Duration: 4, Params: Params{TP: 1, DP: 1}, Records: []metrics.Record{
				ok(10, 20, 4), {PromptLen: 99999, Error: "too long"}}},
			want: OfflineResult{Requests: 2, Completed: 1, DurationS: 4, PromptTokens: 10, OutputTokens: 20,
				RequestThroughput: 0.25, InputThroughput: 2.5, OutputThroughput: 5, TotalThroughput: 7.5,
				MeanLatencyMs: 4000, PerUserOutputTPS: 5, GPUs: 1, PerGPUOutputTPS: 5},
		},
		{
			name: "none completed: no rates, no NaN",
			pr:   Prediction{Duration: 0, Records: []metrics.Record{{PromptLen: 5, Error: "x"}}},
			want: OfflineResult{Requests: 1, GPUs: 1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := OfflineFigures(&tc.pr); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPredictOfflineReportsTheRun(t *testing.T) {
	p := Params{Engine: "trtllm", Model: "Llama-3.1-8B", GPU: "H100"}
	pr, off, err := PredictOffline(p, nil, fixedReqs(200, 128, 128), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := pr.Err(); err != nil {
		t.Fatal(err)
	}
	if off.Completed != 200 || off.GPUs != 1 || off.OutputTokens != pr.Result.TotalOutputTokens {
		t.Errorf("completed %d, GPUs %d, output tokens %d (result %d)", off.Completed, off.GPUs, off.OutputTokens, pr.Result.TotalOutputTokens)
	}
	if math.Abs(off.TotalThroughput-pr.Result.TotalTokenThroughput) > 1e-6*off.TotalThroughput {
		t.Errorf("total tok/s %g, the result block says %g", off.TotalThroughput, pr.Result.TotalTokenThroughput)
	}
	// Rejected prompts are the same error offline as served.
	if pr, _, err = PredictOffline(p, nil, fixedReqs(3, 1<<20, 8), 0); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(pr.Err(), ErrAllRejected) {
		t.Errorf("all rejected offline: err %v, want ErrAllRejected", pr.Err())
	}
}
