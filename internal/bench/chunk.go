package bench

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// chunk is what one SSE data payload of an OpenAI-style stream said. The
// scanner below fills it without encoding/json because it runs once per
// streamed token: at 100k chunks/s reflection and per-chunk allocations
// would cost the client more than the server it is measuring.
type chunk struct {
	// choices is true when "choices" is a non-empty array (vLLM's truthiness
	// test: null, [] and absent all count as no choices).
	choices bool
	// content is true when the first choice carried non-empty text/content.
	content bool
	// reasoning is true when the first choice's delta carried non-empty
	// reasoning_content (or "reasoning").
	reasoning bool
	// role is true when the first choice's delta named a role (the chat
	// stream's opening chunk, which carries no token).
	role bool
	// usage is true when a "usage" object with completion_tokens was present.
	usage      bool
	completion int
	prompt     int
	hasPrompt  bool
	// errMsg is the message of a top-level "error" object, if any.
	errMsg string
}

// errSyntax marks a payload that is not the JSON object we expect.
var errSyntax = errors.New("malformed JSON")

// parseChunk scans one data payload. Generated text (completions' "text" or
// chat's delta "content") is appended to text; the grown slice is returned.
func parseChunk(b []byte, text []byte, c *chunk) ([]byte, error) {
	*c = chunk{}
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return text, fmt.Errorf("%w: payload is not an object (byte %d)", errSyntax, i)
	}
	i++
	var err error
	for {
		i = skipWS(b, i)
		if i >= len(b) {
			return text, fmt.Errorf("%w: unterminated object", errSyntax)
		}
		if b[i] == '}' {
			i++
			break
		}
		var key []byte
		key, i, err = rawString(b, i)
		if err != nil {
			return text, err
		}
		if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
			return text, fmt.Errorf("%w: want ':' at byte %d", errSyntax, i)
		}
		i = skipWS(b, i+1)
		switch string(key) {
		case "choices":
			text, i, err = scanChoices(b, i, text, c)
		case "usage":
			i, err = scanUsage(b, i, c)
		case "error":
			i, err = scanError(b, i, c)
		default:
			i, err = skipValue(b, i, 0)
		}
		if err != nil {
			return text, err
		}
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' {
			i++
			break
		}
		return text, fmt.Errorf("%w: want ',' or '}' at byte %d", errSyntax, i)
	}
	if i = skipWS(b, i); i != len(b) {
		return text, fmt.Errorf("%w: trailing data at byte %d", errSyntax, i)
	}
	return text, nil
}

func scanChoices(b []byte, i int, text []byte, c *chunk) ([]byte, int, error) {
	if i < len(b) && b[i] != '[' {
		j, err := skipValue(b, i, 0) // null or something odd: no choices
		return text, j, err
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == ']' {
		return text, i + 1, nil
	}
	c.choices = true
	first := true
	var err error
	for {
		if first && i < len(b) && b[i] == '{' {
			text, i, err = scanChoice(b, i, text, c)
		} else {
			i, err = skipValue(b, i, 0)
		}
		if err != nil {
			return text, i, err
		}
		first = false
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i = skipWS(b, i+1)
			continue
		}
		if i < len(b) && b[i] == ']' {
			return text, i + 1, nil
		}
		return text, i, fmt.Errorf("%w: want ',' or ']' in choices at byte %d", errSyntax, i)
	}
}

// scanChoice reads one choice object: "text" (completions) or "delta"
// (chat) with "content" and "reasoning_content"/"reasoning".
func scanChoice(b []byte, i int, text []byte, c *chunk) ([]byte, int, error) {
	return scanObject(b, i, text, func(key []byte, b []byte, i int, text []byte) ([]byte, int, error) {
		switch string(key) {
		case "text":
			return appendStringValue(b, i, text, &c.content)
		case "delta", "message":
			return scanObject(b, i, text, func(key []byte, b []byte, i int, text []byte) ([]byte, int, error) {
				switch string(key) {
				case "content":
					return appendStringValue(b, i, text, &c.content)
				case "role":
					c.role = true
				case "reasoning_content", "reasoning":
					j, nonEmpty, err := skipStringValue(b, i)
					if nonEmpty {
						c.reasoning = true
					}
					return text, j, err
				}
				j, err := skipValue(b, i, 0)
				return text, j, err
			})
		}
		j, err := skipValue(b, i, 0)
		return text, j, err
	})
}

func scanUsage(b []byte, i int, c *chunk) (int, error) {
	if i < len(b) && b[i] != '{' {
		return skipValue(b, i, 0)
	}
	_, j, err := scanObject(b, i, nil, func(key []byte, b []byte, i int, text []byte) ([]byte, int, error) {
		switch string(key) {
		case "completion_tokens":
			n, ok, j, err := intValue(b, i)
			if ok {
				c.usage, c.completion = true, n
			}
			return text, j, err
		case "prompt_tokens":
			n, ok, j, err := intValue(b, i)
			if ok {
				c.hasPrompt, c.prompt = true, n
			}
			return text, j, err
		}
		j, err := skipValue(b, i, 0)
		return text, j, err
	})
	return j, err
}

func scanError(b []byte, i int, c *chunk) (int, error) {
	start := i
	j, err := skipValue(b, i, 0)
	if err != nil {
		return j, err
	}
	if string(b[start:j]) == "null" {
		return j, nil
	}
	msg := string(b[start:j])
	if b[start] == '{' {
		// Prefer the "message" field when the error is an object.
		_, _, _ = scanObject(b, start, nil, func(key []byte, b []byte, i int, text []byte) ([]byte, int, error) {
			if string(key) == "message" {
				var m []byte
				var ne bool
				m, k, err := appendStringValue(b, i, nil, &ne)
				if err == nil {
					msg = string(m)
				}
				return text, k, err
			}
			k, err := skipValue(b, i, 0)
			return text, k, err
		})
	}
	if len(msg) > 1024 {
		msg = msg[:1024]
	}
	c.errMsg = msg
	return j, nil
}

type fieldFunc func(key []byte, b []byte, i int, text []byte) ([]byte, int, error)

// scanObject walks the object at b[i], calling f with each key and the
// offset of its value; f returns the offset just past the value.
func scanObject(b []byte, i int, text []byte, f fieldFunc) ([]byte, int, error) {
	if i >= len(b) || b[i] != '{' {
		j, err := skipValue(b, i, 0) // null where an object was expected
		return text, j, err
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		return text, i + 1, nil
	}
	for {
		var key []byte
		var err error
		key, i, err = rawString(b, skipWS(b, i))
		if err != nil {
			return text, i, err
		}
		if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
			return text, i, fmt.Errorf("%w: want ':' at byte %d", errSyntax, i)
		}
		text, i, err = f(key, b, skipWS(b, i+1), text)
		if err != nil {
			return text, i, err
		}
		i = skipWS(b, i)
		if i < len(b) && b[i] == ',' {
			i++
			continue
		}
		if i < len(b) && b[i] == '}' {
			return text, i + 1, nil
		}
		return text, i, fmt.Errorf("%w: want ',' or '}' at byte %d", errSyntax, i)
	}
}

func skipWS(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// rawString returns the undecoded bytes of the string at b[i]. Keys we look
// for never need unescaping; an escaped key simply does not match.
func rawString(b []byte, i int) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, fmt.Errorf("%w: want string at byte %d", errSyntax, i)
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return b[i+1 : j], j + 1, nil
		}
	}
	return nil, len(b), fmt.Errorf("%w: unterminated string at byte %d", errSyntax, i)
}

// skipStringValue skips a string or null and says whether it was a
// non-empty string.
func skipStringValue(b []byte, i int) (int, bool, error) {
	if i < len(b) && b[i] == '"' {
		s, j, err := rawString(b, i)
		return j, len(s) > 0, err
	}
	j, err := skipValue(b, i, 0)
	return j, false, err
}

// appendStringValue decodes the string at b[i] onto text (null appends
// nothing) and sets *nonEmpty when it had content.
func appendStringValue(b []byte, i int, text []byte, nonEmpty *bool) ([]byte, int, error) {
	if i >= len(b) || b[i] != '"' {
		j, err := skipValue(b, i, 0)
		return text, j, err
	}
	start := len(text)
	j := i + 1
	for j < len(b) {
		c := b[j]
		switch {
		case c == '"':
			if len(text) > start || j > i+1 {
				*nonEmpty = true
			}
			return text, j + 1, nil
		case c == '\\':
			if j+1 >= len(b) {
				return text, len(b), fmt.Errorf("%w: unterminated escape at byte %d", errSyntax, j)
			}
			j++
			switch b[j] {
			case '"', '\\', '/':
				text = append(text, b[j])
			case 'b':
				text = append(text, '\b')
			case 'f':
				text = append(text, '\f')
			case 'n':
				text = append(text, '\n')
			case 'r':
				text = append(text, '\r')
			case 't':
				text = append(text, '\t')
			case 'u':
				r, k, ok := hex4(b, j+1)
				if !ok {
					return text, j, fmt.Errorf("%w: bad \\u escape at byte %d", errSyntax, j)
				}
				j = k - 1
				if utf16.IsSurrogate(r) {
					if r2, k2, ok2 := hex4(b, k+2); ok2 && k+1 < len(b) && b[k] == '\\' && b[k+1] == 'u' {
						if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
							r = d
							j = k2 - 1
						} else {
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				}
				text = utf8.AppendRune(text, r)
			default:
				return text, j, fmt.Errorf("%w: bad escape at byte %d", errSyntax, j)
			}
			j++
		case c < 0x20:
			return text, j, fmt.Errorf("%w: control byte in string at byte %d", errSyntax, j)
		default:
			// Copy the run of plain bytes in one append.
			k := j + 1
			for k < len(b) && b[k] != '"' && b[k] != '\\' && b[k] >= 0x20 {
				k++
			}
			text = append(text, b[j:k]...)
			j = k
		}
	}
	return text, len(b), fmt.Errorf("%w: unterminated string at byte %d", errSyntax, i)
}

func hex4(b []byte, i int) (rune, int, bool) {
	if i+4 > len(b) {
		return 0, i, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, i, false
		}
	}
	return r, i + 4, true
}

// intValue reads a JSON number as an int; null gives ok=false.
func intValue(b []byte, i int) (int, bool, int, error) {
	j, err := skipValue(b, i, 0)
	if err != nil {
		return 0, false, j, err
	}
	s := b[i:j]
	if string(s) == "null" {
		return 0, false, j, nil
	}
	n, perr := strconv.Atoi(string(s))
	if perr != nil {
		f, ferr := strconv.ParseFloat(string(s), 64)
		if ferr != nil {
			return 0, false, j, fmt.Errorf("%w: token count %q at byte %d is not a number", errSyntax, s, i)
		}
		n = int(f)
	}
	return n, true, j, nil
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 512

// skipValue returns the offset just past the JSON value at b[i].
func skipValue(b []byte, i int, depth int) (int, error) {
	if depth > maxDepth {
		return i, fmt.Errorf("%w: nesting deeper than %d at byte %d", errSyntax, maxDepth, i)
	}
	i = skipWS(b, i)
	if i >= len(b) {
		return i, fmt.Errorf("%w: value expected at end of payload", errSyntax)
	}
	switch c := b[i]; {
	case c == '"':
		_, j, err := rawString(b, i)
		return j, err
	case c == '{' || c == '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		i = skipWS(b, i+1)
		if i < len(b) && b[i] == closer {
			return i + 1, nil
		}
		for {
			var err error
			if c == '{' {
				if _, i, err = rawString(b, skipWS(b, i)); err != nil {
					return i, err
				}
				if i = skipWS(b, i); i >= len(b) || b[i] != ':' {
					return i, fmt.Errorf("%w: want ':' at byte %d", errSyntax, i)
				}
				i++
			}
			if i, err = skipValue(b, i, depth+1); err != nil {
				return i, err
			}
			i = skipWS(b, i)
			if i < len(b) && b[i] == ',' {
				i++
				continue
			}
			if i < len(b) && b[i] == closer {
				return i + 1, nil
			}
			return i, fmt.Errorf("%w: unterminated container at byte %d", errSyntax, i)
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		j := i + 1
		for j < len(b) {
			d := b[j]
			if (d >= '0' && d <= '9') || d == '.' || d == 'e' || d == 'E' || d == '+' || d == '-' {
				j++
				continue
			}
			break
		}
		return j, nil
	default:
		return i, fmt.Errorf("%w: unexpected byte %q at %d", errSyntax, c, i)
	}
}

func literal(b []byte, i int, lit string) (int, error) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), nil
	}
	return i, fmt.Errorf("%w: bad literal at byte %d", errSyntax, i)
}
