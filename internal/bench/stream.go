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
	partial []byte // a line cut by a read boundary, awaiting its end

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

// bufPool recycles the net/http path's read buffers between requests.
var bufPool = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

const (
	// readBufSize is the net/http path's read size; the epoll path reads
	// into one buffer shared by all its connections.
	readBufSize = 4 << 10
	// partialKeep is the largest carry-over buffer kept between lines: one
	// that grew for a long line is dropped once the line is done, so an
	// idle stream holds at most this much.
	partialKeep = 1 << 10
)

// readStream reads SSE from r until EOF or [DONE], feeding events to s.
// now is the run clock. There is no line-length limit: a line cut by a
// read boundary is carried over in s.partial, which grows as needed.
func readStream(r io.Reader, s *streamState, now func() float64) error {
	bp := bufPool.Get().(*[]byte)
	defer bufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if err := s.feed(buf[:n], now()); err != nil || s.done {
				return err
			}
		}
		if rerr != nil {
			if rerr == io.EOF {
				return s.eof(now())
			}
			return rerr
		}
	}
}

// feed handles the bytes of one network read, all stamped ts (the time
// the read returned). Complete lines are handled in place; a trailing
// partial line is copied to s.partial and completed by a later feed, so
// it is stamped when its last byte arrives. feed stops at [DONE].
func (s *streamState) feed(p []byte, ts float64) error {
	for len(p) > 0 {
		k := bytes.IndexByte(p, '\n')
		if k < 0 {
			s.partial = append(s.partial, p...)
			return nil
		}
		line := p[:k]
		p = p[k+1:]
		carried := len(s.partial) > 0
		if carried {
			s.partial = append(s.partial, line...)
			line = s.partial
		}
		err := s.line(line, ts)
		if carried {
			s.dropPartial()
		}
		if err != nil || s.done {
			return err
		}
	}
	return nil
}

// eof ends the stream at a clean end of body: a last line without its
// newline, then the pending event.
func (s *streamState) eof(ts float64) error {
	if len(s.partial) > 0 {
		err := s.line(s.partial, ts)
		s.dropPartial()
		if err != nil || s.done {
			return err
		}
	}
	return s.line(nil, ts)
}

func (s *streamState) dropPartial() {
	if cap(s.partial) > partialKeep {
		s.partial = nil
	} else {
		s.partial = s.partial[:0]
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
