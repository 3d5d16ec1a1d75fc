package simargs

import (
	"slices"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/engine"
)

// TestProgramWords: each engine's server commands, from the one registry
// of program words, and the refusal of a command that starts another
// program, quoting as many words as before the registry.
func TestProgramWords(t *testing.T) {
	for _, tc := range []struct {
		engine, argv, rest, err string
	}{
		{engine.VLLM, "vllm serve M --port 1", "M --port 1", ""},
		{engine.VLLM, "/usr/bin/python3.12 -m vllm.entrypoints.openai.api_server --model M", "--model M", ""},
		{engine.VLLM, "python3 -m vllm.entrypoints.cli.main serve M", "M", ""},
		{engine.VLLM, "python3 -m vllm.entrypoints.cli.main bench M", "", "simargs: vllm: command \"python3 -m vllm.entrypoints.cli.main\" is not `vllm serve ...` or `python3 -m vllm.entrypoints.openai.api_server ...`"},
		{engine.VLLM, "vllm", "", "simargs: vllm: command \"vllm\" is not `vllm serve ...`"},
		{engine.VLLM, "", "", "simargs: vllm: empty command"},
		{engine.SGLang, "python -m sglang.launch_server --model-path M", "--model-path M", ""},
		{engine.SGLang, "sglang serve --model-path M", "--model-path M", ""},
		{engine.SGLang, "vllm serve M", "", "simargs: sglang: command \"vllm serve M\" is not `python3 -m sglang.launch_server ...` or `sglang serve ...`"},
		{engine.TRTLLM, "trtllm-serve serve M", "M", ""},
		{engine.TRTLLM, "/opt/bin/trtllm-serve M --tp_size 2", "M --tp_size 2", ""},
		{engine.TRTLLM, "trtllm-llmapi-launch trtllm-serve M", "", "simargs: trtllm: command \"trtllm-llmapi-launch trtllm-serve\" is not `trtllm-serve ...`"},
	} {
		k, ok := argvKindOf(tc.engine)
		if !ok {
			t.Fatalf("no argvKind for %s", tc.engine)
		}
		rest, err := stripProgram(k, strings.Fields(tc.argv))
		if tc.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.err) {
				t.Errorf("%s %q: err %v, want %q", tc.engine, tc.argv, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(rest, " ") != tc.rest {
			t.Errorf("%s %q: rest %q, err %v; want %q", tc.engine, tc.argv, rest, err, tc.rest)
		}
	}
}

// TestArgvKindsAgreeWithEngine: every engine perflab registers has its
// command line registered here, and each program word the simulator
// accepts is one engine.Kind says starts that engine's server (its
// Programs, or python -m one of its Modules), so the simulated image and
// the fake kubelet, which read engine.ServerPrograms, start what simargs
// reads.
func TestArgvKindsAgreeWithEngine(t *testing.T) {
	for _, ek := range engine.Kinds() {
		k, ok := argvKindOf(ek.Name)
		if !ok {
			t.Errorf("engine %s has no argvKind", ek.Name)
			continue
		}
		for _, w := range k.programs {
			if w[0] == "python*" {
				mod := w[2]
				if !slices.ContainsFunc(ek.Modules, func(m string) bool {
					return m == mod || strings.HasSuffix(m, ".") && strings.HasPrefix(mod, m)
				}) {
					t.Errorf("%s: module %s is none of engine.Kind's %v", ek.Name, mod, ek.Modules)
				}
			} else if !slices.Contains(ek.Programs, w[0]) {
				t.Errorf("%s: program %s is none of engine.Kind's %v", ek.Name, w[0], ek.Programs)
			}
		}
	}
}
