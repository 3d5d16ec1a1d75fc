package lab_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
	"github.com/perflab/perflab/internal/tokenizer"
)

// twoGPUSpec: one engine on a 2-GPU node, two 1-GPU candidates in one
// stage, so the lab runs them at once.
const twoGPUSpec = `
name: two-gpu-parallel
model: Qwen/Qwen3-14B
hardware: {gpu: H100, count: 2}
engines: [{name: vllm, version: 0.11.0}]
runtime: sim
time_scale: 20
tokenizer: ../shared/data/tokenizers/qwen3
tuning: {name: rnd, dataset: random, input_len: 256, output_len: 64, num_prompts: 64, seed: 42}
no_generalization: true
stages:
  - name: max_num_seqs
    values: ["16", "32"]
search: {disable: true}
combinations: false
repeats: 1
parallel: 2
`

// environ reads one variable from a live process's environment.
func environ(pid int, name string) (string, bool) {
	// os/exec's Start returns once the child is past execve's point of no
	// return, which can be before the new image's memory (and so its
	// environment) is readable: /proc/PID/environ is empty for a moment.
	var b []byte
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var err error
		b, err = os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
		if err != nil {
			return "", false
		}
		if len(b) > 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, kv := range strings.Split(string(b), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// TestE2EParallelTrialsGPUs: real `perflab sim serve` processes on a 2-GPU
// spec; two 1-GPU trials run at once, each engine sees its own
// CUDA_VISIBLE_DEVICES (read from /proc/PID/environ), and the two differ.
func TestE2EParallelTrialsGPUs(t *testing.T) {
	root := e2eRoot(t)
	t.Chdir(root)
	s, err := labspec.ParseSpec("two-gpu.yaml", []byte(twoGPUSpec))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(s.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu      sync.Mutex
		devices = map[int]string{} // pid → CUDA_VISIBLE_DEVICES
		alive   = map[int]bool{}
		overlap [][2]string // device sets of engines up at the same time
	)
	alloc, err := s.RuntimeKind().GPUs(context.Background(), s.Hardware.Count)
	if err != nil {
		t.Fatal(err)
	}
	runner := &lab.LiveRunner{
		GPUs:      alloc,
		Runtime:   &engine.Sim{Binary: perflabBin, GPU: s.Hardware.GPU, TimeScale: s.TimeScale, Tokenizer: s.Tokenizer},
		Requests:  lab.CachedRequests(lab.DatasetRequests(tok)),
		TimeScale: labspec.Scale(s.TimeScale),
		Started: func(pid int) {
			v, ok := environ(pid, "CUDA_VISIBLE_DEVICES")
			if !ok {
				v = "<unset>"
			}
			mu.Lock()
			defer mu.Unlock()
			devices[pid] = v
			for other := range alive {
				overlap = append(overlap, [2]string{devices[other], v})
			}
			alive[pid] = true
		},
		Stopped: func(pid int) {
			mu.Lock()
			delete(alive, pid)
			mu.Unlock()
		},
	}
	st, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "lab.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	start := time.Now()
	l := &lab.Lab{Spec: s, Store: st, Runner: runner}
	sum, err := l.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s; engines %v; concurrent pairs %v", time.Since(start).Round(time.Millisecond), devices, overlap)
	if len(devices) != 3 {
		t.Errorf("%d engines started, want 3 (baseline + 2 candidates)", len(devices))
	}
	for pid, v := range devices {
		if v != "0" && v != "1" {
			t.Errorf("engine %d: CUDA_VISIBLE_DEVICES=%q, want one of the 2 GPUs", pid, v)
		}
	}
	if len(overlap) == 0 {
		t.Fatal("no two trials ran at once on the 2-GPU spec")
	}
	for _, p := range overlap {
		if p[0] == p[1] {
			t.Errorf("two engines up at once share CUDA_VISIBLE_DEVICES=%s", p[0])
		}
	}
	if free := runner.GPUs.Free(); free != 2 {
		t.Errorf("%d GPUs free after the lab, want 2", free)
	}
	for _, ss := range sum.Stages {
		for _, c := range ss.Candidates {
			if c.Decision == "failed" {
				t.Errorf("candidate %s failed: %s", c.Name, c.Reason)
			}
		}
	}
}
