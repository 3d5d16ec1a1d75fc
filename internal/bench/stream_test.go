package bench

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
)

// pieces delivers one piece per Read and advances a fake clock by one
// second per Read, so each event's timestamp names the read that
// completed it.
type pieces struct {
	parts []string
	t     float64
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.parts) == 0 {
		return 0, io.EOF
	}
	n := copy(b, p.parts[0])
	if n < len(p.parts[0]) {
		p.parts[0] = p.parts[0][n:]
	} else {
		p.parts = p.parts[1:]
	}
	p.t++
	return n, nil
}

func (p *pieces) now() float64 { return p.t }

const (
	cmplChunk  = `{"id":"x","object":"text_completion","choices":[{"index":0,"text":"hi","logprobs":null,"finish_reason":null}],"usage":null}`
	usageOnly  = `{"id":"x","object":null,"choices":[],"usage":{"prompt_tokens":7,"total_tokens":10,"completion_tokens":3}}`
	roleChunk  = `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`
	thinkChunk = `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]}`
	chatChunk  = `{"object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"A\u00e9\n"}}]}`
)

func ev(s string) string { return "data: " + s + "\n\n" }

func TestReadStream(t *testing.T) {
	long := `{"choices":[{"text":"` + strings.Repeat("x", 300000) + `"}]}`
	for _, tc := range []struct {
		name      string
		parts     []string
		ttft      float64
		itl       []float64
		chunkTok  []int
		usage     int
		prompt    int
		text      string
		reasoning int
		ttfc      float64
		done      bool
	}{
		{name: "one event per read",
			parts: []string{ev(cmplChunk), ev(cmplChunk), ev(cmplChunk), ev(usageOnly), ev("[DONE]")},
			ttft:  1, itl: []float64{1, 1}, chunkTok: []int{1, 1, 1}, usage: 3, prompt: 7, text: "hihihi", done: true},
		{name: "several events in one read",
			parts: []string{ev(cmplChunk) + ev(cmplChunk), ev(cmplChunk) + ev(usageOnly) + ev("[DONE]")},
			ttft:  1, itl: []float64{0, 1}, chunkTok: []int{1, 1, 1}, usage: 3, prompt: 7, text: "hihihi", done: true},
		{name: "line split across reads",
			parts: []string{"da", "ta: " + cmplChunk[:20], cmplChunk[20:] + "\n", "\n" + ev("[DONE]")},
			ttft:  3, chunkTok: []int{1}, text: "hi", done: true},
		{name: "comments and CRLF and other fields",
			parts: []string{": ping\r\n\r\n", "event: message\r\nid: 1\r\ndata: " + cmplChunk + "\r\n\r\n", ": keepalive\n\n", ev(cmplChunk)},
			ttft:  2, itl: []float64{2}, chunkTok: []int{1, 1}, text: "hihi"},
		{name: "no space after data colon and no final newline",
			parts: []string{"data:" + cmplChunk + "\n\n", "data:" + cmplChunk},
			ttft:  1, itl: []float64{1}, chunkTok: []int{1, 1}, text: "hihi"},
		{name: "chat role chunk reasoning then content",
			parts: []string{ev(roleChunk), ev(thinkChunk), ev(thinkChunk), ev(chatChunk), ev(usageOnly), ev("[DONE]")},
			ttft:  1, itl: []float64{1, 1, 1}, chunkTok: []int{0, 1, 1, 1}, usage: 3, prompt: 7, text: "Aé\n", reasoning: 2, ttfc: 4, done: true},
		{name: "line longer than any buffer",
			parts: []string{ev(long[:70000]), ""},
			ttft:  0, chunkTok: nil},
		{name: "multi-line data event",
			parts: []string{"data: {\"choices\":\ndata: [{\"text\":\"ab\"}]}\n\n"},
			ttft:  1, chunkTok: []int{1}, text: "ab"},
		{name: "continuous usage",
			parts: []string{ev(`{"choices":[{"text":"a"}],"usage":{"completion_tokens":2}}`), ev(`{"choices":[{"text":"b"}],"usage":{"completion_tokens":5}}`), ev("[DONE]")},
			ttft:  1, itl: []float64{1}, chunkTok: []int{2, 3}, usage: 5, text: "ab", done: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.name == "line longer than any buffer" {
				// Deliver a 300 kB line in 7 kB reads: no limit, one event.
				var parts []string
				l := ev(long)
				for len(l) > 7000 {
					parts, l = append(parts, l[:7000]), l[7000:]
				}
				tc.parts = append(parts, l)
				tc.ttft = -1 // the read that brought the last byte
				tc.chunkTok = []int{1}
				tc.text = strings.Repeat("x", 300000)
			}
			p := &pieces{parts: tc.parts}
			s := &streamState{}
			if err := readStream(p, s, p.now); err != nil {
				t.Fatal(err)
			}
			if tc.ttft == -1 {
				tc.ttft = p.t
			}
			if !s.first || s.ttft != tc.ttft {
				t.Errorf("first=%v ttft=%v, want %v", s.first, s.ttft, tc.ttft)
			}
			if len(s.itl) != len(tc.itl) {
				t.Errorf("itl %v, want %v", s.itl, tc.itl)
			} else {
				for i := range s.itl {
					if s.itl[i] != tc.itl[i] {
						t.Errorf("itl %v, want %v", s.itl, tc.itl)
					}
				}
			}
			if len(s.chunkTok) != len(tc.chunkTok) {
				t.Errorf("chunk tokens %v, want %v", s.chunkTok, tc.chunkTok)
			} else {
				for i := range s.chunkTok {
					if s.chunkTok[i] != tc.chunkTok[i] {
						t.Errorf("chunk tokens %v, want %v", s.chunkTok, tc.chunkTok)
					}
				}
			}
			if s.usageTokens != tc.usage || s.promptTokens != tc.prompt {
				t.Errorf("usage %d prompt %d, want %d %d", s.usageTokens, s.promptTokens, tc.usage, tc.prompt)
			}
			if string(s.text) != tc.text {
				t.Errorf("text %q, want %q", truncate(string(s.text)), truncate(tc.text))
			}
			if s.reasoning != tc.reasoning || s.ttfc != tc.ttfc {
				t.Errorf("reasoning %d ttfc %v, want %d %v", s.reasoning, s.ttfc, tc.reasoning, tc.ttfc)
			}
			if s.done != tc.done {
				t.Errorf("done %v", s.done)
			}
		})
	}
}

func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

func TestReadStreamErrors(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
	}{
		{"garbage", []string{ev(cmplChunk), ev(`{"choices": [ nope`)}},
		{"not an object", []string{ev(`[1,2]`)}},
		{"trailing junk", []string{ev(cmplChunk + "x")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &pieces{parts: tc.parts}
			err := readStream(p, &streamState{}, p.now)
			if !errors.Is(err, errSyntax) {
				t.Errorf("err = %v, want a syntax error", err)
			}
		})
	}
	// A server error object with no choices is remembered, not fatal.
	p := &pieces{parts: []string{ev(`{"error":{"message":"boom","code":500}}`), ev("[DONE]")}}
	s := &streamState{}
	if err := readStream(p, s, p.now); err != nil || s.serverErr != "boom" || s.first {
		t.Errorf("error event: err=%v serverErr=%q first=%v", err, s.serverErr, s.first)
	}
}

func TestParseChunkNulls(t *testing.T) {
	var c chunk
	for _, in := range []string{
		`{"object":null,"choices":null,"usage":null}`,
		`{"choices":[]}`,
		`{"choices":[{"delta":null}]}`,
		`{"choices":[{"text":null,"logprobs":{"a":[1,2,{"b":null}]}}],"usage":{"completion_tokens":null}}`,
	} {
		text, err := parseChunk([]byte(in), nil, &c)
		if err != nil {
			t.Errorf("%s: %v", in, err)
		}
		if len(text) != 0 || c.usage || c.content {
			t.Errorf("%s: text %q usage %v content %v", in, text, c.usage, c.content)
		}
	}
	if _, err := parseChunk([]byte(`{"choices":[{"text":"\ud83d\ude00 \u0041"}]}`), nil, &c); err != nil || !c.choices {
		t.Errorf("surrogates: %v", err)
	}
}

// FuzzReadStream feeds arbitrary bytes, cut at arbitrary points, through
// the SSE reader and chunk scanner: no panics, and a syntax error never
// comes with a half-counted chunk.
func FuzzReadStream(f *testing.F) {
	f.Add([]byte(ev(cmplChunk)+ev(usageOnly)+ev("[DONE]")), uint8(7))
	f.Add([]byte(ev(roleChunk)+ev(thinkChunk)+ev(chatChunk)), uint8(3))
	f.Add([]byte(": ping\r\n\r\ndata: {\"choices\":[{\"text\":\"\\u00\"}]}\n\n"), uint8(1))
	f.Add([]byte("data: {\"choices\":[[[[[[[[[[[[[[[[[[[[[[[[{}]]]]]]]]]]]]]]]]]]]]]]]}\n\n"), uint8(5))
	f.Add([]byte(ev(`{"error":{"message":"x"}}`)), uint8(2))
	f.Fuzz(func(t *testing.T, data []byte, cut uint8) {
		step := int(cut)%64 + 1
		var parts []string
		for i := 0; i < len(data); i += step {
			parts = append(parts, string(data[i:min(i+step, len(data))]))
		}
		p := &pieces{parts: parts}
		s := &streamState{}
		err := readStream(p, s, p.now)
		if err != nil && !errors.Is(err, errSyntax) {
			t.Fatalf("unexpected error kind: %v", err)
		}
		if len(s.chunkTok) != len(s.itl)+boolInt(s.first) {
			t.Fatalf("%d chunk counts for %d gaps (first=%v)", len(s.chunkTok), len(s.itl), s.first)
		}
		// The same bytes in one read give the same events.
		q := &pieces{parts: []string{string(data)}}
		s2 := &streamState{}
		err2 := readStream(q, s2, q.now)
		if (err == nil) != (err2 == nil) || len(s2.chunkTok) != len(s.chunkTok) || !bytes.Equal(s.text, s2.text) {
			t.Fatalf("split reads disagree with one read: %v/%v, %d/%d chunks", err, err2, len(s.chunkTok), len(s2.chunkTok))
		}
	})
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
