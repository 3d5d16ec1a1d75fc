package dataset

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/racetest"
)

// -update regenerates testdata from the independent implementations
// (CPython random, numpy, HF tokenizers via npm); it needs python3-numpy and
// `npm install` in tools/goldens/dataset.
var update = flag.Bool("update", false, "regenerate testdata goldens with tools/goldens/dataset/gen.sh")

func TestMain(m *testing.M) {
	flag.Parse()
	if *update {
		cmd := exec.Command("sh", filepath.Join("..", "..", "tools", "goldens", "dataset", "gen.sh"))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			os.Stderr.WriteString("gen.sh: " + err.Error() + "\n")
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}

type shareGPTGolden struct {
	Cases []struct {
		Seed       int64 `json:"seed"`
		NumPrompts int   `json:"num_prompts"`
		OutputLen  *int  `json:"output_len"`
		Requests   []struct {
			ID        string `json:"id"`
			PromptLen int    `json:"prompt_len"`
			OutputLen int    `json:"output_len"`
		} `json:"requests"`
	} `json:"cases"`
}

// Conversation ids and lengths chosen by vLLM's algorithm run on CPython's
// random with lengths from HF's Rust tokenizer, against ours end to end.
func TestShareGPTMatchesVLLMGolden(t *testing.T) {
	racetest.SkipCPUBound(t) // tokenizing the ShareGPT goldens; the smaller sampling tests race parallelFor
	tok := qwen3(t)
	path := shareGPTSample(t)
	b, err := os.ReadFile(filepath.Join("testdata", "sharegpt_goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g shareGPTGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Cases) == 0 {
		t.Fatal("no golden cases")
	}
	for _, c := range g.Cases {
		name := "seed" + strconv.FormatInt(c.Seed, 10) + "_n" + strconv.Itoa(c.NumPrompts)
		t.Run(name, func(t *testing.T) {
			opt := Options{Name: NameShareGPT, Path: path, NumPrompts: c.NumPrompts, Seed: c.Seed}
			if c.OutputLen != nil {
				opt.ShareGPTOutputLen = *c.OutputLen
			}
			reqs, err := Sample(opt, tok)
			if err != nil {
				t.Fatal(err)
			}
			if len(reqs) != len(c.Requests) {
				t.Fatalf("got %d requests, want %d", len(reqs), len(c.Requests))
			}
			for i, w := range c.Requests {
				r := reqs[i]
				if r.SourceID != w.ID || r.PromptLen != w.PromptLen || r.OutputLen != w.OutputLen {
					t.Fatalf("request %d = {%s %d %d}, want {%s %d %d}", i, r.SourceID, r.PromptLen, r.OutputLen, w.ID, w.PromptLen, w.OutputLen)
				}
				if r.IgnoreEOS || r.Prompt == "" {
					t.Fatalf("request %d: ignore_eos %v, empty prompt %v", i, r.IgnoreEOS, r.Prompt == "")
				}
			}
		})
	}
}

type randomGolden struct {
	VocabSize int `json:"vocab_size"`
	Cases     []struct {
		Seed       int64   `json:"seed"`
		NumPrompts int     `json:"num_prompts"`
		InputLen   int     `json:"input_len"`
		OutputLen  int     `json:"output_len"`
		RangeRatio float64 `json:"range_ratio"`
		PrefixLen  int     `json:"prefix_len"`
		Prefix     []int   `json:"prefix"`
		Requests   []struct {
			PromptLen    int    `json:"prompt_len"`
			OutputLen    int    `json:"output_len"`
			IDsSHA256    string `json:"ids_sha256"`
			PromptSHA256 string `json:"prompt_sha256"`
			Head         []int  `json:"head"`
		} `json:"requests"`
	} `json:"cases"`
}

func idsHash(ids []int) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.Itoa(id)
	}
	h := sha256.Sum256([]byte(strings.Join(s, ",")))
	return hex.EncodeToString(h[:])
}

// Lengths and token ids (hashed) from numpy's draws and HF's tokenizer,
// seed 42, 500 prompts of 4000/200 at range ratios 0 and 0.5, plus prefix
// and edge cases.
func TestRandomMatchesVLLMGolden(t *testing.T) {
	racetest.SkipCPUBound(t) // tokenizing 500-prompt goldens; the smaller sampling tests race parallelFor
	tok := qwen3(t)
	f, err := os.Open(filepath.Join("testdata", "random_goldens.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var g randomGolden
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	if g.VocabSize != tok.VocabSize() {
		t.Fatalf("golden vocab %d, tokenizer %d", g.VocabSize, tok.VocabSize())
	}
	for _, c := range g.Cases {
		name := "seed" + strconv.FormatInt(c.Seed, 10) + "_" + strconv.Itoa(c.InputLen) + "x" + strconv.Itoa(c.NumPrompts) +
			"_ratio" + strconv.FormatFloat(c.RangeRatio, 'g', -1, 64) + "_prefix" + strconv.Itoa(c.PrefixLen)
		t.Run(name, func(t *testing.T) {
			opt := Options{Name: NameRandom, NumPrompts: c.NumPrompts, Seed: c.Seed, RandomInputLen: c.InputLen,
				RandomOutputLen: c.OutputLen, RandomRangeRatio: c.RangeRatio, RandomPrefixLen: c.PrefixLen}
			reqs, allIDs := sampleRandomCached(t, opt)
			if len(reqs) != len(c.Requests) {
				t.Fatalf("got %d requests, want %d", len(reqs), len(c.Requests))
			}
			for i, w := range c.Requests {
				r := reqs[i]
				if !r.IgnoreEOS {
					t.Fatalf("request %d without ignore_eos", i)
				}
				if r.PromptLen != w.PromptLen || r.OutputLen != w.OutputLen {
					t.Fatalf("request %d lengths = %d/%d, want %d/%d", i, r.PromptLen, r.OutputLen, w.PromptLen, w.OutputLen)
				}
				h := sha256.Sum256([]byte(r.Prompt))
				if hex.EncodeToString(h[:]) != w.PromptSHA256 {
					t.Fatalf("request %d prompt text differs from HF's", i)
				}
				ids := allIDs[i]
				if got := idsHash(ids); got != w.IDsSHA256 || !slices.Equal(ids[:min(4, len(ids))], w.Head) {
					t.Fatalf("request %d ids hash %s head %v, want %s head %v", i, got, ids[:min(4, len(ids))], w.IDsSHA256, w.Head)
				}
			}
		})
	}
}
