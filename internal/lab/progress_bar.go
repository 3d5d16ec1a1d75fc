package lab

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"

	"github.com/perflab/perflab/internal/store"
)

// BarProgress draws one live bar on a terminal: trials finished of those
// planned, the stage, the ETA and the best so far. Stage
// headers and the final line are printed above the bar, so the screen keeps
// the run's outline; per-trial lines are left to LineProgress (logs), since
// a line per 0.1 s sim-predict trial would scroll the bar away.
type BarProgress struct {
	W io.Writer
	// Refresh is the redraw interval (0: 120 ms).
	Refresh time.Duration
	// AlwaysDraw draws even when W is not a terminal (mpb otherwise stays
	// silent there); for tests and for terminals behind a pipe.
	AlwaysDraw bool

	mu      sync.Mutex
	p       *mpb.Progress
	bar     *mpb.Bar
	planned int
	n, ran  int
	start   time.Time
	aside   time.Duration
	stage   string
	best    string
}

var _ Progress = (*BarProgress)(nil)

func (b *BarProgress) text(f func() string) decor.Decorator {
	return decor.Any(func(decor.Statistics) string {
		b.mu.Lock()
		defer b.mu.Unlock()
		return f()
	})
}

// Start implements Progress.
func (b *BarProgress) Start(s *Spec, planned, stored int) {
	refresh := b.Refresh
	if refresh <= 0 {
		refresh = 120 * time.Millisecond
	}
	b.mu.Lock()
	b.start, b.planned = time.Now(), max(planned, 1)
	width := 20 // the bar itself; a terminal's own width bounds the line
	if b.AlwaysDraw {
		// Off a terminal mpb takes the requested width as the whole line's.
		width = 160
	}
	opts := []mpb.ContainerOption{mpb.WithOutput(b.W), mpb.WithWidth(width), mpb.WithRefreshRate(refresh)}
	if b.AlwaysDraw {
		opts = append(opts, mpb.WithAutoRefresh())
	}
	b.p = mpb.New(opts...)
	b.mu.Unlock()
	fmt.Fprintf(b.p, "lab %s: %s on %dx %s, runtime %s, objective %s; ~%d trials planned, %d already stored\n",
		s.Name, s.Model, s.Hardware.Count, s.Hardware.GPU, s.Runtime, s.Objective.Metric, planned, stored)
	// Built with total 0 so that SetTotal keeps working (mpb stops
	// honouring it once a positive total has armed auto-completion); the
	// bar completes in Done.
	b.bar = b.p.AddBar(0,
		mpb.PrependDecorators(
			b.text(func() string { return fmt.Sprintf("%-14.14s", b.stage) }),
			decor.CountersNoUnit(" %d/%d ")),
		mpb.AppendDecorators(
			b.text(func() string { return " ETA " + b.eta() }),
			b.text(func() string {
				if b.best == "" {
					return " | no incumbent yet"
				}
				return " | incumbent " + b.best
			})))
	b.bar.SetTotal(int64(max(planned, 1)), false)
}

// eta is the time left at the mean trial time so far; callers hold mu.
func (b *BarProgress) eta() string { return eta(b.start.Add(b.aside), b.n, b.ran, b.planned) }

// Aside implements asider.
func (b *BarProgress) Aside(d time.Duration) {
	b.mu.Lock()
	b.aside += d
	b.mu.Unlock()
}

// Stage implements Progress.
func (b *BarProgress) Stage(name string, n int) {
	b.mu.Lock()
	b.stage = name
	p := b.p
	b.mu.Unlock()
	if p != nil {
		fmt.Fprintf(p, "== stage %s: %d candidates\n", name, n)
	}
}

// Trial implements Progress.
func (b *BarProgress) Trial(t TrialSpec, rec store.Trial, score float64, reused bool) {
	b.mu.Lock()
	b.n++
	if !reused {
		b.ran++
	}
	grow := b.n >= b.planned
	if grow {
		// The plan is an estimate (the joint search may stop early or the
		// combinations differ): keep the bar open past it.
		b.planned = b.n + 1
	}
	planned, bar := b.planned, b.bar
	b.mu.Unlock()
	if bar == nil {
		return
	}
	if grow {
		bar.SetTotal(int64(planned), false)
	}
	bar.Increment()
}

// Best implements Progress.
func (b *BarProgress) Best(name string, score float64, unit string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.best = fmt.Sprintf("%s %.1f %s", name, score, unit)
}

// Done implements Progress: it completes the bar, waits for its last frame
// and prints the winner below it.
func (b *BarProgress) Done(sum *Summary) {
	b.mu.Lock()
	p, bar := b.p, b.bar
	b.mu.Unlock()
	if bar != nil {
		bar.SetTotal(-1, true)
	}
	if p != nil {
		p.Wait()
	}
	(&LineProgress{W: b.W, start: b.start}).Done(sum)
}
