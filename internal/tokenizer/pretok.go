package tokenizer

import (
	"encoding/json"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// preStep is one pre-tokenizer of the pipeline.
type preStep struct {
	// split finds the end of the piece starting at i (nil: no split).
	split func(s string, i int) int
	// prefixSpace is ByteLevel's add_prefix_space.
	prefixSpace bool
}

// The Split regexes this package implements by hand. Go's regexp has no
// lookahead, and a hand-written scanner is several times faster anyway.
const (
	// Qwen2, Qwen2.5, Qwen3.
	patQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Qwen3.5: combining marks join the letters.
	patQwen35 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// Llama-3: numbers in groups of up to three digits.
	patLlama3 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// GPT-2, also ByteLevel's own regex (use_regex: true).
	patGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

var knownSplits = map[string]func(s string, i int) int{
	patQwen2:  cl100kStyle{digits: 1}.next,
	patQwen35: cl100kStyle{digits: 1, marks: true}.next,
	patLlama3: cl100kStyle{digits: 3}.next,
	patGPT2:   gpt2Next,
}

func (t *Tokenizer) parsePreTokenizer(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("pre_tokenizer: missing; byte-level BPE needs a ByteLevel pre-tokenizer")
	}
	sawByteLevel := false
	var walk func(raw json.RawMessage) error
	walk = func(raw json.RawMessage) error {
		var p struct {
			Type          string            `json:"type"`
			PreTokenizers []json.RawMessage `json:"pretokenizers"`
			Pattern       struct {
				Regex  *string `json:"Regex"`
				String *string `json:"String"`
			} `json:"pattern"`
			Behavior       string `json:"behavior"`
			Invert         bool   `json:"invert"`
			AddPrefixSpace bool   `json:"add_prefix_space"`
			UseRegex       *bool  `json:"use_regex"`
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			return fmt.Errorf("pre_tokenizer: %w", err)
		}
		switch p.Type {
		case "Sequence":
			for _, sub := range p.PreTokenizers {
				if err := walk(sub); err != nil {
					return err
				}
			}
		case "Split":
			if p.Pattern.Regex == nil {
				return fmt.Errorf("pre_tokenizer: Split on a plain string is not supported")
			}
			if p.Behavior != "Isolated" || p.Invert {
				return fmt.Errorf("pre_tokenizer: Split behavior %q invert=%v is not supported (Isolated only)", p.Behavior, p.Invert)
			}
			fn, ok := knownSplits[*p.Pattern.Regex]
			if !ok {
				return fmt.Errorf("pre_tokenizer: Split regex %q is not one this package implements (Qwen2/Qwen3, Qwen3.5, Llama-3, GPT-2)", *p.Pattern.Regex)
			}
			t.pre = append(t.pre, preStep{split: fn})
		case "ByteLevel":
			sawByteLevel = true
			step := preStep{prefixSpace: p.AddPrefixSpace}
			if p.UseRegex == nil || *p.UseRegex {
				step.split = gpt2Next
			}
			t.pre = append(t.pre, step)
		default:
			return fmt.Errorf("pre_tokenizer: type %q is not supported (Split, ByteLevel, Sequence only)", p.Type)
		}
		return nil
	}
	if err := walk(raw); err != nil {
		return err
	}
	if !sawByteLevel {
		return fmt.Errorf("pre_tokenizer: no ByteLevel step; only byte-level BPE is supported")
	}
	return nil
}

// preTokenize runs the pipeline from step on s and emits the final words.
func (t *Tokenizer) preTokenize(s string, step int, emit func(string)) {
	if s == "" {
		// HF never sees empty pieces: the added-token split drops them.
		return
	}
	for ; step < len(t.pre); step++ {
		p := t.pre[step]
		if p.prefixSpace && (len(s) == 0 || s[0] != ' ') {
			// HF prepends to every piece, empty ones included.
			s = " " + s
		}
		if p.split != nil {
			for i := 0; i < len(s); {
				j := p.split(s, i)
				t.preTokenize(s[i:j], step+1, emit)
				i = j
			}
			return
		}
	}
	emit(s)
}

// Character classes, precomputed for ASCII.
const (
	clsL   = 1 << iota // \p{L}
	clsN               // \p{N}
	clsS               // \s
	clsNL              // \r or \n
	clsM               // \p{M}
	clsAny             // set for every character, so 0 means "end of text"
)

var asciiClass = func() (c [utf8.RuneSelf]uint8) {
	for r := rune(0); r < utf8.RuneSelf; r++ {
		c[r] = classOf(r)
	}
	return
}()

func classOf(r rune) uint8 {
	c := uint8(clsAny)
	switch {
	case unicode.IsLetter(r):
		c |= clsL
	case unicode.IsNumber(r):
		c |= clsN
	case unicode.IsMark(r):
		c |= clsM
	}
	// Oniguruma's \s: U+0009-000D, U+0085 and the Zs/Zl/Zp categories,
	// which is Unicode White_Space, which is what unicode.IsSpace tests.
	if unicode.IsSpace(r) {
		c |= clsS
	}
	if r == '\r' || r == '\n' {
		c |= clsNL
	}
	return c
}

// at returns the class and width of the rune at s[i]; at the end it returns
// 0, 0.
func at(s string, i int) (uint8, int) {
	if i >= len(s) {
		return 0, 0
	}
	if b := s[i]; b < utf8.RuneSelf {
		return asciiClass[b], 1
	}
	r, w := utf8.DecodeRuneInString(s[i:])
	return classOf(r), w
}

// cl100kStyle scans the Qwen/Llama-3 family regex:
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,digits}
//	| ?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// with marks counted as letters when marks is set (Qwen3.5).
type cl100kStyle struct {
	digits int
	marks  bool
}

func (p cl100kStyle) next(s string, i int) int {
	letter := uint8(clsL)
	if p.marks {
		letter |= clsM
	}
	c, w := at(s, i)
	// 1. Contractions, any case.
	if s[i] == '\'' {
		if n := contraction(s[i+1:], true); n > 0 {
			return i + 1 + n
		}
	}
	// 2. An optional non-letter, non-digit, non-newline, then letters.
	if c&letter != 0 {
		return runOf(s, i+w, letter, 0)
	}
	if c&(clsN|clsNL) == 0 {
		if c2, _ := at(s, i+w); c2&letter != 0 {
			return runOf(s, i+w, letter, 0)
		}
	}
	// 3. Digits.
	if c&clsN != 0 {
		j := i + w
		for k := 1; k < p.digits; k++ {
			c2, w2 := at(s, j)
			if c2&clsN == 0 {
				break
			}
			j += w2
		}
		return j
	}
	// 4. An optional space, then other characters, then newlines.
	other := func(c uint8) bool { return c&(clsS|letter|clsN) == 0 && c != 0 }
	j := i
	if s[i] == ' ' {
		if c2, _ := at(s, i+1); other(c2) {
			j = i + 1
		}
	}
	if c2, _ := at(s, j); other(c2) {
		j = runOf(s, j, 0, clsS|letter|clsN)
		return runOf(s, j, clsNL, 0)
	}
	return whitespace(s, i, true)
}

// whitespace handles the regexes' trailing alternatives at a whitespace
// character: \s*[\r\n]+ (when newlines is set), then \s+(?!\S), then \s+.
func whitespace(s string, i int, newlines bool) int {
	end := i
	lastNL, lastStart := -1, i
	for end < len(s) {
		c, w := at(s, end)
		if c&clsS == 0 {
			break
		}
		if c&clsNL != 0 {
			lastNL = end
		}
		lastStart = end
		end += w
	}
	if end == i {
		// Not whitespace: cannot happen for these regexes (every character
		// is a letter, digit, space or other), but never loop forever.
		_, w := at(s, i)
		return i + max(w, 1)
	}
	if newlines && lastNL >= 0 {
		return lastNL + 1
	}
	if end == len(s) || lastStart == i {
		return end
	}
	// Leave the last whitespace character to start the next piece.
	return lastStart
}

// runOf returns the end of the run from i of characters having any class in
// want (want != 0) or none of the classes in avoid (want == 0).
func runOf(s string, i int, want, avoid uint8) int {
	for i < len(s) {
		c, w := at(s, i)
		if want != 0 && c&want == 0 || want == 0 && (c == 0 || c&avoid != 0) {
			break
		}
		i += w
	}
	return i
}

// contraction returns the length of s's leading s|t|re|ve|m|ll|d, or 0.
// Case-insensitive matching follows Oniguruma's case folding, under which
// U+017F (long s) also matches s.
func contraction(s string, fold bool) int {
	if s == "" {
		return 0
	}
	lower := func(i int) (byte, int) {
		if i >= len(s) {
			return 0, 0
		}
		b := s[i]
		if b < utf8.RuneSelf {
			if fold && b >= 'A' && b <= 'Z' {
				b += 'a' - 'A'
			}
			return b, 1
		}
		if fold {
			if r, w := utf8.DecodeRuneInString(s[i:]); r == 'ſ' {
				return 's', w
			}
		}
		return 0, 0
	}
	c, w := lower(0)
	switch c {
	case 's', 't', 'm', 'd':
		return w
	case 'r', 'v':
		if c2, w2 := lower(w); c2 == 'e' {
			return w + w2
		}
	case 'l':
		if c2, w2 := lower(w); c2 == 'l' {
			return w + w2
		}
	}
	return 0
}

// gpt2Next scans GPT-2's regex:
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
func gpt2Next(s string, i int) int {
	if s[i] == '\'' {
		if n := contraction(s[i+1:], false); n > 0 {
			return i + 1 + n
		}
	}
	j := i
	if s[i] == ' ' && i+1 < len(s) {
		j = i + 1
	}
	c, _ := at(s, j)
	switch {
	case c&clsL != 0:
		return runOf(s, j, clsL, 0)
	case c&clsN != 0:
		return runOf(s, j, clsN, 0)
	case c != 0 && c&clsS == 0: // neither letter, digit nor space
		return runOf(s, j, 0, clsS|clsL|clsN)
	}
	return whitespace(s, i, false)
}
