package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

var update = flag.Bool("update", false, "rewrite golden files under testdata/")

// The stand-ins. Every test here runs on loopback and temporary files: no
// GPU, daemon or cluster is needed, and none on the machine is asked.
//
// standInSMI replaces NVIDIA's nvidia-smi: a shell script, first on PATH,
// that answers the GPU query doctor makes with the given lines and the
// plain call with the banner holding the driver's CUDA version. Any other
// query fails, so the test also holds doctor to the query it documents.
func standInSMI(t *testing.T, queryLines []string, driver, cuda string) {
	t.Helper()
	dir := t.TempDir()
	script := "#!/bin/sh\n" +
		"# stand-in for nvidia-smi (perflab doctor tests)\n" +
		"if [ \"$*\" = \"" + strings.Join(queryArgs, " ") + "\" ]; then\n" +
		"cat <<'EOF'\n" + strings.Join(queryLines, "\n") + "\nEOF\n" +
		"exit 0\nfi\n" +
		"if [ $# -eq 0 ]; then\n" +
		"echo '| NVIDIA-SMI " + driver + "    Driver Version: " + driver + "    CUDA Version: " + cuda + "     |'\n" +
		"exit 0\nfi\n" +
		"echo \"stand-in nvidia-smi: unexpected arguments: $*\" >&2\nexit 2\n"
	if err := os.WriteFile(filepath.Join(dir, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// standInDocker replaces the Docker Engine API (dockerd, or podman's
// compatible service): an HTTP server on a unix socket, DOCKER_HOST pointing
// at it, answering the version ping and GET /info with the given body. It
// returns the socket's directory, which the golden files spell $TMP.
func standInDocker(t *testing.T, info map[string]any) string {
	t.Helper()
	// A short directory: a unix socket's path is limited to 108 bytes.
	dir, err := os.MkdirTemp("", "doctor")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "docker.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("API-Version", "1.47")
		switch {
		case strings.HasSuffix(r.URL.Path, "/_ping"):
			w.Write([]byte("OK"))
		case strings.HasSuffix(r.URL.Path, "/info") && r.Method == http.MethodGet:
			json.NewEncoder(w).Encode(info)
		default:
			http.Error(w, "stand-in Docker API: not served: "+r.Method+" "+r.URL.Path, http.StatusNotFound)
		}
	}))
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	return dir
}

// hostEnv is a host whose file systems and limits are given: /dev/shm's
// size, the HF cache disk's free bytes, memlock.
func hostEnv(t *testing.T, vars map[string]string, shmBytes, freeBytes uint64, memlockBytes uint64, unlimited bool) Env {
	return Env{
		Getenv: func(k string) string { return vars[k] },
		Shm:    "/dev/shm",
		DiskSpace: func(path string) (uint64, uint64, error) {
			if path == "/dev/shm" {
				return shmBytes, shmBytes, nil
			}
			return 2 * freeBytes, freeBytes, nil
		},
		Memlock: func() (uint64, bool, error) { return memlockBytes, unlimited, nil },
	}
}

// golden compares the text report (temporary paths as $TMP) with
// testdata/NAME.golden; -update rewrites it.
func golden(t *testing.T, name string, rep Report, tmp ...string) {
	t.Helper()
	var buf bytes.Buffer
	if err := rep.WriteText(&buf); err != nil {
		t.Fatal(err)
	}
	got := buf.String()
	for _, d := range tmp {
		got = strings.ReplaceAll(got, d, "$TMP")
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("report differs from %s (-update rewrites it):\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// statuses maps each check's name to its verdict, for assertions on typed
// values rather than on the golden text.
func statuses(rep Report) map[string]Status {
	m := map[string]Status{}
	for _, c := range rep.Checks {
		m[c.Name] = c.Status
	}
	return m
}

const h100 = "NVIDIA H100 80GB HBM3, %s, 81559 MiB"

func h100s(n int, driver string) []string {
	var out []string
	for range n {
		out = append(out, strings.Replace(h100, "%s", driver, 1))
	}
	return out
}

// TestHealthyGPUHost: 8 H100s on an R580 driver, Docker with the nvidia
// runtime, a large /dev/shm and disk, memlock unlimited, a token: all ok.
func TestHealthyGPUHost(t *testing.T) {
	standInSMI(t, h100s(8, "580.95.05"), "580.95.05", "13.0")
	sockDir := standInDocker(t, map[string]any{
		"Name": "gpu-host", "ServerVersion": "28.3.3", "OperatingSystem": "Ubuntu 24.04.2 LTS",
		"Runtimes": map[string]any{"runc": map[string]any{"path": "runc"}, "nvidia": map[string]any{"path": "nvidia-container-runtime"}},
	})
	hf := t.TempDir()
	env := hostEnv(t, map[string]string{"HF_HOME": hf, "HF_TOKEN": "hf_x"}, 500*gib, 2000*gib, 0, true)
	env.CDIDirs = []string{t.TempDir()}
	rep, err := Run(context.Background(), "docker", env)
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range statuses(rep) {
		if s != OK {
			t.Errorf("%s: %s, want ok", name, s)
		}
	}
	if n := len(engine.Images); rep.Count(OK) < 6+n {
		t.Errorf("%d ok checks, want one per pinned image and the host's: %+v", rep.Count(OK), rep.Checks)
	}
	golden(t, "healthy-docker", rep, sockDir, hf)
}

// TestBrokenGPUHost: an R535 driver (CUDA 12.2), a daemon without the
// nvidia runtime or a CDI spec and rootless, a 64 MiB /dev/shm, a small
// and unwritable HF cache, no token. Each problem is its check's error or
// warning, with the advice.
func TestBrokenGPUHost(t *testing.T) {
	standInSMI(t, []string{strings.Replace(h100, "%s", "535.104.05", 1)}, "535.104.05", "12.2")
	sockDir := standInDocker(t, map[string]any{
		"Name": "old-host", "ServerVersion": "24.0.7", "OperatingSystem": "Ubuntu 22.04.3 LTS",
		"Runtimes":        map[string]any{"runc": map[string]any{"path": "runc"}},
		"SecurityOptions": []string{"name=seccomp,profile=builtin", "name=rootless"},
	})
	// The cache's path runs through a regular file: not writable, even
	// for root (tests may run as root, who ignores permission bits).
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := hostEnv(t, map[string]string{"HF_HOME": filepath.Join(file, "hf")}, 64<<20, 20*gib, 64<<10, false)
	env.CDIDirs = []string{filepath.Join(tmp, "cdi")}
	rep, err := Run(context.Background(), "docker", env)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Status{
		"gpu":                    OK,
		"driver trtllm 1.2.0rc1": Error,   // CUDA 13 needs R580
		"driver vllm 0.11.0":     Warning, // CUDA 12.8 through minor-version compatibility
		"driver sglang 0.5.9":    Warning,
		"docker":                 OK,
		"docker gpu":             Error,
		"docker ulimits":         Warning,
		"shm":                    Warning,
		"memlock":                OK, // containers get unlimited from perflab
		"hf cache":               Error,
		"hf token":               Warning,
	}
	got := statuses(rep)
	for name, s := range want {
		if got[name] != s {
			t.Errorf("%s: %q, want %s", name, got[name], s)
		}
	}
	for _, c := range rep.Checks {
		if c.Status != OK && c.Advice == "" {
			t.Errorf("%s is %s without advice: %+v", c.Name, c.Status, c)
		}
	}
	golden(t, "broken-docker", rep, sockDir, tmp)

	// The process runtime's engines inherit the shell's memlock.
	rep, err = Run(context.Background(), "process", env)
	if err != nil {
		t.Fatal(err)
	}
	if s := statuses(rep)["memlock"]; s != Warning {
		t.Errorf("process runtime, memlock 64 KiB: %s, want warning", s)
	}
}

// TestPodmanCDI: podman's Docker API has no nvidia runtime; a CDI spec for
// nvidia.com/gpu (nvidia-ctk cdi generate) is its GPU support.
func TestPodmanCDI(t *testing.T) {
	cdi := t.TempDir()
	spec := "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices:\n- name: all\n"
	if err := os.WriteFile(filepath.Join(cdi, "nvidia.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	standInDocker(t, map[string]any{
		"Name": "podman-host", "ServerVersion": "5.4.0", "OperatingSystem": "fedora",
		"Runtimes": map[string]any{"crun": map[string]any{"path": "crun"}},
		// podman's API says where it reads CDI specs; doctor looks there.
		"CDISpecDirs": []string{cdi},
	})
	for _, c := range dockerAPI(context.Background(), &Env{CDIDirs: []string{"/nonexistent"}}) {
		if c.Name == "docker gpu" {
			if c.Status != OK || !strings.Contains(c.Found, filepath.Join(cdi, "nvidia.yaml")) {
				t.Errorf("CDI spec not found: %+v", c)
			}
			return
		}
	}
	t.Error("no docker gpu check")
}

// TestThisMachineWithoutGPU is a host like the one these tests are written
// on: no nvidia-smi on PATH, no Docker socket, no kubeconfig. Each runtime
// says so as an error with what to do, and nothing panics.
func TestThisMachineWithoutGPU(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("PATH", empty)
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(empty, "no-docker.sock"))
	t.Setenv("KUBECONFIG", filepath.Join(empty, "no-kubeconfig"))
	t.Setenv("HOME", empty)
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	env := hostEnv(t, map[string]string{"HF_HOME": empty}, 12*gib, 300*gib, 0, true)
	for _, rt := range []string{"docker", "process", "kubernetes"} {
		rep, err := Run(context.Background(), rt, env)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Count(Error) == 0 {
			t.Errorf("%s: no error on a host without GPU: %+v", rt, rep.Checks)
		}
		golden(t, "no-gpu-"+rt, rep, empty)
	}
	rep, err := Run(context.Background(), "process", env)
	if err != nil {
		t.Fatal(err)
	}
	gpu := rep.Checks[0]
	if gpu.Name != "gpu" || gpu.Status != Error || !strings.Contains(gpu.Advice, "--runtime sim") {
		t.Errorf("no nvidia-smi: %+v, want an error pointing at the simulator", gpu)
	}
	if len(rep.Checks) != 5 {
		t.Errorf("no per-image driver lines without a driver, want 5 checks: %+v", rep.Checks)
	}
}

// TestSimulatorNeedsNothing: the sim runtimes check nothing and pass.
func TestSimulatorNeedsNothing(t *testing.T) {
	rep, err := Run(context.Background(), "sim", Env{})
	if err != nil || rep.Count(Error)+rep.Count(Warning) != 0 {
		t.Fatalf("%+v, %v", rep, err)
	}
	if _, err := Run(context.Background(), "bogus", Env{}); err == nil || !strings.Contains(err.Error(), "docker") {
		t.Errorf("unknown runtime: %v, want an error listing the runtimes", err)
	}
}

// TestImageCUDACoversPinnedImages holds the driver table to engine.Images:
// pinning a new image means finding out its CUDA.
func TestImageCUDACoversPinnedImages(t *testing.T) {
	pinned := map[string]bool{}
	for eng, vers := range engine.Images {
		for ver, img := range vers {
			pinned[img] = true
			need, ok := imageCUDA[img]
			if !ok {
				t.Errorf("%s %s: image %s has no entry in imageCUDA", eng, ver, img)
				continue
			}
			full, err1 := parseDriver(need.Driver)
			compat, err2 := parseDriver(need.Compat)
			if err := errors.Join(err1, err2); err != nil || cmpDriver(compat, full) > 0 {
				t.Errorf("%s: driver %q, compat %q: %v", img, need.Driver, need.Compat, err)
			}
		}
	}
	for img := range imageCUDA {
		if !pinned[img] {
			t.Errorf("imageCUDA has %s, which engine.Images no longer pins", img)
		}
	}
}

// TestJudgeDriver: the driver branches against the images' CUDA.
func TestJudgeDriver(t *testing.T) {
	const (
		vllm011 = "vllm/vllm-openai:v0.11.0"
		sglang  = "lmsysorg/sglang:v0.5.9"
		trtllm  = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1"
	)
	for _, tc := range []struct {
		img, driver string
		want        Status
	}{
		{trtllm, "580.95.05", OK},
		{trtllm, "580.65.06", OK},
		{trtllm, "575.57.08", Error},
		{trtllm, "570.172.08", Error},
		{vllm011, "570.124.06", OK},
		{vllm011, "570.86.15", Warning},
		{vllm011, "535.261.03", Warning},
		{vllm011, "470.256.02", Warning}, // forward compatibility, data-center GPUs
		{sglang, "575.57.08", OK},
		{sglang, "570.172.08", Warning},
		{sglang, "470.256.02", Error},
		{"example/unknown:1", "580.95.05", Warning},
		{vllm011, "bogus", Error},
	} {
		c := judgeDriver("driver", tc.img, tc.driver)
		if c.Status != tc.want {
			t.Errorf("%s on %s: %s (%s), want %s", tc.img, tc.driver, c.Status, c.Found, tc.want)
		}
		if c.Status != OK && c.Advice == "" {
			t.Errorf("%s on %s: %s without advice", tc.img, tc.driver, c.Status)
		}
	}
}

// TestParseQueryErrorsNameTheLine: a malformed nvidia-smi answer is an error
// naming its line, not a panic.
func TestParseQueryErrorsNameTheLine(t *testing.T) {
	for _, in := range []string{"NVIDIA H100, 580.95.05\n", "A, B, C\n", "ok, 580.95.05, 1 MiB\nbad line\n"} {
		if _, err := parseQuery([]byte(in)); err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("%q: %v, want an error naming the line", in, err)
		}
	}
}

// TestHFCacheOfEachRuntime: a local engine downloads into HF_HUB_CACHE when
// it is set; a container into the HF_HOME the docker runtime mounts. Each
// runtime checks its own.
func TestHFCacheOfEachRuntime(t *testing.T) {
	tmp := t.TempDir()
	file := filepath.Join(tmp, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	env := hostEnv(t, map[string]string{"HF_HUB_CACHE": filepath.Join(file, "hub"), "HF_HOME": tmp}, gib, 500*gib, 0, true)
	local := hfCacheAt(&env, false)[0]
	if local.Status != Error || !strings.Contains(local.Found, "HF_HUB_CACHE") {
		t.Errorf("process runtime: %+v, want HF_HUB_CACHE not writable", local)
	}
	mounted := hfCacheAt(&env, true)[0]
	if mounted.Status != OK || !strings.Contains(mounted.Found, "(HF_HOME)") {
		t.Errorf("docker runtime: %+v, want the mounted HF_HOME, ok", mounted)
	}
}

// TestRealNvidiaSMIOutput: the query line and banner as a real nvidia-smi
// printed them (an H200 on driver 580.159.04, 2026-11-26), so the stand-in's
// format is the real one.
func TestRealNvidiaSMIOutput(t *testing.T) {
	list, err := parseQuery([]byte("NVIDIA H200, 580.159.04, 143771 MiB\n"))
	if err != nil || len(list) != 1 || list[0] != (hostGPU{Name: "NVIDIA H200", Driver: "580.159.04", Memory: "143771 MiB"}) {
		t.Errorf("query: %+v, %v", list, err)
	}
	banner := "| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |\n"
	if m := cudaRE.FindStringSubmatch(banner); m == nil || m[1] != "13.0" {
		t.Errorf("banner: CUDA %v, want 13.0", m)
	}
	if c := judgeDriver("driver", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1", list[0].Driver); c.Status != OK {
		t.Errorf("TensorRT-LLM 1.2 on 580.159.04: %+v", c)
	}
}
