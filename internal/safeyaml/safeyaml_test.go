package safeyaml

import (
	"bytes"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"
)

// bomb is issue 11's defect 12: nine nested aliases, each ten wide, under
// a spec's stage values: 2 KB of text, 10^9 nodes once expanded.
func bomb(levels, width int) string {
	var b strings.Builder
	b.WriteString("name: bomb\nmodel: Qwen/Qwen3-14B\nengines: [{name: vllm}]\n")
	b.WriteString("x0: &a0 [" + strings.TrimSuffix(strings.Repeat(`"a",`, width), ",") + "]\n")
	for i := 1; i <= levels; i++ {
		refs := make([]string, width)
		for j := range refs {
			refs[j] = fmt.Sprintf("*a%d", i-1)
		}
		fmt.Fprintf(&b, "x%d: &a%d [%s]\n", i, i, strings.Join(refs, ", "))
	}
	fmt.Fprintf(&b, "stages:\n  - name: max_num_seqs\n    values: *a%d\n", levels)
	return b.String()
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		lim  Limits
		bad  string // part of the error; "" = accepted
		line int
	}{
		{"the bomb", bomb(8, 10), Limits{}, "expands to more than 1000000 nodes", 0},
		{"a small alias tree is fine", bomb(2, 10), Limits{}, "", 0},
		{"aliases counted, not just text", bomb(3, 10), Limits{MaxNodes: 500}, "expands to more than 500", 0},
		{"size", strings.Repeat("a: b\n", 100), Limits{MaxBytes: 100}, "more than the 100 allowed", 0},
		{"depth", strings.Repeat("[", 150) + strings.Repeat("]", 150), Limits{}, "nested more than 100 deep", 1},
		{"plain spec", "name: x\nmodel: m\nengines: [{name: vllm}]\n", Limits{}, "", 0},
		{"unparsable is the decoder's to report", "a: [b\n", Limits{}, "", 0},
		{"alias to a missing anchor", "a: *nope\n", Limits{}, "", 0},
		{"block nesting", deepBlock(150), Limits{}, "nested more than 100 deep", 101},
		{"block nesting within the limit", deepBlock(60), Limits{}, "", 0},
		{"explicit keys", strings.Repeat("? ", 150) + "x\n", Limits{}, "nested more than 100 deep", 1},
		{"compact sequences", "a:\n" + strings.Repeat("- ", 150) + "x\n", Limits{}, "nested more than 100 deep", 2},
		{"deep flow mapping in a block", "a:\n  b: " + strings.Repeat("{c: ", 150) + "1" + strings.Repeat("}", 150) + "\n", Limits{}, "nested more than 100 deep", 2},
		{"brackets in text are not nesting", "a: b[" + strings.Repeat("[", 150) + "\nc: 'x[[[[[[[[['\nd: \"{{{{{\\\"{{{{\"\n", Limits{MaxDepth: 5}, "", 0},
		{"a block scalar's indentation is text", "a: |\n" + blockText(150) + "b: 1\n", Limits{}, "", 0},
		{"a comment's brackets are text", "a: 1 # [[[[[[[[[[\n", Limits{MaxDepth: 5}, "", 0},
		{"block keys", manyKeys(20_000), Limits{}, "more than 10000 entries", 10_001},
		{"flow keys", "{" + strings.Repeat(`"k": 1, `, 20_000) + "}", Limits{}, "more than 10000 entries", 1},
		{"keys within the limit", manyKeys(500), Limits{}, "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check([]byte(tc.doc), tc.lim)
			if tc.bad == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var e *Error
			if err == nil || !strings.Contains(err.Error(), tc.bad) || !errors.Is(err, ErrTooLarge) || !errors.As(err, &e) {
				t.Fatalf("err = %v, want %q", err, tc.bad)
			}
			if tc.line > 0 && e.Line != tc.line {
				t.Errorf("line %d, want %d", e.Line, tc.line)
			}
		})
	}
}

// deepBlock is a block mapping n levels deep by indentation.
func deepBlock(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sk%d:\n", strings.Repeat(" ", i), i)
	}
	fmt.Fprintf(&b, "%sv: 1\n", strings.Repeat(" ", n))
	return b.String()
}

// blockText is a literal block scalar's lines, each indented one more.
func blockText(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "%sline %d\n", strings.Repeat(" ", i+2), i)
	}
	return b.String()
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "k%d: 1\n", i)
	}
	return b.String()
}

// allocated is the memory f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// TestCheckBoundedBeforeParse is issue 23's item 2: the refusal of a deep
// or wide text costs little, because it comes before the parser (which
// took 218 MB for 10,000 nested brackets and 2 s for 20,000 keys).
func TestCheckBoundedBeforeParse(t *testing.T) {
	for _, tc := range []struct {
		name string
		doc  string
		max  uint64
	}{
		{"10,000 nested brackets", strings.Repeat("[", 10_000) + strings.Repeat("]", 10_000), 1 << 20},
		{"100,000 nested brackets (200 KB)", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), 1 << 20},
		{"200,000 keys (2 MB)", "{" + strings.Repeat(`"k": 1, `, 200_000) + "}", 1 << 20},
		{"200,000 block keys", manyKeys(200_000), 1 << 20},
	} {
		if !t.Run(tc.name, func(t *testing.T) {
			var err error
			doc := []byte(tc.doc)
			if n := allocated(func() { err = Check(doc, Limits{}) }); n > tc.max {
				t.Errorf("allocated %d bytes, want at most %d", n, tc.max)
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("err = %v, want a refusal", err)
			}
		}) {
			return // the larger cases would take gigabytes where the first failed
		}
	}
}

func TestCheckJSON(t *testing.T) {
	if err := CheckJSON([]byte("{"+strings.Repeat(`"k": 1, `, 20_000)+`"z": 2}`), Limits{}); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "more than 10000 keys") {
		t.Errorf("wide object: %v", err)
	}
	if err := CheckJSON([]byte(`{"a": [`+strings.Repeat("1, ", 20_000)+`2], "b": {"c": [{"d": 1}, {"e": 2}]}}`), Limits{MaxKeys: 2}); err != nil {
		t.Errorf("a long array and small objects: %v", err)
	}
	if err := CheckJSON([]byte(`{"a": {"x": 1, "y": 2}, "b": 1, "c": 2}`), Limits{MaxKeys: 2}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("three keys past a nested object, limit 2: %v", err)
	}
	if err := CheckJSONReader(strings.NewReader(strings.Repeat(" ", 200)+"1"), Limits{MaxBytes: 100}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a stream over the limit: %v", err)
	}
	deep := []byte(strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000))
	if n := allocated(func() { _ = CheckJSON(deep, Limits{}) }); n > 1<<20 {
		t.Errorf("deep JSON allocated %d bytes", n)
	}
	if err := CheckJSON([]byte(strings.Repeat("[", 200)+strings.Repeat("]", 200)), Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("deep JSON: %v", err)
	}
	if err := CheckJSON([]byte(`{"a":[1,2,{"b":3}]}`), Limits{}); err != nil {
		t.Errorf("plain JSON: %v", err)
	}
	if err := CheckJSON([]byte(strings.Repeat(" ", 200)), Limits{MaxBytes: 100}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("big JSON: %v", err)
	}
}

// FuzzCheck: Check never panics, and what it accepts it accepted within
// its limits (a second check agrees).
func FuzzCheck(f *testing.F) {
	for _, s := range []string{bomb(3, 3), "a: &x [1, 2]\nb: *x\n", "- [a, b]\n- {c: d}\n", "x: !!str 1\n", "&a [*a]"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxNodes: 10000, MaxDepth: 50, MaxBytes: 1 << 16}
		if a, b := Check(data, lim), Check(data, lim); (a == nil) != (b == nil) {
			t.Fatalf("two checks disagree: %v / %v", a, b)
		}
	})
}

// FuzzCheckJSON: the whole-buffer and streamed checks agree, whatever the
// bytes, and neither panics.
func FuzzCheckJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, {"b": "c:}"}]}`, strings.Repeat("[", 60), `{"k": 1, "k2": {"x": "\"}"}}`, `"\\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxDepth: 20, MaxKeys: 5, MaxBytes: 1 << 16}
		a, b := CheckJSON(data, lim), CheckJSONReader(iotest.OneByteReader(bytes.NewReader(data)), lim)
		if (a == nil) != (b == nil) {
			t.Fatalf("buffer and stream disagree: %v / %v", a, b)
		}
	})
}
