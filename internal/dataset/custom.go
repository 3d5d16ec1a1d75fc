package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
)

// maxLineBytes bounds one JSONL line (a 32k-token prompt is ~150 kB).
const maxLineBytes = 64 << 20

// customLine is one line of a custom dataset. Other keys are ignored, as
// vLLM's pandas reader ignores other columns.
type customLine struct {
	Prompt       *string          `json:"prompt"`
	OutputTokens *json.RawMessage `json:"output_tokens"`
}

type customRow struct {
	prompt string
	out    int // 0 when the line had none
	line   int
}

// readCustom parses JSONL; every error names file:line.
func readCustom(path string, r io.Reader) ([]customRow, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	var rows []customRow
	for line := 1; ; line++ {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			full := append([]byte(nil), b...)
			for errors.Is(err, bufio.ErrBufferFull) {
				if len(full) > maxLineBytes {
					return nil, fmt.Errorf("dataset: %s:%d: line longer than %d bytes", path, line, maxLineBytes)
				}
				b, err = br.ReadSlice('\n')
				full = append(full, b...)
			}
			b = full
		}
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("dataset: read %s: %w", path, err)
		}
		if t := bytes.TrimSpace(b); len(t) > 0 {
			row, perr := parseCustomLine(t)
			if perr != nil {
				return nil, fmt.Errorf("dataset: %s:%d: %w", path, line, perr)
			}
			row.line = line
			rows = append(rows, row)
		}
		if err == io.EOF {
			return rows, nil
		}
	}
}

func parseCustomLine(b []byte) (customRow, error) {
	if b[0] != '{' {
		return customRow{}, errors.New("want a JSON object {\"prompt\": ..., \"output_tokens\": ...}")
	}
	var l customLine
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&l); err != nil {
		var se *json.SyntaxError
		var te *json.UnmarshalTypeError
		switch {
		case errors.As(err, &se):
			return customRow{}, fmt.Errorf("malformed JSON at column %d: %w", se.Offset, err)
		case errors.As(err, &te):
			return customRow{}, fmt.Errorf("field %q: want %v, got %s", te.Field, te.Type, te.Value)
		}
		return customRow{}, fmt.Errorf("malformed JSON: %w", err)
	}
	if dec.More() {
		return customRow{}, fmt.Errorf("data after the JSON object at column %d", dec.InputOffset()+1)
	}
	if l.Prompt == nil {
		return customRow{}, errors.New(`missing "prompt"`)
	}
	row := customRow{prompt: *l.Prompt}
	if l.OutputTokens != nil && string(*l.OutputTokens) != "null" {
		v, err := strconv.Atoi(string(*l.OutputTokens))
		if err != nil {
			// pandas would read 12.0; accept integral floats only.
			f, ferr := strconv.ParseFloat(string(*l.OutputTokens), 64)
			if ferr != nil || f != float64(int(f)) {
				return customRow{}, fmt.Errorf(`"output_tokens" %s is not an integer`, *l.OutputTokens)
			}
			v = int(f)
		}
		if v < 1 {
			return customRow{}, fmt.Errorf(`"output_tokens" %d must be at least 1`, v)
		}
		row.out = v
	}
	return row, nil
}

// sampleCustom is vLLM's CustomDataset with --skip-chat-template: load the
// JSONL, random.seed(seed) + random.shuffle, take the first num_prompts,
// count prompt tokens, oversample. (perflab's bench applies chat templates
// at the endpoint; the prompt here is the user message.)
func sampleCustom(opt Options, tok Tokenizer) ([]Request, error) {
	if opt.Path == "" {
		return nil, errors.New("dataset: custom needs a dataset path (a JSONL file)")
	}
	f, err := os.Open(opt.Path)
	if err != nil {
		return nil, fmt.Errorf("dataset: custom: %w", err) // "open PATH: ..."
	}
	defer f.Close()
	rows, err := readCustom(opt.Path, f)
	if err != nil {
		return nil, err
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("dataset: %s: no requests (empty file)", opt.Path)
	}
	if !opt.DisableShuffle {
		newPyRandom(opt.Seed).shuffle(len(rows), func(i, j int) { rows[i], rows[j] = rows[j], rows[i] })
	}
	n := opt.numPrompts()
	rows = rows[:min(n, len(rows))]
	reqs := make([]Request, len(rows))
	for i, r := range rows {
		out := opt.CustomOutputLen
		switch {
		case out > 0:
		case r.out > 0:
			out = r.out
		case out == -1:
			return nil, fmt.Errorf("dataset: %s:%d: no \"output_tokens\" and custom output len is -1 (take it from the file)", opt.Path, r.line)
		default:
			out = DefaultCustomOutputLen
		}
		reqs[i] = Request{Prompt: r.prompt, OutputLen: out, SourceID: opt.Path + ":" + strconv.Itoa(r.line)}
	}
	parallelFor(len(reqs), func(i int) { reqs[i].PromptLen = len(tok.Encode(reqs[i].Prompt)) })
	return oversample(reqs, n, opt.Seed, opt.NoOversample), nil
}
