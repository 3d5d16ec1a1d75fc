package report

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"

	"github.com/perflab/perflab/internal/atomicfile"
)

// WriteJSON writes the report model as indented JSON.
func WriteJSON(w io.Writer, r *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("report: json: %w", err)
	}
	return nil
}

// WriteCSV writes one row per configuration tried (tuning workload) and per
// benchmark case, for spreadsheets.
func WriteCSV(w io.Writer, r *Report) error {
	cw := csv.NewWriter(w)
	header := []string{"kind", "stage", "name", "workload", "status", "failure", "kept", "decision",
		"total_tps", "tps_per_gpu", "output_tps", "mean_ttft_ms", "mean_tpot_ms", "p99_tpot_ms", "completed", "failed", "command"}
	if err := cw.Write(header); err != nil {
		return fmt.Errorf("report: csv: %w", err)
	}
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', 2, 64) }
	row := func(kind string, c *Candidate) []string {
		m := c.Metrics
		return []string{kind, c.Stage, c.Name, c.Workload, c.Status, c.Failure, strconv.FormatBool(c.Kept), c.Decision,
			f(m.TotalTPS), f(m.TPSPerGPU), f(m.OutputTPS), f(m.MeanTTFTMs), f(m.MeanTPOTMs), f(m.P99TPOTMs),
			strconv.Itoa(m.Completed), strconv.Itoa(m.Failed), c.Command}
	}
	for i := range r.Tried {
		if err := cw.Write(row("trial", &r.Tried[i])); err != nil {
			return fmt.Errorf("report: csv: %w", err)
		}
	}
	for _, c := range r.Cases {
		for _, side := range []struct {
			kind string
			c    *Candidate
		}{{"case-baseline", c.Baseline}, {"case-optimized", c.Optimized}} {
			if side.c != nil {
				if err := cw.Write(row(side.kind, side.c)); err != nil {
					return fmt.Errorf("report: csv: %w", err)
				}
			}
		}
	}
	cw.Flush()
	return cw.Error()
}

// Formats names the files WriteAll can produce.
var Formats = []string{"md", "html", "json", "csv"}

// WriteAll writes the charts and the report in each format into dir
// (report.md, report.html, report.json, report.csv) and returns the paths.
func WriteAll(r *Report, dir string, formats ...string) ([]string, error) {
	if len(formats) == 0 {
		formats = Formats
	}
	if err := Finite(r); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: create %s: %w", dir, err)
	}
	if err := WriteCharts(r, dir); err != nil {
		return nil, err
	}
	var paths []string
	for _, format := range formats {
		var write func(io.Writer, *Report) error
		switch format {
		case "md":
			write = WriteMarkdown
		case "html":
			write = func(w io.Writer, r *Report) error { return WriteHTML(w, r, dir) }
		case "json":
			write = WriteJSON
		case "csv":
			write = WriteCSV
		default:
			return paths, fmt.Errorf("report: unknown format %q (want md, html, json or csv)", format)
		}
		path := filepath.Join(dir, "report."+format)
		// A write that fails leaves the previous file whole.
		if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return write(w, r) }); err != nil {
			return paths, fmt.Errorf("report: %w", err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// Finite returns an error naming the first field of r that holds NaN or
// an infinity. WriteAll checks it before writing anything: such a value
// would print as "NaN" in one format and fail to encode in another, and
// is a bug in how the report was built, to be named rather than written.
func Finite(r *Report) error {
	if p := nonFinite("report", reflect.ValueOf(r)); p != "" {
		return fmt.Errorf("report: %s is not a finite number", p)
	}
	return nil
}

func nonFinite(path string, v reflect.Value) string {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			return nonFinite(path, v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() {
				if p := nonFinite(path+"."+f.Name, v.Field(i)); p != "" {
					return p
				}
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			if p := nonFinite(fmt.Sprintf("%s[%d]", path, i), v.Index(i)); p != "" {
				return p
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if p := nonFinite(fmt.Sprintf("%s[%v]", path, k), v.MapIndex(k)); p != "" {
				return p
			}
		}
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return path
		}
	}
	return ""
}
