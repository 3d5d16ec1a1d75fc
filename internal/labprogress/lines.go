package labprogress

import (
	"fmt"
	"io"
	"time"

	"github.com/perflab/perflab/internal/report"
)

// LineProgress writes one plain line per event: for logs and pipes, where
// bars would be noise. It is a Sink of Events, which computes what it
// prints.
type LineProgress struct {
	W io.Writer
}

var _ Sink = (*LineProgress)(nil)

// Event implements Sink.
func (p *LineProgress) Event(e Event) {
	switch e.Type {
	case EventStart:
		fmt.Fprintf(p.W, "lab %s: %s on %dx %s, runtime %s, objective %s; engines %s; at most %d trials (--dry-run tells the path), %d already stored\n",
			e.Name, e.Model, e.GPUs, e.GPU, e.Runtime, e.Objective, e.Engines, e.Planned, e.Stored)
	case EventStage:
		io.WriteString(p.W, e.StageLine())
	case EventTrialEnded:
		t := e.Trial
		how := "ran"
		if t.Reused {
			how = "stored"
		}
		res := fmt.Sprintf("%.1f", t.Score)
		switch {
		case t.Status != "ok":
			res = "FAILED " + t.FailureClass
		case t.SLO != "":
			res = "SLO " + t.SLO
		}
		fmt.Fprintf(p.W, "  [%d/≤%d] %s %s (%s, repeat %d): %s; %s; ETA %s\n",
			e.Done, e.Planned, how, t.Name, t.Workload, t.Repeat, res, standing(e), e.ETAText())
	case EventDone:
		printDone(p.W, e)
	}
}

// standing says where the lab is: the incumbent (kept so far) and, when
// another configuration measured higher, that one too.
func standing(e Event) string {
	inc := "no incumbent yet"
	if e.Incumbent != nil {
		inc = "incumbent " + e.Incumbent.Text()
	}
	if e.Top != nil {
		inc += "; top measured " + e.Top.Text()
	}
	return inc
}

// printDone prints the lab's last lines: the winner, and why it stopped
// early if it did.
func printDone(w io.Writer, e Event) {
	sum := e.Summary
	if sum == nil {
		return
	}
	if sum.Winner != nil {
		gain := fmt.Sprintf("%+.1f%% over baseline", 100*sum.Gain)
		// A score that is no measurement (a load search stopped below a
		// load the client could not deliver) has no gain against it.
		switch b := sum.Baseline; {
		case sum.Winner.Why == report.WhyUnmeasured:
			gain = "no score, no gain: " + sum.Winner.Reason
		case b != nil && b.Why == report.WhyUnmeasured:
			gain = "no gain: the baseline has no score: " + b.Reason
		case b != nil && !(b.Score > 0):
			// A baseline with no load within the SLO (or that failed)
			// scores 0, and a gain over it would read "+0.0%".
			gain = "no gain: the baseline has no score"
			if b.Reason != "" {
				gain += ": " + b.Reason
			}
		}
		fmt.Fprintf(w, "winner: %s, %.1f %s (%s); %d tuning trials, %d run now, %d from the store, %s\n",
			sum.Winner.Name, sum.Winner.Score, sum.Unit, gain, sum.TuningTrials, sum.TrialsRun, sum.TrialsReused,
			time.Duration(e.ElapsedSeconds*float64(time.Second)).Round(time.Millisecond))
	}
	if sum.Stopped != "" {
		fmt.Fprintf(w, "stopped early: %s\n", sum.Stopped)
	}
}

// Text is how the terminal shows a score: "name 1234.5 tok/s".
func (s *Score) Text() string { return fmt.Sprintf("%s %.1f %s", s.Name, s.Score, s.Unit) }
