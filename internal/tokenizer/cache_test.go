package tokenizer

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestLoadIsCachedWhileFilesAreUnchanged: a second Load of the same
// directory returns the tokenizer already read, and an edited file (its
// size or modification time changed) is read again. Without the cache
// every Load parses tokenizer.json anew and the pointers differ.
func TestLoadIsCachedWhileFilesAreUnchanged(t *testing.T) {
	dir := t.TempDir()
	writeTiny(t, dir, `{"bos_token": null}`)
	a, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]*Tokenizer, 8)
	for i := range got {
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _ = Load(dir) }()
	}
	wg.Wait()
	for i, b := range got {
		if b != a {
			t.Fatalf("load %d read the files again while they were unchanged", i)
		}
	}
	if f, err := LoadFile(filepath.Join(dir, "tokenizer.json")); err != nil || f == a {
		t.Fatalf("LoadFile shares Load's tokenizer (it has no config applied): %v", err)
	}

	// A config written afterwards (later mtime, other size) is read.
	cfg := filepath.Join(dir, "tokenizer_config.json")
	if err := os.WriteFile(cfg, []byte(`{"chat_template": "{{ messages[0].content }}"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	later := time.Now().Add(time.Minute)
	if err := os.Chtimes(cfg, later, later); err != nil {
		t.Fatal(err)
	}
	c, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c == a || !c.HasChatTemplate() {
		t.Fatalf("an edited tokenizer_config.json was not read again (same tokenizer: %v, template: %v)", c == a, c.HasChatTemplate())
	}
}

// TestLoadErrorNotCached: a failed load is tried again once the file is
// there.
func TestLoadErrorNotCached(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(dir); err == nil {
		t.Fatal("no tokenizer.json, no error")
	}
	writeTiny(t, dir, "")
	if _, err := Load(dir); err != nil {
		t.Fatalf("the file is there now: %v", err)
	}
}

// TestCacheBounded: at most cacheSize tokenizers are kept.
func TestCacheBounded(t *testing.T) {
	for i := 0; i < cacheSize+3; i++ {
		dir := t.TempDir()
		writeTiny(t, dir, "")
		if _, err := Load(dir); err != nil {
			t.Fatal(err)
		}
	}
	loaded.mu.Lock()
	n := len(loaded.m)
	loaded.mu.Unlock()
	if n > cacheSize {
		t.Fatalf("%d tokenizers kept, bound %d", n, cacheSize)
	}
}

func writeTiny(t *testing.T, dir, config string) {
	t.Helper()
	tok := `{"added_tokens": [], "normalizer": null, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
"decoder": {"type": "ByteLevel"}, "post_processor": null,
"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]}}`
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(tok), 0o644); err != nil {
		t.Fatal(err)
	}
	if config != "" {
		if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(config), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
