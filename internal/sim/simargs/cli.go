package simargs

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/perflab/perflab/internal/suggest"
)

// style selects whose command-line conventions a parser copies: Python's
// argparse (vLLM, SGLang) or click (trtllm-serve). They differ in abbreviation,
// error wording and how a flag given a value is treated.
type style int

const (
	styleArgparse style = iota
	styleClick
)

// kind is how a flag consumes and checks its value.
type kind int

const (
	kStr       kind = iota // one value, any string
	kInt                   // one value, Python int()
	kFloat                 // one value, Python float()
	kHumanInt              // vLLM's human_readable_int: 32768, 32k (×1000), 32K (×1024)
	kJSON                  // one value that must be a JSON object
	kStoreTrue             // no value (argparse store_true / click is_flag)
	kBoolOpt               // argparse BooleanOptionalAction: --x / --no-x
	kPlus                  // nargs='+': one or more values
)

// flag is one option of a real engine parser.
type flag struct {
	names    []string // every spelling, long first; kBoolOpt lists only the positive form
	kind     kind
	choices  []string // allowed values, nil = any
	foldCase bool     // choices compared case-insensitively (vLLM enums)
}

// dest is the key a parsed flag is stored under: its first spelling.
func (f *flag) dest() string { return f.names[0] }

// display is how argparse names the flag in its messages.
func (f *flag) display() string {
	if f.kind == kBoolOpt {
		return f.names[0] + "/--no-" + strings.TrimPrefix(f.names[0], "--")
	}
	return strings.Join(f.names, "/")
}

// cli is one engine version's parser: its flags and conventions.
type cli struct {
	engine string
	prog   string // as the engine names itself in errors ("vllm serve")
	usage  string // the usage line printed before an argparse error
	style  style
	// underscores: vLLM's FlexibleArgumentParser accepts --max_model_len
	// for --max-model-len.
	underscores bool
	// positional names the positional arguments accepted, in order; the
	// first ones up to required must be present.
	positional []string
	required   int
	flags      []*flag
	byName     map[string]*flag
	longNames  []string // sorted, for abbreviation matching
}

func newCLI(c cli, flags ...[]*flag) *cli {
	c.byName = map[string]*flag{}
	for _, group := range flags {
		for _, f := range group {
			c.flags = append(c.flags, f)
			for _, n := range f.names {
				c.byName[n] = f
				if strings.HasPrefix(n, "--") {
					c.longNames = append(c.longNames, n)
				}
			}
			if f.kind == kBoolOpt {
				neg := "--no-" + strings.TrimPrefix(f.names[0], "--")
				c.byName[neg] = f
				c.longNames = append(c.longNames, neg)
			}
		}
	}
	sort.Strings(c.longNames)
	return &c
}

// without returns a copy of flags minus the named ones (a flag a version dropped).
func without(flags []*flag, names ...string) []*flag {
	drop := map[string]bool{}
	for _, n := range names {
		drop[n] = true
	}
	var out []*flag
	for _, f := range flags {
		if !drop[f.names[0]] {
			out = append(out, f)
		}
	}
	return out
}

// value is one parsed flag value.
type value struct {
	str  string   // raw text (kStr, kJSON, choices)
	num  float64  // kInt, kFloat, kHumanInt
	on   bool     // kStoreTrue, kBoolOpt
	list []string // kPlus
	obj  map[string]any
}

// parsed is the result of parsing argv against a cli.
type parsed struct {
	vals map[string]value // by flag dest
	pos  []string
}

// setDotted applies vLLM's dotted form of a JSON flag,
// --speculative-config.num_speculative_tokens=4: the value (JSON if it
// parses, else a string; "key+" splits a comma list) is merged into the
// flag's object.
func (p *parsed) setDotted(dest, path, raw string) {
	v := p.vals[dest]
	if v.obj == nil {
		v.obj = map[string]any{}
	}
	keys := strings.Split(path, ".")
	last := keys[len(keys)-1]
	var val any
	if strings.HasSuffix(last, "+") {
		keys[len(keys)-1] = strings.TrimSuffix(last, "+")
		var list []any
		for _, s := range strings.Split(raw, ",") {
			list = append(list, s)
		}
		val = list
	} else if err := json.Unmarshal([]byte(raw), &val); err != nil {
		val = raw
	}
	m := v.obj
	for _, k := range keys[:len(keys)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = val
	b, _ := json.Marshal(v.obj)
	v.str = string(b)
	p.vals[dest] = v
}

func (p *parsed) has(dest string) bool { _, ok := p.vals[dest]; return ok }
func (p *parsed) str(dest string) string {
	return p.vals[dest].str
}
func (p *parsed) int(dest string) int { return int(p.vals[dest].num) }

// Error is a rejection of the engine's command line, worded the way the
// engine words it. Stderr is what the engine would print (usage line
// included); ExitCode is its exit status.
type Error struct {
	Engine   string
	Msg      string // the engine's own error line, e.g. "vllm serve: error: unrecognized arguments: --foo"
	Stderr   string
	ExitCode int
}

func (e *Error) Error() string { return e.Msg }

func (c *cli) fail(format string, a ...any) *Error {
	msg := fmt.Sprintf(format, a...)
	if c.style == styleClick {
		usage := c.usage + "\nTry '" + c.prog + " --help' for help.\n\n"
		return &Error{Engine: c.engine, Msg: "Error: " + msg, Stderr: usage + "Error: " + msg + "\n", ExitCode: 2}
	}
	line := c.prog + ": error: " + msg
	return &Error{Engine: c.engine, Msg: line, Stderr: c.usage + "\n" + line + "\n", ExitCode: 2}
}

// looksNegative is argparse's test for a token that is a value despite its
// leading dash (it only holds when the parser has no flag that looks like a
// negative number, which is true of every engine here).
func looksNegative(s string) bool {
	if len(s) < 2 || s[0] != '-' {
		return false
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

func isFlagToken(s string) bool {
	return len(s) > 1 && s[0] == '-' && !looksNegative(s)
}

// lookup finds the flag a token names, with argparse's abbreviation rule
// (a unique prefix of a long option) where the style allows it.
func (c *cli) lookup(name string) (*flag, string, *Error) {
	if f, ok := c.byName[name]; ok {
		return f, name, nil
	}
	if c.style == styleClick || !strings.HasPrefix(name, "--") {
		return nil, "", nil
	}
	var hits []string
	for _, n := range c.longNames {
		if strings.HasPrefix(n, name) {
			hits = append(hits, n)
		}
	}
	switch len(hits) {
	case 0:
		return nil, "", nil
	case 1:
		return c.byName[hits[0]], hits[0], nil
	}
	return nil, "", c.fail("ambiguous option: %s could match %s", name, strings.Join(hits, ", "))
}

// parse reads argv (program words already removed) the way the engine's
// parser does.
func (c *cli) parse(argv []string) (*parsed, *Error) {
	p := &parsed{vals: map[string]value{}}
	var unknown []string
	onlyPos := false
	for i := 0; i < len(argv); i++ {
		tok := argv[i]
		if onlyPos || !isFlagToken(tok) {
			if tok == "--" && !onlyPos && c.style == styleArgparse {
				onlyPos = true
				continue
			}
			if len(p.pos) < len(c.positional) {
				p.pos = append(p.pos, tok)
			} else if c.style == styleClick {
				return nil, c.fail("Got unexpected extra argument (%s)", tok)
			} else {
				unknown = append(unknown, tok)
			}
			continue
		}
		name, val, hasVal := tok, "", false
		if strings.HasPrefix(tok, "--") {
			if k, v, ok := strings.Cut(tok, "="); ok {
				name, val, hasVal = k, v, true
			}
		} else if k, v, ok := strings.Cut(tok, "="); ok && c.style == styleArgparse {
			name, val, hasVal = k, v, true
		}
		if c.underscores {
			// vLLM's FlexibleArgumentParser: underscores become dashes in the
			// flag name (up to its first dot), and -O3 means -O 3.
			if strings.HasPrefix(name, "--") {
				head, tail, dotted := strings.Cut(name, ".")
				name = strings.ReplaceAll(head, "_", "-")
				if dotted {
					if f := c.byName[name]; f != nil && f.kind == kJSON {
						if !hasVal {
							if i+1 >= len(argv) {
								return nil, c.fail("argument %s: expected one argument", f.display())
							}
							i++
							val = argv[i]
						}
						p.setDotted(f.dest(), tail, val)
						continue
					}
					name += "." + tail
				}
			} else if strings.HasPrefix(tok, "-O") && len(tok) > 2 {
				name, val, hasVal = "-O", strings.TrimPrefix(tok[2:], "="), true
			}
		}
		f, canon, err := c.lookup(name)
		if err != nil {
			return nil, err
		}
		if f == nil {
			if c.style == styleClick {
				return nil, c.fail("No such option: %s%s", name, c.suggest(name))
			}
			unknown = append(unknown, tok)
			continue
		}
		switch f.kind {
		case kStoreTrue, kBoolOpt:
			if hasVal {
				if c.style == styleClick {
					return nil, c.fail("Option '%s' does not take a value.", canon)
				}
				return nil, c.fail("argument %s: ignored explicit argument '%s'", f.display(), val)
			}
			p.vals[f.dest()] = value{on: !strings.HasPrefix(canon, "--no-") || f.kind == kStoreTrue}
			continue
		case kPlus:
			var list []string
			if hasVal {
				list = append(list, val)
			}
			for i+1 < len(argv) && !isFlagToken(argv[i+1]) && argv[i+1] != "--" {
				i++
				list = append(list, argv[i])
			}
			if len(list) == 0 {
				return nil, c.fail("argument %s: expected at least one argument", f.display())
			}
			p.vals[f.dest()] = value{list: list, str: strings.Join(list, " ")}
			continue
		}
		if !hasVal {
			if i+1 >= len(argv) || (isFlagToken(argv[i+1]) && c.style == styleArgparse) {
				if c.style == styleClick {
					return nil, c.fail("Option '%s' requires an argument.", canon)
				}
				return nil, c.fail("argument %s: expected one argument", f.display())
			}
			i++
			val = argv[i]
		}
		v, err := c.convert(f, val)
		if err != nil {
			return nil, err
		}
		p.vals[f.dest()] = v
	}
	if len(unknown) > 0 {
		return nil, c.fail("unrecognized arguments: %s", strings.Join(unknown, " "))
	}
	if len(p.pos) < c.required {
		if c.style == styleClick {
			return nil, c.fail("Missing argument '%s'.", c.positional[len(p.pos)])
		}
		return nil, c.fail("the following arguments are required: %s", strings.Join(c.positional[len(p.pos):c.required], ", "))
	}
	return p, nil
}

// suggest mimics click's "Did you mean" hint for a near miss.
func (c *cli) suggest(name string) string {
	best, bestD := "", 4
	for _, n := range c.longNames {
		if d := suggest.Distance(name, n); d < bestD {
			best, bestD = n, d
		}
	}
	if best == "" {
		return ""
	}
	return " Did you mean " + best + "?"
}

// convert checks one value the way the engine's parser type-checks it.
func (c *cli) convert(f *flag, raw string) (value, *Error) {
	bad := func(typ string) *Error {
		if c.style == styleClick {
			what := map[string]string{"int": "integer", "float": "float"}[typ]
			return c.fail("Invalid value for '%s': '%s' is not a valid %s.", f.names[0], raw, what)
		}
		return c.fail("argument %s: invalid %s value: '%s'", f.display(), typ, raw)
	}
	v := value{str: raw}
	switch f.kind {
	case kInt:
		n, ok := pyInt(raw)
		if !ok {
			return v, bad("int")
		}
		v.num = float64(n)
	case kHumanInt:
		n, ok := humanInt(raw)
		if !ok {
			return v, bad("human_readable_int")
		}
		v.num = float64(n)
	case kFloat:
		x, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil || strings.ContainsAny(raw, "xXpP_") {
			return v, bad("float")
		}
		v.num = x
	case kJSON:
		var obj map[string]any
		if err := json.Unmarshal([]byte(raw), &obj); err != nil || obj == nil {
			return v, c.fail("argument %s: invalid loads value: '%s'", f.display(), raw)
		}
		v.obj = obj
	}
	if f.choices != nil {
		for _, ch := range f.choices {
			if ch == raw || (f.foldCase && strings.EqualFold(ch, raw)) {
				v.str = ch
				return v, nil
			}
		}
		if c.style == styleClick {
			return v, c.fail("Invalid value for '%s': '%s' is not one of %s.", f.names[0], raw, quoteList(f.choices, ", "))
		}
		return v, c.fail("argument %s: invalid choice: '%s' (choose from %s)", f.display(), raw, quoteList(f.choices, ", "))
	}
	return v, nil
}

func quoteList(xs []string, sep string) string {
	q := make([]string, len(xs))
	for i, x := range xs {
		q[i] = "'" + x + "'"
	}
	return strings.Join(q, sep)
}

// pyInt accepts what Python's int() accepts from a command line: optional
// sign, decimal digits, underscores between digits, surrounding spaces.
func pyInt(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if s == "" || strings.HasPrefix(s, "_") || strings.HasSuffix(s, "_") || strings.Contains(s, "__") {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.ReplaceAll(s, "_", ""), 10, 64)
	return n, err == nil
}

// humanInt is vLLM's human_readable_int: a plain int, or a number with a
// k/m/g suffix (decimal multiples) or K/M/G (binary multiples).
func humanInt(s string) (int64, bool) {
	s = strings.TrimSpace(s)
	if n, ok := pyInt(s); ok {
		return n, true
	}
	if len(s) < 2 {
		return 0, false
	}
	mult := map[byte]float64{'k': 1e3, 'm': 1e6, 'g': 1e9, 'K': 1 << 10, 'M': 1 << 20, 'G': 1 << 30}[s[len(s)-1]]
	if mult == 0 {
		return 0, false
	}
	x, err := strconv.ParseFloat(s[:len(s)-1], 64)
	if err != nil || x < 0 || math.IsInf(x, 0) || math.IsNaN(x) {
		return 0, false
	}
	if s[len(s)-1] >= 'A' && s[len(s)-1] <= 'Z' && x != math.Trunc(x) {
		return 0, false // binary multiples take whole numbers only
	}
	return int64(x * mult), true
}
