package tokenizer

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one chat message given to the chat template.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is a previous assistant turn's thinking, which Qwen3's
	// template places inside <think>; left out of the template's view when
	// empty, so `is defined` is false as with a plain OpenAI message.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// ChatOptions are the template variables beyond the messages.
type ChatOptions struct {
	// AddGenerationPrompt appends the assistant turn's opening.
	AddGenerationPrompt bool
	// EnableThinking, when set, is passed as enable_thinking (Qwen3: false
	// adds an empty <think></think> block).
	EnableThinking *bool
	// Vars are further template variables (chat_template_kwargs), e.g.
	// "tools".
	Vars map[string]any
}

// chatTemplate is the parsed template, built on first use.
type chatTemplate struct {
	once sync.Once
	tpl  *exec.Template
	err  error
}

// HasChatTemplate reports whether the tokenizer came with a chat template.
func (t *Tokenizer) HasChatTemplate() bool { return t.chat != "" }

// ApplyChatTemplate renders msgs with the model's chat_template, as
// transformers' apply_chat_template(tokenize=False) does.
func (t *Tokenizer) ApplyChatTemplate(msgs []Message, addGenerationPrompt bool) (string, error) {
	return t.ApplyChatTemplateWith(msgs, ChatOptions{AddGenerationPrompt: addGenerationPrompt})
}

// ApplyChatTemplateWith is ApplyChatTemplate with the other template
// variables (enable_thinking, tools, ...).
func (t *Tokenizer) ApplyChatTemplateWith(msgs []Message, opt ChatOptions) (string, error) {
	if t.chat == "" {
		return "", fmt.Errorf("tokenizer: %s has no chat_template (tokenizer_config.json or chat_template.jinja)", t.source)
	}
	tpl, err := t.chatTemplate()
	if err != nil {
		return "", err
	}
	list := make([]any, len(msgs))
	for i, m := range msgs {
		mm := map[string]any{"role": m.Role, "content": m.Content}
		if m.ReasoningContent != "" {
			mm["reasoning_content"] = m.ReasoningContent
		}
		list[i] = mm
	}
	// transformers passes the special tokens' text, then the kwargs.
	vars := map[string]any{
		"bos_token": t.bosToken,
		"eos_token": t.eosToken,
	}
	for k, v := range opt.Vars {
		vars[k] = v
	}
	vars["messages"] = list
	vars["add_generation_prompt"] = opt.AddGenerationPrompt
	if opt.EnableThinking != nil {
		vars["enable_thinking"] = *opt.EnableThinking
	}
	out, err := renderSafely(tpl, vars)
	if err != nil {
		return "", fmt.Errorf("tokenizer: chat template from %s: %w", t.chatSrc, err)
	}
	return out, nil
}

func (t *Tokenizer) chatTemplate() (*exec.Template, error) {
	t.chatOnce.once.Do(func() {
		t.chatOnce.tpl, t.chatOnce.err = parseChatTemplate(t.chat)
		if t.chatOnce.err != nil {
			t.chatOnce.err = fmt.Errorf("tokenizer: parse chat template from %s: %w", t.chatSrc, t.chatOnce.err)
		}
	})
	return t.chatOnce.tpl, t.chatOnce.err
}

// errTemplateRaised carries raise_exception's message out of a render.
var errTemplateRaised = errors.New("template raised an exception")

// parseChatTemplate compiles a template with transformers' Jinja settings:
// trim_blocks and lstrip_blocks on, and the raise_exception helper.
func parseChatTemplate(src string) (*exec.Template, error) {
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	// A loader that finds nothing: a template from the Hub must not read
	// local files through {% include %}.
	loader, err := loaders.NewShiftedLoader("chat_template", strings.NewReader(src), noFiles{})
	if err != nil {
		return nil, err
	}
	ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
	ctx.Set("raise_exception", func(msg string) (string, error) {
		return "", fmt.Errorf("%w: %s", errTemplateRaised, msg)
	})
	env := &exec.Environment{
		Context:           ctx,
		Filters:           builtins.Filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
	return exec.NewTemplate("chat_template", cfg, loader, env)
}

// noFiles is a gonja loader with no templates in it.
type noFiles struct{}

func (noFiles) Read(path string) (io.Reader, error) {
	return nil, fmt.Errorf("chat templates may not include other templates (%q)", path)
}
func (noFiles) Resolve(path string) (string, error)      { return path, nil }
func (n noFiles) Inherit(string) (loaders.Loader, error) { return n, nil }

// renderSafely renders tpl, turning a panic inside the template engine into
// an error: a template from the Hub is input, and input must not crash us.
func renderSafely(tpl *exec.Template, vars map[string]any) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("template engine panic: %v", r)
		}
	}()
	return tpl.ExecuteToString(exec.NewContext(vars))
}
