package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/labspec"
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
	// Host paths resolve against the data root and stay under it; a
	// tokenizer that is not a file there is a Hub id.
	if b.Tokenizer != "" {
		p, local, err := s.paths().Ref(b.Tokenizer)
		if err == nil && local && !exists(p) {
			err = &labspec.PathError{Value: b.Tokenizer, Reason: "no such file or directory under the data root"}
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, pathError("tokenizer", err))
			return
		}
		b.Tokenizer = p
	}
	if b.DatasetPath != "" {
		p, err := s.paths().Path(b.DatasetPath)
		if err == nil && !exists(p) {
			err = &labspec.PathError{Value: b.DatasetPath, Reason: "no such file under the data root"}
		}
		if err != nil {
			writeError(w, http.StatusBadRequest, pathError("dataset_path", err))
			return
		}
		b.DatasetPath = p
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
	lr, lctx, err := s.jobs.begin(run.ID, s.base, nil)
	if err != nil {
		writeError(w, http.StatusConflict, apiError{Error: fmt.Sprintf("run %d: %v", run.ID, err)})
		return
	}
	s.wg.Add(1)
	h, cancel := lr.hub, lr.cancel
	te := &labprogress.TrialEvent{Key: "benchmark/" + b.Profile, Name: b.Model + " @ " + b.BaseURL, Stage: "benchmark", Workload: b.Profile}
	h.Event(labprogress.Event{Type: labprogress.EventTrialStarted, Time: time.Now(), Stage: "benchmark", Trial: te, Planned: 1})
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
			h.Event(labprogress.Event{Type: labprogress.EventTrialEnded, Time: time.Now(), Stage: "benchmark", Trial: &ended, Done: 1, Ran: 1, Planned: 1})
		}
		s.jobs.finish(lr, stored.Status, err)
	}(run)
	run.Status = "running"
	writeJSON(w, http.StatusAccepted, startedOf(run))
}

// pathError is the answer to a host path the resolver refused.
func pathError(field string, err error) apiError {
	e := apiError{Error: fmt.Sprintf("benchmark: %s: %v", field, err), Field: field}
	var pe *labspec.PathError
	if errors.As(err, &pe) {
		e.Path = pe.Value
	}
	return e
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
