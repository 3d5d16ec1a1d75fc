package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/atomicfile"
	"github.com/perflab/perflab/internal/metrics"
	"github.com/perflab/perflab/internal/sim"
	"github.com/perflab/perflab/internal/sim/simargs"
)

func newSimCalibrateCmd() *cobra.Command {
	var engine, version, gpu, dsKind, out string
	var gpus int
	cmd := &cobra.Command{
		Use:   "calibrate RESULTS... [-- ENGINE ARGV]",
		Short: "Refit the simulator's coefficients from measured result JSON files",
		Long: "Each RESULT is a vLLM --save-result JSON or a perflab result JSON measured with the\n" +
			"deployment given by --engine/--engine-version/--gpu and the engine argv after --.\n" +
			"Writes coefficients JSON (per GPU, engine and version) that --coefficients accepts.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			files, argv := args, []string(nil)
			if d := cmd.ArgsLenAtDash(); d >= 0 {
				files, argv = args[:d], args[d:]
			}
			if len(files) == 0 {
				return fmt.Errorf("sim calibrate: no result files")
			}
			p, err := simargs.Parse(engine, version, argv, nil)
			if err != nil {
				return err
			}
			p.GPU, p.GPUs = gpu, gpus
			var cases []sim.Case
			var results []*metrics.Result
			for _, f := range files {
				b, err := os.ReadFile(f)
				if err != nil {
					return fmt.Errorf("sim calibrate: %w", err)
				}
				r, err := metrics.ParseJSON(b)
				if err != nil {
					return fmt.Errorf("sim calibrate: %s: %w", f, err)
				}
				mc := r.MaxConcurrency
				cases = append(cases, sim.Case{ID: f, Params: p, Workload: sim.Workload{Kind: dsKind, MaxConcurrency: mc}})
				results = append(results, r)
			}
			coef, err := sim.Calibrate(cases, results)
			if err != nil {
				return err
			}
			if d, err := p.WithDefaults(); err == nil {
				if h := coef.Held[sim.Key(d.GPU, d.Engine, d.Version)]; len(h) > 0 {
					fmt.Fprintf(cmd.ErrOrStderr(), "sim calibrate: these results do not pin %s; kept at the embedded calibration's values\n", strings.Join(h, ", "))
				}
			}
			if out == "" || out == "-" {
				_, err = cmd.OutOrStdout().Write(coef.JSON())
				return err
			}
			return atomicfile.WriteFile(out, coef.JSON(), 0o644)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&engine, "engine", "vllm", "engine the results were measured on: vllm, sglang or trtllm")
	fl.StringVar(&version, "engine-version", "", "engine version (default: newest known)")
	fl.StringVar(&gpu, "gpu", "H100", "GPU catalog name")
	fl.IntVar(&gpus, "gpus", 0, "GPU count (default TP*DP)")
	fl.StringVar(&dsKind, "dataset-name", "random", "dataset of the runs: random (lengths from the totals) or sharegpt")
	fl.StringVarP(&out, "output", "o", "-", "write the coefficients JSON here")
	return cmd
}
