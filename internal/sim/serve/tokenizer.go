package serve

import "github.com/perflab/perflab/internal/tokenizer"

// TokenizerCounter counts prompt tokens exactly with a tokenizer: chat
// prompts through the model's chat template with the generation prompt, as
// vLLM's chat endpoint does.
type TokenizerCounter struct{ Tok *tokenizer.Tokenizer }

var _ Counter = TokenizerCounter{}

// CountText counts a completions prompt.
func (c TokenizerCounter) CountText(text string) int { return len(c.Tok.Encode(text)) }

// CountChat applies the chat template and counts the result; without a
// template it falls back to the estimate's framing around exact content counts.
func (c TokenizerCounter) CountChat(msgs []Message) (int, error) {
	if !c.Tok.HasChatTemplate() {
		n := 3
		for _, m := range msgs {
			n += 4 + len(c.Tok.Encode(m.Content))
		}
		return n, nil
	}
	tm := make([]tokenizer.Message, len(msgs))
	for i, m := range msgs {
		tm[i] = tokenizer.Message{Role: m.Role, Content: m.Content}
	}
	text, err := c.Tok.ApplyChatTemplate(tm, true)
	if err != nil {
		return 0, err
	}
	return len(c.Tok.Encode(text)), nil
}
