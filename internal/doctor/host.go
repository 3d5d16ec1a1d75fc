package doctor

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

const (
	gib = 1 << 30
	// shmWant is the /dev/shm below which a multi-GPU engine's NCCL and
	// its workers' shared-memory queues may run out: several GiB.
	shmWant = 8 * gib
	// diskWant is the free disk below which the examples' weights (and,
	// on the docker runtime, the images beside them) may not fit.
	diskWant = 100 * gib
)

// modelSizes says what the examples' weights take, for the disk advice:
// BF16 weights at two bytes a parameter (FP8 at one).
const modelSizes = "the examples' weights take about 16 GB (Qwen3-14B-FP8), 19 GB (Qwen3.5-9B), 30 GB (Qwen3-14B), 66 GB (Qwen3-32B), 470 GB (Qwen3-235B-A22B); each engine image 10-30 GB more on Docker's disk"

// shm checks the shared-memory mount the engines' workers and NCCL use.
func shm(_ context.Context, e *Env) []Check {
	path := e.Shm
	if path == "" {
		path = "/dev/shm"
	}
	const ipc = "perflab's docker runtime runs containers with --ipc=host, so this is theirs too"
	total, _, err := e.diskSpace(path)
	if err != nil {
		return []Check{{Name: "shm", Status: Error, Found: fmt.Sprintf("%s: %v", path, err),
			Advice: "mount a tmpfs at /dev/shm of several GiB (the engines' workers and NCCL use it; " + ipc + ")"}}
	}
	c := Check{Name: "shm", Status: OK, Found: fmt.Sprintf("%s is %s; %s", path, humanBytes(total), ipc)}
	if total < shmWant {
		c.Status = Warning
		c.Advice = fmt.Sprintf("grow it to %s or more (`mount -o remount,size=16G /dev/shm`): NCCL and the engines' worker queues need several GiB with tensor parallelism", humanBytes(shmWant))
	}
	return []Check{c}
}

// memlock checks the locked-memory limit the process runtime's engines
// inherit; containers get perflab's own (unlimited), so there it only
// informs.
func memlock(containers bool) check {
	return func(_ context.Context, e *Env) []Check {
		get := e.Memlock
		if get == nil {
			get = processMemlock
		}
		n, unlimited, err := get()
		if err != nil {
			return []Check{{Name: "memlock", Status: Warning, Found: fmt.Sprintf("cannot read RLIMIT_MEMLOCK: %v", err),
				Advice: "check `ulimit -l` by hand: NCCL and TensorRT-LLM pin host memory"}}
		}
		have := "unlimited"
		if !unlimited {
			have = humanBytes(n)
		}
		c := Check{Name: "memlock", Status: OK, Found: "ulimit -l is " + have}
		switch {
		case containers:
			c.Found += " here; each engine container gets memlock unlimited from perflab"
		case !unlimited:
			c.Status = Warning
			c.Advice = "run perflab under `ulimit -l unlimited` (memlock in /etc/security/limits.conf): NCCL and TensorRT-LLM pin host memory"
		}
		return []Check{c}
	}
}

// hfCache checks the Hugging Face cache the engines download into: that
// it can be written and that the weights fit. A local engine honours
// HF_HUB_CACHE; the docker runtime mounts HF_HOME (or the default) into
// each container and passes no HF_HUB_CACHE, so there that is the cache.
func hfCache(containers bool) check {
	return func(_ context.Context, e *Env) []Check {
		return hfCacheAt(e, containers)
	}
}

func hfCacheAt(e *Env, containers bool) []Check {
	dir, from := "", ""
	if !containers {
		dir, from = e.getenv("HF_HUB_CACHE"), "HF_HUB_CACHE"
	}
	if dir == "" {
		dir, from = e.getenv("HF_HOME"), "HF_HOME"
	}
	if dir == "" {
		home := e.Home
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir, from = filepath.Join(home, ".cache", "huggingface"), "default"
	}
	// A cache not made yet is made by the first download (or the docker
	// runtime): its nearest existing parent must be writable then.
	probe := dir
	for {
		if _, err := os.Stat(probe); err == nil || !errors.Is(err, fs.ErrNotExist) {
			break
		}
		parent := filepath.Dir(probe)
		if parent == probe {
			break
		}
		probe = parent
	}
	where := fmt.Sprintf("%s (%s)", dir, from)
	if probe != dir {
		where = fmt.Sprintf("%s (%s; not made yet, so its parent %s)", dir, from, probe)
	}
	if err := writable(probe); err != nil {
		return []Check{{Name: "hf cache", Status: Error, Found: fmt.Sprintf("%s: not writable: %v", where, err),
			Advice: "point HF_HOME at a writable directory on a large disk"}}
	}
	_, free, err := e.diskSpace(probe)
	if err != nil {
		return []Check{{Name: "hf cache", Status: Warning, Found: fmt.Sprintf("%s: free space unknown: %v", where, err),
			Advice: "check `df -h` by hand: " + modelSizes}}
	}
	c := Check{Name: "hf cache", Status: OK, Found: fmt.Sprintf("%s: writable, %s free", where, humanBytes(free))}
	if free < diskWant {
		c.Status = Warning
		c.Advice = fmt.Sprintf("free %s or more, or point HF_HOME at a larger disk: %s", humanBytes(diskWant), modelSizes)
	}
	return []Check{c}
}

// writable tries to create (and removes) a file in dir.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".perflab-doctor-*")
	if err != nil {
		// The probe's random name says nothing to the user.
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// hfToken checks that a token is there for gated models (a warning only:
// the examples' Qwen models are not gated).
func hfToken(_ context.Context, e *Env) []Check {
	if e.getenv("HF_TOKEN") != "" {
		return []Check{{Name: "hf token", Status: OK, Found: "HF_TOKEN is set (perflab passes it to the engines, never stores it)"}}
	}
	return []Check{{Name: "hf token", Status: Warning, Found: "HF_TOKEN is not set",
		Advice: "export HF_TOKEN=hf_... (a token that accepted the model's licence) for gated models such as meta-llama/Llama-3.1-8B-Instruct; the examples' Qwen models need none"}}
}

// humanBytes is a size in GiB, MiB or KiB, as df -h shows it.
func humanBytes(n uint64) string {
	switch {
	case n >= gib:
		return fmt.Sprintf("%.1f GiB", float64(n)/gib)
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	}
	return fmt.Sprintf("%d KiB", n>>10)
}
