package lab

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/loadsearch"
	"github.com/perflab/perflab/internal/tokenizer"
)

// TestGridExamplesSLO (issue 27: "the same winner as an exhaustive SLO
// search on the simulator") runs the 14B SLO example with --grid on the
// noise-free simulator in process: every config of its space gets a load
// search of its own, and the lab's winner must sustain the grid's best
// load within the search's tolerance. The space is the example's stages
// (engine, quantization, attention backend) by its joint search's engine,
// quantization and max_num_seqs (110 configs); the example's whole space,
// with max_num_batched_tokens and chunked prefill, is 1,320 load searches,
// an hour on a 2-core machine. It takes minutes, so it runs with
// PERFLAB_LAB_GRID=1, as TestGridExamples:
//
//	PERFLAB_LAB_GRID=1 go test ./internal/lab -run GridExamplesSLO -v -timeout 60m
func TestGridExamplesSLO(t *testing.T) {
	if os.Getenv("PERFLAB_LAB_GRID") != "1" {
		t.Skip("set PERFLAB_LAB_GRID=1 to compare the SLO example with its exhaustive grid")
	}
	chdirRoot(t)
	s, err := labspec.LoadSpec(filepath.Join("examples", "qwen3-14b-h100-slo.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s.Generalization, s.NoGeneralization = nil, true
	s.Noise = labspec.Noise{}
	s.Search.Knobs = []string{labspec.KnobEngine, labspec.KnobQuantization, labspec.KnobMaxNumSeqs}
	tok, err := tokenizer.Load(s.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	r := &PredictRunner{Predictor: SimPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(DatasetRequests(tok))}
	l := &Lab{Spec: s, Store: newMemStore(), Runner: r, Guide: r, Grid: true}
	start := time.Now()
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	g := sum.Grid
	if g == nil || g.Best == nil || sum.Winner == nil {
		t.Fatalf("grid %+v, winner %+v", g, sum.Winner)
	}
	tol := s.Objective.Load.Tolerance
	if tol == 0 {
		tol = loadsearch.DefaultTolerance
	}
	points := 0
	for _, ls := range sum.LoadSearches {
		points += len(ls.Result.Points)
	}
	t.Logf("grid %d configs, best %s %.4g req/s; lab winner %s %.4g req/s, gap %.2f%% (tolerance %.0f%%); lab %d searched configs (%.1f%% of the grid); %d points in all, %s",
		g.Size, g.Best.Name, g.Best.Score, sum.Winner.Name, sum.Winner.Score, 100*g.WinnerGap, 100*tol, g.LabTrials, 100*g.LabShare, points, time.Since(start).Round(time.Second))
	if g.WinnerGap > tol {
		t.Errorf("winner %s %.2f%% below the grid's best %s, want within the search's tolerance %.0f%%", sum.Winner.Name, 100*g.WinnerGap, g.Best.Name, 100*tol)
	}
}
