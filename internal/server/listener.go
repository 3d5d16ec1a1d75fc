package server

import (
	"net"
	"sync"
)

// limitListener accepts at most n connections open at once: the next
// Accept waits until one closes, and the kernel's backlog holds the
// callers meanwhile. (golang.org/x/net/netutil has the same; this is the
// few lines it takes, without a dependency.)
func limitListener(ln net.Listener, n int) net.Listener {
	return &capListener{Listener: ln, slots: make(chan struct{}, n), done: make(chan struct{})}
}

type capListener struct {
	net.Listener
	slots     chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ net.Listener = (*capListener)(nil)

// Accept waits for a free slot, then for a connection.
func (l *capListener) Accept() (net.Conn, error) {
	select {
	case l.slots <- struct{}{}:
	case <-l.done:
		return nil, net.ErrClosed
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.slots
		return nil, err
	}
	return &capConn{Conn: c, release: func() { <-l.slots }}, nil
}

// Close stops the listener and any Accept waiting for a slot.
func (l *capListener) Close() error {
	l.closeOnce.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// capConn gives its slot back once, on its first Close.
type capConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *capConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
