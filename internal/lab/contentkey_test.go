package lab

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/labspec"
)

// Two tiny ShareGPT files that differ in content.
const (
	sgOne = `[{"id":"1","conversations":[{"from":"human","value":"Tell me about GPUs and how they serve models."},{"from":"gpt","value":"They run many small matrix products at once, which is what a transformer needs."}]}]`
	sgTwo = `[{"id":"2","conversations":[{"from":"human","value":"What is a key?"},{"from":"gpt","value":"A name for what is measured."}]}]`
)

// placedSpec writes smallSpec, tuned on a ShareGPT-style file beside it
// (relative path), into dir, and loads it as the CLI does.
func placedSpec(t *testing.T, dir, data string) *labspec.Spec {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "sg.json"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(smallSpec,
		"tuning: {name: rnd, dataset: random, input_len: 512, output_len: 128, num_prompts: 200, seed: 42}",
		"tuning: {name: sg, dataset: sharegpt, path: data/sg.json, num_prompts: 200}", 1)
	text += "noise: {sigma: 0.02, seed: 7}\n"
	p := filepath.Join(dir, "spec.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := labspec.LoadSpec(p)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestKeyIgnoresWhereFilesLie: the same spec and dataset in two clones at
// different paths is one run with the same trial keys (and so the same
// simulated noise); another dataset is another run.
func TestKeyIgnoresWhereFilesLie(t *testing.T) {
	root := t.TempDir()
	a := placedSpec(t, filepath.Join(root, "a"), sgOne)
	b := placedSpec(t, filepath.Join(root, "deeper", "b with space"), sgOne)
	if a.Tuning.Path == b.Tuning.Path {
		t.Fatal("both specs name one path: the test shows nothing")
	}
	if a.Key() != b.Key() {
		t.Errorf("same spec and data at two places: keys %s and %s", a.Key(), b.Key())
	}
	if ka, kb := a.Tuning.KeyName(), b.Tuning.KeyName(); ka != kb {
		t.Errorf("workload keys %s and %s differ by place", ka, kb)
	}
	c := placedSpec(t, filepath.Join(root, "c"), sgTwo)
	if c.Key() == a.Key() || c.Tuning.KeyName() == a.Tuning.KeyName() {
		t.Error("another dataset under the same name shares the key")
	}
	// Key reads the spec without changing it.
	if !filepath.IsAbs(a.Tuning.Path) || strings.HasPrefix(a.Tuning.Path, "sha256:") {
		t.Errorf("Key changed the spec's path to %q", a.Tuning.Path)
	}
}

// TestAdoptRunKeyedByPath: a run stored when keys hashed absolute paths
// (run key and trial keys) is adopted by the same spec from another
// clone: nothing is measured again and the decisions are the same.
func TestAdoptRunKeyedByPath(t *testing.T) {
	root := t.TempDir()
	a := placedSpec(t, filepath.Join(root, "a"), sgOne)
	ms := newMemStore()
	first, err := analyticLab(a, ms).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Store it as the earlier perflab did: under another run key, trial
	// keys naming the workload by its path.
	old := ms.runs[a.Key()]
	delete(ms.runs, a.Key())
	old.Key = "keyed-by-path"
	ms.runs[old.Key] = old
	renamed := 0
	for i, tr := range ms.trials[old.ID] {
		for _, w := range append([]labspec.Workload{*a.Tuning}, a.Generalization...) {
			if k := strings.Replace(tr.Key, "/"+w.KeyName()+"/", "/"+w.PathKeyName()+"/", 1); k != tr.Key {
				ms.trials[old.ID][i].Key = k
				renamed++
			}
		}
	}
	if renamed == 0 || a.Tuning.KeyName() == a.Tuning.PathKeyName() {
		t.Fatal("no trial key named a path: the test shows nothing")
	}

	b := placedSpec(t, filepath.Join(root, "elsewhere", "b"), sgOne)
	again, err := analyticLab(b, finderStore{ms}).Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if again.TrialsRun != 0 || again.TrialsReused < first.TrialsRun {
		t.Errorf("rerun from another clone ran %d trials and reused %d, want 0 and %d", again.TrialsRun, again.TrialsReused, first.TrialsRun)
	}
	if again.Winner.ConfigHash != first.Winner.ConfigHash || again.Gain != first.Gain {
		t.Errorf("winner %s %+.4f, first %s %+.4f", again.Winner.Name, again.Gain, first.Winner.Name, first.Gain)
	}
}
