package bench

import (
	"context"
	"fmt"
	"net/http"
	"net/textproto"
	"net/url"
	"runtime"
	"strings"

	"github.com/perflab/perflab/internal/dataset"
	"github.com/perflab/perflab/internal/metrics"
)

// Transports accepted by Config.Transport.
const (
	// TransportAuto picks epoll for plain http:// base URLs on Linux when
	// no Client is given and no proxy applies, else net/http.
	TransportAuto = "auto"
	// TransportEpoll is the purpose-built HTTP/1.1 streaming client: one
	// event loop on epoll, no goroutine per stream (Linux, http:// only).
	TransportEpoll = "epoll"
	// TransportNetHTTP is Go's net/http client.
	TransportNetHTTP = "net/http"
)

// sender starts requests on one transport. done is called exactly once,
// from any goroutine, when rec is final; it gets the chunk text offsets
// that doHTTP describes.
type sender interface {
	start(ctx context.Context, r *dataset.Request, rec *metrics.Record, done func(ends []int32))
}

// httpSender runs each request on its own goroutine over net/http.
type httpSender struct{ cl *client }

var _ sender = httpSender{}

func (s httpSender) start(ctx context.Context, r *dataset.Request, rec *metrics.Record, done func([]int32)) {
	go func() { done(s.cl.doHTTP(ctx, r, rec)) }()
}

// resolveTransport turns c.Transport into TransportEpoll or
// TransportNetHTTP for the request URL u, refusing an explicit epoll that
// cannot serve it.
func (c *Config) resolveTransport(u *url.URL) (string, error) {
	why := ""
	switch {
	case runtime.GOOS != "linux":
		why = "it needs Linux"
	case u.Scheme != "http":
		why = "it speaks plain http:// only"
	case c.Client != nil:
		why = "Config.Client is set"
	case u.User != nil:
		why = "the URL carries user info"
	case proxied(u):
		why = "a proxy applies to the URL"
	}
	switch c.Transport {
	case "", TransportAuto:
		if why != "" {
			return TransportNetHTTP, nil
		}
		return TransportEpoll, nil
	case TransportEpoll:
		if why != "" {
			return "", fmt.Errorf("bench: transport epoll cannot serve %s: %s", u.Redacted(), why)
		}
		return TransportEpoll, nil
	case TransportNetHTTP:
		return TransportNetHTTP, nil
	}
	return "", fmt.Errorf("bench: unknown transport %q (want auto, epoll or net/http)", c.Transport)
}

// proxyFor is the proxy rule newTransport uses (a variable so that tests
// can stand in for the environment, which net/http reads only once).
var proxyFor = http.ProxyFromEnvironment

// proxied reports whether net/http would send u through a proxy.
func proxied(u *url.URL) bool {
	p, err := proxyFor(&http.Request{URL: u})
	return err != nil || p != nil
}

// checkHeaders rejects header names and values that would corrupt the
// request (net/http refuses them per request; both transports refuse them
// up front).
func checkHeaders(h map[string]string) error {
	for k, v := range h {
		if k == "" || strings.IndexFunc(k, func(r rune) bool {
			return r <= ' ' || r >= 0x7f || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r)
		}) >= 0 {
			return fmt.Errorf("bench: invalid header name %q", k)
		}
		if strings.ContainsAny(v, "\r\n\x00") {
			return fmt.Errorf("bench: invalid value for header %s", textproto.CanonicalMIMEHeaderKey(k))
		}
	}
	return nil
}
