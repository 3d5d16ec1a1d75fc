package bench

import (
	"bytes"
	"io"
	"sync"
)

// streamState accumulates one response's SSE events into timings. Times are
// seconds on the run clock; each event is stamped with the time of the
// network read that completed it, so several events arriving in one read
// share a timestamp (they did arrive together) and a line split across
// reads is stamped when its last byte came in.
type streamState struct {
	sent float64

	first     bool // a choices chunk has been seen
	done      bool // [DONE] seen
	ttft      float64
	last      float64
	ttfc      float64 // first content after reasoning
	seenText  bool
	reasoning int
	itl       []float64
	chunkTok  []int
	textEnds  []int32 // len(text) after each choices chunk, for per-chunk tokenizing

	usageSeen     bool
	usageTokens   int
	usagePerChunk bool // usage arrived inside choices chunks (cumulative)
	prevUsage     int
	promptTokens  int
	hasPrompt     bool

	text    []byte
	dataBuf []byte // multi-line data fields joined with '\n'
	dataN   int    // data lines in the pending event

	serverErr string
	c         chunk
}

// event handles one complete SSE event's data payload stamped at ts.
func (s *streamState) event(data []byte, ts float64) error {
	if bytes.Equal(data, doneMarker) {
		s.done = true
		return nil
	}
	var err error
	s.text, err = parseChunk(data, s.text, &s.c)
	if err != nil {
		return err
	}
	c := &s.c
	if c.errMsg != "" && !c.choices {
		s.serverErr = c.errMsg
	}
	if c.hasPrompt {
		s.promptTokens, s.hasPrompt = c.prompt, true
	}
	if !c.choices {
		if c.usage {
			s.usageSeen, s.usageTokens = true, c.completion
		}
		return nil
	}
	if !s.first {
		s.first = true
		s.ttft = ts - s.sent
	} else {
		s.itl = append(s.itl, ts-s.last)
	}
	s.last = ts
	n := 1
	if c.role && !c.content && !c.reasoning {
		n = 0 // the role-only opening chunk carries no token
	}
	if c.usage {
		// Continuous usage stats: completion_tokens is cumulative, so the
		// difference is what this chunk carried.
		s.usagePerChunk = true
		n = c.completion - s.prevUsage
		s.prevUsage = c.completion
		s.usageSeen, s.usageTokens = true, c.completion
	}
	s.chunkTok = append(s.chunkTok, n)
	s.textEnds = append(s.textEnds, int32(len(s.text)))
	if c.reasoning {
		s.reasoning++
	}
	if c.content && !s.seenText {
		s.seenText = true
		if s.reasoning > 0 {
			s.ttfc = ts - s.sent
		}
	}
	return nil
}

var (
	doneMarker = []byte("[DONE]")
	dataPrefix = []byte("data:")
)

// bufPool recycles read buffers between requests; a buffer that had to
// grow for a long line is dropped rather than pinned in the pool.
var bufPool = sync.Pool{New: func() any { b := make([]byte, initialBuf); return &b }}

const (
	initialBuf = 1024
	pooledMax  = 16 << 10
)

// readStream reads SSE from r until EOF or [DONE], feeding events to s.
// now is the run clock. There is no line-length limit: the buffer doubles
// while a line does not fit.
func readStream(r io.Reader, s *streamState, now func() float64) error {
	bp := bufPool.Get().(*[]byte)
	buf := *bp
	defer func() {
		if cap(buf) <= pooledMax {
			*bp = buf[:cap(buf)]
			bufPool.Put(bp)
		}
	}()
	start, end := 0, 0 // unconsumed bytes are buf[start:end]
	for {
		if end == len(buf) {
			if start > 0 {
				end = copy(buf, buf[start:end])
				start = 0
			} else {
				nb := make([]byte, 2*len(buf))
				copy(nb, buf[:end])
				buf = nb
			}
		}
		n, rerr := r.Read(buf[end:])
		if n > 0 {
			ts := now()
			end += n
			for {
				k := bytes.IndexByte(buf[start:end], '\n')
				if k < 0 {
					break
				}
				line := buf[start : start+k]
				start += k + 1
				if err := s.line(line, ts); err != nil {
					return err
				}
				if s.done {
					return nil
				}
			}
			if start == end {
				start, end = 0, 0
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				// A last line without its newline, then the pending event.
				if start < end {
					if err := s.line(buf[start:end], now()); err != nil {
						return err
					}
				}
				return s.line(nil, now())
			}
			return rerr
		}
	}
}

// line handles one SSE line (without its '\n'); an empty line dispatches
// the pending event.
func (s *streamState) line(l []byte, ts float64) error {
	if n := len(l); n > 0 && l[n-1] == '\r' {
		l = l[:n-1]
	}
	if len(l) == 0 {
		if s.dataN == 0 {
			return nil
		}
		s.dataN = 0
		err := s.event(s.dataBuf, ts)
		s.dataBuf = s.dataBuf[:0]
		return err
	}
	if l[0] == ':' { // comment / keep-alive ping
		return nil
	}
	if !bytes.HasPrefix(l, dataPrefix) {
		return nil // event:, id:, retry: and unknown fields carry no data
	}
	v := l[len(dataPrefix):]
	if len(v) > 0 && v[0] == ' ' {
		v = v[1:]
	}
	if s.dataN == 0 && s.canDispatchNow(v) {
		// Fast path: a single-line event is handled as soon as its data
		// line is complete, without copying, like vLLM's client does; the
		// blank line that follows then finds nothing pending.
		return s.event(v, ts)
	}
	if s.dataN > 0 {
		s.dataBuf = append(s.dataBuf, '\n')
	}
	s.dataBuf = append(s.dataBuf, v...)
	s.dataN++
	return nil
}

// canDispatchNow reports whether a data line is a complete payload on its
// own: [DONE] or a JSON object. A multi-line data event (legal SSE, never
// sent by OpenAI-style servers) starts with a line that is not a complete
// object and so takes the buffered path.
func (s *streamState) canDispatchNow(v []byte) bool {
	if bytes.Equal(v, doneMarker) {
		return true
	}
	v = bytes.TrimRight(v, " \t")
	return len(v) > 1 && v[0] == '{' && v[len(v)-1] == '}'
}
