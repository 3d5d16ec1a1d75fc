package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// The epoll transport. One goroutine runs an event loop over non-blocking
// sockets: it dials, writes each request, and pushes whatever a read
// brings through respParser into the request's streamState. No goroutine
// and no bufio buffers per stream: a stream costs its ereq (the parse
// state, a few hundred bytes), its econn, and a carry-over buffer only
// while a line is cut by a read boundary. All reads share one buffer.
//
// Every read in one epoll_wait batch is stamped with the time taken right
// after epoll_wait returned (monotonic), so a chunk's time is when the
// kernel had it ready, not when the loop got round to it.

const (
	epollET        = 1 << 31 // EPOLLET; syscall's constant is negative
	epollRDHUP     = 0x2000
	loopReadBuf    = 64 << 10
	loopMaxEvents  = 256
	drainAfterDone = 4 << 10 // like net/http's path: read this much past [DONE] to reuse the connection
)

// ereq is one request in flight on the loop.
type ereq struct {
	ctx   context.Context
	rec   *metrics.Record
	done  func([]int32)
	ends  []int32
	out   []byte // request bytes; kept until the answer starts, for a retry
	off   int    // bytes of out written
	dl    int64  // deadline, ns since client.base
	hidx  int    // index in the deadline heap; -1 when out of it
	conn  *econn
	retry bool // already retried once on a fresh connection
	st    streamState
	head  []byte // non-200: the start of the body
}

// econn is one connection.
type econn struct {
	fd         int
	req        *ereq
	p          respParser
	connecting bool
	reused     bool // it carried an earlier request
	got        bool // bytes of the current answer arrived
	draining   bool // the request ended at [DONE]; read to the body's end
	drained    int
}

// epollSender owns the loop.
type epollSender struct {
	cl      *client
	epfd    int
	wakeR   int
	wakeW   int
	sa      syscall.Sockaddr
	family  int
	raddr   net.Addr
	dialErr error
	head    []byte // request line and fixed headers
	defID   string // X-Request-Id from Config.Headers, for requests without an id
	maxIdle int

	mu      sync.Mutex
	queue   []*ereq
	ctxs    map[context.Context]func() bool
	closing bool
	woken   atomic.Bool
	fired   atomic.Bool // a request context ended: scan for canceled requests

	doneMu   sync.Mutex
	doneQ    []*ereq
	doneWake chan struct{}
	loopDone chan struct{}
	compDone chan struct{}

	// Owned by the loop goroutine.
	conns []*econn // by fd
	idle  []*econn
	heap  []*ereq
	buf   []byte
}

var _ sender = (*epollSender)(nil)

// newEpollSender resolves the server address and starts the loop.
func newEpollSender(cl *client, maxIdle int) (*epollSender, error) {
	u, err := url.Parse(cl.url)
	if err != nil {
		return nil, fmt.Errorf("bench: epoll transport: %w", err)
	}
	s := &epollSender{cl: cl, maxIdle: max(maxIdle, 16), ctxs: map[context.Context]func() bool{},
		doneWake: make(chan struct{}, 1), loopDone: make(chan struct{}), compDone: make(chan struct{}),
		buf: make([]byte, loopReadBuf)}
	s.resolve(u)
	s.buildHead(u)
	if s.epfd, err = syscall.EpollCreate1(syscall.EPOLL_CLOEXEC); err != nil {
		return nil, fmt.Errorf("bench: epoll transport: %w", os.NewSyscallError("epoll_create1", err))
	}
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_NONBLOCK|syscall.O_CLOEXEC); err != nil {
		syscall.Close(s.epfd)
		return nil, fmt.Errorf("bench: epoll transport: %w", os.NewSyscallError("pipe2", err))
	}
	s.wakeR, s.wakeW = p[0], p[1]
	if err := syscall.EpollCtl(s.epfd, syscall.EPOLL_CTL_ADD, s.wakeR, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(s.wakeR)}); err != nil {
		s.closeFDs()
		return nil, fmt.Errorf("bench: epoll transport: %w", os.NewSyscallError("epoll_ctl", err))
	}
	go s.loop()
	go s.complete()
	return s, nil
}

// resolve looks the host up once per run (net/http does it per dial); a
// failure is reported by every request, as a dial error.
func (s *epollSender) resolve(u *url.URL) {
	port, err := strconv.Atoi(u.Port())
	if u.Port() == "" {
		port, err = 80, nil
	}
	if err != nil {
		s.dialErr = fmt.Errorf("bad port %q", u.Port())
		return
	}
	host := u.Hostname()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		s.dialErr = err
		return
	}
	// Prefer IPv4, as a dual-stack "localhost" most often listens there.
	sort.SliceStable(ips, func(i, j int) bool { return ips[i].IP.To4() != nil && ips[j].IP.To4() == nil })
	ip := ips[0]
	s.raddr = &net.TCPAddr{IP: ip.IP, Port: port, Zone: ip.Zone}
	if v4 := ip.IP.To4(); v4 != nil {
		sa := &syscall.SockaddrInet4{Port: port}
		copy(sa.Addr[:], v4)
		s.sa, s.family = sa, syscall.AF_INET
		return
	}
	sa := &syscall.SockaddrInet6{Port: port}
	copy(sa.Addr[:], ip.IP.To16())
	if ip.Zone != "" {
		ifi, err := net.InterfaceByName(ip.Zone)
		if err != nil {
			s.dialErr = err
			return
		}
		sa.ZoneId = uint32(ifi.Index)
	}
	s.sa, s.family = sa, syscall.AF_INET6
}

// buildHead renders the request line and the headers every request
// shares, as net/http's doHTTP sets them.
func (s *epollSender) buildHead(u *url.URL) {
	cfg := s.cl.cfg
	h := map[string]string{"User-Agent": "Go-http-client/1.1"}
	for k, v := range cfg.Headers {
		h[textproto.CanonicalMIMEHeaderKey(k)] = v
	}
	h["Content-Type"] = "application/json"
	if cfg.APIKey != "" {
		h["Authorization"] = "Bearer " + cfg.APIKey
	}
	s.defID = h["X-Request-Id"]
	// net/http takes these from the request, never from the header map.
	for _, k := range []string{"Host", "Content-Length", "X-Request-Id", "Transfer-Encoding", "Connection"} {
		delete(h, k)
	}
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	b := fmt.Appendf(nil, "POST %s HTTP/1.1\r\nHost: %s\r\n", u.RequestURI(), u.Host)
	for _, k := range keys {
		b = fmt.Appendf(b, "%s: %s\r\n", k, h[k])
	}
	s.head = b
}

// start implements sender.
func (s *epollSender) start(ctx context.Context, r *dataset.Request, rec *metrics.Record, done func([]int32)) {
	body, err := s.cl.cfg.payload(r)
	if err != nil {
		fail(rec, ClassBadStream, err.Error())
		done(nil)
		return
	}
	q := &ereq{ctx: ctx, rec: rec, done: done, hidx: -1}
	out := make([]byte, 0, len(s.head)+len(body)+64+len(rec.ID))
	out = append(out, s.head...)
	out = append(out, "Content-Length: "...)
	out = strconv.AppendInt(out, int64(len(body)), 10)
	if id := rec.ID; id != "" || s.defID != "" {
		if id == "" {
			id = s.defID
		}
		out = append(out, "\r\nX-Request-Id: "...)
		out = append(out, id...)
	}
	out = append(out, "\r\n\r\n"...)
	q.out = append(out, body...)
	q.st.sent = s.cl.now()
	rec.Sent = q.st.sent
	q.dl = int64(time.Since(s.cl.base)) + int64(s.cl.cfg.Timeout)

	s.mu.Lock()
	if _, ok := s.ctxs[ctx]; !ok && ctx.Done() != nil {
		s.ctxs[ctx] = context.AfterFunc(ctx, func() { s.fired.Store(true); s.wake() })
	}
	s.queue = append(s.queue, q)
	s.mu.Unlock()
	s.wake()
}

// wake interrupts epoll_wait; one pending byte is enough.
func (s *epollSender) wake() {
	if s.woken.CompareAndSwap(false, true) {
		_, _ = syscall.Write(s.wakeW, []byte{1})
	}
}

// close stops the loop after the requests in flight (Run has waited for
// them; any left are canceled) and closes every descriptor.
func (s *epollSender) close() {
	s.mu.Lock()
	s.closing = true
	for _, stop := range s.ctxs {
		stop()
	}
	s.mu.Unlock()
	_, _ = syscall.Write(s.wakeW, []byte{1})
	<-s.loopDone
	close(s.doneWake)
	<-s.compDone
}

func (s *epollSender) closeFDs() {
	syscall.Close(s.epfd)
	syscall.Close(s.wakeR)
	syscall.Close(s.wakeW)
}

// complete calls the done callbacks off the loop, so a slow consumer
// (OnRecord, the progress bar) never delays a timestamp.
func (s *epollSender) complete() {
	defer close(s.compDone)
	var batch []*ereq
	for range s.doneWake {
		for {
			s.doneMu.Lock()
			batch, s.doneQ = s.doneQ, batch[:0]
			s.doneMu.Unlock()
			if len(batch) == 0 {
				break
			}
			for i, q := range batch {
				q.done(q.ends)
				batch[i] = nil
			}
		}
	}
}

func (s *epollSender) loop() {
	defer close(s.loopDone)
	defer s.closeFDs()
	events := make([]syscall.EpollEvent, loopMaxEvents)
	for {
		wait := -1
		if len(s.heap) > 0 {
			d := s.heap[0].dl - int64(time.Since(s.cl.base))
			wait = int(max(0, (d+int64(time.Millisecond)-1)/int64(time.Millisecond)))
		}
		n, err := syscall.EpollWait(s.epfd, events, wait)
		ts := s.cl.now()
		if err != nil && err != syscall.EINTR {
			s.failAll(os.NewSyscallError("epoll_wait", err))
			return
		}
		for i := range max(n, 0) {
			ev := &events[i]
			fd := int(ev.Fd)
			if fd == s.wakeR {
				// Drain before taking the queue: a wake after this point
				// writes a fresh byte.
				var b [64]byte
				_, _ = syscall.Read(s.wakeR, b[:])
				s.woken.Store(false)
				continue
			}
			if fd < len(s.conns) && s.conns[fd] != nil {
				s.event(s.conns[fd], ev.Events, ts)
			}
		}
		s.mu.Lock()
		queue, closing := s.queue, s.closing
		s.queue = nil
		s.mu.Unlock()
		for _, q := range queue {
			s.begin(q)
		}
		if s.fired.Swap(false) {
			s.cancelDone()
		}
		now := int64(time.Since(s.cl.base))
		for len(s.heap) > 0 && s.heap[0].dl <= now {
			q := s.heap[0]
			s.end(q, context.DeadlineExceeded)
		}
		if closing {
			s.failAll(context.Canceled)
			for _, c := range s.conns {
				if c != nil {
					s.closeConn(c)
				}
			}
			return
		}
	}
}

// begin puts a new request on an idle connection or a fresh one.
func (s *epollSender) begin(q *ereq) {
	s.heapPush(q)
	if q.ctx.Err() != nil {
		s.end(q, q.ctx.Err())
		return
	}
	for len(s.idle) > 0 {
		c := s.idle[len(s.idle)-1]
		s.idle = s.idle[:len(s.idle)-1]
		if c.fd >= 0 {
			s.attach(c, q)
			s.write(c)
			return
		}
	}
	s.dial(q)
}

func (s *epollSender) attach(c *econn, q *ereq) {
	c.req, q.conn = q, c
	c.p = respParser{}
	c.got, c.draining, c.drained = false, false, 0
	q.off = 0
}

func (s *epollSender) dial(q *ereq) {
	if s.dialErr != nil {
		s.end(q, &net.OpError{Op: "dial", Net: "tcp", Err: s.dialErr})
		return
	}
	fd, err := syscall.Socket(s.family, syscall.SOCK_STREAM|syscall.SOCK_NONBLOCK|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		s.end(q, &net.OpError{Op: "dial", Net: "tcp", Addr: s.raddr, Err: os.NewSyscallError("socket", err)})
		return
	}
	// net/http's dialer sets TCP_NODELAY; the request goes out in one write.
	_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
	err = syscall.Connect(fd, s.sa)
	if err != nil && err != syscall.EINPROGRESS {
		syscall.Close(fd)
		s.end(q, &net.OpError{Op: "dial", Net: "tcp", Addr: s.raddr, Err: os.NewSyscallError("connect", err)})
		return
	}
	c := &econn{fd: fd, connecting: err != nil}
	ev := syscall.EpollEvent{Events: syscall.EPOLLIN | syscall.EPOLLOUT | epollRDHUP | epollET, Fd: int32(fd)}
	if err := syscall.EpollCtl(s.epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
		syscall.Close(fd)
		s.end(q, &net.OpError{Op: "dial", Net: "tcp", Addr: s.raddr, Err: os.NewSyscallError("epoll_ctl", err)})
		return
	}
	for fd >= len(s.conns) {
		s.conns = append(s.conns, nil)
	}
	s.conns[fd] = c
	s.attach(c, q)
	if !c.connecting {
		s.write(c)
	}
}

// write sends what is left of the request; EAGAIN waits for EPOLLOUT.
func (s *epollSender) write(c *econn) {
	q := c.req
	if q == nil || q.off >= len(q.out) {
		return
	}
	for q.off < len(q.out) {
		n, err := syscall.Write(c.fd, q.out[q.off:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			return
		}
		if err != nil {
			s.connFail(c, &net.OpError{Op: "write", Net: "tcp", Addr: s.raddr, Err: os.NewSyscallError("write", err)})
			return
		}
		q.off += n
	}
}

// event handles readiness of c.
func (s *epollSender) event(c *econn, ev uint32, ts float64) {
	if c.connecting {
		if ev&(syscall.EPOLLOUT|syscall.EPOLLERR|syscall.EPOLLHUP) == 0 {
			return
		}
		c.connecting = false
		if e, err := syscall.GetsockoptInt(c.fd, syscall.SOL_SOCKET, syscall.SO_ERROR); err != nil || e != 0 {
			if err == nil {
				err = syscall.Errno(e)
			}
			q := c.req
			s.closeConn(c)
			if q != nil {
				s.end(q, &net.OpError{Op: "dial", Net: "tcp", Addr: s.raddr, Err: os.NewSyscallError("connect", err)})
			}
			return
		}
	}
	if ev&syscall.EPOLLOUT != 0 {
		s.write(c)
		if c.fd < 0 {
			return
		}
	}
	if ev&(syscall.EPOLLIN|syscall.EPOLLERR|syscall.EPOLLHUP|epollRDHUP) == 0 {
		return
	}
	// Edge-triggered: read until the socket is empty. A short read means
	// it was, unless the peer also hung up (then read on to the EOF).
	hup := ev&(syscall.EPOLLERR|syscall.EPOLLHUP|epollRDHUP) != 0
	for c.fd >= 0 {
		n, err := syscall.Read(c.fd, s.buf)
		switch {
		case err == syscall.EINTR:
			continue
		case err == syscall.EAGAIN:
			return
		case err != nil:
			s.connFail(c, &net.OpError{Op: "read", Net: "tcp", Addr: s.raddr, Err: os.NewSyscallError("read", err)})
			return
		case n == 0:
			s.eof(c, ts)
			return
		}
		s.data(c, s.buf[:n], ts)
		if n < len(s.buf) && !hup {
			return
		}
	}
}

// data pushes the bytes of one read through c's response parser.
func (s *epollSender) data(c *econn, p []byte, ts float64) {
	if c.req == nil {
		s.closeConn(c) // an idle connection has nothing to say
		return
	}
	c.got = true
	for len(p) > 0 && !c.p.done() {
		had := c.p.headerDone()
		seg, rest, err := c.p.next(p)
		p = rest
		if err != nil {
			id := "(idle)"
			if c.req != nil {
				id = c.req.rec.ID
			}
			s.connFail(c, fmt.Errorf("request %s: bad HTTP response: %w", id, err))
			return
		}
		q := c.req
		if !had && c.p.headerDone() && q != nil {
			q.out = nil // answered: no retry from here on
		}
		if len(seg) == 0 {
			continue
		}
		switch {
		case c.draining:
			if c.drained += len(seg); c.drained > drainAfterDone {
				s.end(q, nil)
				s.closeConn(c)
				return
			}
		case c.p.status != http.StatusOK:
			if room := errBodyMax - len(q.head); room > 0 {
				q.head = append(q.head, seg[:min(room, len(seg))]...)
			}
			if len(q.head) >= errBodyMax {
				s.end(q, nil)
				s.closeConn(c)
				return
			}
		default:
			if err := q.st.feed(seg, ts); err != nil {
				s.end(q, err)
				s.closeConn(c)
				return
			}
			// After [DONE] the request is measured; it still holds its
			// concurrency slot while the rest of the body is read, as on
			// the net/http path, so the server never sees more than the
			// cap in flight.
			c.draining = q.st.done
		}
	}
	if c.p.done() {
		if q := c.req; q != nil {
			var err error
			if !q.st.done {
				err = q.st.eof(ts)
			}
			s.end(q, err)
		}
		s.release(c)
	}
}

// eof: the server closed c.
func (s *epollSender) eof(c *econn, ts float64) {
	q := c.req
	if q == nil || q.st.done {
		s.closeConn(c)
		if q != nil {
			s.end(q, nil)
		}
		return
	}
	if err := c.p.eof(); err != nil || c.p.status != http.StatusOK {
		s.connFail(c, err) // a non-200 answer ends with the body it had
		return
	}
	s.end(q, q.st.eof(ts)) // a close-delimited stream ended
	s.closeConn(c)
}

// connFail ends c's request with a transport error and closes c. A reused
// connection that failed before any answer is retried once on a fresh
// one, as net/http retries a request on a connection the server closed
// while it sat idle.
func (s *epollSender) connFail(c *econn, err error) {
	q := c.req
	reused, got := c.reused, c.got
	s.closeConn(c)
	if q == nil {
		return
	}
	if reused && !got && !q.retry && q.out != nil {
		q.retry = true
		q.conn = nil
		s.dial(q)
		return
	}
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	s.end(q, err)
}

// release returns c to the idle list when the server allows it.
func (s *epollSender) release(c *econn) {
	c.req = nil
	if len(s.idle) >= s.maxIdle {
		// Drop connections the server closed while they sat idle.
		live := s.idle[:0]
		for _, ic := range s.idle {
			if ic.fd >= 0 {
				live = append(live, ic)
			}
		}
		clear(s.idle[len(live):])
		s.idle = live
	}
	if !c.p.keepAlive || len(s.idle) >= s.maxIdle {
		s.closeConn(c)
		return
	}
	c.reused, c.draining = true, false
	c.p = respParser{}
	s.idle = append(s.idle, c)
}

func (s *epollSender) closeConn(c *econn) {
	if c.fd < 0 {
		return
	}
	syscall.Close(c.fd)
	s.conns[c.fd] = nil
	c.fd = -1
	c.req = nil
}

// end finishes q: err nil is a normal end (a non-200 answer or the end of
// the stream), else the error that cut it off. The record is classified
// exactly as doHTTP classifies it.
func (s *epollSender) end(q *ereq, err error) {
	if q.hidx < 0 {
		return // already ended
	}
	s.heapRemove(q)
	if c := q.conn; c != nil && c.req == q {
		c.req = nil
		if err != nil {
			s.closeConn(c)
		}
	}
	if q.st.done {
		err = nil // past [DONE] the body is read only to reuse the connection
	}
	rec := q.rec
	phase := "read stream"
	answered := q.conn != nil && q.conn.p.headerDone() && q.out == nil
	switch {
	case !answered && err != nil:
		// Before the response header: net/http reports these from Do.
		failErr(rec, q.ctx, q.ctx, &url.Error{Op: "Post", URL: s.cl.url, Err: err}, "send")
	case q.conn != nil && q.conn.p.status != http.StatusOK:
		failStatus(rec, q.conn.p.reason, q.head)
	default:
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			err = errOr(q.ctx.Err(), err)
		}
		q.ends = s.cl.settle(rec, &q.st, err, func(err error) { failErr(rec, q.ctx, q.ctx, err, phase) })
	}
	q.out, q.head = nil, nil
	s.doneMu.Lock()
	s.doneQ = append(s.doneQ, q)
	s.doneMu.Unlock()
	select {
	case s.doneWake <- struct{}{}:
	default:
	}
}

func errOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// cancelDone ends every request whose context is done.
func (s *epollSender) cancelDone() {
	for i := 0; i < len(s.heap); {
		q := s.heap[i]
		if err := q.ctx.Err(); err != nil {
			s.end(q, err)
			continue // the heap moved another request to i
		}
		i++
	}
}

func (s *epollSender) failAll(err error) {
	for len(s.heap) > 0 {
		s.end(s.heap[0], err)
	}
	s.mu.Lock()
	queue := s.queue
	s.queue = nil
	s.mu.Unlock()
	for _, q := range queue {
		s.heapPush(q)
		s.end(q, err)
	}
}

// The deadline heap: every request in flight, earliest deadline first.

func (s *epollSender) heapPush(q *ereq) {
	q.hidx = len(s.heap)
	s.heap = append(s.heap, q)
	s.heapUp(q.hidx)
}

func (s *epollSender) heapRemove(q *ereq) {
	i, last := q.hidx, len(s.heap)-1
	if i != last {
		s.heapSwap(i, last)
	}
	s.heap[last] = nil
	s.heap = s.heap[:last]
	q.hidx = -1
	if i != last {
		s.heapDown(i)
		s.heapUp(i)
	}
}

func (s *epollSender) heapSwap(i, j int) {
	h := s.heap
	h[i], h[j] = h[j], h[i]
	h[i].hidx, h[j].hidx = i, j
}

func (s *epollSender) heapUp(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if s.heap[p].dl <= s.heap[i].dl {
			return
		}
		s.heapSwap(i, p)
		i = p
	}
}

func (s *epollSender) heapDown(i int) {
	for {
		l := 2*i + 1
		if l >= len(s.heap) {
			return
		}
		m := l
		if r := l + 1; r < len(s.heap) && s.heap[r].dl < s.heap[l].dl {
			m = r
		}
		if s.heap[i].dl <= s.heap[m].dl {
			return
		}
		s.heapSwap(i, m)
		i = m
	}
}
