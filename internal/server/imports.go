package server

import (
	"net/http"
	"path/filepath"
	"strings"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/report"
)

// imported is the answer to an import.
type imported struct {
	ID       int64    `json:"id"`
	Name     string   `json:"name"`
	Trials   int      `json:"trials"`
	Warnings []string `json:"warnings"`
}

// postImport stores another tool's results as a run, as `perflab report
// import` does.
func (s *Server) postImport(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	file := filepath.Base(q.Get("filename"))
	if file == "." || file == "/" {
		file = "upload"
	}
	items, err := report.ImportBytes(body, file)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	name := q.Get("run")
	if name == "" {
		name = "import-" + strings.TrimSuffix(file, filepath.Ext(file))
	}
	run, err := app.Import(r.Context(), s.cfg.Store, name, items)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	out := imported{ID: run.ID, Name: run.Name, Trials: len(items), Warnings: []string{}}
	for _, it := range items {
		for _, wn := range it.Warnings {
			out.Warnings = append(out.Warnings, it.Source+": "+wn)
		}
	}
	writeJSON(w, http.StatusCreated, out)
}
