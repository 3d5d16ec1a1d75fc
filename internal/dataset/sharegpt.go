package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
)

// vLLM's is_valid_sequence bounds for ShareGPT.
const (
	shareGPTMinLen       = 4
	shareGPTMaxPromptLen = 1024
	shareGPTMaxTotalLen  = 2048
)

type shareGPTTurn struct {
	From  string `json:"from"`
	Value string `json:"value"`
}

type shareGPTEntry struct {
	ID            string         `json:"id"`
	Conversations []shareGPTTurn `json:"conversations"`
}

// span is where one kept entry lies in the file, so the file never has to
// be held whole: pass one records spans, pass two reads back only the
// entries the shuffle reaches.
type span struct{ start, end int64 }

// shareGPTIndex lists the spans of entries with at least two turns, in
// file order, and counts what was left out.
type shareGPTIndex struct {
	spans      []span
	total      int
	noConvs    int
	shortConvs int
}

// indexShareGPT streams the top-level JSON array token by token.
func indexShareGPT(path string, r io.Reader) (*shareGPTIndex, error) {
	dec := json.NewDecoder(bufio.NewReaderSize(r, 1<<20))
	tokErr := func(err error) error { return jsonErr(path, "", err) }
	t, err := dec.Token()
	if err != nil {
		return nil, tokErr(err)
	}
	if d, ok := t.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("dataset: %s: want a JSON array of conversations, got %v at byte 0", path, describeToken(t))
	}
	idx := &shareGPTIndex{}
	for dec.More() {
		start := dec.InputOffset()
		var e struct {
			Conversations *[]json.RawMessage `json:"conversations"`
		}
		if err := dec.Decode(&e); err != nil {
			return nil, jsonErr(path, fmt.Sprintf("entry %d: ", idx.total), err)
		}
		idx.total++
		switch {
		case e.Conversations == nil:
			idx.noConvs++
		case len(*e.Conversations) < 2:
			idx.shortConvs++
		default:
			idx.spans = append(idx.spans, span{start, dec.InputOffset()})
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, tokErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, fmt.Errorf("dataset: %s: data after the top-level array at byte %d", path, dec.InputOffset())
		}
		return nil, tokErr(err)
	}
	return idx, nil
}

func describeToken(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return "a string"
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// jsonErr turns encoding/json errors into ones that say where: the file,
// then entry ("entry 3: " or ""), then the place in the file. It is the
// only layer that adds "dataset: PATH: ".
func jsonErr(path, entry string, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("dataset: %s: %smalformed JSON at byte %d%s: %w", path, entry, se.Offset, lineOf(path, se.Offset), err)
	case errors.As(err, &te):
		return fmt.Errorf("dataset: %s: %swrong schema at byte %d%s: field %q: want %v, got %s", path, entry, te.Offset, lineOf(path, te.Offset), te.Field, te.Type, te.Value)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return fmt.Errorf("dataset: %s: %struncated JSON: %w", path, entry, io.ErrUnexpectedEOF)
	default:
		return fmt.Errorf("dataset: %s: %s%w", path, entry, err)
	}
}

// lineOf rescans the file up to off to name the line; only on error paths.
func lineOf(path string, off int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	br := bufio.NewReader(io.LimitReader(f, off))
	line := 1
	for {
		b, err := br.ReadByte()
		if err != nil {
			break
		}
		if b == '\n' {
			line++
		}
	}
	return fmt.Sprintf(" (line %d)", line)
}

// readEntry decodes the entry stored in s.
func readEntry(path string, f io.ReaderAt, s span) (*shareGPTEntry, error) {
	buf := make([]byte, s.end-s.start)
	if _, err := f.ReadAt(buf, s.start); err != nil {
		return nil, fmt.Errorf("dataset: read %s: %w", path, err)
	}
	// The span starts right after the previous value, so it may begin
	// with the separating comma.
	buf = bytes.TrimLeft(buf, " \t\r\n,")
	var e shareGPTEntry
	if err := json.Unmarshal(buf, &e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			te.Offset += s.end - int64(len(buf))
			return nil, jsonErr(path, "", te)
		}
		return nil, fmt.Errorf("dataset: %s: entry at byte %d: %w", path, s.start, err)
	}
	return &e, nil
}

// filterCounts says how many conversations each vLLM filter dropped.
type filterCounts struct {
	promptShort, outputShort, promptLong, totalLong int
}

func (c filterCounts) String() string {
	return fmt.Sprintf("prompt < %d tokens: %d, output < %d tokens: %d, prompt > %d tokens: %d, prompt+output > %d tokens: %d",
		shareGPTMinLen, c.promptShort, shareGPTMinLen, c.outputShort, shareGPTMaxPromptLen, c.promptLong, shareGPTMaxTotalLen, c.totalLong)
}

// validSequence is vLLM's is_valid_sequence, counting the first failing
// check.
func (c *filterCounts) validSequence(promptLen, outputLen int, skipMinOutput bool) bool {
	switch {
	case promptLen < shareGPTMinLen:
		c.promptShort++
	case !skipMinOutput && outputLen < shareGPTMinLen:
		c.outputShort++
	case promptLen > shareGPTMaxPromptLen:
		c.promptLong++
	case promptLen+outputLen > shareGPTMaxTotalLen:
		c.totalLong++
	default:
		return true
	}
	return false
}

// sampleShareGPT is vLLM v0.11.0's ShareGPTDataset: keep entries with at
// least two turns, random.seed(seed) + random.shuffle, then walk the
// shuffled list taking turn 0 as prompt and turn 1 as completion until
// num_prompts pass is_valid_sequence, then oversample.
func sampleShareGPT(opt Options, tok Tokenizer) ([]Request, error) {
	if opt.Path == "" {
		return nil, errors.New("dataset: sharegpt needs a dataset path (the ShareGPT JSON file)")
	}
	f, err := os.Open(opt.Path)
	if err != nil {
		return nil, fmt.Errorf("dataset: sharegpt: %w", err) // "open PATH: ..."
	}
	defer f.Close()
	idx, err := indexShareGPT(opt.Path, f)
	if err != nil {
		return nil, err
	}
	spans := idx.spans
	if !opt.DisableShuffle {
		newPyRandom(opt.Seed).shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	}
	n := opt.numPrompts()
	outOverride := opt.ShareGPTOutputLen
	var counts filterCounts
	reqs := make([]Request, 0, n)

	// Tokenize ahead in parallel batches, then apply vLLM's sequential
	// walk; the batch past the last needed entry is wasted work, nothing
	// more.
	type tokenized struct {
		e                   *shareGPTEntry
		promptLen, complLen int
		err                 error
	}
	const batch = 256
	for pos := 0; pos < len(spans) && len(reqs) < n; {
		// Need n-len(reqs) more; tokenize a little beyond, not the file.
		end := min(pos+batch, len(spans), pos+max(2*(n-len(reqs)), 16))
		res := make([]tokenized, end-pos)
		parallelFor(end-pos, func(k int) {
			e, err := readEntry(opt.Path, f, spans[pos+k])
			if err != nil {
				res[k].err = err
				return
			}
			res[k].e = e
			res[k].promptLen = len(tok.Encode(e.Conversations[0].Value))
			if outOverride == 0 {
				res[k].complLen = len(tok.Encode(e.Conversations[1].Value))
			}
		})
		for _, r := range res {
			if len(reqs) >= n {
				break
			}
			if r.err != nil {
				return nil, r.err
			}
			outLen := r.complLen
			if outOverride != 0 {
				outLen = outOverride
			}
			if !counts.validSequence(r.promptLen, outLen, outOverride != 0) {
				continue
			}
			reqs = append(reqs, Request{
				Prompt:    r.e.Conversations[0].Value,
				PromptLen: r.promptLen,
				OutputLen: outLen,
				SourceID:  r.e.ID,
			})
		}
		pos = end
	}
	if len(reqs) == 0 {
		return nil, fmt.Errorf("dataset: %s: no conversation left after filtering: %d entries, %d without conversations, %d with fewer than 2 turns; of the rest %s",
			opt.Path, idx.total, idx.noConvs, idx.shortConvs, counts)
	}
	return oversample(reqs, n, opt.Seed, opt.NoOversample), nil
}
