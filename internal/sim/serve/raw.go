package serve

import (
	"errors"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// rawConn is a hijacked client connection carrying one streamed response
// as HTTP/1.1 chunks. The event loop writes it directly with non-blocking
// writes; when the socket buffer is full (a slow client), the rest goes to
// a goroutine that finishes it with blocking writes, so one slow client
// never holds up the loop and the others.
type rawConn struct {
	conn net.Conn
	// fd is the socket, written directly (-1 when the connection has none).
	// Only the loop writes it, and only before close, which the loop or the
	// drain goroutine (while the loop does not write) calls; so the runtime's
	// per-write fd locking and poller reset, a few percent of the CPU per
	// token, are not needed.
	fd int

	mu       sync.Mutex
	backlog  []byte    // bytes the drain goroutine still has to write
	pending  []lateRec // lateness to record once the backlog is written
	draining bool      // the drain goroutine owns the socket
	closing  bool      // close once the backlog is written
	closed   bool
	failed   error
	ended    chan struct{} // closed when the response is over (finished or dropped)
}

// lateRec is lateness to record when bytes reach the socket.
type lateRec struct {
	deadline time.Time
	tokens   int
}

// errWouldBlock means the socket took only part of a write.
var errWouldBlock = errors.New("serve: socket buffer full")

// hijackStream takes over an HTTP/1.1 connection for a streamed response
// and writes the response header. It returns nil, leaving w untouched,
// when the connection cannot be taken (HTTP/2, HTTP/1.0, a test recorder).
func hijackStream(w http.ResponseWriter, r *http.Request) *rawConn {
	if !r.ProtoAtLeast(1, 1) {
		return nil
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		return nil
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return nil
	}
	c := &rawConn{conn: conn, fd: -1, ended: make(chan struct{})}
	if sc, ok := conn.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			rc.Control(func(fd uintptr) { c.fd = int(fd) })
		}
	}
	// The connection closes after the response: a hijacked connection
	// cannot go back to net/http for the next request.
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\nCache-Control: no-cache\r\n" +
		"Connection: close\r\nTransfer-Encoding: chunked\r\nDate: " + time.Now().UTC().Format(http.TimeFormat) + "\r\n\r\n"
	conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte(head)); err != nil {
		conn.Close()
		close(c.ended)
		c.closed = true
		c.failed = err
		return c
	}
	conn.SetWriteDeadline(time.Time{})
	return c
}

// watch waits for the client to go away (or for the response to end) and
// calls gone if the client left first. Reading is how a disconnect shows
// while nothing is being written, e.g. while the request waits in the queue.
func (c *rawConn) watch(gone func()) {
	var b [256]byte
	for {
		if _, err := c.conn.Read(b[:]); err != nil {
			break
		}
	}
	select {
	case <-c.ended:
	default:
		gone()
	}
}

// send writes wire (whole HTTP chunks, the terminating one included when
// finished) and records the lateness of evs' tokens when the bytes reach the
// socket; finished closes the connection after. An error means the client
// is gone. slow counts streams handed to a writer goroutine. wire is the caller's scratch: send copies what it keeps.
func (c *rawConn) send(wire []byte, evs []tokenEvent, finished bool, late *latency, slow *atomic.Int64) error {
	c.mu.Lock()
	if c.failed != nil || c.closed {
		err := c.failed
		c.mu.Unlock()
		if err == nil {
			err = net.ErrClosed
		}
		return err
	}
	if c.draining {
		c.backlog = append(c.backlog, wire...)
		c.pending = appendLate(c.pending, evs)
		c.closing = c.closing || finished
		c.mu.Unlock()
		return nil
	}
	c.mu.Unlock()
	n, err := c.write(wire)
	if err == nil {
		now := time.Now()
		for _, ev := range evs {
			if ev.tokens > 0 {
				late.add(now.Sub(ev.deadline), ev.tokens)
			}
		}
		if finished {
			c.close()
		}
		return nil
	}
	if !errors.Is(err, errWouldBlock) {
		c.close()
		return err
	}
	c.mu.Lock()
	c.backlog = append(c.backlog[:0], wire[n:]...)
	c.pending = appendLate(c.pending[:0], evs)
	c.closing = finished
	c.draining = true
	c.mu.Unlock()
	slow.Add(1)
	go c.drain(late)
	return nil
}

func appendLate(dst []lateRec, evs []tokenEvent) []lateRec {
	for _, ev := range evs {
		if ev.tokens > 0 {
			dst = append(dst, lateRec{ev.deadline, ev.tokens})
		}
	}
	return dst
}

// write tries one non-blocking write (the runtime keeps sockets in
// non-blocking mode); errWouldBlock reports a partial one.
func (c *rawConn) write(p []byte) (int, error) {
	if c.fd < 0 {
		return 0, errWouldBlock
	}
	n := 0
	for n < len(p) {
		m, err := syscall.Write(c.fd, p[n:])
		if m > 0 {
			n += m
		}
		switch {
		case err == syscall.EINTR:
		case err == syscall.EAGAIN:
			return n, errWouldBlock
		case err != nil:
			return n, err
		case m <= 0:
			return n, errWouldBlock
		}
	}
	return n, nil
}

// drain writes the backlog with blocking writes until it is empty.
func (c *rawConn) drain(late *latency) {
	var buf []byte
	var recs []lateRec
	for {
		c.mu.Lock()
		if len(c.backlog) == 0 {
			c.draining = false
			closing := c.closing
			c.mu.Unlock()
			if closing {
				c.close()
			}
			return
		}
		buf, c.backlog = c.backlog, buf[:0]
		recs, c.pending = c.pending, recs[:0]
		c.mu.Unlock()
		c.conn.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.conn.Write(buf); err != nil {
			c.mu.Lock()
			c.failed = err
			c.draining = false
			c.mu.Unlock()
			c.close() // the watcher sees the close and cancels the request
			return
		}
		now := time.Now()
		for _, r := range recs {
			late.add(now.Sub(r.deadline), r.tokens)
		}
	}
}

// finish ends the response (terminating chunk) and closes the connection,
// after any backlog; for a server that stops with the stream open.
func (c *rawConn) finish() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	if c.draining {
		c.backlog = append(c.backlog, "0\r\n\r\n"...)
		c.closing = true
		c.mu.Unlock()
		return
	}
	c.mu.Unlock()
	c.conn.SetWriteDeadline(time.Now().Add(time.Second))
	c.conn.Write([]byte("0\r\n\r\n"))
	c.close()
}

// close ends the response and closes the connection once.
func (c *rawConn) close() {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	c.mu.Unlock()
	close(c.ended)
	c.conn.Close()
}
