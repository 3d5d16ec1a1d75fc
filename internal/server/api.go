package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/goccy/go-yaml"

	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/store"
)

// apiError is every error's body.
type apiError struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	Line  int    `json:"line,omitempty"`
	Path  string `json:"path,omitempty"`
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, e apiError) { writeJSON(w, code, e) }

// writeStoreError answers 404 for a missing run or trial, 500 otherwise.
func writeStoreError(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, apiError{Error: err.Error()})
		return
	}
	writeError(w, http.StatusInternalServerError, apiError{Error: err.Error()})
}

// runID reads the {id} path value; on a bad one it has answered 404.
func runID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusNotFound, apiError{Error: "no run " + strconv.Quote(v) + ": run ids are positive integers"})
		return 0, false
	}
	return id, true
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	running, queued := s.labsRunning()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "labs_running": running, "labs_queued": queued})
}

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Write(openAPI)
}

// runInfo is a run as the list shows it.
type runInfo struct {
	ID        int64  `json:"id"`
	Key       string `json:"key"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Active    bool   `json:"active"`
	Resumable bool   `json:"resumable"`
	// NotResumable says why a run that stopped is not resumable: its
	// stored spec is refused now (a number past a limit added since).
	NotResumable string     `json:"not_resumable,omitempty"`
	Model        string     `json:"model,omitempty"`
	Runtime      string     `json:"runtime,omitempty"`
	GPU          string     `json:"gpu,omitempty"`
	GPUs         int        `json:"gpus,omitempty"`
	Objective    string     `json:"objective,omitempty"`
	Unit         string     `json:"unit,omitempty"`
	Trials       int        `json:"trials"`
	Failed       int        `json:"failed"`
	Winner       *string    `json:"winner"`
	WinnerScore  *float64   `json:"winner_score"`
	BestGain     *float64   `json:"best_gain"`
	GPUHours     float64    `json:"gpu_hours"`
	Created      time.Time  `json:"created"`
	Updated      time.Time  `json:"updated"`
	Started      *time.Time `json:"started"`
}

// summaryHead is the part of the lab's summary a run list shows.
type summaryHead struct {
	Model     string         `json:"model"`
	Runtime   string         `json:"runtime"`
	GPU       string         `json:"gpu"`
	GPUs      int            `json:"gpus"`
	Objective string         `json:"objective"`
	Unit      string         `json:"unit"`
	Winner    *lab.Candidate `json:"winner"`
	Gain      float64        `json:"gain"`
	GPUHours  float64        `json:"gpu_hours"`
	Stages    []struct {
		Name       string          `json:"name"`
		Candidates []lab.Candidate `json:"candidates"`
	} `json:"stages"`
}

// specHead is the part of a stored spec a run list shows while the run
// has no summary yet.
type specHead struct {
	Model    string `yaml:"model"`
	Runtime  string `yaml:"runtime"`
	Hardware struct {
		GPU   string `yaml:"gpu"`
		Count int    `yaml:"count"`
	} `yaml:"hardware"`
	Objective struct {
		Metric string `yaml:"metric"`
	} `yaml:"objective"`
}

func (s *Server) info(ri store.RunInfo) (runInfo, *summaryHead) {
	out := runInfo{ID: ri.ID, Key: ri.Key, Name: ri.Name, Status: ri.Status, Trials: ri.Trials, Failed: ri.Failed,
		Created: ri.Created, Updated: ri.Updated}
	if !ri.Started.IsZero() {
		st := ri.Started
		out.Started = &st
	}
	lr := s.activeLab(ri.ID)
	out.Active = lr != nil
	if lr != nil {
		// The store has the run's last status; its lab here says more.
		out.Status = "running"
		if lr.queued.Load() {
			out.Status = StatusQueued
		}
	}
	out.Resumable = !out.Active && ri.Spec != "" &&
		(ri.Status == store.StatusInterrupted || (ri.Status == "running" && ri.LeaseUntil.Before(time.Now())))
	if out.Resumable {
		// Resuming parses the spec again; one refused now would be a 400
		// there, so the list does not offer it.
		if err := labspec.ValidateSpec(fmt.Sprintf("run %d", ri.ID), []byte(ri.Spec)); err != nil {
			out.Resumable, out.NotResumable = false, err.Error()
		}
	}
	var sum *summaryHead
	if len(ri.Summary) > 0 {
		var h summaryHead
		if json.Unmarshal(ri.Summary, &h) == nil {
			sum = &h
			out.Model, out.Runtime, out.GPU, out.GPUs, out.Objective, out.Unit, out.GPUHours =
				h.Model, h.Runtime, h.GPU, h.GPUs, h.Objective, h.Unit, h.GPUHours
			if h.Winner != nil && ri.Status != store.StatusInterrupted && !out.Active {
				out.Winner, out.WinnerScore, out.BestGain = &h.Winner.Name, &h.Winner.Score, &h.Gain
			}
		}
	}
	if out.Model == "" && ri.Spec != "" {
		var sh specHead
		if yaml.Unmarshal([]byte(ri.Spec), &sh) == nil {
			out.Model, out.Runtime, out.GPU, out.GPUs, out.Objective = sh.Model, sh.Runtime, sh.Hardware.GPU, sh.Hardware.Count, sh.Objective.Metric
		}
	}
	return out, sum
}

// runPage is one page of the run list.
type runPage struct {
	Runs       []runInfo `json:"runs"`
	Total      int       `json:"total"`
	NextOffset *int      `json:"next_offset,omitempty"`
}

func (s *Server) listRuns(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, offset := 50, 0
	for name, dst := range map[string]*int{"limit": &limit, "offset": &offset} {
		if v := q.Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || (name == "limit" && (n < 1 || n > 500)) {
				writeError(w, http.StatusBadRequest, apiError{Error: fmt.Sprintf("%s=%s: want an integer (limit 1 to 500, offset 0 or more)", name, v), Field: name})
				return
			}
			*dst = n
		}
	}
	status, model := q.Get("status"), q.Get("model")
	switch status {
	case "", "running", "done", "failed", store.StatusInterrupted, StatusQueued:
	default:
		writeError(w, http.StatusBadRequest, apiError{Error: "status=" + status + ": want queued, running, done, failed or interrupted", Field: "status"})
		return
	}
	resumable := q.Get("resumable")
	infos, err := s.cfg.Store.RunInfos(r.Context())
	if err != nil {
		writeStoreError(w, err)
		return
	}
	page := runPage{Runs: []runInfo{}}
	for _, ri := range infos {
		info, _ := s.info(ri)
		if status != "" && info.Status != status {
			continue
		}
		if model != "" && info.Model != model {
			continue
		}
		if resumable != "" && strconv.FormatBool(info.Resumable) != resumable {
			continue
		}
		page.Total++
		if page.Total > offset && len(page.Runs) < limit {
			page.Runs = append(page.Runs, info)
		}
	}
	if next := offset + len(page.Runs); next < page.Total && len(page.Runs) > 0 {
		page.NextOffset = &next
	}
	writeJSON(w, http.StatusOK, page)
}

// decision is one candidate's fate in a stage.
type decision struct {
	Stage    string  `json:"stage"`
	Name     string  `json:"name"`
	Decision string  `json:"decision"`
	Reason   string  `json:"reason,omitempty"`
	Score    float64 `json:"score"`
	Gain     float64 `json:"gain"`
}

// runDetail is one run.
type runDetail struct {
	runInfo
	Spec      string          `json:"spec"`
	Summary   json.RawMessage `json:"summary"`
	Decisions []decision      `json:"decisions"`
	Progress  *wireEvent      `json:"progress"`
	Error     string          `json:"error,omitempty"`
}

func (s *Server) getRun(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	s.writeRun(w, r, id)
}

// writeRun answers the run with its decisions and live progress.
func (s *Server) writeRun(w http.ResponseWriter, r *http.Request, id int64) {
	ri, err := s.runInfo(r, id)
	if err != nil {
		lr := s.jobs.get(id)
		if lr != nil && errors.Is(err, store.ErrNotFound) && lr.result() != nil {
			// Its lab stopped before its first trial, and the empty run
			// was removed: the error is all there is.
			writeJSON(w, http.StatusOK, runDetail{runInfo: runInfo{ID: id, Status: "failed"}, Decisions: []decision{}, Error: lr.result().Error()})
			return
		}
		writeStoreError(w, err)
		return
	}
	info, sum := s.info(ri)
	d := runDetail{runInfo: info, Spec: ri.Spec, Summary: ri.Summary, Decisions: []decision{}}
	lr := s.jobs.get(id)
	if sum != nil && !info.Active {
		for _, st := range sum.Stages {
			for _, c := range st.Candidates {
				d.Decisions = append(d.Decisions, decision{Stage: st.Name, Name: c.Name, Decision: c.Decision, Reason: c.Reason, Score: c.Score, Gain: c.Gain})
			}
		}
	} else if lr != nil {
		d.Decisions = append(d.Decisions, lr.hub.incumbents()...)
	}
	if lr != nil {
		if info.Active {
			d.Progress = lr.hub.last()
		}
		if err := lr.result(); err != nil {
			d.Error = err.Error()
		}
	}
	writeJSON(w, http.StatusOK, d)
}

// runInfo finds one run with its trial counts.
func (s *Server) runInfo(r *http.Request, id int64) (store.RunInfo, error) {
	infos, err := s.cfg.Store.RunInfos(r.Context())
	if err != nil {
		return store.RunInfo{}, err
	}
	for _, ri := range infos {
		if ri.ID == id {
			return ri, nil
		}
	}
	return store.RunInfo{}, fmt.Errorf("store: run %d: %w", id, store.ErrNotFound)
}

// trialInfo is a trial as the list shows it.
type trialInfo struct {
	Key              string          `json:"key"`
	Stage            string          `json:"stage"`
	Name             string          `json:"name"`
	Workload         string          `json:"workload"`
	Repeat           int             `json:"repeat"`
	Status           string          `json:"status"`
	FailureClass     string          `json:"failure_class,omitempty"`
	Reason           string          `json:"reason,omitempty"`
	Config           json.RawMessage `json:"config,omitempty"`
	TotalThroughput  float64         `json:"total_throughput,omitempty"`
	OutputThroughput float64         `json:"output_throughput,omitempty"`
	MeanTPOTMs       float64         `json:"mean_tpot_ms,omitempty"`
	MeanTTFTMs       float64         `json:"mean_ttft_ms,omitempty"`
	// Score is the trial's score under the run's objective, as the lab
	// scored it (null when it has none: failed, unreadable); Unit is the
	// score's. Clients show these and derive no score of their own.
	Score   *float64   `json:"score"`
	Unit    string     `json:"unit,omitempty"`
	Attempt int        `json:"attempt,omitempty"`
	Cost    store.Cost `json:"cost"`
	Started time.Time  `json:"started"`
	Ended   time.Time  `json:"ended"`
}

// trialDetail is one trial with its command, result, log and metrics.
type trialDetail struct {
	trialInfo
	Command       string             `json:"command"`
	Result        json.RawMessage    `json:"result,omitempty"`
	ResultText    string             `json:"result_text,omitempty"`
	LogTail       string             `json:"log_tail"`
	EngineMetrics map[string]float64 `json:"engine_metrics"`
}

func trialOf(t store.Trial) (trialInfo, *metrics.Result) {
	ti := trialInfo{Key: t.Key, Stage: t.Stage, Name: t.Name, Workload: t.Workload, Repeat: t.Repeat, Status: t.Status,
		FailureClass: t.FailureClass, Reason: t.Reason, Config: t.Config, Attempt: t.Attempt, Cost: t.Cost, Started: t.Started, Ended: t.Ended}
	if len(t.Result) == 0 {
		return ti, nil
	}
	res, err := metrics.ParseJSON(t.Result)
	if err != nil {
		return ti, nil
	}
	ti.TotalThroughput, ti.OutputThroughput, ti.MeanTPOTMs, ti.MeanTTFTMs = res.TotalTokenThroughput, res.OutputThroughput, res.MeanTPOTMs, res.MeanTTFTMs
	return ti, res
}

func (s *Server) listTrials(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	run, err := s.cfg.Store.Run(r.Context(), id)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	obj := objectiveOf(run)
	trials, err := s.cfg.Store.TrialHeads(r.Context(), id)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	out := make([]trialInfo, 0, len(trials))
	for _, t := range trials {
		ti, _ := trialOf(t)
		f, err := s.figuresOf(r, t, obj)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		ti.TotalThroughput, ti.OutputThroughput, ti.MeanTPOTMs, ti.MeanTTFTMs = f.total, f.output, f.tpot, f.ttft
		ti.Score, ti.Unit = f.score, lab.ObjectiveUnit(obj)
		out = append(out, ti)
	}
	writeJSON(w, http.StatusOK, map[string]any{"trials": out})
}

// figures are the few numbers of a trial's result that the list shows,
// with its score (nil when it has none).
type figures struct {
	total, output, tpot, ttft float64
	score                     *float64
}

// objectiveOf is the objective the run's lab scores its trials by: the
// stored spec's, normalized as the lab normalizes it; a run stored without
// its spec falls back to its summary's objective name.
func objectiveOf(run store.Run) labspec.Objective {
	if run.Spec != "" {
		var sh struct {
			Objective labspec.Objective `yaml:"objective"`
		}
		if yaml.Unmarshal([]byte(run.Spec), &sh) == nil {
			return sh.Objective.Normalized()
		}
	}
	var h summaryHead
	_ = json.Unmarshal(run.Summary, &h)
	return labspec.Objective{Metric: h.Objective}.Normalized()
}

// scoreOf is the trial's score under obj, nil when it has none.
func scoreOf(obj labspec.Objective, t store.Trial) *float64 {
	if sc, ok := lab.ScoreTrial(obj, t); ok {
		return &sc
	}
	return nil
}

// figureKey names one stored trial result: a trial saved again (a retry)
// ends later.
type figureKey struct {
	run   int64
	key   string
	ended int64
}

// figuresOf returns the trial's list figures, reading and parsing its
// result once: a stored result does not change, and parsing every
// result's per-request arrays on each poll of the list made it slow.
func (s *Server) figuresOf(r *http.Request, t store.Trial, obj labspec.Objective) (figures, error) {
	k := figureKey{t.RunID, t.Key, t.Ended.UnixMilli()}
	if f, ok := s.figures.get(k); ok {
		return f, nil
	}
	full, err := s.cfg.Store.Trial(r.Context(), t.RunID, t.Key)
	if err != nil {
		return figures{}, err
	}
	var f figures
	if ti, _ := trialOf(full); ti.Status != "" {
		f = figures{ti.TotalThroughput, ti.OutputThroughput, ti.MeanTPOTMs, ti.MeanTTFTMs, scoreOf(obj, full)}
	}
	s.figures.put(k, f)
	return f, nil
}

func (s *Server) getTrial(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	run, err := s.cfg.Store.Run(r.Context(), id)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	t, err := s.cfg.Store.Trial(r.Context(), id, r.PathValue("key"))
	if err != nil {
		writeStoreError(w, err)
		return
	}
	ti, res := trialOf(t)
	obj := objectiveOf(run)
	ti.Score, ti.Unit = scoreOf(obj, t), lab.ObjectiveUnit(obj)
	d := trialDetail{trialInfo: ti, Command: t.Command, Result: t.Result, LogTail: t.LogTail, EngineMetrics: t.EngineMetrics}
	if d.EngineMetrics == nil {
		d.EngineMetrics = map[string]float64{}
	}
	if res != nil {
		var b bytes.Buffer
		if res.WriteText(&b) == nil {
			d.ResultText = b.String()
		}
	}
	writeJSON(w, http.StatusOK, d)
}
