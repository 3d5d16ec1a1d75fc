package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/doctor"
	"github.com/perflab/perflab/internal/runtimes"
)

// newDoctorCmd checks the host a runtime would run on; its exit status is
// non-zero when a check is an error, so a provisioning script can gate on
// it.
func newDoctorCmd() *cobra.Command {
	var runtime, output string
	var env doctor.Env
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check this host (or cluster) for a runtime: driver vs the pinned images, GPU containers, /dev/shm, memlock, HF cache and token, Kubernetes GPUs and RBAC",
		Long: `Check what a runtime needs before the first real run, one line per check:
ok, warning or error, what was found, and what to do.

  process     nvidia-smi (GPUs, driver, CUDA) and the driver against each pinned
              engine image's CUDA; /dev/shm; the memlock ulimit; the Hugging Face
              cache (writable, free disk) and HF_TOKEN
  docker      the same, and the Docker API (DOCKER_HOST, podman's too): reachable,
              with the nvidia runtime or a CDI spec for nvidia.com/gpu
  kubernetes  the kubeconfig context, each node's allocatable nvidia.com/gpu, and a
              SelfSubjectAccessReview for every call the runtime makes
  sim, sim-predict
              nothing to check: the simulator needs no GPU

The exit status is 1 when any check is an error. Nothing on the host changes.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("doctor: --output %q: want text or json", output)
			}
			rep, err := doctor.Run(cmd.Context(), runtime, env)
			if err != nil {
				return err
			}
			if output == "json" {
				err = rep.WriteJSON(cmd.OutOrStdout())
			} else {
				err = rep.WriteText(cmd.OutOrStdout())
			}
			if err != nil {
				return fmt.Errorf("doctor: %w", err)
			}
			if n := rep.Count(doctor.Error); n > 0 {
				return fmt.Errorf("doctor: %d check(s) failed for runtime %s", n, runtime)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&runtime, "runtime", runtimes.Docker, "the runtime to check the host for: "+strings.Join(doctor.Runtimes(), ", "))
	f.StringVarP(&output, "output", "o", "text", "text or json")
	f.StringVar(&env.KubeContext, "kube-context", "", "kubernetes: the kubeconfig context (default: the current one, or the in-cluster config)")
	f.StringVar(&env.Namespace, "namespace", "", "kubernetes: the namespace the engine pods would run in (default: the context's)")
	return cmd
}
