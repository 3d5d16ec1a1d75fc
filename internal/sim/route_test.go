package sim

import (
	"math"
	"testing"
)

// TestPredictDataParallel (issue 11: sim predict split DP load round-robin
// in shards while sim serve routed least-loaded, so the two faces of one
// model could disagree): a DP prediction runs its replicas together on one
// clock behind the Router sim serve uses. Two replicas serving 2N
// requests take about as long as one serving N, at twice the throughput,
// each engine taking half; a finite rate keeps the replicas balanced.
func TestPredictDataParallel(t *testing.T) {
	for _, eng := range []string{EngineVLLM, EngineSGLang} {
		one, err := PredictWith(Params{Engine: eng, Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil, fixedReqs(200, 512, 64), Load{})
		if err != nil {
			t.Fatal(err)
		}
		two, err := PredictWith(Params{Engine: eng, Model: "Qwen/Qwen3-14B", GPU: "H100", DP: 2, Route: RouteFor(eng, nil)}, nil, fixedReqs(400, 512, 64), Load{})
		if err != nil {
			t.Fatal(err)
		}
		if two.Result.Completed != 400 {
			t.Fatalf("%s: %d of 400 completed", eng, two.Result.Completed)
		}
		ratio := two.Result.TotalTokenThroughput / one.Result.TotalTokenThroughput
		if ratio < 1.8 || ratio > 2.2 {
			t.Errorf("%s: DP2 on twice the load gives %.2fx DP1's throughput, want about 2", eng, ratio)
		}
		if d := math.Abs(two.Duration/one.Duration - 1); d > 0.1 {
			t.Errorf("%s: DP2 took %.2f s on twice the load, DP1 %.2f s", eng, two.Duration, one.Duration)
		}
		// Capacity and the running limit count both replicas.
		if two.KVCapacityTokens != 2*one.KVCapacityTokens || two.MaxRunning != 2*one.MaxRunning || one.MaxRunning <= 0 {
			t.Errorf("%s: DP2 holds %d KV tokens and runs %d at once; DP1 %d and %d", eng, two.KVCapacityTokens, two.MaxRunning, one.KVCapacityTokens, one.MaxRunning)
		}
	}
}

// TestRouterPolicies: round robin deals in turn; vLLM's least-loaded
// router reads published counts and adds its own picks until the next
// publication (so a burst at t=0 is dealt in turn too); shortest queue
// reads live counts.
func TestRouterPolicies(t *testing.T) {
	live := []Stats{{Running: 5}, {Running: 1}, {Waiting: 2}}
	stats := func(k int) Stats { return live[k] }
	rr := NewRouter(RouteRoundRobin, 3)
	for i, want := range []int{0, 1, 2, 0} {
		if got := rr.Pick(0, stats); got != want {
			t.Errorf("round robin pick %d = %d, want %d", i, got, want)
		}
	}
	sq := NewRouter(RouteShortestQueue, 3)
	if got := sq.Pick(0, stats); got != 1 {
		t.Errorf("shortest queue = %d, want 1", got)
	}
	ll := NewRouter(RouteLeastLoaded, 3)
	// Scores at t=0: 5, 1, 8 → replica 1, which then counts one waiting
	// (score 5, tied with replica 0: the lower index wins).
	var got []int
	for range 3 {
		got = append(got, ll.Pick(0, stats))
	}
	if got[0] != 1 || got[1] != 0 {
		t.Errorf("least loaded picks %v, want 1 then 0", got)
	}
	zero := func(int) Stats { return Stats{} }
	burst := NewRouter(RouteLeastLoaded, 2)
	for i, want := range []int{0, 1, 0, 1} {
		if got := burst.Pick(0, zero); got != want {
			t.Errorf("burst pick %d = %d, want %d (in turn)", i, got, want)
		}
	}
}
