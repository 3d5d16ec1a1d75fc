package engine

import (
	"slices"
	"testing"
)

// TestKindsComplete holds every registered engine to what callers rely on:
// a display name, a default version that parses and has a pinned image,
// a protocol, a renderer and support checks, search candidates the engine
// accepts, and names and aliases that no other engine claims.
func TestKindsComplete(t *testing.T) {
	seen := map[string]string{}
	for _, k := range Kinds() {
		if k.Name == "" || k.Display == "" || k.Protocol == nil || k.render == nil || k.support == nil || k.DefaultPort == 0 {
			t.Errorf("%q: incomplete kind %+v", k.Name, k)
		}
		if _, err := parseVersion(k.DefaultVersion); err != nil {
			t.Errorf("%s: default version: %v", k.Name, err)
		}
		if img, _ := ImageFor(k.Name, ""); img != k.Image.Pinned[k.DefaultVersion] {
			t.Errorf("%s: default version %s has no pinned image (got %q)", k.Name, k.DefaultVersion, img)
		}
		for _, b := range k.AttentionCandidates {
			if !k.HasAttentionBackend(b) {
				t.Errorf("%s: search candidate %q is not one of its backends", k.Name, b)
			}
		}
		for _, n := range append([]string{k.Name}, k.Aliases...) {
			if other, dup := seen[n]; dup {
				t.Errorf("name %q claimed by %s and %s", n, other, k.Name)
			}
			seen[n] = k.Name
		}
		if DefaultVersions[k.Name] != k.DefaultVersion || ProtocolFor(k.Name) != k.Protocol {
			t.Errorf("%s: DefaultVersions/ProtocolFor disagree with the kind", k.Name)
		}
	}
	if n := KindNames(); !slices.Equal(n, []string{VLLM, SGLang, TRTLLM}) {
		t.Errorf("KindNames = %v", n)
	}
	if got := KindList(); got != "vllm, sglang or trtllm" {
		t.Errorf("KindList = %q", got)
	}
}

func TestParseKindAndDisplay(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"vllm", VLLM}, {" SGLang ", SGLang}, {"tensorrt-llm", TRTLLM}, {"TRT-LLM", TRTLLM},
		{"tensorrt_llm", TRTLLM}, {"trtllm", TRTLLM}, {"", ""}, {"llama.cpp", ""},
	} {
		k, ok := ParseKind(tc.in)
		got := ""
		if ok {
			got = k.Name
		}
		if got != tc.want {
			t.Errorf("ParseKind(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if _, ok := KindOf("tensorrt-llm"); ok {
		t.Error("KindOf accepts an alias; Config.Engine must be the canonical name")
	}
	for in, want := range map[string]string{VLLM: "vLLM", SGLang: "SGLang", TRTLLM: "TensorRT-LLM", "other": "other"} {
		if got := DisplayName(in); got != want {
			t.Errorf("DisplayName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestKindOfCommand(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
	}{
		{[]string{"vllm", "serve", "m"}, VLLM},
		{[]string{"/usr/bin/vllm", "serve", "m"}, VLLM},
		{[]string{"python3", "-m", "vllm.entrypoints.openai.api_server"}, VLLM},
		{[]string{"python3", "-m", "sglang.launch_server", "--model-path", "m"}, SGLang},
		{[]string{"sglang", "serve"}, SGLang},
		{[]string{"trtllm-serve", "m"}, TRTLLM},
		{[]string{"python3", "-m", "sglang.bench_serving"}, ""},
		{[]string{"python3", "-m"}, ""},
		{[]string{"bash"}, ""},
		{nil, ""},
	} {
		got := ""
		if k, ok := KindOfCommand(tc.argv); ok {
			got = k.Name
		}
		if got != tc.want {
			t.Errorf("KindOfCommand(%q) = %q, want %q", tc.argv, got, tc.want)
		}
	}
}

// TestServerPrograms: the programs a stand-in must provide come from the
// registry: an engine registered with its own program appears, and every
// registered engine's rendered command starts with one of them (so the
// simulated image and the fake kubelet can run it).
func TestServerPrograms(t *testing.T) {
	for _, k := range Kinds() {
		for _, c := range []Config{{Engine: k.Name, Model: "Qwen/Qwen3-8B"}} {
			cmd, err := Render(c)
			if err != nil {
				t.Fatalf("%s: %v", k.Name, err)
			}
			if !slices.Contains(ServerPrograms(), cmd.Argv[0]) {
				t.Errorf("%s: its command %q starts with a program not in ServerPrograms %q", k.Name, cmd.Argv, ServerPrograms())
			}
		}
	}
	saved := kinds
	t.Cleanup(func() { kinds = saved })
	kinds = append(append([]*Kind(nil), saved...), &Kind{Name: "toyengine", Programs: []string{"toy-serve", "vllm"}})
	got := ServerPrograms()
	if !slices.Contains(got, "toy-serve") {
		t.Errorf("ServerPrograms = %q, lacks a registered engine's toy-serve", got)
	}
	if len(got) != len(slices.Compact(slices.Sorted(slices.Values(got)))) {
		t.Errorf("ServerPrograms = %q, has a program twice", got)
	}
}
