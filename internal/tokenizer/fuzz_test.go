package tokenizer

import (
	"encoding/binary"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// FuzzRoundTrip: on valid NFC text, Decode(Encode(s)) == s exactly, Count
// agrees with Encode, and nothing panics. Run with
// go test -fuzz=FuzzRoundTrip ./internal/tokenizer/
func FuzzRoundTrip(f *testing.F) {
	for _, s := range []string{
		"", "hello world", "  \n\n\t x", "it's I'LL 'Ve", "12345678901234567890",
		"你好，世界", "👨‍👩‍👧‍👦 👍🏽", "e\u0301", "<|im_start|>user\nhi<|im_end|>", "<think>\n</think>",
		"\r\n\r\n", "\u00a0\u3000\u2028", strings.Repeat("=", 300), "a'ſ", "\x00\x7f",
	} {
		f.Add(s)
	}
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			// Invalid input must not panic either; it cannot round-trip.
			tok.Encode(s)
			return
		}
		s = norm.NFC.String(s)
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
		}
		if n := tok.Count(s); n != len(ids) {
			t.Fatalf("Count(%q) = %d, Encode gave %d ids", s, n, len(ids))
		}
	})
}

// FuzzDecode: arbitrary ids, in range or not, never panic and always decode
// to valid UTF-8.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x00, 0x02, 0x50, 0x3b})
	f.Add([]byte{0x00, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00, 0xbd})
	tok := qwen3(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var ids []int
		for len(data) >= 4 {
			v := int32(binary.BigEndian.Uint32(data))
			// Mostly ids near the vocabulary, sometimes anything.
			if v >= 0 {
				v %= 160000
			}
			ids = append(ids, int(v))
			data = data[4:]
		}
		if s := tok.Decode(ids); !utf8.ValidString(s) {
			t.Fatalf("Decode(%v) = %q is not valid UTF-8", ids, s)
		}
	})
}

func TestLossyUTF8(t *testing.T) {
	tests := []struct {
		in   string
		want string
	}{
		{"abc", "abc"},
		{"\xff", "\uFFFD"},
		{"\xff\xfe", "\uFFFD\uFFFD"},
		{"\xf0\x9f\x98", "\uFFFD"},             // truncated 4-byte sequence: one maximal subpart
		{"\xf0\x9f\x98a", "\uFFFDa"},           // ... followed by ASCII
		{"\xe2\x82", "\uFFFD"},                 // truncated 3-byte
		{"\xed\xa0\x80", "\uFFFD\uFFFD\uFFFD"}, // surrogate: ED A0 is already invalid
		{"\xe0\x80\x80", "\uFFFD\uFFFD\uFFFD"}, // overlong
		{"\xc0\xaf", "\uFFFD\uFFFD"},
		{"\xf4\x90\x80\x80", "\uFFFD\uFFFD\uFFFD\uFFFD"}, // above U+10FFFF
		{"a\x80\x80b", "a\uFFFD\uFFFDb"},
		{"\xf0\x9f\x98\x80", "😀"},
	}
	for _, tc := range tests {
		if got := lossyUTF8([]byte(tc.in)); got != tc.want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestEncodeInvalidUTF8 checks that invalid bytes are encoded as the U+FFFD
// Rust would have seen after a lossy conversion.
func TestEncodeInvalidUTF8(t *testing.T) {
	tok := qwen3(t)
	got := tok.Encode("a\xffb")
	want := tok.Encode("a\uFFFDb")
	if len(got) != len(want) {
		t.Fatalf("Encode(a\\xffb) = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("Encode(a\\xffb) = %v, want %v", got, want)
		}
	}
}

func TestVocabAndSpecial(t *testing.T) {
	tok := qwen3(t)
	if got := tok.VocabSize(); got != 151643 {
		t.Errorf("VocabSize = %d, want 151643 (HF vocab_size, added tokens excluded)", got)
	}
	// transformers' all_special_ids: eos, pad, then additional_special_tokens
	// without repeats.
	want := []int{151645, 151643, 151644, 151646, 151647, 151648, 151649, 151650, 151651, 151652, 151653, 151654, 151655, 151656}
	got := tok.SpecialIDs()
	if len(got) != len(want) {
		t.Fatalf("SpecialIDs = %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("SpecialIDs = %v, want %v", got, want)
		}
	}
}

// TestConcurrentEncode encodes from several goroutines at once (the word
// cache is shared) and expects the sequential result; run it with -race.
func TestConcurrentEncode(t *testing.T) {
	tok := qwen3(t)
	var texts []string
	for _, c := range loadShareGPT(t)[:60] {
		for _, turn := range c.Conversations {
			texts = append(texts, turn.Value)
		}
	}
	want := make([]int, len(texts))
	for i, s := range texts {
		want[i] = len(tok.Encode(s))
	}
	errs := make(chan string, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := len(texts) - 1; i >= 0; i-- {
				if n := tok.Count(texts[i]); n != want[i] {
					errs <- fmt.Sprintf("text %d: %d tokens concurrently, %d alone", i, n, want[i])
					return
				}
			}
			errs <- ""
		}()
	}
	for g := 0; g < 4; g++ {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
