package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// source is a readiness source without a runtime: a lifecycle, a probe
// target and the two signals, for WaitReady's own tests.
type source struct {
	lc       *Lifecycle
	base     string
	up, done chan struct{}
	plan     ReadyPlan
}

func (s *source) Lifecycle() *Lifecycle { return s.lc }
func (s *source) BaseURL() string       { return s.base }
func (s *source) Up() <-chan struct{}   { return s.up }
func (s *source) Done() <-chan struct{} { return s.done }
func (s *source) ReadyPlan() ReadyPlan  { return s.plan }

func newSource(base string, plan ReadyPlan) *source {
	if plan.Poll == 0 {
		plan.Poll = 5 * time.Millisecond
	}
	return &source{lc: NewLifecycle(100, nil), base: base, up: make(chan struct{}), done: make(chan struct{}), plan: plan}
}

// readyServer answers ready for model m.
func readyServer(t *testing.T, m string) string {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/v1/models", func(w http.ResponseWriter, _ *http.Request) {
		w.Write([]byte(`{"data":[{"id":"` + m + `"}]}`))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestWaitReady(t *testing.T) {
	const short = 50 * time.Millisecond
	silent := "http://127.0.0.1:1" // nothing listens: a server that never answers
	for _, tc := range []struct {
		name string
		src  func(t *testing.T) *source
		// act runs beside the wait.
		act       func(s *source)
		want      FailureClass // "" = ready
		reason    string
		kept      bool // the failure is the server's own (not after a Stop)
		stateWant State
	}{
		{name: "ready once up", src: func(t *testing.T) *source { return newSource(readyServer(t, "m"), ReadyPlan{Model: "m"}) },
			act: func(s *source) { close(s.up) }, stateWant: StateReady},
		{name: "the wrong model is unhealthy", src: func(t *testing.T) *source {
			return newSource(readyServer(t, "other"), ReadyPlan{Model: "m", ReadyTimeout: short, Started: "the container started"})
		}, act: func(s *source) { close(s.up) }, want: ClassUnhealthy, reason: "not ready 50ms after the container started", kept: true},
		{name: "silence is hung", src: func(t *testing.T) *source { return newSource(silent, ReadyPlan{StallTimeout: short}) },
			act: func(s *source) { close(s.up) }, want: ClassHung, reason: "no log progress", kept: true},
		{name: "silence before up names what it waits for", src: func(t *testing.T) *source {
			return newSource(silent, ReadyPlan{StallTimeout: short, BeforeUp: "pod or log"})
		}, want: ClassHung, reason: "no pod or log progress", kept: true},
		{name: "a pull is capped by the pull timeout, not the stall", src: func(t *testing.T) *source {
			since := time.Now()
			return newSource(silent, ReadyPlan{StallTimeout: time.Millisecond, PullTimeout: short, Image: "img",
				Pulling: func() time.Time { return since }})
		}, want: ClassHung, reason: "the pull of img still under way", kept: true},
		{name: "a failure the runtime records ends the wait", src: func(t *testing.T) *source { return newSource(silent, ReadyPlan{}) },
			act:  func(s *source) { s.lc.Fail(&Failure{Class: ClassUnschedulable, Reason: "no node"}) },
			want: ClassUnschedulable, reason: "no node", kept: true},
		{name: "an exit ends the wait", src: func(t *testing.T) *source { return newSource(silent, ReadyPlan{}) },
			act:  func(s *source) { s.lc.Exited(Exit{Code: 2, What: "exited (status 2)"}); close(s.done) },
			want: ClassStartupCrash, reason: "exited (status 2)", kept: true},
		// Before the lifecycle, the process and docker runtimes kept a
		// timed-out wait as the failure of a server already being
		// stopped.
		{name: "a timeout after Stop is not the server's failure", src: func(t *testing.T) *source {
			s := newSource(silent, ReadyPlan{StallTimeout: short})
			s.lc.BeginStop()
			return s
		}, act: func(s *source) { close(s.up) }, want: ClassHung, reason: "no log progress", kept: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.src(t)
			if tc.act != nil {
				go tc.act(s)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := WaitReady(ctx, s)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if st := s.lc.State(); st != tc.stateWant {
					t.Errorf("state %s, want %s", st, tc.stateWant)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("err %v, want a *Failure", err)
			}
			if f.Class != tc.want || !strings.Contains(f.Reason, tc.reason) {
				t.Fatalf("failure %s %q, want %s with %q", f.Class, f.Reason, tc.want, tc.reason)
			}
			if got := s.lc.Failure(); (got != nil) != tc.kept {
				t.Errorf("server's failure %+v, kept should be %v", got, tc.kept)
			}
		})
	}
}

func TestStateString(t *testing.T) {
	for s, want := range map[State]string{StateStarting: "starting", StateExited: "exited", State(9): "State(9)"} {
		if s.String() != want {
			t.Errorf("%d: %q", int(s), s.String())
		}
	}
}
