package metrics

import (
	"bufio"
	"io"
)

// PythonJSONReader is pythonJSONToStrict on a stream: it rewrites the bare
// NaN, Infinity and -Infinity that Python's json module writes into null,
// "inf" and "-inf", leaving strings alone, without holding the document.
// A bare token that starts like one of them and is not is passed on as it
// is, for the decoder to refuse.
func PythonJSONReader(r io.Reader) io.Reader {
	return &pyJSONReader{r: bufio.NewReaderSize(r, 64<<10)}
}

type pyJSONReader struct {
	r       *bufio.Reader
	pending string // a rewritten token not yet returned
	inStr   bool
	esc     bool
	err     error
}

var _ io.Reader = (*pyJSONReader)(nil)

func (p *pyJSONReader) Read(out []byte) (int, error) {
	n := 0
	for n < len(out) {
		if p.pending != "" {
			k := copy(out[n:], p.pending)
			p.pending = p.pending[k:]
			n += k
			continue
		}
		if p.err != nil {
			break
		}
		c, err := p.r.ReadByte()
		if err != nil {
			p.err = err
			break
		}
		if p.inStr {
			switch {
			case p.esc:
				p.esc = false
			case c == '\\':
				p.esc = true
			case c == '"':
				p.inStr = false
			}
		} else {
			switch c {
			case '"':
				p.inStr = true
			case 'N':
				if p.next("aN") {
					p.pending = "null"
					continue
				}
			case 'I':
				if p.next("nfinity") {
					p.pending = `"inf"`
					continue
				}
			case '-':
				if p.next("Infinity") {
					p.pending = `"-inf"`
					continue
				}
			}
		}
		out[n] = c
		n++
	}
	if n > 0 {
		return n, nil
	}
	return 0, p.err
}

// next consumes rest when it comes next.
func (p *pyJSONReader) next(rest string) bool {
	b, err := p.r.Peek(len(rest))
	if err != nil || string(b) != rest {
		return false
	}
	p.r.Discard(len(rest))
	return true
}
