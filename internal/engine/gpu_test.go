package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestParseNvidiaSMI(t *testing.T) {
	out := "0, NVIDIA H100 80GB HBM3, 81559, 0\n1, NVIDIA H100 80GB HBM3, 81559, 40321\n\n"
	gpus, err := ParseNvidiaSMI([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	want := []GPU{{0, "NVIDIA H100 80GB HBM3", 81559, 0}, {1, "NVIDIA H100 80GB HBM3", 81559, 40321}}
	if !slices.Equal(gpus, want) {
		t.Errorf("got %+v", gpus)
	}
	for _, bad := range []struct{ in, err string }{
		{"0, H100, 80\n", "line 1: want 4 fields"},
		{"0, H100, 1, 0\nx, H100, 1, 0\n", `line 2: index "x"`},
		{"0, H100, 1, 0\n0, H100, 1, 0\n", "line 2: index 0 listed twice"},
		{"0, H100, -5, 0\n", "memory.total"},
	} {
		if _, err := ParseNvidiaSMI([]byte(bad.in)); err == nil || !strings.Contains(err.Error(), bad.err) {
			t.Errorf("ParseNvidiaSMI(%q) err = %v, want %q", bad.in, err, bad.err)
		}
	}
}

func FuzzParseNvidiaSMI(f *testing.F) {
	f.Add([]byte("0, NVIDIA H100 80GB HBM3, 81559, 0\n"))
	f.Add([]byte("0, A, [N/A], [N/A]\n1,B,2,3"))
	f.Fuzz(func(t *testing.T, b []byte) {
		gpus, err := ParseNvidiaSMI(b)
		if err == nil {
			for _, g := range gpus {
				if g.Index < 0 || g.MemoryTotalMiB < 0 {
					t.Fatalf("negative value accepted: %+v", g)
				}
			}
		}
	})
}

// TestDiscoverGPUs runs a fake nvidia-smi script that checks the query
// arguments, as the real one would be asked.
func TestDiscoverGPUs(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "nvidia-smi")
	body := `#!/bin/sh
[ "$1" = "--query-gpu=index,name,memory.total,memory.used" ] && [ "$2" = "--format=csv,noheader,nounits" ] || { echo "bad args: $*" >&2; exit 2; }
printf '0, NVIDIA H100 80GB HBM3, 81559, 12\n1, NVIDIA H100 80GB HBM3, 81559, 0\n'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	old := NvidiaSMI
	defer func() { NvidiaSMI = old }()
	NvidiaSMI = script
	gpus, err := DiscoverGPUs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(gpus) != 2 || gpus[0].MemoryUsedMiB != 12 {
		t.Errorf("got %+v", gpus)
	}
	NvidiaSMI = filepath.Join(dir, "missing")
	if _, err := DiscoverGPUs(context.Background()); err == nil {
		t.Error("missing nvidia-smi: no error")
	}
}

func TestAllocator(t *testing.T) {
	a := NewAllocator([]int{3, 1, 0, 2})
	if _, err := a.Acquire(context.Background(), 5); err == nil {
		t.Error("acquired more GPUs than exist")
	}
	x, err := a.Acquire(context.Background(), 2)
	if err != nil || !slices.Equal(x, []int{0, 1}) {
		t.Fatalf("first = %v %v", x, err)
	}
	y, _ := a.Acquire(context.Background(), 2)
	if !slices.Equal(y, []int{2, 3}) {
		t.Fatalf("second = %v", y)
	}
	// A third trial waits until one releases.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	if _, err := a.Acquire(ctx, 1); err == nil {
		t.Error("acquired from an empty pool")
	}
	cancel()
	var wg sync.WaitGroup
	var z []int
	wg.Add(1)
	go func() {
		defer wg.Done()
		z, _ = a.Acquire(context.Background(), 2)
	}()
	time.Sleep(20 * time.Millisecond)
	a.Release(x)
	wg.Wait()
	if !slices.Equal(z, []int{0, 1}) {
		t.Errorf("after release = %v", z)
	}
	defer func() {
		if recover() == nil {
			t.Error("double release did not panic")
		}
	}()
	a.Release(y)
	a.Release(y)
}

// TestConcurrentTrialsGetDisjointGPUs runs trials through the allocator
// concurrently and checks no GPU is ever held twice.
func TestConcurrentTrialsGetDisjointGPUs(t *testing.T) {
	a := NewAllocator([]int{0, 1, 2, 3})
	var mu sync.Mutex
	held := map[int]bool{}
	var wg sync.WaitGroup
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func(n int) {
			defer wg.Done()
			ids, err := a.Acquire(context.Background(), n)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, id := range ids {
				if held[id] {
					t.Errorf("GPU %d handed out twice", id)
				}
				held[id] = true
			}
			mu.Unlock()
			time.Sleep(time.Millisecond)
			mu.Lock()
			for _, id := range ids {
				delete(held, id)
			}
			mu.Unlock()
			a.Release(ids)
		}(1 + i%3)
	}
	wg.Wait()
	if a.Free() != 4 {
		t.Errorf("free = %d after all released", a.Free())
	}
}

// TestDiscoverGPUsErrors (issue 11, defect 9: `perflab engine gpus` ended
// with a dangling colon): a missing nvidia-smi says so and wraps
// ErrNoGPUTool; a failing one carries its stderr, and no message ends in
// a colon.
func TestDiscoverGPUsErrors(t *testing.T) {
	old := NvidiaSMI
	t.Cleanup(func() { NvidiaSMI = old })
	NvidiaSMI = filepath.Join(t.TempDir(), "nvidia-smi")
	_, err := DiscoverGPUs(context.Background())
	if !errors.Is(err, ErrNoGPUTool) || strings.HasSuffix(strings.TrimSpace(err.Error()), ":") {
		t.Errorf("missing nvidia-smi: %v", err)
	}
	for _, tc := range []struct{ body, want string }{
		{"#!/bin/sh\necho 'NVIDIA-SMI has failed' >&2\nexit 9\n", "NVIDIA-SMI has failed"},
		{"#!/bin/sh\nexit 9\n", "exit status 9"},
	} {
		if err := os.WriteFile(NvidiaSMI, []byte(tc.body), 0o755); err != nil {
			t.Fatal(err)
		}
		_, err := DiscoverGPUs(context.Background())
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.HasSuffix(strings.TrimSpace(err.Error()), ":") {
			t.Errorf("failing nvidia-smi: %v, want it to end in %q", err, tc.want)
		}
	}
}
