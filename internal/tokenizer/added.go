package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// addedMatcher finds added tokens in text, leftmost-longest like HF's
// Aho-Corasick matcher, and applies their single_word/lstrip/rstrip flags.
type addedMatcher struct {
	first [256]bool
	// byFirst lists candidate patterns by their first byte, longest first.
	byFirst map[byte][]addedPattern
}

type addedPattern struct {
	text string // the content, normalized when the token is normalized
	tok  *addedToken
}

// newAddedMatcher builds a matcher; form, when set, normalizes the patterns
// (HF matches normalized tokens against normalized text).
func newAddedMatcher(toks []*addedToken, form *norm.Form) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	m := &addedMatcher{byFirst: map[byte][]addedPattern{}}
	for _, a := range sortedAdded(toks) {
		text := a.Content
		if form != nil {
			text = form.String(text)
		}
		if text == "" {
			continue
		}
		m.first[text[0]] = true
		m.byFirst[text[0]] = append(m.byFirst[text[0]], addedPattern{text, a})
	}
	return m
}

// split calls fn for each piece of text in order: the text between matches
// (tok nil, never empty) and each matched token (with the whitespace its
// lstrip/rstrip swallowed).
func (m *addedMatcher) split(text string, fn func(piece string, tok *addedToken)) {
	if m == nil {
		if text != "" {
			fn(text, nil)
		}
		return
	}
	startOffset := 0
	for i := 0; i < len(text); {
		if !m.first[text[i]] {
			i++
			continue
		}
		var hit *addedPattern
		for k := range m.byFirst[text[i]] {
			p := &m.byFirst[text[i]][k]
			if strings.HasPrefix(text[i:], p.text) {
				hit = p
				break
			}
		}
		if hit == nil {
			i++
			continue
		}
		start, stop := i, i+len(hit.text)
		// The matcher moves on past every match, even one discarded below.
		i = stop
		a := hit.tok
		if a.SingleWord {
			startSpace := start == 0 || !endsWithWord(text[:start])
			stopSpace := stop == len(text) || !startsWithWord(text[stop:])
			if !startSpace || !stopSpace {
				continue
			}
		}
		if start < startOffset {
			// An earlier token's rstrip already took this text.
			continue
		}
		if a.LStrip {
			start = max(len(strings.TrimRightFunc(text[:start], unicode.IsSpace)), startOffset)
		}
		if a.RStrip {
			stop = len(text) - len(strings.TrimLeftFunc(text[stop:], unicode.IsSpace))
			i = stop
		}
		if startOffset < start {
			fn(text[startOffset:start], nil)
		}
		fn(text[start:stop], a)
		startOffset = stop
	}
	if startOffset < len(text) {
		fn(text[startOffset:], nil)
	}
}

// isWordChar is Rust regex's Unicode \w.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.IsDigit(r) ||
		unicode.In(r, unicode.Pc, unicode.Nl, unicode.Other_Alphabetic, unicode.Join_Control)
}

func endsWithWord(s string) bool {
	r, _ := utf8.DecodeLastRuneInString(s)
	return s != "" && isWordChar(r)
}

func startsWithWord(s string) bool {
	r, _ := utf8.DecodeRuneInString(s)
	return s != "" && isWordChar(r)
}
