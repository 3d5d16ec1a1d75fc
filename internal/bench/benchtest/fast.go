package benchtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// Fast is a measurement server that is cheap enough not to be the limit:
// it speaks just enough HTTP/1.1 for a streaming completions client
// (keep-alive, Content-Length request bodies, chunked responses), renders
// each completion chunk once, and at zero latency writes Batch SSE events
// per write (the stream's natural behaviour when tokens come faster than
// the network drains them). With TTFT or Gap set it writes one event per
// write on that schedule, measured from the request's arrival, and logs
// when each write began and returned, like Server.
type Fast struct {
	// Chunks per request; 0 takes the request's max_tokens (or
	// max_completion_tokens).
	Chunks int
	// Batch is how many events go in one write at zero latency (default 16).
	Batch int
	// TTFT and Gap make a timed stream: first chunk TTFT after arrival,
	// then one every Gap, each on an absolute schedule.
	TTFT, Gap time.Duration
	// KeepLogs keeps a Log per request (by the trailing digits of its
	// x-request-id), with Began/Written for every choices chunk.
	KeepLogs bool
	// LogTo, when set, gets one line per finished request: its
	// x-request-id, then the arrival and each write's return as Unix
	// nanoseconds (Clock's wall reading plus monotonic time since), so a
	// client in another process can judge its timestamps against them.
	LogTo io.Writer
	// Clock is the origin of the logged times; Serve's start when zero.
	Clock time.Time

	mu   sync.Mutex
	logs map[int]*Log
}

// fastEvent is one rendered completion chunk event.
var fastEvent = append(append([]byte("data: "), completionChunk("tok ")...), "\n\n"...)

// Serve accepts connections on ln until it is closed.
func (f *Fast) Serve(ln net.Listener) error {
	if f.Clock.IsZero() {
		f.Clock = time.Now()
	}
	f.mu.Lock()
	if f.logs == nil {
		f.logs = map[int]*Log{}
	}
	f.mu.Unlock()
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go f.conn(c)
	}
}

// Logs returns the log of request i once it has finished, or nil.
func (f *Fast) Logs(i int) *Log {
	f.mu.Lock()
	lg := f.logs[i]
	f.mu.Unlock()
	if lg != nil {
		select {
		case <-lg.done:
		case <-time.After(10 * time.Second):
		}
	}
	return lg
}

func (f *Fast) conn(c net.Conn) {
	defer c.Close()
	br := bufio.NewReaderSize(c, 4<<10)
	var body, out []byte
	for {
		// Stamp the arrival once the request's first byte is here, not
		// while a kept-alive connection idles between requests: the
		// timed plan runs from it, and a stamp taken early let a reused
		// connection answer sooner than its TTFT after the client sent.
		if _, err := br.Peek(1); err != nil {
			return
		}
		arrived := time.Now()
		id, get, err := readRequest(br, &body)
		if err != nil {
			return
		}
		if get {
			// GET /v1/models, for a client that asks for the model.
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(modelsJSON), modelsJSON); err != nil {
				return
			}
			continue
		}
		chunks := f.Chunks
		if chunks == 0 {
			chunks = max(1, maxTokens(body))
		}
		var lg *Log
		idx := -1
		if m := idDigits.FindString(id); m != "" {
			idx, _ = strconv.Atoi(m)
		}
		if (f.KeepLogs && idx >= 0) || f.LogTo != nil {
			lg = &Log{ID: id, Arrived: arrived.Sub(f.Clock), done: make(chan struct{}),
				Began: make([]time.Duration, 0, chunks), Written: make([]time.Duration, 0, chunks)}
			if f.KeepLogs && idx >= 0 {
				f.mu.Lock()
				f.logs[idx] = lg
				f.mu.Unlock()
			}
		}
		out = append(out[:0], "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"...)
		err = f.stream(c, chunks, arrived, lg, out)
		if lg != nil {
			lg.Finished = err == nil
			close(lg.done)
			if f.LogTo != nil {
				f.writeLog(lg)
			}
		}
		if err != nil {
			return
		}
	}
}

// stream writes one response; out already holds the header.
func (f *Fast) stream(c net.Conn, chunks int, arrived time.Time, lg *Log, out []byte) error {
	timed := f.TTFT > 0 || f.Gap > 0
	batch := max(f.Batch, 1)
	if f.Batch == 0 {
		batch = 16
	}
	if timed {
		batch = 1
	}
	for k := 0; k < chunks; {
		m := min(batch, chunks-k)
		out = fmt.Appendf(out, "%x\r\n", m*len(fastEvent))
		for range m {
			out = append(out, fastEvent...)
		}
		out = append(out, "\r\n"...)
		if timed {
			if d := time.Until(arrived.Add(f.TTFT + time.Duration(k)*f.Gap)); d > 0 {
				time.Sleep(d)
			}
		}
		if lg != nil {
			lg.Began = append(lg.Began, time.Since(f.Clock))
		}
		if _, err := c.Write(out); err != nil {
			return err
		}
		if lg != nil {
			lg.Written = append(lg.Written, time.Since(f.Clock))
		}
		out = out[:0]
		k += m
	}
	tail := append(append([]byte("data: "), usageChunk(chunks, 0)...), "\n\ndata: [DONE]\n\n"...)
	out = fmt.Appendf(out, "%x\r\n%s\r\n0\r\n\r\n", len(tail), tail)
	_, err := c.Write(out)
	return err
}

func (f *Fast) writeLog(lg *Log) {
	base := f.Clock.UnixNano()
	b := fmt.Appendf(nil, "%s %d", lg.ID, base+int64(lg.Arrived))
	for _, w := range lg.Written {
		b = fmt.Appendf(b, " %d", base+int64(w))
	}
	b = append(b, '\n')
	f.mu.Lock()
	_, _ = f.LogTo.Write(b)
	f.mu.Unlock()
}

const modelsJSON = `{"object":"list","data":[{"id":"fake-model","object":"model","root":"fake-model"}]}`

// readRequest reads one request's head and body (into *body) and returns
// its x-request-id and whether it was a GET.
func readRequest(br *bufio.Reader, body *[]byte) (id string, get bool, err error) {
	clen := 0
	for first := true; ; first = false {
		line, err := br.ReadSlice('\n')
		if err != nil {
			return "", false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if first {
			get = bytes.HasPrefix(line, []byte("GET "))
		}
		if len(line) == 0 {
			if first {
				continue
			}
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch {
		case bytes.EqualFold(k, []byte("content-length")):
			clen, _ = strconv.Atoi(string(v))
		case bytes.EqualFold(k, []byte("x-request-id")):
			id = string(v)
		}
	}
	if cap(*body) < clen {
		*body = make([]byte, clen)
	}
	*body = (*body)[:clen]
	if _, err := io.ReadFull(br, *body); err != nil {
		return "", false, err
	}
	return id, get, nil
}

// maxTokens finds max_tokens or max_completion_tokens in a JSON body
// without decoding it.
func maxTokens(b []byte) int {
	for _, key := range []string{`"max_tokens":`, `"max_completion_tokens":`} {
		if i := bytes.Index(b, []byte(key)); i >= 0 {
			rest := bytes.TrimLeft(b[i+len(key):], " ")
			j := 0
			for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
				j++
			}
			n, _ := strconv.Atoi(string(rest[:j]))
			return n
		}
	}
	return 0
}
