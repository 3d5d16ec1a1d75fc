package serve

import (
	"encoding/json"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"

	"github.com/perflab/perflab/internal/tokenizer"
)

func qwenTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	path := shareddata.Path(t, "data", "tokenizers", "qwen3")
	tok, err := tokenizer.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestTokenizerCounts checks prompt tokens are counted with the tokenizer
// (chat through the template) and that the filler output is one token a word.
func TestTokenizerCounts(t *testing.T) {
	tok := qwenTokenizer(t)
	c := TokenizerCounter{Tok: tok}
	text := "The quick brown fox jumps over the lazy dog."
	if got, want := c.CountText(text), len(tok.Encode(text)); got != want {
		t.Errorf("CountText = %d, want %d", got, want)
	}
	tmpl, err := tok.ApplyChatTemplate([]tokenizer.Message{{Role: "user", Content: text}}, true)
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.CountChat([]Message{{Role: "user", Content: text}})
	if err != nil || got != len(tok.Encode(tmpl)) || got <= c.CountText(text) {
		t.Errorf("CountChat = %d, %v; want %d (template included)", got, err, len(tok.Encode(tmpl)))
	}
	if n := len(tok.Encode(string(appendFiller(nil, 0, 100)))); n != 100 {
		t.Errorf("100 filler tokens re-tokenize to %d tokens", n)
	}

	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001), Counter: c})
	resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"`+text+`","max_tokens":2}`)
	defer resp.Body.Close()
	var m struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		}
	}
	json.NewDecoder(resp.Body).Decode(&m)
	if m.Usage.PromptTokens != len(tok.Encode(text)) {
		t.Errorf("usage.prompt_tokens = %d, want %d", m.Usage.PromptTokens, len(tok.Encode(text)))
	}
}
