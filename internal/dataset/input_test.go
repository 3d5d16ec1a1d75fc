package dataset

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestShareGPTBadInput(t *testing.T) {
	long := strings.Repeat("x", 1100)
	cases := []struct {
		name, body string
		want       []string
	}{
		{"truncated", `[{"id": "a", "conversations": [`, []string{"entry 0: truncated JSON"}},
		{"syntax", "[\n {\"id\": \"a\",\n  \"conversations\": [} ]", []string{"malformed JSON at byte", "(line 3)"}},
		{"not array", `{"id": "a"}`, []string{"want a JSON array", `"{"`}},
		{"scalar", `42`, []string{"want a JSON array"}},
		{"empty", ``, []string{"truncated JSON"}},
		{"conversations string", "[\n{\"id\": \"a\", \"conversations\": \"hello\"}]", []string{"wrong schema at byte", "(line 2)", "conversations"}},
		{"value number", "[\n{\"id\": \"a\", \"conversations\": [{\"from\": \"human\", \"value\": 5}, {\"value\": \"hi there you\"}]}]", []string{"wrong schema", "(line 2)", "value"}},
		{"trailing", `[] []`, []string{"after the top-level array"}},
		{"nothing left", `[{"id": "a", "conversations": [{"value": "hi"}, {"value": "yo"}]}, {"id": "b"}, {"id": "c", "conversations": [{"value": "only one"}]}, {"id": "d", "conversations": [{"value": "` + long + `"}, {"value": "answer"}]}]`,
			[]string{"no conversation left", "4 entries", "1 without conversations", "1 with fewer than 2 turns", "prompt < 4 tokens: 1", "prompt > 1024 tokens: 1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := writeFile(t, "sg.json", c.body)
			_, err := Sample(Options{Name: NameShareGPT, Path: p, NumPrompts: 5}, byteTok{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q does not mention %q", err, w)
				}
			}
			prefixedOnce(t, err, "dataset: "+p+": ")
		})
	}
	_, err := Sample(Options{Name: NameShareGPT, Path: filepath.Join(t.TempDir(), "missing.json"), NumPrompts: 5}, byteTok{})
	if err == nil || !strings.Contains(err.Error(), "missing.json") {
		t.Fatalf("missing file: err = %v", err)
	}
	prefixedOnce(t, err, "dataset: ")
}

func TestShareGPTFiltersAndOutputLen(t *testing.T) {
	body := `[
 {"id": "short-out", "conversations": [{"value": "a fine prompt"}, {"value": "no"}]},
 {"id": "ok1", "conversations": [{"value": "a fine prompt"}, {"value": "a fine answer"}, {"value": "ignored turn"}]},
 {"id": "one-turn", "conversations": [{"value": "alone"}]},
 {"id": "ok2", "conversations": [{"value": "another prompt"}, {"value": "another answer"}]}
]`
	p := writeFile(t, "sg.json", body)
	reqs, err := Sample(Options{Name: NameShareGPT, Path: p, NumPrompts: 2, DisableShuffle: true}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 2 || reqs[0].SourceID != "ok1" || reqs[1].SourceID != "ok2" || reqs[0].PromptLen != len("a fine prompt") || reqs[0].OutputLen != len("a fine answer") {
		t.Fatalf("got %+v", reqs)
	}
	// --sharegpt-output-len skips the minimum-output check, so the first
	// entry comes back, with the override as its length.
	reqs, err = Sample(Options{Name: NameShareGPT, Path: p, NumPrompts: 3, DisableShuffle: true, ShareGPTOutputLen: 2}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 3 || reqs[0].SourceID != "short-out" || reqs[0].OutputLen != 2 {
		t.Fatalf("got %+v", reqs)
	}
	// Oversampling fills up to NumPrompts from the kept requests; with
	// NoOversample it does not.
	reqs, err = Sample(Options{Name: NameShareGPT, Path: p, NumPrompts: 7}, byteTok{})
	if err != nil || len(reqs) != 7 {
		t.Fatalf("oversample: %d requests, %v", len(reqs), err)
	}
	reqs, err = Sample(Options{Name: NameShareGPT, Path: p, NumPrompts: 7, NoOversample: true}, byteTok{})
	if err != nil || len(reqs) != 2 {
		t.Fatalf("no-oversample: %d requests, %v", len(reqs), err)
	}
}

func TestCustom(t *testing.T) {
	body := "{\"prompt\": \"first prompt\", \"output_tokens\": 7}\n\n{\"prompt\": \"second\", \"extra\": [1]}\n{\"prompt\": \"third\", \"output_tokens\": 12.0}\n"
	p := writeFile(t, "c.jsonl", body)
	reqs, err := Sample(Options{Name: NameCustom, Path: p, NumPrompts: 3, DisableShuffle: true}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Request{
		{Prompt: "first prompt", PromptLen: 12, OutputLen: 7, SourceID: p + ":1"},
		{Prompt: "second", PromptLen: 6, OutputLen: DefaultCustomOutputLen, SourceID: p + ":3"},
		{Prompt: "third", PromptLen: 5, OutputLen: 12, SourceID: p + ":4"},
	}
	if len(reqs) != len(want) {
		t.Fatalf("got %+v", reqs)
	}
	for i := range want {
		if reqs[i] != want[i] {
			t.Fatalf("request %d = %+v, want %+v", i, reqs[i], want[i])
		}
	}
	reqs, err = Sample(Options{Name: NameCustom, Path: p, NumPrompts: 5, CustomOutputLen: 9}, byteTok{})
	if err != nil || len(reqs) != 5 {
		t.Fatalf("oversampled custom: %d, %v", len(reqs), err)
	}
	for _, r := range reqs {
		if r.OutputLen != 9 {
			t.Fatalf("custom output len not applied: %+v", r)
		}
	}

	bad := []struct{ body, want string }{
		{"{\"prompt\": \"a\"}\n{\"prompt\": \"b\"\n", ":2: malformed JSON"},
		{"{\"prompt\": \"a\"}\n[1, 2]\n", ":2: want a JSON object"},
		{"{\"text\": \"a\"}\n", `:1: missing "prompt"`},
		{"{\"prompt\": 5}\n", `:1: field "prompt"`},
		{"{\"prompt\": \"a\", \"output_tokens\": \"many\"}\n", `:1: "output_tokens" "many" is not an integer`},
		{"{\"prompt\": \"a\", \"output_tokens\": 0}\n", "must be at least 1"},
		{"{\"prompt\": \"a\"} {\"prompt\": \"b\"}\n", ":1: data after the JSON object"},
		{"\n  \n", "no requests"},
	}
	for _, c := range bad {
		p := writeFile(t, "bad.jsonl", c.body)
		_, err := Sample(Options{Name: NameCustom, Path: p}, byteTok{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: err = %v, want %q", c.body, err, c.want)
			continue
		}
		prefixedOnce(t, err, "dataset: ")
	}
	p = writeFile(t, "noout.jsonl", "{\"prompt\": \"a\"}\n")
	if _, err := Sample(Options{Name: NameCustom, Path: p, CustomOutputLen: -1}, byteTok{}); err == nil || !strings.Contains(err.Error(), "noout.jsonl:1") {
		t.Errorf("-1 without output_tokens: %v", err)
	}
}

func TestPrefixShared(t *testing.T) {
	opt := Options{Name: NamePrefixShared, GSPNumGroups: 3, GSPPromptsPerGroup: 4, GSPSystemPromptLen: 20, GSPQuestionLen: 5, GSPOutputLen: 9, Seed: 1}
	tok := byteTok{special: []int{0, 255}}
	reqs, err := Sample(opt, tok)
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 12 {
		t.Fatalf("%d requests", len(reqs))
	}
	perGroup := map[int][]Request{}
	for _, r := range reqs {
		if r.PromptLen != 20+2+5 || r.OutputLen != 9 || r.PrefixLen < 22 {
			t.Fatalf("bad request %+v", r)
		}
		if strings.IndexByte(r.Prompt, 0) >= 0 || strings.IndexByte(r.Prompt, 0xff) >= 0 {
			t.Fatal("special id in a generated prompt")
		}
		perGroup[r.PrefixGroup] = append(perGroup[r.PrefixGroup], r)
	}
	for g := 1; g <= 3; g++ {
		rs := perGroup[g]
		if len(rs) != 4 {
			t.Fatalf("group %d has %d prompts", g, len(rs))
		}
		for _, r := range rs[1:] {
			if r.Prompt[:r.PrefixLen] != rs[0].Prompt[:r.PrefixLen] {
				t.Fatalf("group %d prompts do not share %d leading tokens", g, r.PrefixLen)
			}
		}
	}
	again, _ := Sample(opt, tok)
	for i := range reqs {
		if again[i] != reqs[i] {
			t.Fatal("same seed, different requests")
		}
	}
	opt.Seed = 2
	other, _ := Sample(opt, tok)
	if other[0].Prompt == reqs[0].Prompt {
		t.Fatal("different seed, same first prompt")
	}
}

func TestRandomPrefix(t *testing.T) {
	reqs, err := Sample(Options{Name: NameRandom, NumPrompts: 6, RandomInputLen: 10, RandomOutputLen: 3, RandomPrefixLen: 5, Seed: 3}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range reqs {
		if r.PrefixGroup != 1 || r.PrefixLen < 5 || r.PromptLen != 15 || r.OutputLen != 3 || !r.IgnoreEOS {
			t.Fatalf("bad request %+v", r)
		}
		if r.Prompt[:5] != reqs[0].Prompt[:5] {
			t.Fatal("prefix not shared")
		}
	}
}

// FuzzShareGPT feeds arbitrary bytes through the streaming reader and the
// sampler: errors are fine, panics are not.
func FuzzShareGPT(f *testing.F) {
	f.Add([]byte(`[{"id": "a", "conversations": [{"from": "human", "value": "hello there"}, {"from": "gpt", "value": "general kenobi"}]}]`))
	f.Add([]byte(`[{"id": "a", "conversations": "x"}, {"id": 3}]`))
	f.Add([]byte(`[{"conversations": [{"value": 1}, {}]}]`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{}`))
	f.Add([]byte("[\n\t{\"conversations\": [{\"value\": \"\\u00e9\\ud83d\\ude00 x\"}, {\"value\": \"yyyy\"}]} , null ]"))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "fuzz.json")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		reqs, err := Sample(Options{Name: NameShareGPT, Path: p, NumPrompts: 3}, byteTok{})
		if err == nil && len(reqs) != 3 {
			t.Fatalf("%d requests without error", len(reqs))
		}
	})
}

// FuzzCustomJSONL checks the JSONL reader never panics and always says
// which line an error is on.
func FuzzCustomJSONL(f *testing.F) {
	f.Add([]byte("{\"prompt\": \"a\", \"output_tokens\": 3}\n{\"prompt\": \"b\"}\n"))
	f.Add([]byte("{\"prompt\": \"a\", \"output_tokens\": 1e400}\n"))
	f.Add([]byte("{\"prompt\": \"a\"\n"))
	f.Add([]byte("\n\n[]"))
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := readCustom("f.jsonl", bytes.NewReader(data))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dataset: f.jsonl:") && !strings.HasPrefix(err.Error(), "dataset: read") {
				t.Fatalf("error without file:line: %v", err)
			}
			return
		}
		for _, r := range rows {
			if r.line < 1 || r.out < 0 {
				t.Fatalf("bad row %+v", r)
			}
		}
	})
}

// FuzzDecodeProfile: profile files never panic the decoder.
func FuzzDecodeProfile(f *testing.F) {
	f.Add([]byte("dataset_name: Random\ndataset_input_tokens: 1024\nrequest_rate: 1000\ntotal_requests: 10\n"))
	f.Add([]byte("name: x\ndataset: {name: random}\nrequest_rate: inf\n"))
	f.Add([]byte(`{"name": "x", "dataset": {"name": "sharegpt"}, "request_rate": -1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodeProfile(data, "f.yaml")
		if err == nil && !(p.RequestRate > 0) {
			t.Fatalf("accepted rate %v", p.RequestRate)
		}
	})
}
