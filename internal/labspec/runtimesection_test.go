package labspec

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/runtimes"
)

// TestSpecRuntimeSection: runtime: {kind, settings} means what the same
// spec means with the runtime's name and the settings at the top level:
// the same normalized spec, so the same run key, legacy key and stored
// form, for each runtime that has settings and for those that have none.
func TestSpecRuntimeSection(t *testing.T) {
	const head = "name: x\nmodel: m\nengines: [{name: vllm}]\n"
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, section string }{
		{"docker",
			"runtime: docker\nimages: {vllm: perflab-sim:dev}\nvolumes: [\"data:/data:ro\"]\n",
			"runtime:\n  kind: docker\n  settings:\n    images: {vllm: perflab-sim:dev}\n    volumes: [\"data:/data:ro\"]\n"},
		{"kubernetes",
			"runtime: kubernetes\nimages: {vllm: perflab-sim:dev}\nkubernetes:\n  namespace: lab\n  simulated: true\n  node_selector: {pool: gpu}\n",
			"runtime:\n  kind: kubernetes\n  settings:\n    images: {vllm: perflab-sim:dev}\n    namespace: lab\n    simulated: true\n    node_selector: {pool: gpu}\n"},
		{"kubernetes, images only", "runtime: kubernetes\nimages: {vllm: img:1}\n",
			"runtime: {kind: kubernetes, settings: {images: {vllm: img:1}}}\n"},
		{"process", "runtime: process\n", "runtime: {kind: process}\n"},
		{"sim, null settings", "runtime: sim\n", "runtime:\n  kind: sim\n  settings:\n"},
		{"section before the rest", "runtime: docker\nimages: {vllm: a:1}\ntime_scale: 10\n",
			"runtime:\n  kind: docker\n  settings: {images: {vllm: a:1}}\ntime_scale: 10\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := ParseSpecIn("old.yaml", []byte(head+tc.old), dir)
			if err != nil {
				t.Fatal(err)
			}
			sec, err := ParseSpecIn("section.yaml", []byte(head+tc.section), dir)
			if err != nil {
				t.Fatal(err)
			}
			if sec.Key() != old.Key() || sec.LegacyKey() != old.LegacyKey() {
				t.Errorf("keys %s/%s, want the top-level form's %s/%s", sec.Key(), sec.LegacyKey(), old.Key(), old.LegacyKey())
			}
			if sec.YAML() != old.YAML() {
				t.Errorf("stored form differs:\n%s\nwant\n%s", sec.YAML(), old.YAML())
			}
			if sec.RuntimeKind().Name() != old.Runtime {
				t.Errorf("runtime kind %s, want %s", sec.RuntimeKind().Name(), old.Runtime)
			}
		})
	}
}

// TestSpecRuntimeSectionErrors: a runtime refuses settings that are not
// its own, a runtime without settings refuses any, a setting given twice
// and a malformed section are refused, each at its line; and the other
// fields of a spec with a section keep their lines.
func TestSpecRuntimeSectionErrors(t *testing.T) {
	const head = "name: x\nmodel: m\nengines: [{name: vllm}]\n"
	for _, tc := range []struct {
		name, body, want string
		line             int
	}{
		{"docker has no namespace", "runtime:\n  kind: docker\n  settings:\n    images: {vllm: a:1}\n    namespace: lab\n", `runtime.settings: docker: unknown field "namespace"`, 8},
		{"kubernetes has no volumes", "runtime:\n  kind: kubernetes\n  settings:\n    volumes: [\"/tmp:/d\"]\n", `runtime.settings: kubernetes: unknown field "volumes"`, 7},
		{"process has no settings", "runtime:\n  kind: process\n  settings: {images: {vllm: a:1}}\n", "runtime process has no settings", 6},
		{"given twice", "images: {vllm: b:1}\nruntime:\n  kind: docker\n  settings:\n    images: {vllm: a:1}\n", "runtime.settings.images: images is also given at the spec's top level", 8},
		{"cluster twice", "kubernetes: {namespace: a}\nruntime: {kind: kubernetes, settings: {namespace: b}}\n", "also given at the spec's top level ($.kubernetes)", 5},
		{"no kind", "runtime:\n  settings: {images: {vllm: a:1}}\n", "runtime: kind is required", 4},
		{"unknown section field", "runtime:\n  kind: docker\n  image: a:1\n", `runtime: unknown field "image"`, 6},
		{"unknown runtime", "runtime: {kind: dokcer}\n", `runtime "dokcer"`, 4},
		{"bad image under settings", "runtime:\n  kind: docker\n  settings:\n    images: {vllm: \"a b\"}\n", "is not an image reference", 7},
		{"unknown engine under settings", "runtime:\n  kind: docker\n  settings:\n    images:\n      vlm: a:1\n", `unknown engine "vlm"`, 8},
		{"later field keeps its line", "runtime:\n  kind: docker\n  settings:\n    images: {vllm: a:1}\nrepeats: -1\n", "repeats", 8},
		{"unknown top-level field keeps its line", "runtime:\n  kind: docker\nbogus: 1\n", `unknown field "bogus"`, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseSpecIn("s.yaml", []byte(head+tc.body), t.TempDir())
			var se *SpecError
			if !errors.As(err, &se) {
				t.Fatalf("err = %v, want a *SpecError", err)
			}
			if !strings.Contains(se.Msg, tc.want) || se.Line != tc.line {
				t.Errorf("got line %d %q, want line %d and %q", se.Line, se.Msg, tc.line, tc.want)
			}
		})
	}
}

// TestSpecRuntimeSectionConfined: host paths written under the runtime's
// settings are held to a server's root as the top-level ones are.
func TestSpecRuntimeSectionConfined(t *testing.T) {
	root := t.TempDir()
	for _, body := range []string{
		"runtime:\n  kind: docker\n  settings: {volumes: [\"/etc:/x:ro\"]}\n",
		"runtime:\n  kind: kubernetes\n  settings: {hf_cache_host_path: /etc}\n",
	} {
		_, err := ParseSpecConfined("s.yaml", []byte("name: x\nmodel: m\nengines: [{name: vllm}]\n"+body), root)
		var pe *PathError
		if !errors.As(err, &pe) {
			t.Errorf("%q: err = %v, want a *PathError (outside the server's root)", body, err)
		}
	}
}

// TestSpecRuntimeSettings: the runtime a spec runs on decodes its own
// settings from either spelling, the same value; a stored field the
// runtime has none of is refused at its line, in the old top-level form
// and after a command line's --runtime chose another runtime, with the
// runtime's typed error inside.
func TestSpecRuntimeSettings(t *testing.T) {
	const head = "name: x\nmodel: m\nengines: [{name: vllm}]\n"
	for _, tc := range []struct {
		name, body, runtime string // runtime: the command line's, "" for none
		field               string
		line                int
	}{
		{"docker has no cluster", "runtime: docker\nimages: {vllm: a:1}\nkubernetes: {namespace: lab}\n", "", "kubernetes", 6},
		{"kubernetes has no volumes", "runtime: kubernetes\nvolumes: [\"/tmp:/d\"]\n", "", "volumes", 5},
		{"process has no images", "runtime: process\nimages: {vllm: a:1}\n", "", "images", 5},
		{"sim-predict has no volumes", "volumes: [\"/tmp:/d\"]\n", "", "volumes", 4},
		{"--runtime docker on a cluster's spec", "runtime:\n  kind: kubernetes\n  settings:\n    namespace: lab\n", runtimes.Docker, "kubernetes", 7},
		{"--runtime sim on a docker spec", "runtime: docker\nvolumes: [\"/tmp:/d\"]\n", runtimes.Sim, "volumes", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSpecIn("s.yaml", []byte(head+tc.body), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if tc.runtime != "" {
				s.Runtime = tc.runtime
			}
			_, err = s.RuntimeSettings()
			var se *SpecError
			var re *runtimes.SettingError
			if !errors.As(err, &se) || !errors.As(err, &re) {
				t.Fatalf("err = %v, want a *SpecError around a *runtimes.SettingError", err)
			}
			if re.Field != tc.field || se.Line != tc.line || se.File != "s.yaml" {
				t.Errorf("got %s:%d field %s (%v), want line %d field %s", se.File, se.Line, re.Field, err, tc.line, tc.field)
			}
		})
	}

	// A command line's --namespace on a docker lab: no line to point at,
	// and the message says where it came from.
	s, err := ParseSpecIn("s.yaml", []byte(head+"runtime: docker\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	s.Kubernetes = &runtimes.KubeSettings{Namespace: "lab"}
	if _, err := s.RuntimeSettings(); err == nil || !strings.Contains(err.Error(), "command line") {
		t.Errorf("--namespace on docker: err = %v, want one saying the command line set it", err)
	}

	dir := t.TempDir()
	for _, pair := range [][2]string{
		{"runtime: docker\nimages: {vllm: a:1}\nvolumes: [\"/tmp:/d:ro\"]\n",
			"runtime: {kind: docker, settings: {images: {vllm: a:1}, volumes: [\"/tmp:/d:ro\"]}}\n"},
		{"runtime: kubernetes\nimages: {vllm: a:1}\nkubernetes: {namespace: lab, simulated: true}\n",
			"runtime: {kind: kubernetes, settings: {images: {vllm: a:1}, namespace: lab, simulated: true}}\n"},
		{"runtime: process\n", "runtime: {kind: process}\n"},
	} {
		var got [2]any
		for i, body := range pair {
			s, err := ParseSpecIn("s.yaml", []byte(head+body), dir)
			if err != nil {
				t.Fatal(err)
			}
			if got[i], err = s.RuntimeSettings(); err != nil {
				t.Fatalf("%q: %v", body, err)
			}
		}
		if !reflect.DeepEqual(got[0], got[1]) {
			t.Errorf("settings of\n%s= %#v\nsettings of\n%s= %#v", pair[0], got[0], pair[1], got[1])
		}
		if pair[0] != "runtime: process\n" && got[0] == nil {
			t.Errorf("%q: no settings decoded", pair[0])
		}
	}
}
