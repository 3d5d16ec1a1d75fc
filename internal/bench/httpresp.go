package bench

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// respParser decodes one HTTP/1.x response pushed to it in arbitrary
// pieces, for the epoll transport: the status line and headers, then the
// body framed by Transfer-Encoding: chunked, Content-Length, or the
// connection's close. It hands out body bytes as sub-slices of the input,
// so the body is never copied; only the header block is buffered, and only
// until it is complete. Interim 1xx responses are skipped, as net/http
// skips them.
type respParser struct {
	state   uint8
	status  int    // 0 until the header block is complete
	reason  string // "500 Internal Server Error"; kept for non-200 only
	hdr     []byte // the header block so far
	hdrLine int    // start of the header line being scanned in hdr
	// Body framing.
	chunked    bool
	closeDelim bool  // no length: the body runs to EOF
	keepAlive  bool  // the connection may carry another request after this
	remain     int64 // bytes left in the body (Content-Length) or chunk
	digits     int   // hex digits read of the current chunk size
	lineLen    int   // bytes in the current trailer line
	lastCR     bool  // the trailer line so far ends in '\r'
}

const (
	rpHeader      = iota
	rpBody        // Content-Length or close-delimited
	rpChunkSize   // hex digits of a chunk size
	rpChunkExt    // ";ext" up to the end of the size line
	rpChunkSizeLF // '\r' seen after the size
	rpChunkData   // remain bytes of chunk data
	rpChunkDataCR // the CRLF after the chunk data
	rpChunkDataLF //
	rpTrailer     // trailer lines up to an empty line
	rpDone        // the body is complete
)

// maxHeaderBytes bounds the response header block (net/http allows 10 MB;
// an OpenAI-style server sends a few hundred bytes).
const maxHeaderBytes = 1 << 20

// errChunked is net/http's complaint for a broken chunked framing.
var errChunked = errors.New("malformed chunked encoding")

// headerDone reports whether the status line and headers are parsed.
func (h *respParser) headerDone() bool { return h.status != 0 }

// done reports whether the body is complete.
func (h *respParser) done() bool { return h.state == rpDone }

// next consumes framing from p and returns the next run of body bytes
// (possibly empty) and the unconsumed rest of p. Call it until rest is
// empty or done() is true; headerDone() turns true before any body byte
// is returned.
func (h *respParser) next(p []byte) (body, rest []byte, err error) {
	for len(p) > 0 {
		switch h.state {
		case rpHeader:
			var done bool
			p, done, err = h.header(p)
			if err != nil || !done {
				return nil, p, err
			}
			return nil, p, nil
		case rpBody:
			if h.closeDelim {
				return p, nil, nil
			}
			data, rest := h.take(p, rpDone)
			return data, rest, nil
		case rpChunkSize:
			c := p[0]
			switch {
			case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F':
				if h.digits >= 15 {
					return nil, p, fmt.Errorf("%w: chunk length too large", errChunked)
				}
				h.remain = h.remain<<4 | int64(unhex(c))
				h.digits++
			case c == ';' || c == ' ' || c == '\t':
				h.state = rpChunkExt
			case c == '\r':
				h.state = rpChunkSizeLF
			case c == '\n':
				if err := h.sizeLineDone(); err != nil {
					return nil, p, err
				}
			default:
				return nil, p, fmt.Errorf("%w: invalid byte %q in chunk length", errChunked, c)
			}
			p = p[1:]
		case rpChunkExt:
			k := bytes.IndexByte(p, '\n')
			if k < 0 {
				return nil, nil, nil
			}
			p = p[k+1:]
			if err := h.sizeLineDone(); err != nil {
				return nil, p, err
			}
		case rpChunkSizeLF:
			if p[0] != '\n' {
				return nil, p, fmt.Errorf("%w: CR without LF after chunk length", errChunked)
			}
			p = p[1:]
			if err := h.sizeLineDone(); err != nil {
				return nil, p, err
			}
		case rpChunkData:
			data, rest := h.take(p, rpChunkDataCR)
			return data, rest, nil
		case rpChunkDataCR, rpChunkDataLF:
			want := byte('\r')
			if h.state == rpChunkDataLF {
				want = '\n'
			}
			if p[0] != want {
				return nil, p, fmt.Errorf("%w: chunk data not followed by CRLF", errChunked)
			}
			p = p[1:]
			if h.state == rpChunkDataCR {
				h.state = rpChunkDataLF
			} else {
				h.state = rpChunkSize
				h.remain, h.digits = 0, 0
			}
		case rpTrailer:
			k := bytes.IndexByte(p, '\n')
			if k < 0 {
				h.lineLen += len(p)
				h.lastCR = p[len(p)-1] == '\r'
				return nil, nil, nil
			}
			if k > 0 {
				h.lastCR = p[k-1] == '\r'
			}
			h.lineLen += k
			empty := h.lineLen == 0 || (h.lineLen == 1 && h.lastCR)
			h.lineLen, h.lastCR = 0, false
			p = p[k+1:]
			if empty {
				h.state = rpDone
			}
		case rpDone:
			return nil, p, nil
		}
	}
	return nil, p, nil
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

// sizeLineDone ends a chunk-size line: data follows, or the trailer after
// the last (zero) chunk.
// take returns the part of p that belongs to the current body or chunk
// (up to remain bytes) and what follows it, moving to then when it is all
// in.
func (h *respParser) take(p []byte, then uint8) (data, rest []byte) {
	n := min(int64(len(p)), h.remain)
	h.remain -= n
	if h.remain == 0 {
		h.state = then
	}
	return p[:n], p[n:]
}

func (h *respParser) sizeLineDone() error {
	if h.digits == 0 {
		return fmt.Errorf("%w: empty chunk length", errChunked)
	}
	if h.remain == 0 {
		h.state = rpTrailer
		h.lineLen = 0
	} else {
		h.state = rpChunkData
	}
	return nil
}

// header buffers the header block until its empty line and parses it.
// It returns the bytes after the block (or nil when more are needed).
func (h *respParser) header(p []byte) (rest []byte, done bool, err error) {
	old := len(h.hdr)
	if old+len(p) > maxHeaderBytes {
		return nil, false, fmt.Errorf("server response headers exceeded %d bytes", maxHeaderBytes)
	}
	h.hdr = append(h.hdr, p...)
	for {
		k := bytes.IndexByte(h.hdr[h.hdrLine:], '\n')
		if k < 0 {
			return nil, false, nil
		}
		line := h.hdr[h.hdrLine : h.hdrLine+k]
		end := h.hdrLine + k + 1
		if h.hdrLine > 0 && (len(line) == 0 || (len(line) == 1 && line[0] == '\r')) {
			rest = p[end-old:]
			if err := h.parseHeader(h.hdr[:h.hdrLine]); err != nil {
				return nil, false, err
			}
			if h.status >= 100 && h.status < 200 && h.status != 101 {
				// Interim response: the real one follows.
				*h = respParser{hdr: h.hdr[:0]}
				return rest, false, nil
			}
			h.hdr, h.hdrLine = nil, 0
			return rest, true, nil
		}
		h.hdrLine = end
	}
}

// parseHeader reads the status line and the framing headers of block.
func (h *respParser) parseHeader(block []byte) error {
	line, block, _ := bytes.Cut(block, []byte("\n"))
	line = bytes.TrimSuffix(line, []byte("\r"))
	proto, status, ok := bytes.Cut(line, []byte(" "))
	var minor byte
	switch string(proto) {
	case "HTTP/1.1":
		minor = 1
	case "HTTP/1.0":
	default:
		ok = false
	}
	if !ok || len(status) < 3 || (len(status) > 3 && status[3] != ' ') {
		return fmt.Errorf("malformed HTTP response %q", line)
	}
	code, err := strconv.Atoi(string(status[:3]))
	if err != nil || code < 100 {
		return fmt.Errorf("malformed HTTP status code %q", status[:3])
	}
	h.status = code
	if code != 200 {
		h.reason = string(status)
	}
	h.keepAlive = minor == 1
	clen := int64(-1)
	for len(block) > 0 {
		line, block, _ = bytes.Cut(block, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		name, val, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return fmt.Errorf("malformed MIME header line: %q", line)
		}
		val = bytes.TrimSpace(val)
		switch {
		case asciiEqualFold(name, "transfer-encoding"):
			// net/http accepts only "chunked" (identity is dropped).
			if !asciiEqualFold(val, "chunked") && !asciiEqualFold(val, "identity") {
				return fmt.Errorf("unsupported transfer encoding: %q", val)
			}
			// HTTP/1.0 has no chunked coding; net/http ignores it there.
			h.chunked = minor == 1 && asciiEqualFold(val, "chunked")
		case asciiEqualFold(name, "content-length"):
			n, err := strconv.ParseInt(string(val), 10, 64)
			if err != nil || n < 0 || (clen >= 0 && n != clen) {
				return fmt.Errorf("bad Content-Length %q", val)
			}
			clen = n
		case asciiEqualFold(name, "connection"):
			for _, tok := range bytes.Split(val, []byte(",")) {
				tok = bytes.TrimSpace(tok)
				if asciiEqualFold(tok, "close") {
					h.keepAlive = false
				} else if asciiEqualFold(tok, "keep-alive") && minor == 0 {
					h.keepAlive = true
				}
			}
		}
	}
	switch {
	case code == 204 || code == 304 || code == 101:
		h.state = rpDone
	case h.chunked:
		h.state = rpChunkSize
	case clen >= 0:
		h.remain = clen
		h.state = rpBody
		if clen == 0 {
			h.state = rpDone
		}
	default:
		h.closeDelim = true
		h.keepAlive = false
		h.state = rpBody
	}
	return nil
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// eof is the connection's end: fine for a close-delimited body, else the
// response was cut short. Like net/http, a connection that closes before
// any response byte gives io.EOF and one cut mid-response
// io.ErrUnexpectedEOF.
func (h *respParser) eof() error {
	switch {
	case h.state == rpDone:
		return nil
	case h.state == rpBody && h.closeDelim:
		h.state = rpDone
		return nil
	case h.state == rpHeader && len(h.hdr) == 0:
		return io.EOF
	}
	return io.ErrUnexpectedEOF
}
