package lab

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/store"
)

// TestDryRunProgress (issue 27: the SLO lab's dry run took 15 minutes
// printing nothing until its end): the dry run writes a line as its path
// reaches each new config, with the projection so far, and its last line
// agrees with the plan it returns.
func TestDryRunProgress(t *testing.T) {
	s := mustSpec(t, smallSpec)
	mem, err := store.Open(context.Background(), "sqlite::memory:")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	guide := &PredictRunner{Predictor: AnalyticPredictor{}, Hardware: s.Hardware, Requests: CachedRequests(StandinRequests)}
	var buf bytes.Buffer
	plan, err := DryRun(context.Background(), s, guide, "analytic", mem, &buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) < plan.Configs {
		t.Fatalf("%d progress lines for %d configs:\n%s", len(lines), plan.Configs, buf.String())
	}
	prev := 0
	for _, l := range lines {
		var took string
		var trials, configs, starts int
		var gpuh float64
		if _, err := fmt.Sscanf(l, "dry run %s %d trials, %d configs, %d starts, %f GPU-hours", &took, &trials, &configs, &starts, &gpuh); err != nil {
			t.Fatalf("line %q: %v", l, err)
		}
		// Starts and GPU-hours are priced in the order trials ended,
		// which parallel trials may make differ from the store's.
		if configs < prev || configs > plan.Configs || trials > plan.Trials || starts > trials || !(gpuh > 0) {
			t.Errorf("line %q runs past the plan (%d trials, %d configs) or back", l, plan.Trials, plan.Configs)
		}
		prev = configs
	}
	if prev != plan.Configs {
		t.Errorf("last line says %d configs, the plan %d", prev, plan.Configs)
	}
}

// TestDryRunProgressBetweenTrials: while no trial ends (the joint
// search's guide predicting hundreds of configs, a minute or more on the
// SLO example), the dry run still writes its projection once every
// interval, and not more often.
func TestDryRunProgressBetweenTrials(t *testing.T) {
	var buf bytes.Buffer
	p := &dryRunProgress{w: &buf, spec: mustSpec(t, smallSpec), every: time.Hour, seen: map[string]bool{}}
	p.quiet()
	p.quiet()
	if n := strings.Count(buf.String(), "\n"); n != 1 || !strings.Contains(buf.String(), "the guide predicting") {
		t.Errorf("%d lines in an hour's silence, want 1:\n%s", n, buf.String())
	}
}
