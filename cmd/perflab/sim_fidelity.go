package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/sim"
)

func newSimFidelityCmd() *cobra.Command {
	var coefPath, sharegpt string
	var lomo bool
	cmd := &cobra.Command{
		Use:   "fidelity",
		Short: "Compare the simulator with every result block of the reference reports",
		Long: "Predicts each measured block of the three reference reports and lists measured, predicted\n" +
			"and the error of Total TPS, mean TTFT and mean TPOT, then the published orderings.\n" +
			"--lomo also refits without each model and reports its error (about 1.5 min on one core).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			coef := sim.DefaultCoefficients()
			if coefPath != "" {
				c, err := sim.LoadCoefficients(coefPath)
				if err != nil {
					return err
				}
				coef = c
			}
			sim.ShareGPTLengthsPath = sharegpt
			ref, err := sim.ReferenceCases()
			if err != nil {
				return err
			}
			f := sim.Evaluate(ref, coef)
			if lomo {
				f.LOMO = sim.LeaveOneModelOut(ref, coef, sim.FitOptions{Orderings: ref.Orderings})
			}
			return f.WriteText(cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&coefPath, "coefficients", "", "coefficients JSON (default: the embedded calibration)")
	fl.StringVar(&sharegpt, "sharegpt-path", defaultShareGPT(), "ShareGPT JSON giving the length shape of ShareGPT workloads")
	fl.BoolVar(&lomo, "lomo", false, "also report leave-one-model-out errors (refits; slow)")
	return cmd
}

func defaultShareGPT() string {
	for _, p := range []string{"../shared/data/sharegpt/sharegpt_v3_sample_1000.json", "shared/data/sharegpt/sharegpt_v3_sample_1000.json"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return ""
}
