package labspec

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"kubernetes has no volumes", "runtime:\n  kind: kubernetes\n  settings:\n    volumes: [\"/d:/d\"]\n", `runtime.settings: kubernetes: unknown field "volumes"`, 7},
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
