package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/perflab/perflab/internal/racetest"
	"github.com/perflab/perflab/internal/shareddata"

	"golang.org/x/text/unicode/norm"
)

// sharedDir returns ../shared relative to the module root, skipping the test
// (failing it under CI=true) when it is missing.
func sharedDir(t testing.TB) string {
	t.Helper()
	return shareddata.Dir(t)
}

var (
	qwenOnce sync.Once
	qwenTok  *Tokenizer
	qwenErr  error
)

// qwen3 loads the shared Qwen3 tokenizer once per test binary.
func qwen3(t testing.TB) *Tokenizer {
	t.Helper()
	dir := filepath.Join(sharedDir(t), "data", "tokenizers", "qwen3")
	qwenOnce.Do(func() { qwenTok, qwenErr = Load(dir) })
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenTok
}

type sharegptConv struct {
	ID            string `json:"id"`
	Conversations []struct {
		From  string `json:"from"`
		Value string `json:"value"`
	} `json:"conversations"`
}

func loadShareGPT(t testing.TB) []sharegptConv {
	t.Helper()
	path := filepath.Join(sharedDir(t), "data", "sharegpt", "sharegpt_v3_sample_1000.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var convs []sharegptConv
	if err := json.Unmarshal(data, &convs); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return convs
}

type goldenCase struct {
	Kind string `json:"kind"`
	Conv int    `json:"conv"`
	Turn int    `json:"turn"`
	ID   string `json:"id"`
	Name string `json:"name"`
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
	// Variant cases: the Qwen3 vocabulary under another pre-tokenizer.
	Variant string   `json:"variant"`
	Pieces  []string `json:"pieces"`
}

// variantTokenizer rebuilds the variants of tools/goldens/tokenizer/gen.js:
// the Qwen3 tokenizer.json with another model family's pre-tokenizer.
func variantTokenizer(t *testing.T, name string) *Tokenizer {
	t.Helper()
	path := filepath.Join(sharedDir(t), "data", "tokenizers", "qwen3", "tokenizer.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	split := func(re string) map[string]any {
		return map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re}, "behavior": "Isolated", "invert": false}
	}
	byteLevel := func(prefix, useRegex bool) map[string]any {
		return map[string]any{"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": false, "use_regex": useRegex}
	}
	seq := func(steps ...any) map[string]any { return map[string]any{"type": "Sequence", "pretokenizers": steps} }
	var pre any
	ignoreMerges := false
	switch name {
	case "llama3":
		pre, ignoreMerges = seq(split(patLlama3), byteLevel(false, false)), true
	case "qwen35":
		pre = seq(split(patQwen35), byteLevel(false, false))
	case "gpt2":
		pre = byteLevel(true, true)
	case "gpt2-noprefix":
		pre = byteLevel(false, true)
	case "flags":
		pre = json.RawMessage(doc["pre_tokenizer"])
		// The same extra added tokens as gen.js, one with each flag.
		var added []map[string]any
		if err := json.Unmarshal(doc["added_tokens"], &added); err != nil {
			t.Fatal(err)
		}
		tok := func(id int, content string, single, l, r, normalized, special bool) map[string]any {
			return map[string]any{"id": id, "content": content, "single_word": single, "lstrip": l, "rstrip": r, "normalized": normalized, "special": special}
		}
		added = append(added,
			tok(151669, "[MASK]", false, true, false, false, true),
			tok(151670, "<R>", false, false, true, false, true),
			tok(151671, "hello", true, false, false, true, false),
			tok(151672, "caf\u00e9", false, false, false, true, false),
			tok(151673, "<both>", true, true, true, false, false),
		)
		if doc["added_tokens"], err = json.Marshal(added); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown variant %q", name)
	}
	if doc["pre_tokenizer"], err = json.Marshal(pre); err != nil {
		t.Fatal(err)
	}
	if ignoreMerges {
		doc["model"] = json.RawMessage(strings.Replace(string(doc["model"]), `"ignore_merges": false`, `"ignore_merges": true`, 1))
		if !strings.Contains(string(doc["model"]), `"ignore_merges": true`) {
			t.Fatal("could not set ignore_merges in the Qwen3 model")
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := parseTokenizerJSON(out)
	if err != nil {
		t.Fatalf("variant %s: %v", name, err)
	}
	return tok
}

func loadGolden(t *testing.T) []goldenCase {
	t.Helper()
	path := filepath.Join("testdata", "qwen3_golden.jsonl.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (regenerate with tools/goldens/tokenizer: npm install && node gen.js)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	var cases []goldenCase
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	for line := 1; sc.Scan(); line++ {
		var c goldenCase
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		cases = append(cases, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return cases
}

// firstDiff describes where two id sequences part, with the tokens around it.
func firstDiff(tok *Tokenizer, got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	window := func(ids []int) string {
		lo, hi := max(i-3, 0), min(i+4, len(ids))
		s := ""
		for k := lo; k < hi; k++ {
			s += fmt.Sprintf(" %d%q", ids[k], tok.TokenBytes(ids[k]))
		}
		return s
	}
	return fmt.Sprintf("first difference at index %d (len got %d, want %d)\n\tgot: %s\n\twant:%s", i, len(got), len(want), window(got), window(want))
}

// TestGolden compares Encode and Decode with HF tokenizers' output on every
// ShareGPT turn, the hard cases and random id sequences.
func TestGolden(t *testing.T) {
	racetest.SkipCPUBound(t) // every ShareGPT turn through Encode; TestConcurrentEncode races the shared cache
	tok := qwen3(t)
	convs := loadShareGPT(t)
	cases := loadGolden(t)
	counts := map[string]int{}
	variants := map[string]*Tokenizer{}
	failures := 0
	fail := func(format string, args ...any) {
		failures++
		if failures <= 10 {
			t.Errorf(format, args...)
		}
	}
	for _, c := range cases {
		counts[c.Kind]++
		switch c.Kind {
		case "sharegpt":
			if c.Conv >= len(convs) || c.Turn >= len(convs[c.Conv].Conversations) || convs[c.Conv].ID != c.ID {
				t.Fatalf("golden sharegpt case conv %d turn %d (id %s) does not match the shared sample; regenerate", c.Conv, c.Turn, c.ID)
			}
			text := convs[c.Conv].Conversations[c.Turn].Value
			got := tok.Encode(text)
			if !slices.Equal(got, c.IDs) {
				fail("sharegpt conv %d (%s) turn %d: %s", c.Conv, c.ID, c.Turn, firstDiff(tok, got, c.IDs))
			}
			if n := tok.Count(text); n != len(c.IDs) {
				fail("sharegpt conv %d turn %d: Count %d, want %d", c.Conv, c.Turn, n, len(c.IDs))
			}
			// Decoding gives back the normalized text exactly.
			if back := tok.Decode(got); back != norm.NFC.String(text) {
				fail("sharegpt conv %d turn %d: Decode(Encode(text)) differs from NFC(text)", c.Conv, c.Turn)
			}
		case "hard":
			got := tok.Encode(c.Text)
			if !slices.Equal(got, c.IDs) {
				fail("hard case %q (text %q): %s", c.Name, c.Text, firstDiff(tok, got, c.IDs))
			}
		case "decode":
			if got := tok.Decode(c.IDs); got != c.Text {
				fail("decode %v: got %q, want %q", c.IDs, got, c.Text)
			}
		case "variant":
			vt, ok := variants[c.Variant]
			if !ok {
				vt = variantTokenizer(t, c.Variant)
				variants[c.Variant] = vt
			}
			got := vt.Encode(c.Text)
			if !slices.Equal(got, c.IDs) {
				fail("variant %s case %q (text %.80q): %s", c.Variant, c.Name, c.Text, firstDiff(vt, got, c.IDs))
			}
			if c.Pieces != nil {
				var pieces []string
				vt.preTokenize(norm.NFC.String(c.Text), 0, func(w string) { pieces = append(pieces, byteLevelEncode([]byte(w))) })
				if !slices.Equal(pieces, c.Pieces) && !(len(pieces) == 0 && len(c.Pieces) == 0) {
					fail("variant %s case %q (text %q): pre-tokenized\n\tgot:  %q\n\twant: %q", c.Variant, c.Name, c.Text, pieces, c.Pieces)
				}
			}
		default:
			t.Fatalf("unknown golden kind %q", c.Kind)
		}
	}
	if failures > 10 {
		t.Errorf("... %d failures in all", failures)
	}
	total := counts["sharegpt"] + counts["hard"] + counts["decode"]
	t.Logf("golden cases: %d sharegpt, %d hard, %d decode, %d other-family variants", counts["sharegpt"], counts["hard"], counts["decode"], counts["variant"])
	if counts["variant"] == 0 {
		t.Error("no variant cases: Llama-3/GPT-2/Qwen3.5 splitting unchecked")
	}
	if total < 2000 || counts["hard"] < 200 {
		t.Errorf("only %d golden cases (%d hard); want at least 2000 and 200", total, counts["hard"])
	}
}
