package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/perflab/perflab/internal/atomicfile"
)

// resultFlags are vllm bench serve's result-file switches, spelled as vLLM
// spells them and shared by every command that writes a result: bench and
// sim predict.
type resultFlags struct {
	save     bool
	dir      string
	filename string
	label    string
}

func (r *resultFlags) register(fl *pflag.FlagSet) {
	fl.BoolVar(&r.save, "save-result", false, "save the result to a JSON file")
	fl.StringVar(&r.dir, "result-dir", "", "directory for the result file")
	fl.StringVar(&r.filename, "result-filename", "", "result file name")
	fl.StringVar(&r.label, "label", "", "result label (default: --backend)")
}

// loadShape is what vLLM's result file name says of the load.
type loadShape struct {
	backend            string
	rate               float64
	maxConcurrency     int
	rampUp             string
	rampStart, rampEnd int
}

// name is vLLM's compute_result_filename: --result-filename when given,
// else label-rate[-concurrency]-model-date.json, under --result-dir.
func (r *resultFlags) name(model string, ld loadShape, dt string) string {
	base := model[strings.LastIndex(model, "/")+1:]
	conc := ""
	if ld.maxConcurrency > 0 {
		conc = fmt.Sprintf("-concurrency%d", ld.maxConcurrency)
	}
	label := r.label
	if label == "" {
		label = ld.backend
	}
	var name string
	if ld.rampUp != "" {
		name = fmt.Sprintf("%s-ramp-up-%s-%dqps-%dqps%s-%s-%s.json", label, ld.rampUp, ld.rampStart, ld.rampEnd, conc, base, dt)
	} else {
		name = fmt.Sprintf("%s-%sqps%s-%s-%s.json", label, pyFloat(ld.rate), conc, base, dt)
	}
	if r.filename != "" {
		name = r.filename
	}
	if r.dir != "" {
		name = filepath.Join(r.dir, name)
	}
	return name
}

// write saves res as JSON under name, atomically, and says where.
func (r *resultFlags) write(stderr io.Writer, cmdName, name string, res any) error {
	if dir := filepath.Dir(name); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("%s: result dir: %w", cmdName, err)
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return fmt.Errorf("%s: encode result: %w", cmdName, err)
	}
	if err := atomicfile.WriteFile(name, b, 0o644); err != nil {
		return fmt.Errorf("%s: save result: %w", cmdName, err)
	}
	fmt.Fprintf(stderr, "Saved result to %s\n", name)
	return nil
}
