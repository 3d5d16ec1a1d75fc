package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/shareddata"
)

func TestTokenizeCmd(t *testing.T) {
	dir := shareddata.Path(t, "data", "tokenizers", "qwen3")
	tests := []struct {
		name  string
		args  []string
		input string
		want  string
	}{
		{"count", nil, "Hello world", "2\n"},
		{"ids", []string{"--ids"}, "Hello world", "9707 1879\n"},
		{"per line", []string{"--per-line"}, "Hello world\nsecond line", "2\n2\n"},
		{"chat", []string{"--chat", "--ids"}, `[{"role":"user","content":"Hi"}]`, "151644 872 198 13048 151645 198 151644 77091 198\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := newTokenizeCmd()
			var out bytes.Buffer
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			cmd.SetIn(strings.NewReader(tc.input))
			cmd.SetArgs(append([]string{"--tokenizer", dir}, tc.args...))
			if err := cmd.Execute(); err != nil {
				t.Fatal(err)
			}
			if out.String() != tc.want {
				t.Errorf("got %q, want %q", out.String(), tc.want)
			}
		})
	}
	cmd := newTokenizeCmd()
	cmd.SetArgs(nil)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "--model or --tokenizer") {
		t.Errorf("no tokenizer: err = %v", err)
	}
}
