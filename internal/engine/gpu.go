package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// GPU is one device as nvidia-smi reports it.
type GPU struct {
	Index          int    `json:"index"`
	Name           string `json:"name"`
	MemoryTotalMiB int    `json:"memory_total_mib"`
	MemoryUsedMiB  int    `json:"memory_used_mib"`
}

// NvidiaSMI is the nvidia-smi executable DiscoverGPUs runs; tests point it
// at a fake script.
var NvidiaSMI = "nvidia-smi"

// nvidiaSMIArgs is the query DiscoverGPUs runs; ParseNvidiaSMI reads its
// output.
var nvidiaSMIArgs = []string{"--query-gpu=index,name,memory.total,memory.used", "--format=csv,noheader,nounits"}

// DiscoverGPUs lists the machine's GPUs. A machine without nvidia-smi has
// none: that is an error, so callers can tell it from a parse problem.
func DiscoverGPUs(ctx context.Context) ([]GPU, error) {
	var stderr bytes.Buffer
	c := exec.CommandContext(ctx, NvidiaSMI, nvidiaSMIArgs...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		var notFound *exec.Error
		if errors.As(err, &notFound) || errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("engine: list GPUs: %s is not on PATH (no NVIDIA driver here?): %w", NvidiaSMI, ErrNoGPUTool)
		}
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return nil, fmt.Errorf("engine: list GPUs: %s: %w: %s", NvidiaSMI, err, msg)
		}
		return nil, fmt.Errorf("engine: list GPUs: %s: %w", NvidiaSMI, err)
	}
	return ParseNvidiaSMI(out)
}

// ErrNoGPUTool is wrapped when nvidia-smi cannot be run at all.
var ErrNoGPUTool = errors.New("nvidia-smi not found")

// ParseNvidiaSMI parses `nvidia-smi --query-gpu=index,name,memory.total,
// memory.used --format=csv,noheader,nounits` output, one GPU a line, e.g.
// "0, NVIDIA H100 80GB HBM3, 81559, 0". Errors name the line.
func ParseNvidiaSMI(out []byte) ([]GPU, error) {
	var gpus []GPU
	for i, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		f := strings.Split(line, ",")
		if len(f) != 4 {
			return nil, fmt.Errorf("engine: nvidia-smi line %d: want 4 fields (index, name, memory.total, memory.used), got %d: %q", i+1, len(f), line)
		}
		var g GPU
		var err error
		num := func(s, what string) int {
			if err != nil {
				return 0
			}
			s = strings.TrimSpace(s)
			if s == "[N/A]" || s == "N/A" {
				return 0
			}
			n, e := strconv.Atoi(s)
			if e != nil || n < 0 {
				err = fmt.Errorf("engine: nvidia-smi line %d: %s %q is not a number", i+1, what, s)
			}
			return n
		}
		g.Index = num(f[0], "index")
		g.Name = strings.TrimSpace(f[1])
		g.MemoryTotalMiB = num(f[2], "memory.total")
		g.MemoryUsedMiB = num(f[3], "memory.used")
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(gpus, func(o GPU) bool { return o.Index == g.Index }) {
			return nil, fmt.Errorf("engine: nvidia-smi line %d: index %d listed twice", i+1, g.Index)
		}
		gpus = append(gpus, g)
	}
	return gpus, nil
}

// Allocator hands out disjoint GPU sets to concurrent trials; each set
// becomes a Launch.GPUs (and so CUDA_VISIBLE_DEVICES).
type Allocator struct {
	mu      sync.Mutex
	free    []int // sorted
	all     []int
	changed chan struct{} // closed and replaced on every Release
}

// NewAllocator manages the given device indices.
func NewAllocator(indices []int) *Allocator {
	all := slices.Clone(indices)
	slices.Sort(all)
	all = slices.Compact(all)
	return &Allocator{free: slices.Clone(all), all: all, changed: make(chan struct{})}
}

// Acquire blocks until n GPUs are free and returns them (lowest indices
// first), or fails at once if n exceeds what the allocator manages.
func (a *Allocator) Acquire(ctx context.Context, n int) ([]int, error) {
	if n <= 0 || n > len(a.all) {
		return nil, fmt.Errorf("engine: want %d GPUs, the machine has %d", n, len(a.all))
	}
	for {
		a.mu.Lock()
		if len(a.free) >= n {
			got := slices.Clone(a.free[:n])
			a.free = slices.Delete(a.free, 0, n)
			a.mu.Unlock()
			return got, nil
		}
		wait := a.changed
		a.mu.Unlock()
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("engine: wait for %d GPUs: %w", n, ctx.Err())
		case <-wait:
		}
	}
}

// Release returns GPUs from Acquire. Releasing an index twice or one the
// allocator does not manage is a programming error and panics.
func (a *Allocator) Release(ids []int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(a.all, id) || slices.Contains(a.free, id) {
			panic(fmt.Sprintf("engine: release of GPU %d that is not held", id))
		}
		a.free = append(a.free, id)
	}
	slices.Sort(a.free)
	close(a.changed)
	a.changed = make(chan struct{})
}

// Changed is closed at the next Release: a waiter takes it, checks what
// it waits for, and waits on it, so that no release is missed.
func (a *Allocator) Changed() <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.changed
}

// TryAcquire takes n free GPUs if there are that many now, without
// waiting.
func (a *Allocator) TryAcquire(n int) ([]int, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if n <= 0 || len(a.free) < n {
		return nil, false
	}
	got := slices.Clone(a.free[:n])
	a.free = slices.Delete(a.free, 0, n)
	return got, true
}

// Size is how many GPUs the allocator manages.
func (a *Allocator) Size() int { return len(a.all) }

// Free is how many GPUs are unassigned now.
func (a *Allocator) Free() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.free)
}
