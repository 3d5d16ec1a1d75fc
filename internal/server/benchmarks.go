package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/store"
)

// postBenchmark runs one benchmark against an endpoint the user names,
// with a built-in profile, in the background, stored as a run of its own.
func (s *Server) postBenchmark(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	pb, err := app.ParseBenchmark(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	b := *pb
	// Host paths resolve against the data root and stay under it.
	for _, f := range []struct {
		field string
		v     *string
		path  bool
	}{{"tokenizer", &b.Tokenizer, false}, {"dataset_path", &b.DatasetPath, true}} {
		if *f.v == "" {
			continue
		}
		p := *f.v
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.cfg.DataRoot, p)
		}
		if !f.path && !fileExists(p) && !filepath.IsAbs(*f.v) {
			continue // a Hub id ("Qwen/Qwen3-14B")
		}
		if e, bad := s.checkPath(f.field, p); bad {
			writeError(w, http.StatusBadRequest, e)
			return
		}
		*f.v = p
	}
	if prof, _ := dataset.LookupProfile(b.Profile); prof.Dataset.Name == dataset.NameShareGPT && b.DatasetPath == "" {
		writeError(w, http.StatusBadRequest, apiError{Error: "benchmark: profile " + b.Profile + " reads ShareGPT: dataset_path (under the data root) is required", Field: "dataset_path"})
		return
	}
	if s.base.Err() != nil {
		writeError(w, http.StatusServiceUnavailable, apiError{Error: "server: stopping"})
		return
	}
	run, err := app.NewBenchmarkRun(r.Context(), s.cfg.Store, &b)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	h := newHub(run.ID)
	lctx, cancel := context.WithCancel(s.base)
	lr := &labRun{id: run.ID, hub: h, cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.labs[run.ID] = lr
	s.wg.Add(1)
	s.mu.Unlock()
	te := &lab.TrialEvent{Key: "benchmark/" + b.Profile, Name: b.Model + " @ " + b.BaseURL, Stage: "benchmark", Workload: b.Profile}
	h.Event(lab.Event{Type: lab.EventTrialStarted, Time: time.Now(), Stage: "benchmark", Trial: te, Planned: 1})
	go func(run store.Run) {
		defer s.wg.Done()
		defer cancel()
		stored, err := b.Run(lctx, s.cfg.Store, run)
		if t, terr := s.cfg.Store.Trial(context.WithoutCancel(lctx), run.ID, te.Key); terr == nil {
			ended := *te
			ended.Status, ended.FailureClass = t.Status, t.FailureClass
			if ti, _ := trialOf(t); ti.TotalThroughput > 0 {
				ended.Score = ti.TotalThroughput
			}
			h.Event(lab.Event{Type: lab.EventTrialEnded, Time: time.Now(), Stage: "benchmark", Trial: &ended, Done: 1, Ran: 1, Planned: 1})
		}
		lr.err = err
		h.end(stored.Status, err)
		close(lr.done)
	}(run)
	run.Status = "running"
	writeJSON(w, http.StatusAccepted, startedOf(run))
}

// checkPath refuses a host path outside the data root (symbolic links
// followed).
func (s *Server) checkPath(field, p string) (apiError, bool) {
	spec := &lab.Spec{Tokenizer: p}
	if field != "tokenizer" {
		spec = &lab.Spec{Tuning: &lab.Workload{Path: p}}
	}
	e, bad := s.outsideRoot(spec)
	if bad {
		e.Field = field
		e.Error = fmt.Sprintf("benchmark: %s: %s is outside the data root %s (--data-root)", field, p, s.cfg.DataRoot)
	}
	return e, bad
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
