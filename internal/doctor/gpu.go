package doctor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/engine"
)

// cudaNeed is what an image's CUDA asks of the host's driver.
type cudaNeed struct {
	// CUDA is the toolkit the image is built on.
	CUDA string
	// Driver is the toolkit's own minimum Linux driver: at or above it
	// everything runs.
	Driver string
	// Compat is the minimum driver for CUDA minor-version compatibility
	// (any driver of the same major CUDA): between Compat and Driver the
	// image runs, but a kernel JIT-compiled from PTX newer than the driver
	// fails. Above Compat only with the image's forward-compatibility
	// libraries (datacenter GPUs), which its own entrypoint sets up.
	Compat string
	// ForwardCompat says the image registers its cuda-compat libraries
	// with ldconfig at build time, so they load even when perflab
	// replaces its entrypoint.
	ForwardCompat bool
}

// imageCUDA is the CUDA of each pinned image (engine.Images), from each
// engine's Dockerfile: vLLM's docker/Dockerfile `ARG CUDA_VERSION` (12.8.1
// for v0.11.0, 12.9.1 for v0.17.1), whose final stage runs `ldconfig
// /usr/local/cuda-X.Y/compat/` so the forward-compatibility libraries load
// whatever the entrypoint; SGLang's docker/Dockerfile `ARG
// CUDA_VERSION=12.9.1`; TensorRT-LLM's docker/Dockerfile.multi, built on
// NGC's nvcr.io/nvidia/pytorch (25.08 and later: CUDA 13.0), which sets up
// forward compatibility only in the image's entrypoint script.
//
// The drivers are NVIDIA's, from the CUDA Toolkit release notes, table
// "CUDA Toolkit and Corresponding Driver Versions" (Linux x86_64: 12.8
// Update 1 >= 570.124.06, 12.9 Update 1 >= 575.57.08, 13.0 GA >=
// 580.65.06) and "CUDA Toolkit and Minimum Required Driver Version for
// CUDA Minor Version Compatibility" (12.x >= 525.60.13, 13.x >= 580), and
// the data-center driver matrix
// (docs.nvidia.com/datacenter/tesla/drivers/supported-drivers-and-cuda-toolkit-versions.html:
// R535 and R570 run CUDA 12.x, R580 CUDA 13.x, through minor-version
// compatibility).
//
// A test holds this table to engine.Images: a new pinned image without its
// CUDA here fails it.
var imageCUDA = map[string]cudaNeed{
	"vllm/vllm-openai:v0.11.0":                     {CUDA: "12.8", Driver: "570.124.06", Compat: "525.60.13", ForwardCompat: true},
	"vllm/vllm-openai:v0.17.1":                     {CUDA: "12.9", Driver: "575.57.08", Compat: "525.60.13", ForwardCompat: true},
	"lmsysorg/sglang:v0.5.5.post1":                 {CUDA: "12.9", Driver: "575.57.08", Compat: "525.60.13"},
	"lmsysorg/sglang:v0.5.9":                       {CUDA: "12.9", Driver: "575.57.08", Compat: "525.60.13"},
	"nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1": {CUDA: "13.0", Driver: "580.65.06", Compat: "580.0"},
}

// hostGPU is one line of nvidia-smi's query.
type hostGPU struct {
	Name, Driver, Memory string
}

// queryArgs is the GPU query; its columns are what the report shows.
var queryArgs = []string{"--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"}

// cudaRE finds the highest CUDA the driver supports in nvidia-smi's banner.
var cudaRE = regexp.MustCompile(`CUDA Version:\s*([0-9]+(?:\.[0-9]+)*)`)

// gpus runs nvidia-smi: the GPUs, the driver and its CUDA, and the driver
// against each pinned image.
func gpus(ctx context.Context, e *Env) []Check {
	smi := e.NvidiaSMI
	if smi == "" {
		smi = "nvidia-smi"
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	out, err := runSMI(ctx, smi, queryArgs...)
	if err != nil {
		if errors.Is(err, errNoSMI) {
			return []Check{{Name: "gpu", Status: Error,
				Found:  fmt.Sprintf("no NVIDIA driver or GPU found: %s is not on PATH", smi),
				Advice: "install the NVIDIA driver (R580 or newer runs every pinned image); the simulator (--runtime sim) needs none"}}
		}
		return []Check{{Name: "gpu", Status: Error, Found: err.Error(),
			Advice: "nvidia-smi must list the GPUs: reload the driver (reboot after an upgrade), or check `nvidia-smi` by hand; the simulator (--runtime sim) needs none"}}
	}
	list, err := parseQuery(out)
	if err != nil {
		return []Check{{Name: "gpu", Status: Error, Found: err.Error(), Advice: "run `nvidia-smi " + strings.Join(queryArgs, " ") + "` by hand"}}
	}
	if len(list) == 0 {
		return []Check{{Name: "gpu", Status: Error, Found: smi + " lists no GPU",
			Advice: "check that the GPUs are visible to this host (lspci, the driver's kernel module); the simulator (--runtime sim) needs none"}}
	}
	driver := list[0].Driver
	for _, g := range list[1:] {
		if g.Driver != driver {
			// One driver serves every GPU; two versions mean a broken
			// install, not something to judge image by image.
			return []Check{{Name: "gpu", Status: Error, Found: fmt.Sprintf("nvidia-smi reports drivers %s and %s", driver, g.Driver),
				Advice: "reinstall the NVIDIA driver"}}
		}
	}
	cuda := "unknown"
	if banner, err := runSMI(ctx, smi); err == nil {
		if m := cudaRE.FindSubmatch(banner); m != nil {
			cuda = string(m[1])
		}
	}
	checks := []Check{{Name: "gpu", Status: OK,
		Found: fmt.Sprintf("%s; driver %s, CUDA %s", describeGPUs(list), driver, cuda)}}
	return append(checks, driverChecks(driver)...)
}

// describeGPUs says "8 × NVIDIA H100 80GB HBM3 (81559 MiB)", a mixed host
// one model after another.
func describeGPUs(list []hostGPU) string {
	var parts []string
	for i := 0; i < len(list); {
		j := i
		for j < len(list) && list[j] == list[i] {
			j++
		}
		parts = append(parts, fmt.Sprintf("%d × %s (%s)", j-i, list[i].Name, list[i].Memory))
		i = j
	}
	return strings.Join(parts, ", ")
}

// driverChecks judges the driver against each pinned image, one line per
// engine version, in the engines' and versions' order.
func driverChecks(driver string) []Check {
	var out []Check
	for _, eng := range slices.Sorted(maps.Keys(engine.Images)) {
		for _, ver := range slices.Sorted(maps.Keys(engine.Images[eng])) {
			img := engine.Images[eng][ver]
			out = append(out, judgeDriver(fmt.Sprintf("driver %s %s", eng, ver), img, driver))
		}
	}
	return out
}

// judgeDriver is one image's line.
func judgeDriver(name, img, driver string) Check {
	need, ok := imageCUDA[img]
	if !ok {
		return Check{Name: name, Status: Warning, Found: fmt.Sprintf("%s: its CUDA is not known to perflab doctor", img),
			Advice: "compare the image's CUDA with NVIDIA's driver table by hand"}
	}
	have, err := parseDriver(driver)
	if err != nil {
		return Check{Name: name, Status: Error, Found: err.Error(), Advice: "check `nvidia-smi` by hand"}
	}
	what := fmt.Sprintf("%s (CUDA %s) on driver %s", img, need.CUDA, driver)
	full, _ := parseDriver(need.Driver)
	compat, _ := parseDriver(need.Compat)
	branch := "R" + strings.SplitN(need.Driver, ".", 2)[0]
	switch {
	case cmpDriver(have, full) >= 0:
		return Check{Name: name, Status: OK, Found: what}
	case cmpDriver(have, compat) >= 0:
		return Check{Name: name, Status: Warning,
			Found:  what + fmt.Sprintf(": runs through CUDA minor-version compatibility (needs %s for the full toolkit)", need.Driver),
			Advice: fmt.Sprintf("upgrade the driver to %s+ if a kernel fails to load (PTX JIT needs it)", branch)}
	case need.ForwardCompat:
		return Check{Name: name, Status: Warning,
			Found:  what + fmt.Sprintf(": older than CUDA %s's minimum %s; the image's forward-compatibility libraries run it on data-center GPUs only", need.CUDA, need.Compat),
			Advice: fmt.Sprintf("upgrade the driver to %s+ (a consumer GPU fails with `CUDA driver version is insufficient`)", branch)}
	default:
		return Check{Name: name, Status: Error,
			Found:  what + fmt.Sprintf(": CUDA %s needs driver %s or newer", need.CUDA, need.Driver),
			Advice: fmt.Sprintf("upgrade the driver to %s+; perflab replaces the image's entrypoint, so its forward-compatibility set-up does not run", branch)}
	}
}

// errNoSMI: nvidia-smi is not there at all.
var errNoSMI = errors.New("nvidia-smi not found")

// runSMI runs nvidia-smi, its stderr in the error.
func runSMI(ctx context.Context, smi string, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, smi, args...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		var notFound *exec.Error
		if errors.As(err, &notFound) || errors.Is(err, fs.ErrNotExist) {
			return nil, errNoSMI
		}
		msg := strings.TrimSpace(stderr.String() + " " + string(out))
		return nil, fmt.Errorf("%s %s: %w: %s", smi, strings.Join(args, " "), err, msg)
	}
	return out, nil
}

// parseQuery reads "NVIDIA H100 80GB HBM3, 570.124.06, 81559 MiB" lines;
// errors name the line.
func parseQuery(out []byte) ([]hostGPU, error) {
	var list []hostGPU
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 3 {
			return nil, fmt.Errorf("nvidia-smi line %d: want 3 fields (name, driver_version, memory.total), got %d: %q", i+1, len(f), line)
		}
		g := hostGPU{Name: strings.TrimSpace(f[0]), Driver: strings.TrimSpace(f[1]), Memory: strings.TrimSpace(f[2])}
		if _, err := parseDriver(g.Driver); err != nil {
			return nil, fmt.Errorf("nvidia-smi line %d: %w", i+1, err)
		}
		list = append(list, g)
	}
	return list, nil
}

// parseDriver reads "570.124.06" into its numbers.
func parseDriver(s string) ([]int, error) {
	var v []int
	for _, p := range strings.Split(s, ".") {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("driver version %q: %q is not a number", s, p)
		}
		v = append(v, n)
	}
	return v, nil
}

// cmpDriver orders two driver versions part by part (a missing part is 0).
func cmpDriver(a, b []int) int {
	for i := 0; i < max(len(a), len(b)); i++ {
		x, y := 0, 0
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			if x < y {
				return -1
			}
			return 1
		}
	}
	return 0
}
