package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/perflab/perflab/internal/report"
	"github.com/perflab/perflab/internal/store"
)

// reportCache keeps each run's report files, written by report.WriteAll
// as `perflab report` writes them, under a directory of its own; a run's
// files are written again when its trials or summary change. It holds the
// reports of at most max runs, dropping the one asked for least recently:
// a server that lives for months would otherwise keep a report on disk
// for every run it ever showed, pruned runs among them.
type reportCache struct {
	dir string
	max int

	mu      sync.Mutex
	entries map[int64]*reportEntry
	clock   uint64 // counts lookups, for least-recently-used order
}

// reportEntry is a run's cached report: the stamp its files were written
// at and the lookup that last asked for it.
type reportEntry struct {
	stamp string
	used  uint64
}

// maxCachedReports is how many runs' reports a server keeps on disk (a
// report is its charts as SVG and PNG and the page with them inlined);
// one dropped is written again when next asked for.
const maxCachedReports = 64

// reportDirPrefix names the cache directories; the server's pid follows,
// so a server can tell the directories of servers that died (kill -9,
// OOM) from those of servers still running, and remove them.
const reportDirPrefix = "perflab-serve-reports-"

func newReportCache() (*reportCache, error) {
	removeStaleReportDirs(os.TempDir())
	dir, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", reportDirPrefix, os.Getpid()))
	if err != nil {
		return nil, fmt.Errorf("server: report cache: %w", err)
	}
	return &reportCache{dir: dir, max: maxCachedReports, entries: map[int64]*reportEntry{}}, nil
}

// removeStaleReportDirs removes the report caches under tmp left by
// servers of this host that no longer run (a killed server cannot remove
// its own).
func removeStaleReportDirs(tmp string) {
	ents, _ := os.ReadDir(tmp)
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), reportDirPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil {
			// Before the pid was in the name: its server is gone unless
			// it started before this one was built; an hour is enough.
			if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > time.Hour {
				os.RemoveAll(filepath.Join(tmp, e.Name()))
			}
			continue
		}
		if pid > 0 && errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			os.RemoveAll(filepath.Join(tmp, e.Name()))
		}
	}
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
	c.clock++
	e := c.entries[id]
	if e != nil && e.stamp == stamp {
		e.used = c.clock
		return dir, nil
	}
	rep, err := report.Build(run, trials)
	if err != nil {
		return "", &errNoReport{err.Error()}
	}
	if _, err := report.WriteAll(rep, dir); err != nil {
		return "", err
	}
	if e != nil {
		os.RemoveAll(filepath.Join(c.dir, fmt.Sprint(id), e.stamp))
	}
	c.entries[id] = &reportEntry{stamp: stamp, used: c.clock}
	c.evict(id)
	return dir, nil
}

// evict drops the least recently asked-for reports, never keep's, until
// at most max are left. Called with mu held.
func (c *reportCache) evict(keep int64) {
	for len(c.entries) > max(c.max, 1) {
		var oldest int64
		var at uint64
		found := false
		for id, e := range c.entries {
			if id != keep && (!found || e.used < at) {
				oldest, at, found = id, e.used, true
			}
		}
		if !found {
			return
		}
		os.RemoveAll(filepath.Join(c.dir, fmt.Sprint(oldest)))
		delete(c.entries, oldest)
	}
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
		// The cache's own path is the server's business, not the caller's.
		writeError(w, http.StatusInternalServerError, apiError{Error: fmt.Sprintf("run %d: read its %s from the report cache failed", id, name)})
		return
	}
	w.Header().Set("Content-Type", contentTypes[filepath.Ext(name)])
	w.Write(b)
}

// report serves report.FORMAT.
func (s *Server) report(format string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { s.serveReportFile(w, r, "report."+format) }
}

// chartName is what report.WriteAll names its charts: anything else (a
// NUL, a dot, a slash) names no chart, and is refused before it reaches
// the file system.
var chartName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,100}$`)

// chart serves charts/NAME.svg or .png.
func (s *Server) chart(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("chart")
	ext := filepath.Ext(name)
	base := strings.TrimSuffix(name, ext)
	if (ext != ".svg" && ext != ".png") || !chartName.MatchString(base) {
		writeError(w, http.StatusNotFound, apiError{Error: fmt.Sprintf("chart %q: want NAME.svg or NAME.png, NAME of letters, digits, - and _", name)})
		return
	}
	s.serveReportFile(w, r, name)
}
