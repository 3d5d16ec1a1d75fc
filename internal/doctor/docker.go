package doctor

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/moby/moby/client"
)

// defaultCDIDirs are CDI's own defaults, where `nvidia-ctk cdi generate`
// writes (podman and Docker 25+ read them).
var defaultCDIDirs = []string{"/etc/cdi", "/var/run/cdi"}

// cdiKind is the device kind the NVIDIA Container Toolkit's CDI spec
// declares (`--device nvidia.com/gpu=all`).
const cdiKind = "nvidia.com/gpu"

// dockerAPI checks that the Docker API answers and can give a container
// GPUs: the nvidia runtime in its runtimes, or a CDI spec for
// nvidia.com/gpu.
func dockerAPI(ctx context.Context, e *Env) []Check {
	cli := e.Docker
	if cli == nil {
		c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return []Check{{Name: "docker", Status: Error, Found: fmt.Sprintf("Docker API client: %v", err),
				Advice: "fix DOCKER_HOST (unix:///var/run/docker.sock, or podman's socket)"}}
		}
		defer c.Close()
		cli = c
	}
	host := cli.DaemonHost()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		return []Check{{Name: "docker", Status: Error, Found: fmt.Sprintf("Docker API at %s: %v", host, err),
			Advice: "start Docker (`systemctl start docker`) or podman's API (`podman system service --time=0 unix:///PATH/podman.sock`) and point DOCKER_HOST at it"}}
	}
	info := res.Info
	who := strings.TrimSpace(info.OperatingSystem)
	if who == "" {
		who = "unknown OS"
	}
	out := []Check{{Name: "docker", Status: OK,
		Found: fmt.Sprintf("Docker API at %s: server %s on %s (%s)", host, info.ServerVersion, info.Name, who)}}

	var runtimesSeen []string
	for n := range info.Runtimes {
		runtimesSeen = append(runtimesSeen, n)
	}
	slices.Sort(runtimesSeen)
	dirs := info.CDISpecDirs
	if len(dirs) == 0 {
		dirs = e.CDIDirs
	}
	if len(dirs) == 0 {
		dirs = defaultCDIDirs
	}
	specs := cdiSpecs(dirs)
	gpu := Check{Name: "docker gpu"}
	switch {
	case slices.Contains(runtimesSeen, "nvidia"):
		gpu.Status, gpu.Found = OK, "the daemon has the nvidia runtime (NVIDIA Container Toolkit): perflab's nvidia device requests get the trial's GPUs"
	case len(specs) > 0:
		gpu.Status, gpu.Found = OK, fmt.Sprintf("CDI spec for %s: %s", cdiKind, strings.Join(specs, ", "))
	default:
		gpu.Status = Error
		gpu.Found = fmt.Sprintf("no nvidia runtime (runtimes: %s) and no CDI spec for %s in %s",
			strings.Join(runtimesSeen, ", "), cdiKind, strings.Join(dirs, ", "))
		gpu.Advice = "install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker` (Docker) or `sudo nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml` (podman)"
	}
	out = append(out, gpu)

	// perflab sets memlock=-1 and stack=64 MiB on every engine container;
	// a rootless daemon cannot raise them and fails every start.
	lim := Check{Name: "docker ulimits", Status: OK,
		Found: "perflab runs each engine container with --ipc=host, memlock unlimited and stack 64 MiB"}
	if slices.ContainsFunc(info.SecurityOptions, func(s string) bool { return strings.Contains(s, "rootless") }) {
		lim.Status = Warning
		lim.Found = "the daemon runs rootless: it may not raise the memlock and stack limits perflab sets on each engine container"
		lim.Advice = "run a rootful daemon for GPU labs; a start failing with `error setting rlimit` is this"
	}
	return append(out, lim)
}

// cdiSpecs lists the CDI spec files in dirs that declare nvidia.com/gpu
// devices. A spec is YAML or JSON; its kind is the one line that matters,
// so a text match suffices and no CDI library is pulled in.
func cdiSpecs(dirs []string) []string {
	var found []string
	for _, d := range dirs {
		ents, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		for _, ent := range ents {
			switch filepath.Ext(ent.Name()) {
			case ".yaml", ".yml", ".json":
			default:
				continue
			}
			p := filepath.Join(d, ent.Name())
			b, err := os.ReadFile(p)
			if err == nil && bytes.Contains(b, []byte(cdiKind)) {
				found = append(found, p)
			}
		}
	}
	return found
}
