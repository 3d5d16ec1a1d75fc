package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestChatTemplateGolden renders Qwen3's chat_template with gonja and
// compares with Python Jinja2's output under transformers' settings
// (tools/goldens/tokenizer/chat_gen.py).
func TestChatTemplateGolden(t *testing.T) {
	tok := qwen3(t)
	path := filepath.Join("testdata", "qwen3_chat_golden.jsonl.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("%v (regenerate with python3 tools/goldens/tokenizer/chat_gen.py)", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	n, failures := 0, 0
	for line := 1; sc.Scan(); line++ {
		var c struct {
			Name                string    `json:"name"`
			Messages            []Message `json:"messages"`
			AddGenerationPrompt bool      `json:"add_generation_prompt"`
			EnableThinking      *bool     `json:"enable_thinking"`
			Text                string    `json:"text"`
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s:%d: %v", path, line, err)
		}
		n++
		got, err := tok.ApplyChatTemplateWith(c.Messages, ChatOptions{AddGenerationPrompt: c.AddGenerationPrompt, EnableThinking: c.EnableThinking})
		if err != nil {
			t.Fatalf("%s:%d %s: %v", path, line, c.Name, err)
		}
		if got != c.Text {
			failures++
			if failures <= 5 {
				i := 0
				for i < len(got) && i < len(c.Text) && got[i] == c.Text[i] {
					i++
				}
				t.Errorf("%s:%d %s (add_generation_prompt=%v enable_thinking=%v): differs at byte %d:\n got: %q\nwant: %q",
					path, line, c.Name, c.AddGenerationPrompt, fmtBool(c.EnableThinking), i, excerpt(got, i), excerpt(c.Text, i))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 100 {
		t.Errorf("only %d chat renders in %s", n, path)
	}
	if failures > 0 {
		t.Errorf("%d of %d renders differ", failures, n)
	}
}

func fmtBool(b *bool) string {
	if b == nil {
		return "unset"
	}
	if *b {
		return "true"
	}
	return "false"
}

func excerpt(s string, i int) string {
	lo, hi := max(i-40, 0), min(i+40, len(s))
	return s[lo:hi]
}

func TestChatTemplateErrors(t *testing.T) {
	tok, err := LoadFile(filepath.Join(sharedDir(t), "data", "tokenizers", "qwen3", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}}, true); err == nil || !strings.Contains(err.Error(), "no chat_template") {
		t.Errorf("without a config: err = %v, want 'no chat_template'", err)
	}
	tests := []struct{ name, tmpl, want string }{
		{"syntax", "{% if %}", "parse chat template"},
		{"raise", "{{ raise_exception('only user and assistant roles') }}", "only user and assistant roles"},
		{"include", "{% include 'x.jinja' %}", "include"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := &Tokenizer{chat: tc.tmpl, chatSrc: "test"}
			_, err := tok.ApplyChatTemplate([]Message{{Role: "user", Content: "x"}}, true)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}
