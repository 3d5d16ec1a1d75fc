package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/perflab/perflab/internal/tokenizer"
)

func newTokenizeCmd() *cobra.Command {
	var (
		model, tokPath string
		chat, ids      bool
		perLine        bool
		noGenPrompt    bool
	)
	cmd := &cobra.Command{
		Use:   "tokenize [--model M | --tokenizer PATH] [--chat] [--ids] [FILE|-]",
		Short: "Count the tokens of a text (or a chat) with a model's Hugging Face tokenizer",
		Long: `Tokenize reads FILE (or standard input when FILE is - or absent) and prints
its token count, counted like Hugging Face tokenizers without special tokens
added. With --ids it prints the token ids instead, space-separated.

--per-line counts (or lists ids for) each input line on its own.
--chat takes the input as a chat: a JSON array of {"role", "content"}
messages, or plain text sent as one user message; it renders the model's
chat_template with the generation prompt (as an OpenAI chat request to vLLM
would) and counts the rendered prompt.

The tokenizer comes from --tokenizer (a directory or tokenizer.json), or
from --model looked up like Hugging Face does: the HF cache (HF_HUB_CACHE,
HF_HOME), then the Hub (HF_TOKEN, HF_ENDPOINT; HF_HUB_OFFLINE=1 forbids it).`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if model == "" && tokPath == "" {
				return errors.New("tokenize: give --model or --tokenizer")
			}
			if chat && perLine {
				return errors.New("tokenize: --chat and --per-line do not go together")
			}
			stderr := cmd.ErrOrStderr()
			tok, err := tokenizer.Resolve(cmd.Context(), model, tokenizer.ResolveOptions{
				Path: tokPath,
				Logf: func(f string, a ...any) { fmt.Fprintf(stderr, f+"\n", a...) },
			})
			if err != nil {
				return fmt.Errorf("tokenize: %w%s", err, tokenizerHint(err, "--tokenizer"))
			}
			in, name, err := openInput(cmd, args)
			if err != nil {
				return err
			}
			defer in.Close()
			out := bufio.NewWriter(cmd.OutOrStdout())
			defer out.Flush()
			emit := func(text string) {
				if ids {
					writeIDs(out, tok.Encode(text))
				} else {
					fmt.Fprintln(out, tok.Count(text))
				}
			}
			if perLine {
				sc := bufio.NewScanner(in)
				sc.Buffer(nil, 1<<30)
				for sc.Scan() {
					emit(sc.Text())
				}
				if err := sc.Err(); err != nil {
					return fmt.Errorf("tokenize: read %s: %w", name, err)
				}
				return nil
			}
			data, err := io.ReadAll(in)
			if err != nil {
				return fmt.Errorf("tokenize: read %s: %w", name, err)
			}
			text := string(data)
			if chat {
				msgs, err := parseChatInput(data)
				if err != nil {
					return fmt.Errorf("tokenize: %s: %w", name, err)
				}
				text, err = tok.ApplyChatTemplate(msgs, !noGenPrompt)
				if err != nil {
					return err
				}
			}
			emit(text)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&model, "model", "", "Hugging Face model whose tokenizer to use (e.g. Qwen/Qwen3-8B)")
	f.StringVar(&tokPath, "tokenizer", "", "tokenizer directory or tokenizer.json (overrides --model)")
	f.BoolVar(&chat, "chat", false, "treat the input as chat messages and count the rendered chat template")
	f.BoolVar(&noGenPrompt, "no-generation-prompt", false, "with --chat, leave out the assistant turn's opening")
	f.BoolVar(&ids, "ids", false, "print the token ids instead of the count")
	f.BoolVar(&perLine, "per-line", false, "tokenize each input line on its own")
	return cmd
}

func openInput(cmd *cobra.Command, args []string) (io.ReadCloser, string, error) {
	if len(args) == 0 || args[0] == "-" {
		return io.NopCloser(cmd.InOrStdin()), "standard input", nil
	}
	f, err := os.Open(args[0])
	if err != nil {
		return nil, "", fmt.Errorf("tokenize: %w", err)
	}
	return f, args[0], nil
}

// parseChatInput reads a JSON array of messages; anything that is not JSON
// is one user message.
func parseChatInput(data []byte) ([]tokenizer.Message, error) {
	trimmed := strings.TrimSpace(string(data))
	if !strings.HasPrefix(trimmed, "[") {
		return []tokenizer.Message{{Role: "user", Content: string(data)}}, nil
	}
	var msgs []tokenizer.Message
	if err := json.Unmarshal([]byte(trimmed), &msgs); err != nil {
		return nil, fmt.Errorf("chat messages: %w", err)
	}
	for i, m := range msgs {
		if m.Role == "" {
			return nil, fmt.Errorf("chat messages[%d]: no role", i)
		}
	}
	return msgs, nil
}

func writeIDs(w *bufio.Writer, ids []int) {
	for i, id := range ids {
		if i > 0 {
			w.WriteByte(' ')
		}
		w.WriteString(strconv.Itoa(id))
	}
	w.WriteByte('\n')
}
