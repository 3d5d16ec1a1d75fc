package tokenizer

import (
	"encoding/json"
	"fmt"
	"hash/maphash"
	"strings"
	"sync"
)

// byteToChar is GPT-2's byte-level alphabet: printable bytes stand for
// themselves, the rest are shifted to U+0100 and up so that every byte has a
// visible, non-space character.
var byteToChar, charToByte = func() ([256]rune, map[rune]byte) {
	var b2c [256]rune
	c2b := make(map[rune]byte, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			b2c[b] = rune(b)
		} else {
			b2c[b] = rune(256 + n)
			n++
		}
		c2b[b2c[b]] = byte(b)
	}
	return b2c, c2b
}()

// byteLevelDecodeToken maps a token's byte-level characters back to bytes.
// Like HF's ByteLevel decoder, a token holding any character outside the
// alphabet is taken as its own UTF-8 text.
func byteLevelDecodeToken(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := charToByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// byteLevelEncode maps raw bytes to byte-level characters.
func byteLevelEncode(b []byte) string {
	var sb strings.Builder
	for _, c := range b {
		sb.WriteRune(byteToChar[c])
	}
	return sb.String()
}

// bpeModel is HF's BPE model specialised for byte-level input: words are raw
// bytes, the initial symbols are the 256 byte tokens, and merges are keyed by
// id pairs.
type bpeModel struct {
	vocab        map[string]int32 // byte-level token text -> id
	rawVocab     map[string]int32 // raw bytes -> id, for ignore_merges
	idBytes      [][]byte         // id -> raw bytes (Decode)
	byteID       [256]int32       // id of each single byte, -1 when missing
	merges       map[uint64]uint64
	ignoreMerges bool
	cache        wordCache
}

// cacheMaxWord mirrors HF's cache MAX_LENGTH: longer words are not cached.
const cacheMaxWord = 256

func (m *bpeModel) parse(raw json.RawMessage) error {
	if isNull(raw) {
		return fmt.Errorf("model: missing")
	}
	var kind typed
	if err := json.Unmarshal(raw, &kind); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if kind.Type != "" && kind.Type != "BPE" {
		return fmt.Errorf("model: type %q is not supported (byte-level BPE only: Qwen, Llama-3, GPT-2 style)", kind.Type)
	}
	var f struct {
		Type                    string            `json:"type"`
		Vocab                   map[string]int32  `json:"vocab"`
		Merges                  []json.RawMessage `json:"merges"`
		Dropout                 *float64          `json:"dropout"`
		UnkToken                *string           `json:"unk_token"`
		ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
		EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
		ByteFallback            bool              `json:"byte_fallback"`
		IgnoreMerges            bool              `json:"ignore_merges"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		return fmt.Errorf("model: %w", err)
	}
	if f.Type == "" && f.Merges != nil {
		f.Type = "BPE" // old files leave the type out
	}
	if f.Type != "BPE" {
		return fmt.Errorf("model: type %q is not supported (byte-level BPE only: Qwen, Llama-3, GPT-2 style)", f.Type)
	}
	if f.Dropout != nil && *f.Dropout != 0 {
		return fmt.Errorf("model: BPE dropout %v is not supported", *f.Dropout)
	}
	if f.ContinuingSubwordPrefix != nil && *f.ContinuingSubwordPrefix != "" ||
		f.EndOfWordSuffix != nil && *f.EndOfWordSuffix != "" {
		return fmt.Errorf("model: continuing_subword_prefix/end_of_word_suffix are not supported")
	}
	if f.ByteFallback {
		return fmt.Errorf("model: byte_fallback BPE (SentencePiece style) is not supported; byte-level BPE only")
	}
	if len(f.Vocab) == 0 {
		return fmt.Errorf("model: empty vocab")
	}
	m.vocab = f.Vocab
	m.ignoreMerges = f.IgnoreMerges
	maxID := int32(-1)
	for tok, id := range f.Vocab {
		if id < 0 {
			return fmt.Errorf("model: vocab %q has negative id %d", tok, id)
		}
		maxID = max(maxID, id)
	}
	m.idBytes = make([][]byte, maxID+1)
	m.rawVocab = make(map[string]int32, len(f.Vocab))
	for tok, id := range f.Vocab {
		b := byteLevelDecodeToken(tok)
		m.idBytes[id] = b
		m.rawVocab[string(b)] = id
	}
	for b := 0; b < 256; b++ {
		m.byteID[b] = -1
		if id, ok := f.Vocab[string(byteToChar[b])]; ok {
			m.byteID[b] = id
		}
	}
	m.merges = make(map[uint64]uint64, len(f.Merges))
	for rank, mr := range f.Merges {
		a, b, err := parseMerge(mr)
		if err != nil {
			return fmt.Errorf("model: merges[%d]: %w", rank, err)
		}
		ia, ok1 := f.Vocab[a]
		ib, ok2 := f.Vocab[b]
		in, ok3 := f.Vocab[a+b]
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("model: merges[%d] %q + %q: token not in vocab", rank, a, b)
		}
		key := uint64(ia)<<32 | uint64(ib)
		if _, dup := m.merges[key]; !dup {
			m.merges[key] = uint64(rank)<<32 | uint64(in)
		}
	}
	m.cache.init()
	return nil
}

// parseMerge reads a merge, either "a b" (older files) or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok {
			return "", "", fmt.Errorf("%q is not \"a b\"", s)
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("want \"a b\" or [a, b], got %s", raw)
	}
	return pair[0], pair[1], nil
}

// encodeWord emits the ids of one pre-token (raw bytes).
func (m *bpeModel) encodeWord(word string, emit func(int32)) {
	if len(word) == 0 {
		return
	}
	if len(word) == 1 {
		if id := m.byteID[word[0]]; id >= 0 {
			emit(id)
		}
		return
	}
	if m.ignoreMerges {
		if id, ok := m.rawVocab[word]; ok {
			emit(id)
			return
		}
	}
	cacheable := len(word) < cacheMaxWord
	if cacheable {
		if ids, ok := m.cache.get(word); ok {
			for _, id := range ids {
				emit(id)
			}
			return
		}
	}
	ids := m.merge(word)
	if cacheable {
		m.cache.put(word, ids)
	}
	for _, id := range ids {
		emit(id)
	}
}

// merge applies the merges lowest rank first, leftmost first among equal
// ranks, which is the order HF's priority queue pops them in.
func (m *bpeModel) merge(word string) []int32 {
	syms := make([]int32, 0, len(word))
	for i := 0; i < len(word); i++ {
		// A byte with no token is dropped, as HF drops unknown characters
		// when the model has no unk_token.
		if id := m.byteID[word[i]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	if len(syms) > 64 {
		return m.mergeHeap(syms)
	}
	const none = ^uint64(0)
	// ranks[k] is the merge of syms[k], syms[k+1] (rank<<32 | new id).
	ranks := make([]uint64, len(syms))
	pair := func(k int) uint64 {
		if k+1 >= len(syms) {
			return none
		}
		if r, ok := m.merges[uint64(syms[k])<<32|uint64(uint32(syms[k+1]))]; ok {
			return r
		}
		return none
	}
	for k := range syms {
		ranks[k] = pair(k)
	}
	for len(syms) > 1 {
		best, at := none, -1
		for k := 0; k < len(syms)-1; k++ {
			// Strictly lower: the leftmost pair wins ties.
			if r := ranks[k]; r != none && (at < 0 || r>>32 < best>>32) {
				best, at = r, k
			}
		}
		if at < 0 {
			break
		}
		syms[at] = int32(uint32(best))
		syms = append(syms[:at+1], syms[at+2:]...)
		ranks = append(ranks[:at+1], ranks[at+2:]...)
		ranks[at] = pair(at)
		if at > 0 {
			ranks[at-1] = pair(at - 1)
		}
	}
	return syms
}

// wordCache is a sharded, bounded map from word to ids. When a shard fills it
// is emptied, which keeps memory bounded on endless input.
type wordCache struct {
	seed   maphash.Seed
	shards [32]cacheShard
}

type cacheShard struct {
	mu sync.RWMutex
	m  map[string][]int32
}

const cacheShardCap = 4096

func (c *wordCache) init() {
	c.seed = maphash.MakeSeed()
	for i := range c.shards {
		c.shards[i].m = make(map[string][]int32, 256)
	}
}

func (c *wordCache) shard(word string) *cacheShard {
	return &c.shards[maphash.String(c.seed, word)%uint64(len(c.shards))]
}

func (c *wordCache) get(word string) ([]int32, bool) {
	s := c.shard(word)
	s.mu.RLock()
	ids, ok := s.m[word]
	s.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	s := c.shard(word)
	s.mu.Lock()
	if len(s.m) >= cacheShardCap {
		s.m = make(map[string][]int32, 256)
	}
	s.m[strings.Clone(word)] = ids
	s.mu.Unlock()
}

// mergeHeap is merge for long words: a linked list of symbols and a binary
// heap of candidate merges ordered by (rank, position), HF's Word::merge_all.
func (m *bpeModel) mergeHeap(ids []int32) []int32 {
	n := len(ids)
	next := make([]int32, n)
	prev := make([]int32, n)
	alive := make([]bool, n)
	for i := range ids {
		next[i], prev[i], alive[i] = int32(i+1), int32(i-1), true
	}
	next[n-1] = -1
	var h mergeQueue
	push := func(pos int32) {
		nx := next[pos]
		if nx < 0 {
			return
		}
		if r, ok := m.merges[uint64(ids[pos])<<32|uint64(uint32(ids[nx]))]; ok {
			h.push(mergeItem{rank: uint32(r >> 32), pos: pos, newID: int32(uint32(r))})
		}
	}
	for i := 0; i < n-1; i++ {
		push(int32(i))
	}
	for len(h) > 0 {
		top := h.pop()
		if !alive[top.pos] {
			continue
		}
		nx := next[top.pos]
		if nx < 0 {
			continue
		}
		// Stale entry: the pair at pos changed since it was queued.
		r, ok := m.merges[uint64(ids[top.pos])<<32|uint64(uint32(ids[nx]))]
		if !ok || int32(uint32(r)) != top.newID {
			continue
		}
		ids[top.pos] = top.newID
		alive[nx] = false
		next[top.pos] = next[nx]
		if nn := next[nx]; nn >= 0 {
			prev[nn] = top.pos
		}
		if p := prev[top.pos]; p >= 0 {
			push(p)
		}
		push(top.pos)
	}
	out := ids[:0]
	for i := int32(0); i >= 0; i = next[i] {
		out = append(out, ids[i])
	}
	return out
}

type mergeItem struct {
	rank  uint32
	pos   int32
	newID int32
}

func (a mergeItem) less(b mergeItem) bool {
	return a.rank < b.rank || a.rank == b.rank && a.pos < b.pos
}

// mergeQueue is a binary min-heap of mergeItem.
type mergeQueue []mergeItem

func (h *mergeQueue) push(it mergeItem) {
	*h = append(*h, it)
	q := *h
	for i := len(q) - 1; i > 0; {
		p := (i - 1) / 2
		if !q[i].less(q[p]) {
			break
		}
		q[i], q[p] = q[p], q[i]
		i = p
	}
}

func (h *mergeQueue) pop() mergeItem {
	q := *h
	top := q[0]
	last := len(q) - 1
	q[0] = q[last]
	q = q[:last]
	for i := 0; ; {
		l, r, small := 2*i+1, 2*i+2, i
		if l < len(q) && q[l].less(q[small]) {
			small = l
		}
		if r < len(q) && q[r].less(q[small]) {
			small = r
		}
		if small == i {
			break
		}
		q[i], q[small] = q[small], q[i]
		i = small
	}
	*h = q
	return top
}
