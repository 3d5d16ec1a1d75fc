// Package doctor checks a host (or a cluster) before perflab's first real
// run on it: the NVIDIA driver against each pinned engine image's CUDA, the
// container engine's GPU support, /dev/shm, memlock, the Hugging Face cache
// and token, and for Kubernetes the context, the GPUs per node and the RBAC
// the runtime needs. Each check is one line: ok, warning or error, what was
// found, and what to do. It changes nothing on the host.
package doctor

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/moby/moby/client"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/perflab/perflab/internal/runtimes"
)

// Status is a check's verdict.
type Status string

// Verdicts, from best to worst.
const (
	OK      Status = "ok"
	Warning Status = "warning"
	Error   Status = "error"
)

// Check is one line of the report.
type Check struct {
	// Name says what was checked ("gpu", "driver vllm 0.11.0", "docker").
	Name   string `json:"check"`
	Status Status `json:"status"`
	// Found is what the check saw.
	Found string `json:"found"`
	// Advice says what to do about it ("" when nothing needs doing).
	Advice string `json:"advice,omitempty"`
}

// Report is every check run for one runtime.
type Report struct {
	Runtime string  `json:"runtime"`
	Checks  []Check `json:"checks"`
}

// Count is how many checks ended with status s.
func (r Report) Count(s Status) int {
	n := 0
	for _, c := range r.Checks {
		if c.Status == s {
			n++
		}
	}
	return n
}

// WriteText prints one aligned line per check and a summary line.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range r.Checks {
		line := c.Found
		if c.Advice != "" {
			line += " → " + c.Advice
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Status, c.Name, line)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "runtime %s: %d ok, %d warning(s), %d error(s)\n",
		r.Runtime, r.Count(OK), r.Count(Warning), r.Count(Error))
	return err
}

// WriteJSON writes the report as one indented JSON object.
func (r Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Env is what the checks read from the host; the zero value reads the real
// one. Tests replace each part with a stand-in.
type Env struct {
	// NvidiaSMI is the nvidia-smi executable (default: "nvidia-smi" on
	// PATH).
	NvidiaSMI string
	// Getenv reads an environment variable (default os.Getenv).
	Getenv func(string) string
	// Home is the user's home directory (default os.UserHomeDir).
	Home string
	// Shm is the shared-memory mount (default /dev/shm).
	Shm string
	// CDIDirs are where CDI specs are looked for when the Docker API does
	// not say (default /etc/cdi and /var/run/cdi, the CDI defaults).
	CDIDirs []string
	// DiskSpace returns the total and free bytes of the file system
	// holding a path (default: statfs).
	DiskSpace func(path string) (total, free uint64, err error)
	// Memlock returns the soft RLIMIT_MEMLOCK in bytes and whether it is
	// unlimited (default: this process's).
	Memlock func() (bytes uint64, unlimited bool, err error)
	// Docker is the Docker API client (default: one from DOCKER_HOST and
	// the other DOCKER_* variables, with version negotiation).
	Docker client.APIClient
	// Kube returns the cluster's client, a description of the context and
	// the namespace the runtime would use (default: the kubeconfig's
	// current context, or the in-cluster config, as the runtime loads
	// it). KubeContext picks another context.
	Kube        func() (cli k8s.Interface, context, namespace string, err error)
	KubeContext string
	// Namespace overrides the context's namespace.
	Namespace string
}

func (e *Env) diskSpace(path string) (uint64, uint64, error) {
	if e.DiskSpace != nil {
		return e.DiskSpace(path)
	}
	return diskSpace(path)
}

func (e *Env) getenv(k string) string {
	if e.Getenv != nil {
		return e.Getenv(k)
	}
	return os.Getenv(k)
}

// check is one check: it appends its lines to the report.
type check func(ctx context.Context, e *Env) []Check

// suites are the checks of each runtime, the one place where doctor knows
// a runtime by name: what each runtime needs from the host.
var suites = map[string][]check{
	runtimes.SimPredict: {simulator},
	runtimes.Sim:        {simulator},
	runtimes.Process:    {gpus, shm, memlock(false), hfCache(false), hfToken},
	runtimes.Docker:     {gpus, dockerAPI, shm, memlock(true), hfCache(true), hfToken},
	runtimes.Kubernetes: {kubeChecks},
}

// Runtimes are the runtimes doctor can check, sorted.
func Runtimes() []string {
	var names []string
	for n := range suites {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Run runs every check of the runtime and returns its report; an error
// only for a runtime it does not know (a failed check is a line of the
// report, not an error).
func Run(ctx context.Context, runtime string, e Env) (Report, error) {
	suite, ok := suites[runtime]
	if !ok {
		return Report{}, fmt.Errorf("doctor: runtime %q: want one of %s", runtime, strings.Join(Runtimes(), ", "))
	}
	r := Report{Runtime: runtime}
	for _, c := range suite {
		r.Checks = append(r.Checks, c(ctx, &e)...)
	}
	return r, nil
}

// simulator is the sim runtimes' one check: they need nothing from the
// host, which is worth saying to a user who ran doctor first.
func simulator(context.Context, *Env) []Check {
	return []Check{{Name: "simulator", Status: OK,
		Found: "the simulator needs no GPU, driver, container engine or model weights"}}
}
