package safeyaml

import (
	"errors"
	"fmt"
	"strings"
	"testing"
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

func TestCheckJSON(t *testing.T) {
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
