// Package docker is the engine runtime on the Docker Engine API: each
// server is a container of the engine's official image (or any image with
// the engines' entry points, such as the simulated engine image), started
// from the same rendered Command as a local process would be. It talks to
// DOCKER_HOST (default: the local unix socket) through the moby client, and
// works with podman's Docker-compatible API as well.
package docker

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/perflab/perflab/internal/engine"
)

// Labels perflab puts on every container it creates, so that one filter
// finds them all (Cleanup) or those of one run.
const (
	LabelManaged = engine.LabelManaged // always "true"
	LabelRun     = engine.LabelRun
	LabelTrial   = engine.LabelTrial
	LabelConfig  = engine.LabelConfig // a hash of the rendered command
	LabelEngine  = engine.LabelEngine
	LabelVersion = engine.LabelVersion
	LabelModel   = engine.LabelModel
	// LabelWorkDir is the host directory of a container's log and side
	// files, which perflab made and removes with the container.
	LabelWorkDir = "perflab.workdir"
	// LabelSimImage marks the simulated engine image (perflab sim image).
	LabelSimImage = "perflab.sim-image"
)

// Simulated says whether the image cfg runs in is the simulated engine
// image, by its label: its figures are the simulator's, not a GPU's. An
// image not on the host is not (yet) known to be.
func (r *Runtime) Simulated(ctx context.Context, cfg engine.Config) (bool, error) {
	img, err := r.Image(cfg)
	if err != nil {
		return false, err
	}
	cli, err := r.client()
	if err != nil {
		return false, err
	}
	res, err := cli.ImageInspect(ctx, img)
	if cerrdefs.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("docker: inspect image %s: %w", img, err)
	}
	if res.Config == nil {
		return false, nil
	}
	return res.Config.Labels[LabelSimImage] == "true", nil
}

// Paths inside the container.
const (
	// containerPort is where the engine listens inside a bridge-networked
	// container; it is published on 127.0.0.1 at a free host port.
	containerPort = 8000
	// filesDir holds Command.Files, bind-mounted from a host directory; it
	// is the container's working directory, so the argv's relative names
	// (TensorRT-LLM's extra_llm_api_options.yaml) resolve.
	filesDir = "/perflab/work"
	// hfHomeInContainer is where the host's Hugging Face cache is mounted
	// (HF_HOME points there, whatever user the image runs as).
	hfHomeInContainer = "/root/.cache/huggingface"
)

// Runtime starts each server as a container. The zero value uses DOCKER_HOST
// (or the default socket), the official images, every GPU it is given as a
// device request, --ipc=host and the host's Hugging Face cache.
type Runtime struct {
	// Client is the Docker API client; nil means one from the environment
	// (DOCKER_HOST, DOCKER_API_VERSION, ...) with version negotiation.
	Client client.APIClient
	// Images overrides the image per engine ("vllm", "sglang", "trtllm"),
	// e.g. the simulated engine image for all three.
	Images map[string]string
	// Labels go on every container besides perflab's own, e.g.
	// {LabelRun: runID}; Cleanup finds the containers by them.
	Labels map[string]string
	// Env is added to every container's environment (after the config's).
	Env map[string]string
	// Volumes are extra bind mounts, "HOST:CONTAINER[:ro]".
	Volumes []string
	// HFHome is the host's Hugging Face cache, mounted into the container;
	// empty means $HF_HOME, else ~/.cache/huggingface. "none" mounts none.
	HFHome string
	// NoGPU makes no GPU device requests (a host without the NVIDIA
	// Container Toolkit, or an image that needs none, such as the
	// simulated engine).
	NoGPU bool
	// ShmSize is the container's /dev/shm in bytes; 0 means --ipc=host,
	// which the engines' own docs use.
	ShmSize int64
	// NoUlimits sets no ulimits, leaving the daemon's defaults: for a host
	// that may not raise them (a daemon without CAP_SYS_RESOURCE, as in
	// an unprivileged container), where any --ulimit fails the start.
	NoUlimits bool
	// Memory caps the container's memory in bytes (0 = no limit); the
	// container is killed when it exceeds it, a failure classed oom.
	Memory int64
	// HostNetwork runs the container on the host's network, the engine
	// listening on 127.0.0.1 at a free port, instead of publishing it.
	HostNetwork bool
	// Pull says when a missing image is pulled: "missing" (default) or
	// "never" (a missing image fails at once as image_unavailable).
	Pull string
	// LogLines is the size of the in-memory ring of recent log lines
	// (0 = 2000). PollInterval is how often Ready probes (0 = 250 ms).
	LogLines     int
	PollInterval time.Duration

	once    sync.Once
	cli     client.APIClient
	initErr error
}

var _ engine.Runtime = (*Runtime)(nil)

// client returns the API client, made once.
func (r *Runtime) client() (client.APIClient, error) {
	r.once.Do(func() {
		if r.Client != nil {
			r.cli = r.Client
			return
		}
		c, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			r.initErr = fmt.Errorf("docker: client: %w", err)
			return
		}
		r.cli = c
	})
	return r.cli, r.initErr
}

// Image is the image a config runs in: the override for its engine, or
// the official image of its version.
func (r *Runtime) Image(cfg engine.Config) (string, error) {
	if img := r.Images[cfg.Engine]; img != "" {
		return img, nil
	}
	return engine.ImageFor(cfg.Engine, cfg.EffectiveVersion())
}

// spec is everything Start decides before it talks to the daemon; built by
// a pure function so tests can read it without a daemon.
type spec struct {
	name    string
	image   string
	create  client.ContainerCreateOptions
	baseURL string
	// files are written to a host directory mounted at filesDir.
	files map[string]string
}

// build turns a Launch into the container to create. filesHost is the host
// directory holding Command.Files ("" when there are none); hostPort is
// the free port on 127.0.0.1.
func (r *Runtime) build(l engine.Launch, cmd engine.Command, filesHost string, hostPort int, extraLabels map[string]string) (spec, error) {
	img, err := r.Image(l.Config)
	if err != nil {
		return spec{}, err
	}
	if len(cmd.Argv) == 0 {
		return spec{}, fmt.Errorf("docker: empty command")
	}
	listen, port := "0.0.0.0", containerPort
	if r.HostNetwork {
		listen, port = "127.0.0.1", hostPort
	}
	argv := append(slices.Clone(cmd.Argv), "--host="+listen, "--port="+strconv.Itoa(port))

	env := map[string]string{engine.EnvEngineVersion: l.Config.EffectiveVersion()}
	maps.Copy(env, cmd.Env)
	maps.Copy(env, r.Env)
	if tok := os.Getenv("HF_TOKEN"); tok != "" {
		if _, set := env["HF_TOKEN"]; !set {
			env["HF_TOKEN"] = tok
		}
	}
	hf := r.hfHome()
	var binds []string
	if hf != "" {
		env["HF_HOME"] = hfHomeInContainer
		binds = append(binds, hf+":"+hfHomeInContainer)
	}
	if filesHost != "" {
		binds = append(binds, filesHost+":"+filesDir)
	}
	// A model (or draft model) given as a local directory is mounted at
	// the same path, read-only, so the argv that names it is right inside
	// the container too.
	models := []string{l.Config.Model}
	if sp := l.Config.Speculative; sp != nil {
		models = append(models, sp.DraftModel)
	}
	for _, m := range models {
		if filepath.IsAbs(m) && m != "/" {
			if _, err := os.Stat(m); err == nil {
				binds = append(binds, m+":"+m+":ro")
			}
		}
	}
	binds = append(binds, r.Volumes...)

	labels := map[string]string{
		LabelEngine:  l.Config.Engine,
		LabelVersion: l.Config.EffectiveVersion(),
		LabelModel:   l.Config.Model,
		LabelConfig:  configHash(cmd),
	}
	maps.Copy(labels, r.Labels)
	maps.Copy(labels, l.Labels)
	maps.Copy(labels, extraLabels)
	labels[LabelManaged] = "true" // last: Cleanup finds containers by it

	cfg := &container.Config{
		Image: img,
		// The whole command, program included: images differ in
		// entrypoint (vllm/vllm-openai's is `vllm serve`), so none is
		// inherited.
		Entrypoint: argv[:1],
		Cmd:        argv[1:],
		Env:        envList(env),
		Labels:     labels,
	}
	if filesHost != "" {
		cfg.WorkingDir = filesDir
	}
	hc := &container.HostConfig{
		Binds: binds,
	}
	if !r.NoUlimits {
		hc.Ulimits = []*container.Ulimit{
			// What TensorRT-LLM's docs ask for (NCCL and its allocator
			// pin memory, deep stacks in its kernels).
			{Name: "memlock", Soft: -1, Hard: -1},
			{Name: "stack", Soft: 64 << 20, Hard: 64 << 20},
		}
	}
	if r.Memory > 0 {
		// Swap would let the container run past the limit instead of
		// dying at it.
		hc.Memory, hc.MemorySwap = r.Memory, r.Memory
	}
	if !r.NoGPU {
		req := container.DeviceRequest{Driver: "nvidia", Capabilities: [][]string{{"gpu"}}}
		if l.GPUs == nil {
			req.Count = -1 // as the process runtime inherits every GPU
		} else {
			for _, g := range l.GPUs {
				req.DeviceIDs = append(req.DeviceIDs, strconv.Itoa(g))
			}
		}
		hc.DeviceRequests = []container.DeviceRequest{req}
	}
	if r.ShmSize > 0 {
		hc.ShmSize = r.ShmSize
	} else {
		hc.IpcMode = container.IPCModeHost
	}
	base := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(hostPort))
	if r.HostNetwork {
		hc.NetworkMode = "host"
	} else {
		p, _ := network.PortFrom(containerPort, network.TCP)
		cfg.ExposedPorts = network.PortSet{p: {}}
		hc.PortBindings = network.PortMap{p: {{HostIP: netip.MustParseAddr("127.0.0.1"), HostPort: strconv.Itoa(hostPort)}}}
	}
	name := "perflab-" + l.Config.Engine + "-" + randomHex(6)
	return spec{
		name:    name,
		image:   img,
		create:  client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: hc},
		baseURL: base,
		files:   cmd.Files,
	}, nil
}

// hfHome is the host directory to mount as the Hugging Face cache, or "".
func (r *Runtime) hfHome() string {
	switch r.HFHome {
	case "none":
		return ""
	case "":
	default:
		return r.HFHome
	}
	if h := os.Getenv("HF_HOME"); h != "" {
		return h
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "huggingface")
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}

// configHash names a rendered command in a label: the same config gives the
// same label across runs.
func configHash(cmd engine.Command) string {
	h := sha256.New()
	h.Write([]byte(cmd.String()))
	for _, k := range slices.Sorted(maps.Keys(cmd.Files)) {
		fmt.Fprintf(h, "\x00%s\x00%s", k, cmd.Files[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freePort asks the kernel for an unused TCP port on 127.0.0.1.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("docker: find free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Start implements engine.Runtime. It returns at once: the image pull, the
// container's creation and start happen in the background, and Ready
// reports how they went (image_unavailable for an image that cannot be
// had). Stop cancels them at any point.
func (r *Runtime) Start(ctx context.Context, l engine.Launch) (engine.Handle, error) {
	return r.StartLabeled(ctx, l, nil)
}

// StartLabeled is Start with labels of this server's own on its container
// besides the runtime's (the trial's, {LabelTrial: id}).
func (r *Runtime) StartLabeled(ctx context.Context, l engine.Launch, labels map[string]string) (engine.Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("docker: start: %w", err)
	}
	cli, err := r.client()
	if err != nil {
		return nil, err
	}
	cmd := l.Command
	if len(cmd.Argv) == 0 {
		if cmd, err = engine.Render(l.Config); err != nil {
			return nil, err
		}
	}
	port := l.Port
	if port == 0 {
		if port, err = freePort(); err != nil {
			return nil, err
		}
	}
	// The host side of the work dir: Command.Files and the log.
	workDir, removeDir := l.WorkDir, ""
	if workDir == "" {
		if workDir, err = os.MkdirTemp("", "perflab-docker-"); err != nil {
			return nil, fmt.Errorf("docker: work dir: %w", err)
		}
		if !l.KeepWorkDir {
			removeDir = workDir
		}
	} else if err := os.MkdirAll(workDir, 0o755); err != nil {
		return nil, fmt.Errorf("docker: work dir: %w", err)
	}
	started := false
	defer func() {
		if !started && removeDir != "" {
			os.RemoveAll(removeDir)
		}
	}()
	filesHost := ""
	if len(cmd.Files) > 0 {
		filesHost = filepath.Join(workDir, "files")
		if err := os.MkdirAll(filesHost, 0o755); err != nil {
			return nil, fmt.Errorf("docker: work dir: %w", err)
		}
		for name, content := range cmd.Files {
			if filepath.IsAbs(name) || strings.Contains(name, "..") {
				return nil, fmt.Errorf("docker: file name %q must be relative to the work dir", name)
			}
			if err := os.WriteFile(filepath.Join(filesHost, name), []byte(content), 0o644); err != nil {
				return nil, fmt.Errorf("docker: write %s: %w", name, err)
			}
		}
	}
	if hf := r.hfHome(); hf != "" {
		// Podman refuses to bind a missing directory; Docker would create
		// it owned by root. The engines fill it with the models they load.
		if err := os.MkdirAll(hf, 0o755); err != nil {
			return nil, fmt.Errorf("docker: Hugging Face cache: %w", err)
		}
	}
	if removeDir != "" {
		// Cleanup removes it with a container that outlived a perflab
		// killed before it could (the log and side files live there).
		labels = maps.Clone(labels)
		if labels == nil {
			labels = map[string]string{}
		}
		labels[LabelWorkDir] = removeDir
	}
	sp, err := r.build(l, cmd, filesHost, port, labels)
	if err != nil {
		return nil, err
	}
	logPath := l.LogPath
	if logPath == "" {
		logPath = filepath.Join(workDir, "engine.log")
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("docker: open log: %w", err)
	}
	h := newHandle(r, cli, l, sp, logf, removeDir)
	started = true
	go h.run()
	return h, nil
}
