package lab

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/labprogress"
)

// TestBarProgress drives a whole (analytic) lab through the terminal bar:
// the stage headers and the winner are printed, and the bar's last frame
// shows every trial counted and the best configuration.
func TestBarProgress(t *testing.T) {
	s := mustSpec(t, smallSpec)
	var buf bytes.Buffer
	l := analyticLab(s, newMemStore())
	l.Progress = NewEvents(&labprogress.BarProgress{W: &buf, Refresh: 10 * time.Millisecond, AlwaysDraw: true})
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if testing.Verbose() {
		t.Log(out)
	}
	for _, want := range []string{"lab ", "== stage engine:", "== stage quantization:", "winner: " + sum.Winner.Name} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// The final frame: n/n trials, with n the trials the lab ran.
	frames := regexp.MustCompile(`(\d+)/(\d+) `).FindAllStringSubmatch(out, -1)
	if len(frames) == 0 {
		t.Fatalf("no bar frame in output:\n%s", out)
	}
	last := frames[len(frames)-1]
	if last[1] != last[2] || last[1] == "0" {
		t.Errorf("last frame %s/%s, want a completed bar", last[1], last[2])
	}
	if n := sum.TrialsRun + sum.TrialsReused; last[1] != itoa(n) {
		t.Errorf("bar counted %s trials, the lab ran %d", last[1], n)
	}
	if !strings.Contains(out, "incumbent ") {
		t.Errorf("bar never showed the incumbent:\n%s", out)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// TestETALeavesAsideTheGuide: time the lab spends predicting with the
// guide (no trial runs) is not charged to the trials, so the ETA after a
// slow prediction batch does not jump (issue 11, defect 6: 3 s to 1 min).
// The ETA is computed once, in Events, for the lines and the bar alike.
func TestETALeavesAsideTheGuide(t *testing.T) {
	var last labprogress.Event
	e := NewEvents(labprogress.SinkFunc(func(ev labprogress.Event) { last = ev }))
	e.start = time.Now().Add(-10 * time.Second) // 1 s of trials, then 9 s of predictions
	e.n, e.ran, e.planned = 1, 1, 3
	e.Stage("x", 1)
	if got := last.ETAText(); got != "20s" {
		t.Fatalf("before: ETA %s, want 20s (10 s a trial, 2 left)", got)
	}
	e.Aside(9 * time.Second)
	e.Stage("x", 1)
	if got := last.ETAText(); got != "2s" {
		t.Errorf("after the guide's 9 s set aside: ETA %s, want 2s", got)
	}
}
