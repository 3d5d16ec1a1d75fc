package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// A process reads the same tokenizer many times: each bench job of
// `perflab serve`, each lab and each CLI test parses the same 11 MB
// tokenizer.json, and parsing it is most of their set-up (0.8 s here,
// about 6 s under the race detector). A Tokenizer does not change once
// loaded and is safe for concurrent use, so one copy serves every caller
// while its files are unchanged: the key holds each file's size and
// modification time, so an edited or replaced file is read again.

// cacheSize bounds the tokenizers kept: a server that benchmarks many
// models keeps the few most recent, not all.
const cacheSize = 8

type cacheEntry struct {
	once sync.Once
	tok  *Tokenizer
	err  error
	used uint64
}

var loaded struct {
	mu    sync.Mutex
	clock uint64
	m     map[string]*cacheEntry
}

// cached returns what read(path) returns, read once for each state of
// the files named (path joined with each name; "" is path itself). A
// failed read is not kept, so the next call tries again.
func cached(kind, path string, names []string, read func(string) (*Tokenizer, error)) (*Tokenizer, error) {
	key, err := cacheKey(kind, path, names)
	if err != nil {
		return read(path) // its own error names the file
	}
	loaded.mu.Lock()
	if loaded.m == nil {
		loaded.m = map[string]*cacheEntry{}
	}
	e := loaded.m[key]
	if e == nil {
		if len(loaded.m) >= cacheSize {
			evictOldest()
		}
		e = &cacheEntry{}
		loaded.m[key] = e
	}
	loaded.clock++
	e.used = loaded.clock
	loaded.mu.Unlock()

	e.once.Do(func() { e.tok, e.err = read(path) })
	if e.err != nil {
		loaded.mu.Lock()
		if loaded.m[key] == e {
			delete(loaded.m, key)
		}
		loaded.mu.Unlock()
	}
	return e.tok, e.err
}

// evictOldest drops the least recently used entry; loaded.mu is held.
func evictOldest() {
	var oldest string
	var at uint64
	for k, e := range loaded.m {
		if oldest == "" || e.used < at {
			oldest, at = k, e.used
		}
	}
	delete(loaded.m, oldest)
}

// cacheKey names path (made absolute) and the size and modification time
// of each file the load reads; a file that is absent is part of the key
// too, so one appearing later is read.
func cacheKey(kind, path string, names []string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	var b strings.Builder
	b.WriteString(kind + "\x00" + abs)
	for _, n := range names {
		f := abs
		if n != "" {
			f = filepath.Join(abs, n)
		}
		st, err := os.Stat(f)
		switch {
		case err == nil:
			fmt.Fprintf(&b, "\x00%s:%d:%d", n, st.Size(), st.ModTime().UnixNano())
		case os.IsNotExist(err):
			fmt.Fprintf(&b, "\x00%s:-", n)
		default:
			return "", err
		}
	}
	return b.String(), nil
}
