package engine

// One measurement's trip to the engine, there and back: its command
// rendered, a ready server, the benchmark run against it, what the server
// said meanwhile, and the server released. A lab calls Fleet.Bench once
// per measurement and gets back everything it records, so that a trial's
// package moves are lab → engine → bench → lab with no trip back up to
// the lab in between (docs/architecture.md).

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/bench"
)

// Benched is what a measurement got from the engine: how it got its
// server (Served, its Server nil: released by the time Bench returns), the
// benchmark's outcome, and what the server said after it.
type Benched struct {
	Served
	// Command is the launched command (WithMetrics), for the record;
	// "" when the config does not render.
	Command string
	// Outcome is the benchmark's (nil when none ran); BenchErr its error,
	// BenchSeconds its wall time.
	Outcome      *bench.Outcome
	BenchErr     error
	BenchSeconds float64
	// Metrics is the engine's /metrics after the benchmark.
	Metrics map[string]float64
	// Tail is the server's last log lines, joined (failed or not).
	Tail string
}

// Bench runs one measurement: b against a ready server of w.Config (Serve;
// w.Command is rendered here), with the server's address and the cache
// salt of the measurement key salt. A config that does not render, a
// server that could not be had, one that failed during the benchmark, or
// a benchmark that failed with nothing measured is the returned Failure
// (class and reason); what was measured before a crash stays in Outcome.
// A clean measurement's server is kept for its config (Release); err is
// only for a canceled ctx.
func (f *Fleet) Bench(ctx context.Context, w Want, b bench.Config, salt string) (Benched, error) {
	var out Benched
	cmd, err := Render(w.Config)
	if err != nil {
		out.Failure = &Failure{Class: ClassInvalidConfig, Reason: err.Error()}
		return out, nil
	}
	// Launched with the engine's metrics endpoint on, and recorded so.
	w.Command = WithMetrics(w.Config, cmd)
	out.Command = w.Command.Script()
	out.Served, err = f.Serve(ctx, w)
	if err != nil {
		return out, err
	}
	if out.Failure != nil {
		out.Tail = strings.Join(out.LogTail, "\n")
		return out, nil
	}
	// Released before Bench returns: the caller gets no server to touch.
	srv := out.Server
	out.Server = nil
	if out.Reused {
		out.note(fmt.Sprintf("on the server already up for this config (measurement %d)", srv.Used()+1))
	}
	if gpus := srv.GPUs(); gpus != nil {
		out.Notes = JoinNotes("GPUs "+joinInts(gpus), out.Notes)
	}
	if where := WhereOf(srv.Handle); where != "" {
		out.Notes = JoinNotes(where, out.Notes)
	}
	h := srv.Handle
	clean := false
	defer func() { f.Release(srv, clean) }()
	MarkBenchmarking(h)
	b.BaseURL, b.ExtraBody = h.BaseURL(), srv.Salt(salt)
	start := time.Now()
	out.Outcome, out.BenchErr = bench.Run(ctx, b)
	out.BenchSeconds = time.Since(start).Seconds()
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	if out.BenchErr != nil || lostConnections(out.Outcome) {
		// A server that dropped its clients may be dying: give its exit
		// a moment to be seen, so the trial is classed as the crash it
		// is rather than as a run with a low success rate.
		select {
		case <-h.Done():
		case <-time.After(3 * time.Second):
		}
	}
	out.Metrics = srv.Metrics(ctx)
	measured := out.Outcome != nil && len(out.Outcome.Records) > 0
	switch fl := h.Failure(); {
	case fl != nil:
		out.Failure = &Failure{Class: fl.Class, Reason: fl.Reason}
	case out.BenchErr != nil && !measured:
		out.Failure = &Failure{Class: ClassCrashDuringBench, Reason: out.BenchErr.Error()}
	}
	out.Tail = strings.Join(h.LogTail(f.logLines()), "\n")
	clean = out.Failure == nil
	return out, nil
}

// lostConnections tells whether any request failed the way requests fail
// when the engine dies: the connection reset or refused, or an error event
// mid-stream (vLLM tells its open streams EngineDeadError before the
// process goes).
func lostConnections(out *bench.Outcome) bool {
	if out == nil {
		return false
	}
	for _, r := range out.Records {
		if r.Success {
			continue
		}
		switch r.ErrorClass {
		case bench.ClassReset, bench.ClassConnect, bench.ClassServerError:
			return true
		}
	}
	return false
}

// JoinNotes joins two notes of a trial with "; ", either of which may be
// empty.
func JoinNotes(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + "; " + b
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}
