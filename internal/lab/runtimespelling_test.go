package lab

import (
	"context"
	"reflect"
	"testing"
)

// TestResumeAcrossRuntimeSpellings: the run key hashes the stored
// (top-level) form, which both spellings of a runtime's settings store,
// so a run made from a spec in the old form is found and resumed by the
// same spec in the section form: no trial measured again, one run in the
// store, the same winner.
func TestResumeAcrossRuntimeSpellings(t *testing.T) {
	for _, tc := range []struct{ name, old, section string }{
		{"docker", "runtime: docker\nimages: {vllm: a:1, sglang: a:1, trtllm: a:1}\nvolumes: [\"/tmp:/d:ro\"]\n",
			"runtime:\n  kind: docker\n  settings:\n    images: {vllm: a:1, sglang: a:1, trtllm: a:1}\n    volumes: [\"/tmp:/d:ro\"]\n"},
		{"kubernetes", "runtime: kubernetes\nkubernetes: {namespace: lab, simulated: true}\n",
			"runtime: {kind: kubernetes, settings: {namespace: lab, simulated: true}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := newMemStore()
			first, err := analyticLab(mustSpec(t, smallSpec+tc.old), ms).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			again, err := analyticLab(mustSpec(t, smallSpec+tc.section), ms).Run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if again.TrialsRun != 0 || again.TrialsReused < first.TrialsRun || len(ms.runs) != 1 {
				t.Errorf("resumed in the section form: ran %d trials, reused %d, %d runs stored; want 0, %d, 1",
					again.TrialsRun, again.TrialsReused, len(ms.runs), first.TrialsRun)
			}
			if first.Winner == nil || again.Winner == nil || !reflect.DeepEqual(first.Winner, again.Winner) {
				t.Errorf("winner %v, then %v", first.Winner, again.Winner)
			}
		})
	}
}
