package docker

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"

	"github.com/perflab/perflab/internal/engine"
)

func mustRender(t *testing.T, cfg engine.Config) engine.Command {
	t.Helper()
	cmd, err := engine.Render(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cmd
}

func hasEnv(env []string, kv string) bool { return slices.Contains(env, kv) }

func TestBuildContainerFromLaunch(t *testing.T) {
	t.Setenv("HF_TOKEN", "hf_secret")
	hf := t.TempDir()
	cfg := engine.Config{Engine: engine.VLLM, Model: "Qwen/Qwen3-14B", MaxNumSeqs: 64, Env: map[string]string{"VLLM_X": "1"}}
	cmd := mustRender(t, cfg)
	r := &Runtime{
		Labels:  map[string]string{LabelRun: "run-1", LabelTrial: "overridden", LabelManaged: "false"},
		Env:     map[string]string{"EXTRA": "yes"},
		Volumes: []string{"/data/models:/models:ro"},
		HFHome:  hf,
	}
	sp, err := r.build(engine.Launch{Config: cfg, Command: cmd, GPUs: []int{2, 3}}, cmd, "", 43123, map[string]string{LabelTrial: "7"})
	if err != nil {
		t.Fatal(err)
	}
	c, hc := sp.create.Config, sp.create.HostConfig
	if c.Image != "vllm/vllm-openai:v0.17.1" || sp.image != c.Image {
		t.Errorf("image %q, want the pinned official image of vLLM 0.17.1", c.Image)
	}
	// The whole rendered argv, program first, as entrypoint and command.
	argv := append(slices.Clone(c.Entrypoint), c.Cmd...)
	want := append(slices.Clone(cmd.Argv), "--host=0.0.0.0", "--port=8000")
	if !slices.Equal(argv, want) || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "vllm" {
		t.Errorf("entrypoint %q cmd %q, want %q", c.Entrypoint, c.Cmd, want)
	}
	wantReq := container.DeviceRequest{Driver: "nvidia", DeviceIDs: []string{"2", "3"}, Capabilities: [][]string{{"gpu"}}}
	if len(hc.DeviceRequests) != 1 || hc.DeviceRequests[0].Driver != wantReq.Driver ||
		!slices.Equal(hc.DeviceRequests[0].DeviceIDs, wantReq.DeviceIDs) ||
		len(hc.DeviceRequests[0].Capabilities) != 1 || !slices.Equal(hc.DeviceRequests[0].Capabilities[0], []string{"gpu"}) {
		t.Errorf("device requests %+v, want %+v", hc.DeviceRequests, wantReq)
	}
	ul := map[string][2]int64{}
	for _, u := range hc.Ulimits {
		ul[u.Name] = [2]int64{u.Soft, u.Hard}
	}
	if ul["memlock"] != [2]int64{-1, -1} || ul["stack"] != [2]int64{64 << 20, 64 << 20} {
		t.Errorf("ulimits %v, want memlock -1 and stack 64 MiB", ul)
	}
	if hc.IpcMode != container.IPCModeHost || hc.ShmSize != 0 {
		t.Errorf("ipc %q shm %d, want --ipc=host", hc.IpcMode, hc.ShmSize)
	}
	for _, b := range []string{hf + ":/root/.cache/huggingface", "/data/models:/models:ro"} {
		if !slices.Contains(hc.Binds, b) {
			t.Errorf("binds %q lack %q", hc.Binds, b)
		}
	}
	for _, kv := range []string{"HF_HOME=/root/.cache/huggingface", "HF_TOKEN=hf_secret", "EXTRA=yes", "VLLM_X=1", "PERFLAB_ENGINE_VERSION=0.17.1"} {
		if !hasEnv(c.Env, kv) {
			t.Errorf("env %q lacks %s", c.Env, kv)
		}
	}
	p, _ := network.PortFrom(8000, network.TCP)
	if _, ok := c.ExposedPorts[p]; !ok {
		t.Errorf("port 8000/tcp not exposed: %v", c.ExposedPorts)
	}
	pb := hc.PortBindings[p]
	if len(pb) != 1 || pb[0].HostIP.String() != "127.0.0.1" || pb[0].HostPort != "43123" {
		t.Errorf("port bindings %+v, want 127.0.0.1:43123", pb)
	}
	if sp.baseURL != "http://127.0.0.1:43123" {
		t.Errorf("base URL %q", sp.baseURL)
	}
	for k, v := range map[string]string{LabelManaged: "true", LabelRun: "run-1", LabelTrial: "7",
		LabelEngine: "vllm", LabelVersion: "0.17.1", LabelModel: "Qwen/Qwen3-14B"} {
		if c.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, c.Labels[k], v)
		}
	}
	if len(c.Labels[LabelConfig]) != 16 {
		t.Errorf("config label %q, want a 16-hex hash", c.Labels[LabelConfig])
	}
	if !strings.HasPrefix(sp.name, "perflab-vllm-") || sp.create.Name != sp.name {
		t.Errorf("name %q / %q", sp.name, sp.create.Name)
	}
	if c.WorkingDir != "" || hc.Memory != 0 || hc.NetworkMode != "" {
		t.Errorf("workdir %q memory %d network %q: none asked for", c.WorkingDir, hc.Memory, hc.NetworkMode)
	}
}

func TestBuildContainerVariants(t *testing.T) {
	cfg := engine.Config{Engine: engine.SGLang, Version: "0.5.5.post1", Model: "Qwen/Qwen3-14B"}
	cmd := mustRender(t, cfg)
	l := engine.Launch{Config: cfg, Command: cmd}

	t.Run("no GPU requests", func(t *testing.T) {
		sp, err := (&Runtime{NoGPU: true, HFHome: "none"}).build(l, cmd, "", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(sp.create.HostConfig.DeviceRequests); n != 0 {
			t.Errorf("%d device requests under NoGPU", n)
		}
		if len(sp.create.HostConfig.Binds) != 0 {
			t.Errorf("binds %q with HFHome none", sp.create.HostConfig.Binds)
		}
		for _, kv := range sp.create.Config.Env {
			if strings.HasPrefix(kv, "HF_HOME=") {
				t.Errorf("HF_HOME set with no cache mounted: %s", kv)
			}
		}
	})
	t.Run("nil GPUs means all", func(t *testing.T) {
		sp, err := (&Runtime{HFHome: "none"}).build(l, cmd, "", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		dr := sp.create.HostConfig.DeviceRequests
		if len(dr) != 1 || dr[0].Count != -1 || dr[0].DeviceIDs != nil {
			t.Errorf("device requests %+v, want every GPU (count -1)", dr)
		}
	})
	t.Run("shm size instead of ipc host", func(t *testing.T) {
		sp, err := (&Runtime{ShmSize: 16 << 30, HFHome: "none"}).build(l, cmd, "", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if hc := sp.create.HostConfig; hc.ShmSize != 16<<30 || hc.IpcMode != "" {
			t.Errorf("shm %d ipc %q", hc.ShmSize, hc.IpcMode)
		}
	})
	t.Run("no ulimits", func(t *testing.T) {
		sp, err := (&Runtime{NoUlimits: true, HFHome: "none"}).build(l, cmd, "", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if u := sp.create.HostConfig.Ulimits; len(u) != 0 {
			t.Errorf("ulimits %v under NoUlimits", u)
		}
	})
	t.Run("memory limit without swap", func(t *testing.T) {
		sp, err := (&Runtime{Memory: 64 << 20, HFHome: "none"}).build(l, cmd, "", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		if hc := sp.create.HostConfig; hc.Memory != 64<<20 || hc.MemorySwap != 64<<20 {
			t.Errorf("memory %d swap %d", hc.Memory, hc.MemorySwap)
		}
	})
	t.Run("host network", func(t *testing.T) {
		sp, err := (&Runtime{HostNetwork: true, HFHome: "none"}).build(l, cmd, "", 40111, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, hc := sp.create.Config, sp.create.HostConfig
		if hc.NetworkMode != "host" || len(hc.PortBindings) != 0 || len(c.ExposedPorts) != 0 {
			t.Errorf("network %q bindings %v exposed %v", hc.NetworkMode, hc.PortBindings, c.ExposedPorts)
		}
		if n := len(c.Cmd); c.Cmd[n-2] != "--host=127.0.0.1" || c.Cmd[n-1] != "--port=40111" {
			t.Errorf("argv ends %q, want the host port on loopback", c.Cmd[n-2:])
		}
		if sp.baseURL != "http://127.0.0.1:40111" {
			t.Errorf("base URL %q", sp.baseURL)
		}
	})
	t.Run("sglang takes the whole command", func(t *testing.T) {
		sp, err := (&Runtime{HFHome: "none"}).build(l, cmd, "", 1, nil)
		if err != nil {
			t.Fatal(err)
		}
		c := sp.create.Config
		if c.Image != "lmsysorg/sglang:v0.5.5.post1" {
			t.Errorf("image %q", c.Image)
		}
		if !slices.Equal(c.Entrypoint, []string{"python3"}) || c.Cmd[0] != "-m" || c.Cmd[1] != "sglang.launch_server" {
			t.Errorf("entrypoint %q cmd %q", c.Entrypoint, c.Cmd)
		}
	})
}

func TestBuildContainerFilesMounted(t *testing.T) {
	cfg := engine.Config{Engine: engine.TRTLLM, Model: "Qwen/Qwen3-14B", MaxNumSeqs: 32, KVCacheDtype: "fp8"}
	cmd := mustRender(t, cfg)
	if len(cmd.Files) == 0 {
		t.Fatalf("the TensorRT-LLM config renders no files: %+v", cmd)
	}
	sp, err := (&Runtime{HFHome: "none"}).build(engine.Launch{Config: cfg, Command: cmd}, cmd, "/tmp/perflab-docker-x/files", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, hc := sp.create.Config, sp.create.HostConfig
	if c.WorkingDir != "/perflab/work" || !slices.Contains(hc.Binds, "/tmp/perflab-docker-x/files:/perflab/work") {
		t.Errorf("workdir %q binds %q: the rendered files must be the working directory", c.WorkingDir, hc.Binds)
	}
	if c.Image != "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1" || c.Entrypoint[0] != "trtllm-serve" {
		t.Errorf("image %q entrypoint %q", c.Image, c.Entrypoint)
	}
}

func TestBuildContainerLocalModelAndLabels(t *testing.T) {
	// A model given as a local directory must be visible at the same path
	// inside the container, since the argv names it; a Hub id mounts
	// nothing. The launch's labels (the trial) land on the container.
	dir := t.TempDir()
	cfg := engine.Config{Engine: engine.VLLM, Model: dir}
	cmd := mustRender(t, cfg)
	sp, err := (&Runtime{HFHome: "none", Labels: map[string]string{LabelRun: "r1"}}).build(
		engine.Launch{Config: cfg, Command: cmd, Labels: map[string]string{LabelTrial: "t/1"}}, cmd, "", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sp.create.HostConfig.Binds, dir+":"+dir+":ro") {
		t.Errorf("binds %q: the local model %s is not mounted", sp.create.HostConfig.Binds, dir)
	}
	if l := sp.create.Config.Labels; l[LabelRun] != "r1" || l[LabelTrial] != "t/1" || l[LabelManaged] != "true" {
		t.Errorf("labels %v", l)
	}
	cfg.Model = "Qwen/Qwen3-14B"
	cmd = mustRender(t, cfg)
	sp, err = (&Runtime{HFHome: "none"}).build(engine.Launch{Config: cfg, Command: cmd}, cmd, "", 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.create.HostConfig.Binds) != 0 {
		t.Errorf("a Hub model mounted %q", sp.create.HostConfig.Binds)
	}
}

func TestImageTable(t *testing.T) {
	// Every version the renderer defaults to has its official image.
	for eng, v := range engine.DefaultVersions {
		if engine.Images[eng][v] == "" {
			t.Errorf("no image for the default %s %s", eng, v)
		}
	}
	for _, tc := range []struct{ eng, version, want string }{
		{"vllm", "0.11.0", "vllm/vllm-openai:v0.11.0"},
		{"vllm", "", "vllm/vllm-openai:v0.17.1"},
		{"vllm", "0.12.0", "vllm/vllm-openai:v0.12.0"},
		{"sglang", "0.5.9", "lmsysorg/sglang:v0.5.9"},
		{"sglang", "0.5.5.post1", "lmsysorg/sglang:v0.5.5.post1"},
		{"trtllm", "1.2.0rc1", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1"},
		{"trtllm", "1.1.0", "nvcr.io/nvidia/tensorrt-llm/release:1.1.0"},
	} {
		got, err := engine.ImageFor(tc.eng, tc.version)
		if err != nil || got != tc.want {
			t.Errorf("ImageFor(%s, %q) = %q, %v; want %q", tc.eng, tc.version, got, err, tc.want)
		}
	}
	if _, err := engine.ImageFor("tgi", "1"); err == nil {
		t.Error("an unknown engine got an image")
	}
	r := &Runtime{Images: map[string]string{"sglang": "perflab-sim:dev"}}
	if img, _ := r.Image(engine.Config{Engine: "sglang", Version: "0.5.9"}); img != "perflab-sim:dev" {
		t.Errorf("override: %q", img)
	}
	if img, _ := r.Image(engine.Config{Engine: "vllm"}); img != "vllm/vllm-openai:v0.17.1" {
		t.Errorf("an override for sglang changed vllm's image: %q", img)
	}
}

// exit is how a container ended and what state it was in, for TestClassify.
type exit struct {
	code      int
	oomKilled bool
	memLimit  int64
	waitErr   error
	ready     bool
	benching  bool
}

func TestClassify(t *testing.T) {
	// The container's exit as the lifecycle classes it (exitOf), in the
	// state the server was in.
	classify := func(e exit, lines ...string) *engine.Failure {
		lc := engine.NewLifecycle(100, nil)
		for _, l := range lines {
			lc.Note(l)
		}
		if e.ready {
			lc.MarkReady()
		}
		if e.benching {
			lc.MarkBenchmarking()
		}
		return lc.ClassifyExit(exitOf(e.code, e.oomKilled, e.memLimit, e.waitErr))
	}
	for _, tc := range []struct {
		name string
		e    exit
		log  []string
		want engine.FailureClass
	}{
		{"docker sets OOMKilled", exit{code: 137, oomKilled: true}, nil, engine.ClassOOM},
		{"podman: 137 under a memory limit", exit{code: 137, memLimit: 64 << 20, benching: true}, nil, engine.ClassOOM},
		{"137 without a limit mid-benchmark", exit{code: 137, benching: true}, nil, engine.ClassCrashDuringBench},
		{"engine's OOM line at load", exit{code: 1}, []string{"torch.OutOfMemoryError: CUDA out of memory."}, engine.ClassOOM},
		// vLLM's start-up memory guard (vllm/v1/worker/gpu_worker.py): the
		// GPU not yet free, a wait rather than a crash of the config.
		{"vLLM's memory guard", exit{code: 1}, []string{"ValueError: Free memory on device (3.25/79.19 GiB) on startup is less than desired GPU memory utilization (0.9, 71.27 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.",
			"RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}"}, engine.ClassGPUBusy},
		{"died after ready", exit{code: 1, ready: true}, []string{"boom"}, engine.ClassUnhealthy},
		{"exit before ready", exit{code: 2}, []string{"error: unrecognized arguments: --bad"}, engine.ClassStartupCrash},
		{"wait failed", exit{code: -1, waitErr: errors.New("daemon gone")}, nil, engine.ClassStartupCrash},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := classify(tc.e, tc.log...)
			if f.Class != tc.want {
				t.Fatalf("class %s (%s), want %s", f.Class, f.Reason, tc.want)
			}
			if f.ExitCode != tc.e.code {
				t.Errorf("exit code %d, want %d", f.ExitCode, tc.e.code)
			}
			if len(tc.log) > 0 && !slices.Equal(f.LogTail, tc.log) {
				t.Errorf("log tail %q", f.LogTail)
			}
		})
	}
}

func TestFollowPullError(t *testing.T) {
	for name, stream := range map[string]string{
		"docker": `{"status":"Pulling from x"}` + "\n" + `{"errorDetail":{"message":"manifest unknown"},"error":"manifest unknown"}`,
		"podman": `{"status":"Trying to pull x"}` + "\n" + `{"error":"manifest unknown","progressDetail":{}}`,
	} {
		t.Run(name, func(t *testing.T) {
			h := &handle{lc: engine.NewLifecycle(10, devNull(t)), sp: spec{image: "x"}}
			err := h.followPull(t.Context(), strings.NewReader(stream))
			if err == nil || err.Error() != "manifest unknown" {
				t.Fatalf("err %v, want the pull's own error", err)
			}
			if tail := h.lc.Tail(0); len(tail) != 1 || !strings.Contains(tail[0], "pull x: ") {
				t.Errorf("progress lines %q", tail)
			}
		})
	}
}

func devNull(t *testing.T) *os.File {
	f, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestTRTLLMServedNameOfAMountedModel: a TensorRT-LLM model named by its
// path inside the container, under one of the runtime's extra mounts, is a
// directory to the server but nothing on perflab's host; the server lists
// the directory's name (tensorrt_llm/serve/openai_server.py), and so must
// the name perflab waits for and sends. A host directory mounted at its
// own path gives the same name.
func TestTRTLLMServedNameOfAMountedModel(t *testing.T) {
	host := filepath.Join(t.TempDir(), "Qwen3-14B")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, model string
		volumes     []string
		bind        string
	}{
		{"container path of a mount", "/models/Qwen3-14B", []string{filepath.Dir(host) + ":/models:ro"}, filepath.Dir(host) + ":/models:ro"},
		{"host directory at its own path", host, nil, host + ":" + host + ":ro"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := engine.Config{Engine: engine.TRTLLM, Model: tc.model}
			cmd := mustRender(t, cfg)
			sp, err := (&Runtime{HFHome: "none", Volumes: tc.volumes}).build(engine.Launch{Config: cfg, Command: cmd}, cmd, "", 1, nil)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(sp.create.HostConfig.Binds, tc.bind) {
				t.Errorf("binds %q lack %q", sp.create.HostConfig.Binds, tc.bind)
			}
			if got := cfg.ServedName(); got != "Qwen3-14B" {
				t.Errorf("ServedName = %q, want the directory's name as the server lists it", got)
			}
		})
	}
}
