package engine

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// Command is what an engine config turns into: the argv to execute, the
// environment to add, and files the argv refers to by relative path (written
// into the working directory by the runtime before it starts).
type Command struct {
	Argv []string `json:"argv"`
	// Env holds only the variables this config adds; the runtime adds them
	// to the inherited environment.
	Env map[string]string `json:"env,omitempty"`
	// Files maps a file name (relative to the working dir) to its content,
	// e.g. "extra_llm_api_options.yaml" for TensorRT-LLM.
	Files map[string]string `json:"files,omitempty"`
}

// String renders the command as one shell line, env assignments first, each
// word quoted only when the shell would need it, the way the reference
// reports write their serving commands.
func (c Command) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(c.Env)) {
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(shellQuote(c.Env[k]))
		b.WriteByte(' ')
	}
	for i, a := range c.Argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(shellQuote(a))
	}
	return b.String()
}

// Script is the command as a user pastes it into a shell: each file the
// argv refers to written first with a quoted here-document (TensorRT-LLM's
// options file, as its own deployment guides write it), then String's
// line. Without files it is String.
func (c Command) Script() string {
	if len(c.Files) == 0 {
		return c.String()
	}
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(c.Files)) {
		body := c.Files[name]
		if body != "" && !strings.HasSuffix(body, "\n") {
			body += "\n"
		}
		// The delimiter must not be a line of the body.
		delim := "EOF"
		for i := 1; slices.Contains(strings.Split(body, "\n"), delim); i++ {
			delim = "EOF" + strconv.Itoa(i)
		}
		fmt.Fprintf(&b, "cat > %s <<'%s'\n%s%s\n", shellQuote(name), delim, body, delim)
	}
	b.WriteString(c.String())
	return b.String()
}

// shellQuote quotes s for a POSIX shell when it holds anything but plainly
// safe characters. Braces are quoted: bash would brace-expand
// --speculative-config={"a":1,"b":2} into two words.
func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Render turns a config into the engine's exact command for its version.
// Flags with a value are written --flag=value (the model is positional for
// vllm serve and trtllm-serve, --model-path X for SGLang), in a fixed order,
// which is how the reference reports write them. Knobs left at zero are not
// spelled. A knob the engine or version lacks is an UnsupportedError.
func Render(cfg Config) (Command, error) {
	if err := cfg.Validate(); err != nil {
		return Command{}, err
	}
	v, err := parseVersion(cfg.EffectiveVersion())
	if err != nil {
		return Command{}, err
	}
	r := &renderer{cfg: cfg, v: v, env: map[string]string{}, files: map[string]string{}}
	if k, ok := KindOf(cfg.Engine); ok {
		k.render(r)
	}
	if err := r.appendExtra(); err != nil {
		return Command{}, err
	}
	for k, val := range cfg.Env {
		if old, ok := r.env[k]; ok && old != val {
			return Command{}, &ValidationError{Field: "env", Value: k + "=" + val,
				Reason: fmt.Sprintf("conflicts with %s=%s rendered from the config", k, old)}
		}
		r.env[k] = val
	}
	cmd := Command{Argv: r.argv}
	if len(r.env) > 0 {
		cmd.Env = r.env
	}
	if len(r.files) > 0 {
		cmd.Files = r.files
	}
	return cmd, nil
}

// RenderForLaunch is Render plus the address the server must bind.
func RenderForLaunch(cfg Config, host string, port int) (Command, error) {
	cmd, err := Render(cfg)
	if err != nil {
		return cmd, err
	}
	cmd.Argv = append(cmd.Argv, "--host="+host, "--port="+strconv.Itoa(port))
	return cmd, nil
}

type renderer struct {
	cfg   Config
	v     version
	argv  []string
	env   map[string]string
	files map[string]string
	// flags is every flag name rendered from a knob, to catch extra_args
	// that would set the same thing twice.
	flags []string
}

func (r *renderer) flag(name string) {
	r.argv = append(r.argv, name)
	r.flags = append(r.flags, name)
}

func (r *renderer) val(name string, v any) {
	r.argv = append(r.argv, fmt.Sprintf("%s=%v", name, v))
	r.flags = append(r.flags, name)
}

func (r *renderer) appendExtra() error {
	for _, a := range r.cfg.ExtraArgs {
		name, _, _ := strings.Cut(a, "=")
		if strings.HasPrefix(name, "-") && slices.Contains(r.flags, name) {
			return &ValidationError{Field: "extra_args", Value: a,
				Reason: "sets " + name + ", which the config already renders; use the config field"}
		}
	}
	r.argv = append(r.argv, r.cfg.ExtraArgs...)
	return nil
}

// fmtFloat writes 0.9 as "0.9", never "0.900000".
func fmtFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
