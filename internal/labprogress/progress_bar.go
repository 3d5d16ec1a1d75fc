package labprogress

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// BarProgress draws one live bar on a terminal: trials finished of those
// planned, the stage, the ETA and the best so far, as the latest Event
// says. Stage headers and the final line are printed above the bar, so the
// screen keeps the run's outline; per-trial lines are left to LineProgress
// (logs), since a line per 0.1 s sim-predict trial would scroll the bar
// away. It is a Sink of Events.
type BarProgress struct {
	W io.Writer
	// Refresh is the redraw interval (0: 120 ms).
	Refresh time.Duration
	// AlwaysDraw draws even when W is not a terminal (mpb otherwise stays
	// silent there); for tests and for terminals behind a pipe.
	AlwaysDraw bool

	mu    sync.Mutex
	p     *mpb.Progress
	bar   *mpb.Bar
	total int
	last  Event
}

var _ Sink = (*BarProgress)(nil)

func (b *BarProgress) text(f func(e Event) string) decor.Decorator {
	return decor.Any(func(decor.Statistics) string {
		b.mu.Lock()
		defer b.mu.Unlock()
		return f(b.last)
	})
}

// Event implements Sink.
func (b *BarProgress) Event(e Event) {
	switch e.Type {
	case EventStart:
		b.start(e)
		return
	case EventDone:
		b.done(e)
		return
	}
	b.mu.Lock()
	b.last = e
	p, bar := b.p, b.bar
	grow := e.Done >= b.total
	if grow {
		// The plan is an estimate (the joint search may stop early or the
		// combinations differ): keep the bar open past it.
		b.total = e.Done + 1
	}
	total := b.total
	b.mu.Unlock()
	switch e.Type {
	case EventStage:
		if p != nil {
			io.WriteString(p, e.StageLine())
		}
	case EventTrialEnded:
		if bar == nil {
			return
		}
		if grow {
			bar.SetTotal(int64(total), false)
		}
		bar.SetCurrent(int64(e.Done))
	}
}

func (b *BarProgress) start(e Event) {
	refresh := b.Refresh
	if refresh <= 0 {
		refresh = 120 * time.Millisecond
	}
	b.mu.Lock()
	b.last, b.total = e, max(e.Planned, 1)
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
	p := b.p
	b.mu.Unlock()
	fmt.Fprintf(p, "lab %s: %s on %dx %s, runtime %s, objective %s; ~%d trials planned, %d already stored\n",
		e.Name, e.Model, e.GPUs, e.GPU, e.Runtime, e.Objective, e.Planned, e.Stored)
	// Built with total 0 so that SetTotal keeps working (mpb stops
	// honouring it once a positive total has armed auto-completion); the
	// bar completes in done.
	bar := p.AddBar(0,
		mpb.PrependDecorators(
			b.text(func(e Event) string { return fmt.Sprintf("%-14.14s", e.Stage) }),
			decor.CountersNoUnit(" %d/%d ")),
		mpb.AppendDecorators(
			b.text(func(e Event) string { return " ETA " + e.ETAText() }),
			b.text(func(e Event) string {
				if e.Incumbent == nil {
					return " | no incumbent yet"
				}
				return " | incumbent " + e.Incumbent.Text()
			})))
	bar.SetTotal(int64(max(e.Planned, 1)), false)
	b.mu.Lock()
	b.bar = bar
	b.mu.Unlock()
}

// done completes the bar, waits for its last frame and prints the winner
// below it.
func (b *BarProgress) done(e Event) {
	b.mu.Lock()
	p, bar := b.p, b.bar
	b.mu.Unlock()
	if bar != nil {
		bar.SetTotal(-1, true)
	}
	if p != nil {
		p.Wait()
	}
	printDone(b.W, e)
}
