package runtimes

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

// resetHost forgets the discovered GPUs (they are read once a process).
func resetHost(t *testing.T) {
	t.Helper()
	host.once, host.alloc, host.gpus, host.err = sync.Once{}, nil, nil, nil
	t.Cleanup(func() { host.once, host.alloc, host.gpus, host.err = sync.Once{}, nil, nil, nil })
}

// fakeSMI points engine.NvidiaSMI at a script listing GPUs 3, 5 and 6.
func fakeSMI(t *testing.T) {
	t.Helper()
	script := filepath.Join(t.TempDir(), "nvidia-smi")
	body := "#!/bin/sh\nprintf '3, NVIDIA H100 80GB HBM3, 81559, 0\\n5, NVIDIA H100 80GB HBM3, 81559, 0\\n6, NVIDIA H100 80GB HBM3, 81559, 0\\n'\n"
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	old := engine.NvidiaSMI
	engine.NvidiaSMI = script
	t.Cleanup(func() { engine.NvidiaSMI = old })
}

// TestHostGPUsOnePerProcess: the process runtime's GPUs come from one
// allocator per process, so two labs in one process (a server running
// several) never both hand out the same device; a spec wanting more GPUs
// than the host lists is refused, and so is a host without nvidia-smi.
func TestHostGPUsOnePerProcess(t *testing.T) {
	resetHost(t)
	fakeSMI(t)
	k, err := Lookup(Process)
	if err != nil {
		t.Fatal(err)
	}
	a, err := k.GPUs(context.Background(), 2)
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.GPUs(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	ga, err := a.Acquire(context.Background(), 2)
	if err != nil || !slices.Equal(ga, []int{3, 5}) {
		t.Fatalf("first lab got %v (%v), want the first two listed [3 5]", ga, err)
	}
	gb, err := b.Acquire(context.Background(), 1)
	if err != nil || !slices.Equal(gb, []int{6}) {
		t.Fatalf("second lab got %v (%v), want [6], the one left", gb, err)
	}
	if _, err := k.GPUs(context.Background(), 8); err == nil || !strings.Contains(err.Error(), "lists 3") {
		t.Fatalf("8 GPUs wanted, 3 listed: err %v", err)
	}
	resetHost(t)
	engine.NvidiaSMI = filepath.Join(t.TempDir(), "absent")
	if _, err := k.GPUs(context.Background(), 1); err == nil {
		t.Fatal("no nvidia-smi: want an error")
	}
}

// TestSimGPUs: the simulator's GPUs are only counted: 0..n-1, per lab.
func TestSimGPUs(t *testing.T) {
	k, _ := Lookup(Sim)
	a, err := k.GPUs(context.Background(), 8)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := a.Acquire(context.Background(), 8)
	if err != nil || !slices.Equal(ids, []int{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Fatalf("ids %v err %v, want 0..7", ids, err)
	}
}

// TestRegistry: every name resolves to a Kind of that name whose traits
// hang together, and an unknown name is refused with the known ones.
func TestRegistry(t *testing.T) {
	for _, n := range Names() {
		k, err := Lookup(n)
		if err != nil || k.Name() != n {
			t.Fatalf("%s: %v, %v", n, k, err)
		}
		rt, err := k.New(Env{GPU: "H100"})
		if err != nil {
			t.Fatalf("%s: New: %v", n, err)
		}
		if (rt != nil) != k.Servers() {
			t.Errorf("%s: a runtime %v, but Servers() = %v", n, rt, k.Servers())
		}
		if k.Summary() == "" {
			t.Errorf("%s: no summary", n)
		}
	}
	if _, err := Lookup("docker-compose"); err == nil || !strings.Contains(err.Error(), Process) {
		t.Errorf("unknown runtime: err %v, want one listing the names", err)
	}
	if _, err := Lookup(Default); err != nil {
		t.Errorf("the default runtime %q is not registered", Default)
	}
}

// TestRegisterLikeSQLDrivers: a runtime's package registers it once by
// name; a second registration of the name or a nil Kind panics, as
// sql.Register does, instead of one runtime silently replacing another.
func TestRegisterLikeSQLDrivers(t *testing.T) {
	panics := func(f func()) (p bool) {
		defer func() { p = recover() != nil }()
		f()
		return false
	}
	if !panics(func() { Register(processKind{}) }) {
		t.Error("registering a second process runtime did not panic")
	}
	if !panics(func() { Register(nil) }) {
		t.Error("registering nil did not panic")
	}
	if _, err := Lookup(Docker); err == nil {
		t.Error("docker resolves in a program that did not import dockerrt")
	}
}

// TestSettingsFor: a runtime without settings refuses every stored field
// with a typed error naming it, and takes a spec that sets none; a
// settings value made by another runtime is refused, not read as zero.
func TestSettingsFor(t *testing.T) {
	for _, name := range []string{SimPredict, Sim, Process} {
		k, _ := Lookup(name)
		if v, err := SettingsFor(k, Stored{}); v != nil || err != nil {
			t.Errorf("%s, no settings: %v, %v", name, v, err)
		}
		for field, st := range map[string]Stored{
			"images":     {Images: map[string]string{"vllm": "a:1"}},
			"volumes":    {Volumes: []string{}},
			"kubernetes": {Kubernetes: &KubeSettings{}},
		} {
			_, err := SettingsFor(k, st)
			var se *SettingError
			if !errors.As(err, &se) || se.Runtime != name || se.Field != field {
				t.Errorf("%s with %s: err = %v, want a *SettingError naming both", name, field, err)
			}
		}
	}
	type mine struct{ A int }
	if v, err := SettingsOf[mine]("x", nil); err != nil || v != (mine{}) {
		t.Errorf("no settings: %v, %v; want the zero value", v, err)
	}
	if v, err := SettingsOf[mine]("x", &mine{A: 2}); err != nil || v.A != 2 {
		t.Errorf("a pointer: %v, %v", v, err)
	}
	if _, err := SettingsOf[mine]("x", struct{ B int }{}); err == nil {
		t.Error("another runtime's settings were accepted")
	}
}
