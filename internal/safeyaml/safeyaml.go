// Package safeyaml checks a YAML or JSON document from a user, or later
// from an API client, before it is decoded: its size, its nesting, and how
// far its aliases expand. A 2 KB YAML file whose nested aliases each repeat
// the one before ten times expands to billions of nodes in a decoder; it
// is refused here, with the line of the alias, at the cost of one parse.
package safeyaml

import (
	"errors"
	"fmt"
	"io"

	"github.com/goccy/go-yaml/ast"
	"github.com/goccy/go-yaml/parser"
)

// Limits bound a document. Zero fields take the defaults.
type Limits struct {
	// MaxBytes is the largest document (default 4 MiB).
	MaxBytes int
	// MaxNodes is the most nodes the document may hold once every alias
	// is expanded (default 1,000,000).
	MaxNodes int
	// MaxDepth is the deepest nesting, aliases expanded (default 100).
	MaxDepth int
	// MaxEntries is the most mapping keys and sequence items a YAML text
	// may hold, counted on the bytes before it is parsed (default
	// 10,000). The YAML parser's time grows with the square of the
	// entries (20,000 keys: about 2 s here), so a few MB of keys would
	// hold a request for minutes.
	MaxEntries int
	// MaxKeys is the most keys one JSON object may hold (default
	// 10,000): a JSON decoder is linear in them, but no document this
	// package guards has an object with more than a few hundred.
	MaxKeys int
}

// Defaults are the limits for specs, configs and API bodies: far above any
// real one (the largest example spec has a few hundred nodes), far below
// what exhausts memory.
var Defaults = Limits{MaxBytes: 4 << 20, MaxNodes: 1_000_000, MaxDepth: 100, MaxEntries: 10_000, MaxKeys: 10_000}

func (l Limits) orDefaults() Limits {
	if l.MaxBytes <= 0 {
		l.MaxBytes = Defaults.MaxBytes
	}
	if l.MaxNodes <= 0 {
		l.MaxNodes = Defaults.MaxNodes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = Defaults.MaxDepth
	}
	if l.MaxEntries <= 0 {
		l.MaxEntries = Defaults.MaxEntries
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = Defaults.MaxKeys
	}
	return l
}

// ErrTooLarge is wrapped by every refusal of Check and CheckJSON.
var ErrTooLarge = errors.New("document too large")

// Error is a refused document: what is wrong and the line it was found at
// (0 when it is the document as a whole).
type Error struct {
	Line int
	Msg  string
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Unwrap makes every Error an ErrTooLarge.
func (e *Error) Unwrap() error { return ErrTooLarge }

// Check refuses a YAML (or JSON: YAML's subset) document that exceeds
// lim; it returns nil for a document within them, and also for one that
// does not parse, which the decoder then reports with its position.
func Check(data []byte, lim Limits) error {
	lim = lim.orDefaults()
	if len(data) > lim.MaxBytes {
		return &Error{Msg: fmt.Sprintf("%d bytes, more than the %d allowed", len(data), lim.MaxBytes)}
	}
	// The parser's memory grows with the square of the nesting (100,000
	// nested brackets, 200 KB of text, took 15 GB) and its time with the
	// square of the entries, so both are bounded on the bytes first.
	if err := prescan(data, lim); err != nil {
		return err
	}
	f, err := parser.ParseBytes(data, 0)
	if err != nil || f == nil {
		return nil
	}
	c := &counter{lim: lim, anchors: map[string]ast.Node{}, sizes: map[ast.Node]int{}}
	for _, d := range f.Docs {
		if _, err := c.size(d.Body, 0); err != nil {
			return err
		}
	}
	return nil
}

// counter sizes a document's nodes with aliases expanded, remembering the
// size of each anchored node so that counting is linear in the text.
type counter struct {
	lim     Limits
	anchors map[string]ast.Node
	sizes   map[ast.Node]int
	total   int
}

func (c *counter) size(n ast.Node, depth int) (int, error) {
	if n == nil {
		return 0, nil
	}
	if depth > c.lim.MaxDepth {
		return 0, &Error{Line: line(n), Msg: fmt.Sprintf("nested more than %d deep", c.lim.MaxDepth)}
	}
	s := 1
	var kids []ast.Node
	switch v := n.(type) {
	case *ast.MappingNode:
		for _, mv := range v.Values {
			kids = append(kids, mv.Key, mv.Value)
		}
	case *ast.MappingValueNode:
		kids = append(kids, v.Key, v.Value)
	case *ast.MappingKeyNode:
		kids = append(kids, v.Value)
	case *ast.SequenceNode:
		kids = append(kids, v.Values...)
	case *ast.TagNode:
		kids = append(kids, v.Value)
	case *ast.AnchorNode:
		if v.Name != nil {
			c.anchors[v.Name.GetToken().Value] = v.Value
		}
		kids = append(kids, v.Value)
	case *ast.AliasNode:
		target, ok := c.anchors[aliasName(v)]
		if !ok {
			return 1, c.add(1, n)
		}
		ts, err := c.expand(target, depth+1)
		if err != nil {
			return 0, err
		}
		return ts, nil
	}
	if err := c.add(1, n); err != nil {
		return 0, err
	}
	for _, k := range kids {
		ks, err := c.size(k, depth+1)
		if err != nil {
			return 0, err
		}
		s += ks
	}
	c.sizes[n] = s
	return s, nil
}

// expand counts an alias's target once more: its size is known when the
// anchor was walked (aliases only point backwards).
func (c *counter) expand(target ast.Node, depth int) (int, error) {
	if s, ok := c.sizes[target]; ok {
		return s, c.add(s, target)
	}
	return c.size(target, depth)
}

func (c *counter) add(k int, n ast.Node) error {
	c.total += k
	if c.total > c.lim.MaxNodes {
		return &Error{Line: line(n), Msg: fmt.Sprintf("expands to more than %d nodes (through aliases?)", c.lim.MaxNodes)}
	}
	return nil
}

func aliasName(a *ast.AliasNode) string {
	if a.Value == nil || a.Value.GetToken() == nil {
		return ""
	}
	return a.Value.GetToken().Value
}

func line(n ast.Node) int {
	if n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// CheckJSON refuses a JSON document larger, deeper or with more keys in
// one object than lim (JSON has no aliases, so its size bounds its
// expansion). It scans the bytes, keeping only a key count per open
// container, so it allocates nothing whatever the document.
func CheckJSON(data []byte, lim Limits) error {
	lim = lim.orDefaults()
	if len(data) > lim.MaxBytes {
		return &Error{Msg: fmt.Sprintf("%d bytes, more than the %d allowed", len(data), lim.MaxBytes)}
	}
	var s jsonScan
	return s.scan(data, 0, lim)
}

// CheckJSONReader is CheckJSON on a stream: it reads r through (up to
// lim.MaxBytes and no further) and refuses at the first byte past a
// limit. A read error is returned wrapped; malformed JSON passes, for the
// decoder to report with its offset.
func CheckJSONReader(r io.Reader, lim Limits) error {
	lim = lim.orDefaults()
	lr := io.LimitReader(r, int64(lim.MaxBytes)+1)
	buf := make([]byte, 64<<10)
	var s jsonScan
	var off int64
	for {
		n, err := lr.Read(buf)
		if off+int64(n) > int64(lim.MaxBytes) {
			return &Error{Msg: fmt.Sprintf("more than the %d bytes allowed", lim.MaxBytes)}
		}
		if serr := s.scan(buf[:n], off, lim); serr != nil {
			return serr
		}
		off += int64(n)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("safeyaml: read: %w", err)
		}
	}
}

// jsonScan is the state of a byte scan of JSON, kept between chunks: in
// a string or not, after a backslash or not, and the key count of each
// open container (-1 for an array). A key is a string followed by ':',
// so counting the colons of an object outside strings counts its keys.
type jsonScan struct {
	inStr, esc bool
	open       []int
}

func (s *jsonScan) scan(data []byte, off int64, lim Limits) error {
	for i, c := range data {
		if s.inStr {
			switch {
			case s.esc:
				s.esc = false
			case c == '\\':
				s.esc = true
			case c == '"':
				s.inStr = false
			}
			continue
		}
		switch c {
		case '"':
			s.inStr = true
		case '{', '[':
			if len(s.open) >= lim.MaxDepth {
				return &Error{Msg: fmt.Sprintf("nested more than %d deep (at byte %d)", lim.MaxDepth, off+int64(i))}
			}
			k := -1
			if c == '{' {
				k = 0
			}
			s.open = append(s.open, k)
		case '}', ']':
			if len(s.open) > 0 {
				s.open = s.open[:len(s.open)-1]
			}
		case ':':
			if n := len(s.open); n > 0 && s.open[n-1] >= 0 {
				s.open[n-1]++
				if s.open[n-1] > lim.MaxKeys {
					return &Error{Msg: fmt.Sprintf("an object with more than %d keys (at byte %d)", lim.MaxKeys, off+int64(i))}
				}
			}
		}
	}
	return nil
}
