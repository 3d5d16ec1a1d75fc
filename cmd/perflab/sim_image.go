package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/simimage"
)

// newSimImageCmd is `perflab sim image`.
func newSimImageCmd() *cobra.Command {
	var tag, binary string
	cmd := &cobra.Command{
		Use:   "image --tag TAG",
		Short: "Build the simulated engine image: the engines' commands, served by the simulator, with no registry",
		Long: `Build a container image (through DOCKER_HOST's Docker API; podman's works)
whose vllm, python3 -m sglang.launch_server, sglang and trtllm-serve are
this perflab binary's simulator taking the engines' own command lines:
  perflab sim image --tag perflab-sim:dev
then give it as the image of every engine (images: in a lab spec) and the
lab runs on it exactly as on the official images. Settings come from the
container's environment: PERFLAB_SIM_GPU (default H100), PERFLAB_SIM_GPUS,
PERFLAB_SIM_TIME_SCALE, PERFLAB_SIM_STARTUP_DELAY, PERFLAB_SIM_TOKENIZER,
PERFLAB_SIM_MODEL_CONFIG, PERFLAB_SIM_COEFFICIENTS, PERFLAB_SIM_NO_FAULTS;
the engine version from PERFLAB_ENGINE_VERSION, which the docker runtime sets.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			id, err := simimage.Build(cmd.Context(), simimage.BuildOptions{
				Tag: tag, Binary: binary, Progress: cmd.ErrOrStderr(),
			})
			if err != nil {
				return fmt.Errorf("sim image: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", tag, id)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tag, "tag", "perflab-sim:latest", "name of the image to build")
	f.StringVar(&binary, "binary", "", "perflab binary to put in the image (default: this one; a dynamic one goes in with its C libraries)")
	return cmd
}
