package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/shareddata"
	"github.com/perflab/perflab/internal/store"
)

// simSpec is smallSpec on the simulator itself (sim-predict, no analytic
// stand-in), with the Qwen3 tokenizer under the data root: its trials take
// long enough to stop a lab between two of them.
const simSpec = smallSpec + "tokenizer: tokenizers/qwen3\n"

// storedTrials maps the run's trials by key to when they ended.
func storedTrials(t *testing.T, st *store.Store, id int64) map[string]time.Time {
	t.Helper()
	trials, err := st.Trials(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]time.Time{}
	for _, tr := range trials {
		out[tr.Key] = tr.Ended
	}
	return out
}

// TestCancelResume cancels a lab after its second trial (DELETE: the run
// is interrupted and resumable, its finished trials kept), then resumes it
// (POST resume): the stream goes on with the next ids, nothing finished
// runs again, and the lab ends done.
func TestCancelResume(t *testing.T) {
	root := shareddata.Path(t, "data")
	for name, open := range stores(t) {
		t.Run(name, func(t *testing.T) {
			st := open(t)
			ts := newTestServer(t, st, Config{DataRoot: root})
			s := ts.submit(t, simSpec)
			var canceled runDetail
			ended := 0
			evs := ts.follow(t, s.ID, 0, func(e sseEvent) bool {
				if e.typ == "trial_ended" {
					if ended++; ended == 2 {
						code, b := ts.do(t, "DELETE", fmt.Sprintf("/api/v1/runs/%d", s.ID), "", nil)
						if code != 200 {
							t.Fatalf("DELETE: %d %s", code, b)
						}
						json.Unmarshal(b, &canceled)
					}
				}
				return true
			})
			last := evs[len(evs)-1]
			if canceled.Status != store.StatusInterrupted || !canceled.Resumable || canceled.Active || last.typ != "end" || last.data.Status != store.StatusInterrupted {
				t.Fatalf("after DELETE: run %s resumable %v active %v; stream ended %s %s", canceled.Status, canceled.Resumable, canceled.Active, last.typ, last.data.Status)
			}
			kept := storedTrials(t, st, s.ID)
			if len(kept) < 2 || canceled.Trials != len(kept) {
				t.Fatalf("%d trials stored after the cancel (the run says %d), want 2 or more", len(kept), canceled.Trials)
			}
			if code, _ := ts.do(t, "DELETE", fmt.Sprintf("/api/v1/runs/%d", s.ID), "", nil); code != http.StatusConflict {
				t.Errorf("DELETE of a stopped run: %d, want 409", code)
			}
			var page runPage
			ts.getJSON(t, "/api/v1/runs?resumable=true", &page)
			if page.Total != 1 || page.Runs[0].ID != s.ID {
				t.Fatalf("resumable runs: %+v", page)
			}

			// Held by another server's lab: refused, not started to fail.
			other := store.NewOwner()
			if err := st.AcquireRun(context.Background(), s.ID, other, time.Minute); err != nil {
				t.Fatal(err)
			}
			if code, b := ts.do(t, "POST", fmt.Sprintf("/api/v1/runs/%d/resume", s.ID), "", nil); code != http.StatusConflict {
				t.Errorf("resume of a run another lab holds: %d %s, want 409", code, b)
			}
			if err := st.ReleaseRun(context.Background(), s.ID, other); err != nil {
				t.Fatal(err)
			}

			code, b := ts.do(t, "POST", fmt.Sprintf("/api/v1/runs/%d/resume", s.ID), "", nil)
			if code != http.StatusAccepted {
				t.Fatalf("resume: %d %s", code, b)
			}
			stored := ""
			more := ts.follow(t, s.ID, last.id, func(e sseEvent) bool {
				if e.typ == "trial_ended" && stored == "" {
					r, err := st.Run(context.Background(), s.ID)
					if err != nil {
						t.Fatal(err)
					}
					stored = r.Status
				}
				return true
			})
			if stored != "running" {
				t.Errorf("the store lists the resumed run %q while it runs, want running", stored)
			}
			if more[0].id != last.id+1 || more[0].typ != "start" || more[0].data.Stored != len(kept) {
				t.Errorf("resumed stream starts with %s id %d stored %d, want start id %d stored %d", more[0].typ, more[0].id, more[0].data.Stored, last.id+1, len(kept))
			}
			end := more[len(more)-1]
			if end.typ != "end" || end.data.Status != "done" {
				t.Fatalf("resumed lab ended %s %s %s", end.typ, end.data.Status, end.data.Error)
			}
			after := storedTrials(t, st, s.ID)
			for k, ended := range kept {
				if !after[k].Equal(ended) {
					t.Errorf("trial %s: ended %v before the resume, %v after (run again or lost)", k, ended, after[k])
				}
			}
			var run runDetail
			ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", s.ID), &run)
			var sum struct {
				TrialsReused int `json:"trials_reused"`
			}
			json.Unmarshal(run.Summary, &sum)
			if run.Status != "done" || run.Resumable || sum.TrialsReused != len(kept) || len(after) <= len(kept) {
				t.Errorf("resumed run %s resumable %v, %d reused of %d kept, %d trials in all", run.Status, run.Resumable, sum.TrialsReused, len(kept), len(after))
			}
		})
	}
}

// TestCloseInterrupts: a server that stops (SIGTERM) stops its labs and
// marks their runs interrupted; the next server on the same store lists
// them as resumable and resumes them with nothing finished lost.
func TestCloseInterrupts(t *testing.T) {
	root := shareddata.Path(t, "data")
	st := stores(t)["sqlite"](t)
	srv, err := New(Config{Store: st, DataRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	first := &testServer{Server: srv}
	hs := newLoopback(t, srv)
	first.url = hs
	s := first.submit(t, simSpec)
	closed := make(chan error, 1)
	first.follow(t, s.ID, 0, func(e sseEvent) bool {
		if e.typ == "trial_ended" && e.data.Done == 2 {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				closed <- srv.Close(ctx)
			}()
		}
		return true
	})
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	r, err := st.Run(context.Background(), s.ID)
	if err != nil || r.Status != store.StatusInterrupted {
		t.Fatalf("run after the server stopped: %v %v, want interrupted", r.Status, err)
	}
	kept := storedTrials(t, st, s.ID)

	second := newTestServer(t, st, Config{DataRoot: root})
	var run runDetail
	second.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", s.ID), &run)
	if !run.Resumable || run.Active || run.Trials != len(kept) {
		t.Fatalf("restarted server: run resumable %v active %v trials %d, want resumable with %d", run.Resumable, run.Active, run.Trials, len(kept))
	}
	// Its stream, with no lab here, says how it stands and ends.
	evs := second.follow(t, s.ID, 0, nil)
	if len(evs) != 1 || evs[0].typ != "end" || evs[0].data.Status != store.StatusInterrupted {
		t.Errorf("stream of a stopped run: %v", types(evs))
	}
	if code, b := second.do(t, "POST", fmt.Sprintf("/api/v1/runs/%d/resume", s.ID), "", nil); code != http.StatusAccepted {
		t.Fatalf("resume: %d %s", code, b)
	}
	evs = second.follow(t, s.ID, 0, nil)
	if end := evs[len(evs)-1]; end.data.Status != "done" {
		t.Fatalf("resumed lab ended %s %s", end.data.Status, end.data.Error)
	}
	after := storedTrials(t, st, s.ID)
	for k, ended := range kept {
		if !after[k].Equal(ended) {
			t.Errorf("trial %s lost or run again", k)
		}
	}
}

// TestFreshKeepsEarlierTrials: ?fresh=true starts a new run and archives
// the earlier one whole; a DELETE right after (the fresh lab stopped
// before its first trial) leaves the earlier trials where they were.
func TestFreshKeepsEarlierTrials(t *testing.T) {
	st := stores(t)["sqlite"](t)
	ts := newTestServer(t, st, Config{Options: app.Options{Analytic: true}})
	first := ts.submit(t, smallSpec)
	if evs := ts.follow(t, first.ID, 0, nil); evs[len(evs)-1].data.Status != "done" {
		t.Fatalf("first lab: %v", types(evs))
	}
	kept := storedTrials(t, st, first.ID)
	if len(kept) == 0 {
		t.Fatal("no trials stored")
	}
	code, b := ts.do(t, "POST", "/api/v1/labs?fresh=true", "application/yaml", strings.NewReader(smallSpec))
	if code != http.StatusAccepted {
		t.Fatalf("fresh: %d %s", code, b)
	}
	var fresh started
	json.Unmarshal(b, &fresh)
	if fresh.ID == first.ID {
		t.Errorf("a fresh start reused run %d", first.ID)
	}
	ts.do(t, "DELETE", fmt.Sprintf("/api/v1/runs/%d", fresh.ID), "", nil)
	after := storedTrials(t, st, first.ID)
	if len(after) != len(kept) {
		t.Fatalf("the earlier run has %d trials after a fresh start and a DELETE, had %d", len(after), len(kept))
	}
	for k, ended := range kept {
		if !after[k].Equal(ended) {
			t.Errorf("trial %s changed", k)
		}
	}
	var page runPage
	ts.getJSON(t, "/api/v1/runs", &page)
	found := false
	for _, r := range page.Runs {
		found = found || (r.ID == first.ID && r.Trials == len(kept))
	}
	if !found {
		t.Errorf("the earlier run is not listed with its %d trials: %+v", len(kept), page.Runs)
	}
}
