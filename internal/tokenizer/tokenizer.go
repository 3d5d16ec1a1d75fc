package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a byte-level BPE tokenizer loaded from a Hugging Face
// tokenizer.json. It is safe for concurrent use.
type Tokenizer struct {
	// source names where the tokenizer was loaded from, for messages.
	source string

	normalizer *norm.Form // nil: no normalization
	pre        []preStep  // pre-tokenizer pipeline; empty: the whole piece is one word

	bpe bpeModel

	added       []addedToken // every added token, by position in tokenizer.json
	addedByID   map[int]*addedToken
	rawTrie     *addedMatcher // non-normalized added tokens, matched on the raw input
	normTrie    *addedMatcher // normalized added tokens, matched on normalized pieces
	specialIDs  []int
	chat        string // chat_template, "" when none
	chatSrc     string // where the template came from, for messages
	bosToken    string
	eosToken    string
	vocabSize   int
	maxAddedID  int
	configFound bool
	chatOnce    chatTemplate
}

// addedToken is an entry of tokenizer.json's added_tokens.
type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`

	bytes []byte // what Decode writes for this token
}

// Load reads dir/tokenizer.json and, when present, dir/tokenizer_config.json
// (special tokens, chat template) and dir/chat_template.jinja.
func Load(dir string) (*Tokenizer, error) {
	return cached("dir", dir, []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}, load)
}

func load(dir string) (*Tokenizer, error) {
	t, err := loadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	switch {
	case err == nil:
		if err := t.applyConfig(cfgPath, data); err != nil {
			return nil, err
		}
	case !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("tokenizer: read %s: %w", cfgPath, err)
	}
	// Newer repositories ship the template as its own file, which
	// transformers prefers over the config's field.
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	if data, err := os.ReadFile(jinjaPath); err == nil {
		t.chat, t.chatSrc = string(data), jinjaPath
	}
	return t, nil
}

// LoadFile reads a tokenizer.json alone. Without tokenizer_config.json,
// SpecialIDs falls back to the added tokens flagged special, and there is no
// chat template.
func LoadFile(path string) (*Tokenizer, error) {
	return cached("file", path, []string{""}, loadFile)
}

func loadFile(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: read %s: %w", path, err)
	}
	t, err := parseTokenizerJSON(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	t.source = path
	return t, nil
}

// tokenizerFile is the part of tokenizer.json this package reads.
type tokenizerFile struct {
	AddedTokens   []addedToken    `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         json.RawMessage `json:"model"`
	PostProcessor json.RawMessage `json:"post_processor"`
}

type typed struct {
	Type string `json:"type"`
}

func parseTokenizerJSON(data []byte) (*Tokenizer, error) {
	var f tokenizerFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("parse tokenizer.json: %w", jsonErrWhere(data, err))
	}
	t := &Tokenizer{addedByID: map[int]*addedToken{}}
	if err := t.bpe.parse(f.Model); err != nil {
		return nil, err
	}
	if err := t.parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	if err := t.parsePreTokenizer(f.PreTokenizer); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	t.vocabSize = len(t.bpe.vocab)
	// HF re-adds the added tokens on load and keeps only the ids it
	// computes: a token already in the vocabulary takes the vocabulary's id,
	// a new one the next free id after the base vocabulary. For consistent
	// files these are the ids written in the file.
	byContent := map[string]int{}
	next := len(t.bpe.vocab)
	for _, a := range f.AddedTokens {
		if a.Content == "" {
			continue // HF ignores these too
		}
		if k, ok := byContent[a.Content]; ok {
			// The same content again: its id stays, its flags change.
			a.ID = t.added[k].ID
			t.added[k] = a
			continue
		}
		if id, ok := t.bpe.vocab[a.Content]; ok {
			a.ID = int(id)
		} else {
			a.ID = next
			next++
		}
		byContent[a.Content] = len(t.added)
		t.added = append(t.added, a)
	}
	var raw, normed []*addedToken
	for i := range t.added {
		a := &t.added[i]
		a.bytes = byteLevelDecodeToken(a.Content)
		t.addedByID[a.ID] = a
		if a.ID > t.maxAddedID {
			t.maxAddedID = a.ID
		}
		if a.Normalized {
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawTrie = newAddedMatcher(raw, nil)
	t.normTrie = newAddedMatcher(normed, t.normalizer)
	// Without a tokenizer_config.json the special tokens are those flagged so.
	for _, a := range t.added {
		if a.Special {
			t.specialIDs = append(t.specialIDs, a.ID)
		}
	}
	return t, nil
}

func (t *Tokenizer) parseNormalizer(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("normalizer: %w", err)
	}
	var form norm.Form
	switch n.Type {
	case "NFC":
		form = norm.NFC
	case "NFKC":
		form = norm.NFKC
	case "NFD":
		form = norm.NFD
	case "NFKD":
		form = norm.NFKD
	case "Sequence":
		if len(n.Normalizers) == 0 {
			return nil
		}
		if len(n.Normalizers) == 1 {
			return t.parseNormalizer(n.Normalizers[0])
		}
		return fmt.Errorf("normalizer: a Sequence of %d normalizers is not supported", len(n.Normalizers))
	default:
		return fmt.Errorf("normalizer: type %q is not supported (NFC, NFKC, NFD, NFKD only)", n.Type)
	}
	t.normalizer = &form
	return nil
}

func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("decoder: missing; only the ByteLevel decoder is supported")
	}
	var d struct {
		Type     string            `json:"type"`
		Decoders []json.RawMessage `json:"decoders"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	switch d.Type {
	case "ByteLevel":
		return nil
	case "Sequence":
		if len(d.Decoders) == 1 {
			return checkDecoder(d.Decoders[0])
		}
	}
	return fmt.Errorf("decoder: type %q is not supported (ByteLevel only)", d.Type)
}

// applyConfig reads tokenizer_config.json: the special tokens that make up
// HF's all_special_ids and the chat template.
func (t *Tokenizer) applyConfig(path string, data []byte) error {
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fmt.Errorf("tokenizer: parse %s: %w", path, jsonErrWhere(data, err))
	}
	t.configFound = true
	// transformers' all_special_tokens walks SPECIAL_TOKENS_ATTRIBUTES in this
	// order, skipping unset ones and repeats.
	var ids []int
	seen := map[string]bool{}
	add := func(tok string) {
		if tok == "" || seen[tok] {
			return
		}
		seen[tok] = true
		if id, ok := t.tokenToID(tok); ok {
			ids = append(ids, id)
		}
	}
	for _, key := range []string{"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"} {
		tok, err := configToken(cfg[key])
		if err != nil {
			return fmt.Errorf("tokenizer: %s: %s: %w", path, key, err)
		}
		switch key {
		case "bos_token":
			t.bosToken = tok
		case "eos_token":
			t.eosToken = tok
		}
		add(tok)
	}
	if raw, ok := cfg["additional_special_tokens"]; ok && !isNull(raw) {
		var list []json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("tokenizer: %s: additional_special_tokens: %w", path, err)
		}
		for i, item := range list {
			tok, err := configToken(item)
			if err != nil {
				return fmt.Errorf("tokenizer: %s: additional_special_tokens[%d]: %w", path, i, err)
			}
			add(tok)
		}
	}
	t.specialIDs = ids
	if raw, ok := cfg["chat_template"]; ok && !isNull(raw) {
		tmpl, err := chatTemplateField(raw)
		if err != nil {
			return fmt.Errorf("tokenizer: %s: chat_template: %w", path, err)
		}
		t.chat, t.chatSrc = tmpl, path
	}
	return nil
}

// configToken reads a special-token field: a string, an AddedToken object
// with "content", or null.
func configToken(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return "", fmt.Errorf("want a string or {\"content\": ...}: %w", err)
	}
	return obj.Content, nil
}

// chatTemplateField reads chat_template: a string, or a list of
// {name, template} where transformers uses the one named "default".
func chatTemplateField(raw json.RawMessage) (string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var list []struct {
		Name     string `json:"name"`
		Template string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", fmt.Errorf("want a string or a list of {name, template}: %w", err)
	}
	for _, e := range list {
		if e.Name == "default" {
			return e.Template, nil
		}
	}
	return "", errors.New("no template named \"default\"")
}

// tokenToID maps a token's text to its id the way transformers'
// convert_tokens_to_ids does: added tokens first, then the model vocabulary.
func (t *Tokenizer) tokenToID(tok string) (int, bool) {
	for i := range t.added {
		if t.added[i].Content == tok {
			return t.added[i].ID, true
		}
	}
	id, ok := t.bpe.vocab[tok]
	return int(id), ok
}

// VocabSize is the base vocabulary size, added tokens excluded (HF's
// tokenizer.vocab_size).
func (t *Tokenizer) VocabSize() int { return t.vocabSize }

// SpecialIDs returns HF's all_special_ids: the ids of bos, eos, unk, sep, pad,
// cls, mask and additional_special_tokens from tokenizer_config.json, in that
// order without repeats. Loaded without a config, it is the added tokens
// flagged special.
func (t *Tokenizer) SpecialIDs() []int {
	return append([]int(nil), t.specialIDs...)
}

// Count returns the number of tokens in text (Encode without special tokens).
func (t *Tokenizer) Count(text string) int {
	n := 0
	t.encode(text, func(int32) { n++ })
	return n
}

// Source is the file the tokenizer was loaded from.
func (t *Tokenizer) Source() string { return t.source }

// AddedTokens lists the added tokens' text by id, for display.
func (t *Tokenizer) AddedTokens() map[int]string {
	m := make(map[int]string, len(t.added))
	for _, a := range t.added {
		m[a.ID] = a.Content
	}
	return m
}

// Encode returns the ids of text without adding special tokens (the
// post-processor's BOS/EOS); added and special tokens written in the text are
// recognised, as HF does by default.
func (t *Tokenizer) Encode(text string) []int {
	ids := make([]int, 0, len(text)/3+1)
	t.encode(text, func(id int32) { ids = append(ids, int(id)) })
	return ids
}

func (t *Tokenizer) encode(text string, emit func(int32)) {
	if !utf8.ValidString(text) {
		// HF takes Rust strings, which are valid by construction; replace
		// invalid bytes the way from_utf8_lossy would have.
		text = lossyUTF8([]byte(text))
	}
	t.rawTrie.split(text, func(piece string, tok *addedToken) {
		if tok != nil {
			emit(int32(tok.ID))
			return
		}
		if t.normalizer != nil {
			piece = normalize(*t.normalizer, piece)
		}
		t.normTrie.split(piece, func(piece string, tok *addedToken) {
			if tok != nil {
				emit(int32(tok.ID))
				return
			}
			t.preTokenize(piece, 0, func(word string) { t.bpe.encodeWord(word, emit) })
		})
	})
}

// normalize applies form, skipping the copy when text already is normal.
func normalize(form norm.Form, text string) string {
	if isASCII(text) || form.IsNormalString(text) {
		return text
	}
	return form.String(text)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Decode turns ids into text the way HF decodes with special tokens kept:
// each token's bytes are joined and invalid UTF-8 becomes one U+FFFD per
// maximal invalid subsequence (Rust's from_utf8_lossy). Ids outside the
// vocabulary are skipped, as HF does.
func (t *Tokenizer) Decode(ids []int) string {
	var buf []byte
	for _, id := range ids {
		if a, ok := t.addedByID[id]; ok {
			buf = append(buf, a.bytes...)
			continue
		}
		if id >= 0 && id < len(t.bpe.idBytes) {
			buf = append(buf, t.bpe.idBytes[id]...)
		}
	}
	return lossyUTF8(buf)
}

// TokenBytes is the raw bytes token id stands for, nil when unknown.
func (t *Tokenizer) TokenBytes(id int) []byte {
	if a, ok := t.addedByID[id]; ok {
		return a.bytes
	}
	if id >= 0 && id < len(t.bpe.idBytes) {
		return t.bpe.idBytes[id]
	}
	return nil
}

// lossyUTF8 converts b to a string, replacing each maximal subpart of an
// ill-formed sequence with one U+FFFD, exactly like Rust's
// String::from_utf8_lossy (and Python's errors="replace").
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var out bytes.Buffer
	out.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			out.WriteByte(c)
			i++
			continue
		}
		n, ok := validPrefix(b[i:])
		if ok {
			out.Write(b[i : i+n])
		} else {
			out.WriteString("\uFFFD")
		}
		i += n
	}
	return out.String()
}

// validPrefix looks at the multi-byte sequence starting b. It returns the
// length of a well-formed sequence and true, or the length of the maximal
// subpart to replace and false (Unicode's "substitution of maximal subparts").
func validPrefix(b []byte) (int, bool) {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1, false
	}
	for k := 1; k <= need; k++ {
		if k >= len(b) || b[k] < lo || b[k] > hi {
			return k, false
		}
		lo, hi = 0x80, 0xBF
	}
	return need + 1, true
}

func isNull(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	return s == "" || s == "null"
}

// jsonErrWhere adds the line and column to a JSON syntax error.
func jsonErrWhere(data []byte, err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var off int64
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	default:
		return err
	}
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	line := 1 + bytes.Count(data[:off], []byte("\n"))
	col := off - int64(bytes.LastIndexByte(data[:off], '\n'))
	return fmt.Errorf("line %d column %d (byte %d): %w", line, col, off, err)
}

// sortedAdded returns added tokens sorted longest first, for leftmost-longest
// matching.
func sortedAdded(toks []*addedToken) []*addedToken {
	out := append([]*addedToken(nil), toks...)
	sort.SliceStable(out, func(i, j int) bool { return len(out[i].Content) > len(out[j].Content) })
	return out
}
