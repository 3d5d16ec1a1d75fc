package main

import (
	"io"

	"github.com/spf13/pflag"

	"github.com/perflab/perflab/internal/app"
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

// files is the switches as the library takes them.
func (r *resultFlags) files() app.ResultFiles {
	return app.ResultFiles{Save: r.save, Dir: r.dir, Filename: r.filename, Label: r.label}
}

// name is vLLM's compute_result_filename (app.ResultFiles.Name).
func (r *resultFlags) name(model string, ld loadShape, dt string) string {
	f := r.files()
	return f.Name(model, app.LoadShape{Backend: ld.backend, Rate: ld.rate, MaxConcurrency: ld.maxConcurrency,
		RampUp: ld.rampUp, RampStart: ld.rampStart, RampEnd: ld.rampEnd}, dt)
}

// write saves res as JSON under name, atomically, and says where.
func (r *resultFlags) write(stderr io.Writer, cmdName, name string, res any) error {
	f := r.files()
	return f.Write(stderr, cmdName, name, res)
}
