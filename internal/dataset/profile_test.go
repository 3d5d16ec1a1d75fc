package dataset

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLookupProfileMatchesReports(t *testing.T) {
	cases := []struct {
		lookup       string
		name         string
		in, out, n   int
		seed         int64
		rate         float64
		dataset      string
		wantSharegpt bool
	}{
		{"ShareGPT", "sharegpt", 0, 0, 1000, 0, math.Inf(1), NameShareGPT, true},
		{"Short", "short", 128, 4, 1000, 42, math.Inf(1), NameRandom, false},
		{"medium", "medium", 2000, 100, 500, 42, math.Inf(1), NameRandom, false},
		{"Long", "long", 4000, 200, 500, 42, math.Inf(1), NameRandom, false},
		{"Very long", "very-long", 32000, 100, 100, 42, math.Inf(1), NameRandom, false},
		{"Throughput Profile", "throughput", 1024, 128, 1000, 42, 1000, NameRandom, false},
		{"Long Context", "long-context", 32000, 100, 100, 42, 1, NameRandom, false},
		{"generation_heavy", "generation-heavy", 1000, 2000, 200, 42, 1, NameRandom, false},
		{"gpustack-sharegpt", "gpustack-sharegpt", 0, 0, 1000, 0, 1000, NameShareGPT, true},
	}
	for _, c := range cases {
		t.Run(c.lookup, func(t *testing.T) {
			p, ok := LookupProfile(c.lookup)
			if !ok {
				t.Fatalf("LookupProfile(%q) not found", c.lookup)
			}
			d := p.Dataset
			if p.Name != c.name || d.Name != c.dataset || d.RandomInputLen != c.in || d.RandomOutputLen != c.out ||
				d.NumPrompts != c.n || d.Seed != c.seed || p.RequestRate != c.rate {
				t.Fatalf("got %+v", p)
			}
		})
	}
	if _, ok := LookupProfile("nope"); ok {
		t.Fatal("unknown profile found")
	}
	ps := Profiles()
	if len(ps) != 9 {
		t.Fatalf("Profiles() = %d profiles", len(ps))
	}
	ps[0].Name = "mutated"
	if p, _ := LookupProfile("sharegpt"); p.Name != "sharegpt" {
		t.Fatal("Profiles() exposes the built-in table")
	}
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadProfile(t *testing.T) {
	t.Run("gpustack yaml", func(t *testing.T) {
		p, err := LoadProfile(writeFile(t, "long_context.yaml", "dataset_name: Random\ndataset_input_tokens: 32000\ndataset_output_tokens: 100\ndataset_seed: 42\nrequest_rate: 1\ntotal_requests: 100\n"))
		if err != nil {
			t.Fatal(err)
		}
		want, _ := LookupProfile("long-context")
		if p.Name != "long-context" || p.Dataset != want.Dataset || p.RequestRate != 1 {
			t.Fatalf("got %+v, want %+v", p, want)
		}
	})
	t.Run("native json", func(t *testing.T) {
		p, err := LoadProfile(writeFile(t, "p.json", `{"name": "mine", "dataset": {"name": "random", "random_input_len": 10, "random_range_ratio": 0.5, "num_prompts": 3}, "request_rate": "inf", "max_concurrency": 8}`))
		if err != nil {
			t.Fatal(err)
		}
		if p.Name != "mine" || p.Dataset.RandomInputLen != 10 || p.Dataset.RandomRangeRatio != 0.5 || !math.IsInf(p.RequestRate, 1) || p.MaxConcurrency != 8 {
			t.Fatalf("got %+v", p)
		}
	})
	bad := []struct{ name, body, want string }{
		{"unknown.yaml", "dataset_name: Random\ndataset_seeed: 42\n", "unknown.yaml:2"},
		{"nested.yaml", "name: x\ndataset:\n  name: random\n  random_input: 5\n", "nested.yaml:4"},
		{"type.yaml", "name: x\ndataset:\n  name: random\n  num_prompts: many\n", "type.yaml:4"},
		{"rate.yaml", "name: x\ndataset: {name: random}\nrequest_rate: fast\n", "request_rate"},
		{"zero.yaml", "name: x\ndataset: {name: random}\nrequest_rate: 0\n", "positive"},
		{"ds.yaml", "dataset_name: Sonnet\n", "want ShareGPT or Random"},
		{"noname.yaml", "name: x\n", "dataset name missing"},
		{"empty.yaml", "  \n", "empty"},
		{"list.yaml", "- a\n- b\n", "profile"},
		{"syntax.json", `{"name": "x", "dataset": {`, "syntax.json"},
		{"ratio.yaml", "name: x\ndataset: {name: random, random_range_ratio: 1.5}\n", "[0, 1)"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			_, err := LoadProfile(writeFile(t, c.name, c.body))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want it to contain %q", err, c.want)
			}
		})
	}
	if _, err := LoadProfile(filepath.Join(t.TempDir(), "missing.yaml")); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Fatalf("missing file: %v", err)
	}
}
