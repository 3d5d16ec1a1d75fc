package lab

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestBarProgress drives a whole (analytic) lab through the terminal bar:
// the stage headers and the winner are printed, and the bar's last frame
// shows every trial counted and the best configuration.
func TestBarProgress(t *testing.T) {
	s := mustSpec(t, smallSpec)
	var buf bytes.Buffer
	l := analyticLab(s, newMemStore())
	l.Progress = &BarProgress{W: &buf, Refresh: 10 * time.Millisecond, AlwaysDraw: true}
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
