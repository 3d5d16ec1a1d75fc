package simimage

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func env(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

func TestEntryArgs(t *testing.T) {
	in := map[string]string{EnvMarker: "1"}
	for _, tc := range []struct {
		name string
		argv []string
		env  map[string]string
		want []string // nil: not an entry point
		bad  bool
	}{
		{"vllm", []string{"vllm", "serve", "Qwen/Qwen3-14B", "--port=8000"}, in,
			[]string{"sim", "serve", "--engine", "vllm", "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-14B", "--port=8000"}, false},
		{"full path, version and settings", []string{"/usr/local/bin/vllm", "serve", "m"},
			map[string]string{EnvMarker: "1", "PERFLAB_ENGINE_VERSION": "0.11.0", EnvGPU: "H200", EnvGPUs: "2", EnvTimeScale: "20",
				EnvStartupDelay: "2s", EnvTokenizer: "/tok", EnvNoFaults: "1"},
			[]string{"sim", "serve", "--engine", "vllm", "--engine-version", "0.11.0", "--gpu", "H200", "--gpus", "2",
				"--time-scale", "20", "--startup-delay", "2s", "--tokenizer", "/tok", "--no-faults", "--", "vllm", "serve", "m"}, false},
		{"sglang", []string{"python3", "-m", "sglang.launch_server", "--model-path", "m"}, in,
			[]string{"sim", "serve", "--engine", "sglang", "--gpu", "H100", "--", "python3", "-m", "sglang.launch_server", "--model-path", "m"}, false},
		{"vllm as a module", []string{"python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}, in,
			[]string{"sim", "serve", "--engine", "vllm", "--gpu", "H100", "--", "python", "-m", "vllm.entrypoints.openai.api_server", "--model", "m"}, false},
		{"trtllm", []string{"trtllm-serve", "m"}, in,
			[]string{"sim", "serve", "--engine", "trtllm", "--gpu", "H100", "--", "trtllm-serve", "m"}, false},
		{"not in the image", []string{"vllm", "serve", "m"}, map[string]string{}, nil, false},
		{"perflab itself", []string{"/usr/local/bin/perflab", "sim", "serve"}, in, nil, false},
		{"python for something else", []string{"python3", "-c", "print(1)"}, in, nil, true},
		{"bad time scale", []string{"vllm", "serve", "m"}, map[string]string{EnvMarker: "1", EnvTimeScale: "fast"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args, ok, err := EntryArgs(tc.argv, env(tc.env))
			if tc.bad {
				var ee *EntryError
				if !ok || err == nil {
					t.Fatalf("ok %v err %v, want an error", ok, err)
				}
				if tc.name == "python for something else" && !errors.As(err, &ee) {
					t.Errorf("err %T, want *EntryError", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ok != (tc.want != nil) || !slices.Equal(args, tc.want) {
				t.Errorf("EntryArgs = %q, %v; want %q", args, ok, tc.want)
			}
		})
	}
}

func TestLibraries(t *testing.T) {
	// A dynamic system binary needs its loader and libc.
	libs, err := Libraries("/bin/ls")
	if err != nil {
		t.Fatal(err)
	}
	if len(libs) < 2 || !strings.Contains(libs[0], "ld-") || !slices.ContainsFunc(libs, func(s string) bool { return strings.Contains(s, "libc.so") }) {
		t.Errorf("libraries of /bin/ls: %q", libs)
	}
	if _, err := Libraries("/etc/hostname"); err == nil {
		t.Error("a text file read as an executable")
	}
}

func TestWriteContext(t *testing.T) {
	bin := t.TempDir() + "/perflab"
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeContext(&buf, bin, nil); err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(&buf)
	got := map[string]*tar.Header{}
	var dockerfile string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name] = h
		if h.Name == "Dockerfile" {
			b, _ := io.ReadAll(tr)
			dockerfile = string(b)
		}
	}
	if !strings.HasPrefix(dockerfile, "FROM scratch\n") || !strings.Contains(dockerfile, EnvMarker+"=1") {
		t.Errorf("Dockerfile:\n%s", dockerfile)
	}
	if h := got["rootfs/usr/local/bin/perflab"]; h == nil || h.Size != 6 || h.Mode&0o111 == 0 {
		t.Errorf("binary entry %+v", h)
	}
	for _, n := range EntryNames() {
		if h := got["rootfs/usr/local/bin/"+n]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != "perflab" {
			t.Errorf("entry point %s: %+v", n, h)
		}
	}
	if h := got["rootfs/tmp/"]; h == nil || h.Mode != 0o1777 {
		t.Errorf("/tmp: %+v", h)
	}
}

func TestSettingsContainer(t *testing.T) {
	env, vols := Settings{GPU: "H200", GPUs: 2, TimeScale: 20, StartupDelay: 2 * time.Second,
		Tokenizer: "/data/tok", Coefficients: "/data/c.json", NoFaults: true}.Container()
	want := map[string]string{EnvGPU: "H200", EnvGPUs: "2", EnvTimeScale: "20", EnvStartupDelay: "2s",
		EnvNoFaults: "1", EnvTokenizer: "/perflab/sim/tokenizer", EnvCoefficients: "/perflab/sim/coefficients.json"}
	if len(env) != len(want) {
		t.Errorf("env %v, want %v", env, want)
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
	if !slices.Equal(vols, []string{"/data/tok:/perflab/sim/tokenizer:ro", "/data/c.json:/perflab/sim/coefficients.json:ro"}) {
		t.Errorf("volumes %q", vols)
	}
	// What the container's entry point makes of them.
	args, ok, err := EntryArgs([]string{"vllm", "serve", "m"}, func(k string) string {
		if k == EnvMarker {
			return "1"
		}
		return env[k]
	})
	if err != nil || !ok || !slices.Contains(args, "/perflab/sim/tokenizer") || !slices.Contains(args, "--no-faults") {
		t.Errorf("entry args %q %v %v", args, ok, err)
	}
	if env, vols := (Settings{}).Container(); len(env) != 0 || len(vols) != 0 {
		t.Errorf("zero settings give %v %v", env, vols)
	}
}
