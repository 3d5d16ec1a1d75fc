package server

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/labprogress"
)

// TestLabQueue: with MaxLabs 2, six labs submitted while both slots are
// taken are answered and listed as queued; once the slots free, they
// never run more than two at once, and all six finish.
func TestLabQueue(t *testing.T) {
	const max, n = 2, 6
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{MaxLabs: max, Options: app.Options{Analytic: true}})
	var peak atomic.Int64
	stop := make(chan struct{})
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if r, _ := ts.labsRunning(); int64(r) > peak.Load() {
				peak.Store(int64(r))
			}
			if c := len(ts.slots); c > max {
				peak.Store(int64(c))
			}
			time.Sleep(200 * time.Microsecond)
		}
	}()
	// Both slots held while the labs are submitted, as by two long labs:
	// every one of them waits, whatever the machine's speed.
	for range max {
		ts.slots <- struct{}{}
	}
	var runs []started
	for i := range n {
		spec := strings.Replace(smallSpec, "name: small", fmt.Sprintf("name: q%d", i), 1)
		runs = append(runs, ts.submit(t, spec))
	}
	queued := 0
	for _, r := range runs {
		if r.Status == StatusQueued {
			queued++
			var d runDetail
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", r.ID), &d)
			if d.Status != StatusQueued && d.Status != "running" && d.Status != "done" {
				t.Errorf("run %d answered queued, then listed %s", r.ID, d.Status)
			}
		}
	}
	if queued != n {
		t.Errorf("%d of %d labs answered queued with both slots taken", queued, n)
	}
	for range max {
		<-ts.slots
	}
	for _, r := range runs {
		evs := ts.follow(t, r.ID, 0, nil)
		if len(evs) == 0 || evs[len(evs)-1].data.Status != "done" {
			t.Errorf("run %d (%s): stream %v, want it to end done", r.ID, r.Status, types(evs))
			continue
		}
	}
	close(stop)
	watch.Wait()
	if p := peak.Load(); p > max {
		t.Errorf("%d labs ran at once, with MaxLabs %d", p, max)
	}
	var page runPage
	ts.getJSON(t, "/api/v1/runs?status=done", &page)
	if page.Total != n {
		t.Errorf("%d runs done, want %d", page.Total, n)
	}
}

// TestQueuedCancel: a queued lab stopped with DELETE ends at once,
// interrupted and resumable, having run nothing; once the slot frees, the
// next lab runs.
func TestQueuedCancel(t *testing.T) {
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{MaxLabs: 1, Options: app.Options{Analytic: true}})
	ts.slots <- struct{}{} // the only slot, held as by a long lab
	second := ts.submit(t, strings.Replace(smallSpec, "name: small", "name: waiting", 1))
	if second.Status != StatusQueued {
		t.Fatalf("a lab with no free slot: %s, want queued", second.Status)
	}
	var page runPage
	ts.getJSON(t, "/api/v1/runs?status=queued", &page)
	if page.Total != 1 || page.Runs[0].ID != second.ID {
		t.Errorf("runs listed queued: %+v, want run %d", page.Runs, second.ID)
	}
	code, b := ts.do(t, "DELETE", fmt.Sprintf("/api/v1/runs/%d", second.ID), "", nil)
	if code != 200 {
		t.Fatalf("DELETE a queued run: %d %s", code, b)
	}
	var d runDetail
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", second.ID), &d)
	if d.Status != "interrupted" || !d.Resumable || d.Trials != 0 {
		t.Errorf("a queued run stopped: %s, resumable %v, %d trials; want interrupted, resumable, none", d.Status, d.Resumable, d.Trials)
	}
	if evs := ts.follow(t, second.ID, 0, nil); len(evs) != 2 || evs[0].typ != string(eventQueued) || evs[1].data.Status != "interrupted" {
		t.Errorf("the stopped queued run's stream: %v, want queued then end interrupted", types(evs))
	}
	third := ts.submit(t, strings.Replace(smallSpec, "name: small", "name: third", 1))
	<-ts.slots
	evs := ts.follow(t, third.ID, 0, nil)
	if last := evs[len(evs)-1]; third.Status != StatusQueued || last.data.Status != "done" {
		t.Errorf("the lab queued behind the slot: answered %s, ended %s", third.Status, last.data.Status)
	}
}

// TestHubCompact: an ended lab keeps only its last progress, its
// incumbents and its end; ids go on across a resume.
func TestHubCompact(t *testing.T) {
	h := newHub(1)
	for range 100 {
		h.add(wireEvent{Event: eventOf("trial_ended")})
	}
	h.add(wireEvent{Event: eventOf("best")})
	h.add(wireEvent{Event: eventOf("trial_ended")})
	h.end("done", nil)
	h.compact()
	evs, _, ended := h.after(0)
	if !ended || len(evs) != 3 || evs[0].ID != 101 || evs[2].ID != 103 {
		t.Fatalf("compacted: %d events %v, ended %v", len(evs), evs, ended)
	}
	if got, _, _ := h.after(102); len(got) != 1 || got[0].Type != eventEnd {
		t.Errorf("after 102: %v", got)
	}
	h.reopen()
	h.add(wireEvent{Event: eventOf("start")})
	if got, _, _ := h.after(103); len(got) != 1 || got[0].ID != 104 {
		t.Errorf("after a resume: %v", got)
	}
}

func eventOf(typ string) labprogress.Event {
	return labprogress.Event{Type: labprogress.EventType(typ)}
}
