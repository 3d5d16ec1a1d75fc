package safeyaml

import (
	"bytes"
	"fmt"
	"strings"
)

// prescan bounds a YAML text's nesting and entries on its bytes, before
// the parser allocates anything. It is an estimate, not a parse: the
// nesting of a line is its place in the stack of indentations above it,
// plus its leading "- ", "? " and ": " indicators, plus the flow brackets
// open at each point; the entries are the block lines, those indicators
// and the flow items. It can count less than the parser (a "- key:" line
// is one level here, two in the parser), which the exact check after the
// parse catches; what it must stop, a text nested thousands deep, it
// stops at the first bracket, indicator or indentation past the limit.
func prescan(data []byte, lim Limits) error {
	var (
		indents  []int // the block indentations open above this line
		flow     int   // flow brackets open ('[', '{')
		quote    byte  // the open quote, 0 outside one
		entries  int
		blockInd = -1 // a block scalar's parent indentation; -1 outside one
	)
	tooDeep := func(line, depth int) error {
		if depth > lim.MaxDepth {
			return &Error{Line: line, Msg: fmt.Sprintf("nested more than %d deep", lim.MaxDepth)}
		}
		return nil
	}
	count := func(line, k int) error {
		entries += k
		if entries > lim.MaxEntries {
			return &Error{Line: line, Msg: fmt.Sprintf("more than %d entries (mapping keys and sequence items)", lim.MaxEntries)}
		}
		return nil
	}
	lineNo := 0
	for len(data) > 0 {
		lineNo++
		var l []byte
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			l, data = data[:i], data[i+1:]
		} else {
			l, data = data, nil
		}
		l = bytes.TrimSuffix(l, []byte("\r"))
		ind := 0
		for ind < len(l) && l[ind] == ' ' {
			ind++
		}
		blank := ind == len(l) || l[ind] == '#'
		if blockInd >= 0 {
			if blank || ind > blockInd {
				continue // a block scalar's text
			}
			blockInd = -1
		}
		pos := 0
		depth := flow
		if quote == 0 && flow == 0 {
			if blank {
				continue
			}
			if bytes.HasPrefix(l, []byte("---")) || bytes.HasPrefix(l, []byte("...")) {
				indents = indents[:0]
			}
			for len(indents) > 0 && indents[len(indents)-1] > ind {
				indents = indents[:len(indents)-1]
			}
			if len(indents) == 0 || indents[len(indents)-1] < ind {
				indents = append(indents, ind)
			}
			depth = len(indents)
			pos = ind
			// "- - - x", "? ? x": each indicator opens a level of its own
			// on one line.
			for isIndicator(l, pos) {
				depth++
				if err := count(lineNo, 1); err != nil {
					return err
				}
				pos++
				for pos < len(l) && (l[pos] == ' ' || l[pos] == '\t') {
					pos++
				}
			}
			if err := tooDeep(lineNo, depth); err != nil {
				return err
			}
			if err := count(lineNo, 1); err != nil {
				return err
			}
		}
		base := depth - flow
		prev := byte(' ') // the last byte outside a quote, for what may start a collection
		plain := false    // within a block plain scalar ("b[1]"), where brackets are text
		for ; pos < len(l); pos++ {
			c := l[pos]
			if quote != 0 {
				switch {
				case quote == '"' && c == '\\':
					pos++
				case c == quote:
					if quote == '\'' && pos+1 < len(l) && l[pos+1] == '\'' {
						pos++ // '' is a quote inside a single-quoted scalar
						continue
					}
					quote = 0
					prev = c
				}
				continue
			}
			if c == '#' && (pos == 0 || l[pos-1] == ' ' || l[pos-1] == '\t') {
				break // a comment to the end of the line
			}
			if flow == 0 {
				switch {
				case plain && c == ':' && (pos+1 == len(l) || l[pos+1] == ' ' || l[pos+1] == '\t'):
					plain = false // the end of a key
				case plain:
					continue
				case !strings.ContainsRune(" \t:-?[{!&\"'", rune(c)) && startsValue(prev, flow):
					plain = true
					continue
				}
			}
			switch c {
			case '"', '\'':
				if startsValue(prev, flow) {
					quote = c
				}
			case '[', '{':
				// In block context a bracket inside a plain scalar
				// ("a: b[1]") is text; in flow context it cannot be.
				if flow > 0 || startsValue(prev, flow) {
					flow++
					if err := tooDeep(lineNo, base+flow); err != nil {
						return err
					}
					if err := count(lineNo, 1); err != nil {
						return err
					}
				}
			case ']', '}':
				if flow > 0 {
					flow--
				}
			case ',':
				if flow > 0 {
					if err := count(lineNo, 1); err != nil {
						return err
					}
				}
			}
			if c != ' ' && c != '\t' {
				prev = c
			}
		}
		if quote == 0 && flow == 0 && blockScalarHeader(l) {
			blockInd = ind
		}
	}
	return nil
}

// isIndicator says whether a block indicator ("- ", "? ", ": ") that
// opens a node on its line starts at l[pos].
func isIndicator(l []byte, pos int) bool {
	if pos >= len(l) || (l[pos] != '-' && l[pos] != '?' && l[pos] != ':') {
		return false
	}
	return pos+1 == len(l) || l[pos+1] == ' ' || l[pos+1] == '\t'
}

// startsValue says whether a byte after prev (the last one not blank)
// begins a node: at the start of a line or after an indicator.
func startsValue(prev byte, flow int) bool {
	switch prev {
	case ' ', '\t', ':', '-', '?', '[', '{', ',', '!', '&':
		return true
	}
	return false
}

// blockScalarHeader says whether a line ends with a block scalar's
// indicator ("key: |", "- >-", "key: |2 # note"), after which the more
// indented lines are text.
func blockScalarHeader(l []byte) bool {
	if i := bytes.Index(l, []byte(" #")); i >= 0 {
		l = l[:i]
	}
	l = bytes.TrimRight(l, " \t")
	l = bytes.TrimRight(l, "+-0123456789")
	if len(l) == 0 || (l[len(l)-1] != '|' && l[len(l)-1] != '>') {
		return false
	}
	l = l[:len(l)-1]
	return len(l) == 0 || l[len(l)-1] == ' ' || l[len(l)-1] == '\t'
}
