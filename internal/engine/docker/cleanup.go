package docker

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine"
)

// Cleanup removes every container perflab made that carries all of labels
// (every perflab container when labels is empty), running or not: the
// leftovers of a perflab killed with -9, for `perflab engine cleanup` and a
// lab starting again on its run. It returns the names it removed; on an
// error it still tries the others.
func (r *Runtime) Cleanup(ctx context.Context, labels map[string]string) ([]string, error) {
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	f := make(client.Filters).Add("label", LabelManaged+"=true")
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		f.Add("label", k+"="+labels[k])
	}
	list, err := ListContainers(ctx, cli, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []string
	for _, c := range list.Items {
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		// The daemon's filter is trusted for the managed label; the run's
		// own labels are checked again, as a filter an old daemon ignored
		// must not remove another run's containers.
		if !hasLabels(c.Labels, labels) {
			continue
		}
		_, err := cli.ContainerRemove(ctx, c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			errs = append(errs, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		removed = append(removed, name)
		removeWorkDir(c.Labels[LabelWorkDir])
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("docker: remove containers: %s", strings.Join(errs, "; "))
	}
	return removed, nil
}

// Sweep implements engine.Sweeper: it removes the containers of the run
// named by the runtime's LabelRun label, which a perflab killed with -9
// left behind. A runtime without a run label sweeps nothing, rather than
// every perflab container on the host (other labs' among them).
func (r *Runtime) Sweep(ctx context.Context) ([]string, error) {
	run := r.Labels[LabelRun]
	if run == "" {
		return nil, nil
	}
	return r.Cleanup(ctx, map[string]string{LabelRun: run})
}

var _ engine.Sweeper = (*Runtime)(nil)

// ListContainers is ContainerList, tried again a few times on an error:
// podman fails the whole list ("container not known") when a container
// goes while it is listed, instead of leaving that one out.
func ListContainers(ctx context.Context, cli client.APIClient, o client.ContainerListOptions) (client.ContainerListResult, error) {
	var err error
	for try := 0; try < 5; try++ {
		var res client.ContainerListResult
		if res, err = cli.ContainerList(ctx, o); err == nil {
			return res, nil
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("docker: list containers: %w", ctx.Err())
		case <-time.After(time.Duration(try+1) * 50 * time.Millisecond):
		}
	}
	return client.ContainerListResult{}, fmt.Errorf("docker: list containers: %w", err)
}

func hasLabels(have, want map[string]string) bool {
	if have[LabelManaged] != "true" {
		return false
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// removeWorkDir removes a container's host work directory, but only one
// perflab makes (perflab-docker-* directly under the temporary directory):
// a label is not to be trusted with a path to delete.
func removeWorkDir(dir string) {
	if dir == "" || filepath.Dir(dir) != filepath.Clean(os.TempDir()) || !strings.HasPrefix(filepath.Base(dir), "perflab-docker-") {
		return
	}
	os.RemoveAll(dir)
}
