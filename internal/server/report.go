package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// reportCache keeps each run's report files, written by report.WriteAll
// as `perflab report` writes them, under a directory of its own; a run's
// files are written again when its trials or summary change.
type reportCache struct {
	dir string

	mu    sync.Mutex
	stamp map[int64]string // run id → the stamp its files were written at
}

func newReportCache() (*reportCache, error) {
	dir, err := os.MkdirTemp("", "perflab-serve-reports-")
	if err != nil {
		return nil, fmt.Errorf("server: report cache: %w", err)
	}
	return &reportCache{dir: dir, stamp: map[int64]string{}}, nil
}

func (c *reportCache) close() { os.RemoveAll(c.dir) }

// errNoReport says the run has nothing to report yet.
type errNoReport struct{ msg string }

func (e *errNoReport) Error() string { return e.msg }

// files returns the directory holding the run's report, written now if
// the run changed since.
func (c *reportCache) files(r *http.Request, st *store.Store, id int64) (string, error) {
	run, err := st.Run(r.Context(), id)
	if err != nil {
		return "", err
	}
	trials, err := st.Trials(r.Context(), id)
	if err != nil {
		return "", err
	}
	if len(trials) == 0 {
		return "", &errNoReport{fmt.Sprintf("run %d (%s) has no trials yet: nothing to report", id, run.Name)}
	}
	last := trials[0].Ended
	for _, t := range trials {
		if t.Ended.After(last) {
			last = t.Ended
		}
	}
	stamp := fmt.Sprintf("%d-%d-%d", run.Updated.UnixMilli(), len(trials), last.UnixMilli())
	dir := filepath.Join(c.dir, fmt.Sprint(id), stamp)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stamp[id] == stamp {
		return dir, nil
	}
	rep, err := report.Build(run, trials)
	if err != nil {
		return "", &errNoReport{err.Error()}
	}
	if _, err := report.WriteAll(rep, dir); err != nil {
		return "", err
	}
	if old := c.stamp[id]; old != "" {
		os.RemoveAll(filepath.Join(c.dir, fmt.Sprint(id), old))
	}
	c.stamp[id] = stamp
	return dir, nil
}

var contentTypes = map[string]string{
	".md":   "text/markdown; charset=utf-8",
	".html": "text/html; charset=utf-8",
	".json": "application/json",
	".csv":  "text/csv; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
}

func (s *Server) serveReportFile(w http.ResponseWriter, r *http.Request, name string) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	dir, err := s.reports.files(r, s.cfg.Store, id)
	if err != nil {
		var nr *errNoReport
		if errors.As(err, &nr) {
			writeError(w, http.StatusConflict, apiError{Error: nr.msg})
			return
		}
		writeStoreError(w, err)
		return
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if os.IsNotExist(err) {
		writeError(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("run %d has no chart %s", id, name)})
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, apiError{Error: err.Error()})
		return
	}
	w.Header().Set("Content-Type", contentTypes[filepath.Ext(name)])
	w.Write(b)
}

// report serves report.FORMAT.
func (s *Server) report(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveReportFile(w, r, "report."+format) }
}

// chart serves charts/NAME.svg or .png.
func (s *Server) chart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("chart")
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	if (ext != ".svg" && ext != ".png") || base == "" || strings.ContainsAny(base, `/\.`) {
		writeError(w, http.StatusNotFound, apiError{Error: "chart " + name + ": want NAME.svg or NAME.png"})
		return
	}
	s.serveReportFile(w, r, name)
}
