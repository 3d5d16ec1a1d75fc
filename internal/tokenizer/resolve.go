package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/perflab/perflab/internal/hfhub"
)

// ResolveOptions says where Resolve may look for a model's tokenizer. Zero
// values fall back to the environment variables huggingface_hub reads.
type ResolveOptions struct {
	// Path, when set, is a tokenizer directory or tokenizer.json file used
	// instead of the model name; nothing else is tried.
	Path string
	// HubOnly takes the model name as a Hub id only: no file or
	// directory of that name is looked for (a server must not read its
	// working directory on a client's word), and a name that can only be
	// a path is an error.
	HubOnly bool
	// HidePaths names the hub cache by its role in errors, not by its
	// directory: a server's client is not to learn the host's paths.
	HidePaths bool
	// Revision is the branch, tag or commit; default "main".
	Revision string
	// CacheDir is the hub cache; default HF_HUB_CACHE, else HF_HOME/hub,
	// else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub.
	CacheDir string
	// Endpoint is the Hub's base URL; default HF_ENDPOINT, else
	// https://huggingface.co.
	Endpoint string
	// Token authorises downloads of gated or private repositories; default
	// HF_TOKEN.
	Token string
	// Offline forbids downloads; also set by HF_HUB_OFFLINE=1.
	Offline bool
	// HTTPClient makes the downloads; default a client with a 5-minute
	// timeout.
	HTTPClient *http.Client
	// Logf, when set, is told about choices worth a user's attention (a
	// download, an FP8 repository using its base model's tokenizer).
	Logf func(format string, args ...any)
}

// tokenizerFiles are fetched from the Hub; only the first is required.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja"}

// fp8Suffix matches the FP8 repositories that share their base model's
// tokenizer (Qwen/Qwen3-14B-FP8 -> Qwen/Qwen3-14B).
var fp8Suffix = regexp.MustCompile(`[-_](?i:fp8)(?:[-_](?i:dynamic|static))?$`)

// Resolve finds and loads model's tokenizer the way Hugging Face does: an
// explicit path (opt.Path, or model naming an existing directory or file),
// then the local hub cache, then a download from the Hub into that cache. An
// FP8 repository falls back to its base model's files when its own are not
// found. The error lists every place tried.
func Resolve(ctx context.Context, model string, opt ResolveOptions) (*Tokenizer, error) {
	if opt.Path != "" {
		return loadPath(opt.Path)
	}
	if model == "" {
		return nil, errors.New("tokenizer: resolve: no model name and no tokenizer path")
	}
	var tried []string
	if opt.HubOnly {
		if looksLikePath(model) {
			return nil, fmt.Errorf("tokenizer: %q is a path, not a Hub id", model)
		}
	} else {
		st, err := os.Stat(model)
		switch {
		case err == nil && (st.IsDir() || strings.HasSuffix(model, ".json")):
			return loadPath(model)
		case looksLikePath(model):
			// A Hub id never starts with / or . nor ends in .json: looking
			// "/data/tok" up in the cache and on the Hub would only hide the
			// typo behind two misses.
			return loadPath(model)
		}
		tried = append(tried, fmt.Sprintf("local: no directory or tokenizer .json named %s here", model))
	}
	opt = opt.withDefaults()
	candidates := []string{model}
	if base := fp8Suffix.ReplaceAllString(model, ""); base != model {
		candidates = append(candidates, base)
	}
	for i, repo := range candidates {
		t, err := resolveRepo(ctx, repo, opt, &tried)
		if err != nil {
			return nil, err
		}
		if t != nil {
			if i > 0 {
				opt.logf("tokenizer: %s has no tokenizer of its own here; using its base model %s's (%s)", model, repo, t.source)
			}
			return t, nil
		}
	}
	return nil, &NotFoundError{Model: model, Tried: tried}
}

// NotFoundError says that no tokenizer was found for a model, and every
// place that was tried (a path, the cache, the Hub).
type NotFoundError struct {
	Model string
	Tried []string
}

// Error lists the places tried, one a line.
func (e *NotFoundError) Error() string {
	return fmt.Sprintf("tokenizer: no tokenizer for %q; tried:\n  %s", e.Model, strings.Join(e.Tried, "\n  "))
}

// resolveRepo tries the cache then the Hub for one repository. It returns
// nil, nil when the tokenizer is simply not there, and an error for a
// tokenizer that is there but broken (or a cancelled context).
func resolveRepo(ctx context.Context, repo string, opt ResolveOptions, tried *[]string) (*Tokenizer, error) {
	hub := opt.hub()
	if dir, ok := hub.Cached(repo, tokenizerFiles[0]); ok {
		return Load(dir)
	} else {
		if opt.HidePaths {
			*tried = append(*tried, "cache: the server's HF cache holds no tokenizer.json for "+repo)
		} else {
			*tried = append(*tried, "cache: "+dir+" (no tokenizer.json)")
		}
	}
	if opt.Offline {
		*tried = append(*tried, fmt.Sprintf("hub: %s skipped (offline: HF_HUB_OFFLINE is set)", repo))
		return nil, nil
	}
	dir, err := hub.Download(ctx, repo, tokenizerFiles)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("tokenizer: download %s: %w", repo, ctx.Err())
		}
		*tried = append(*tried, fmt.Sprintf("hub: %v", err))
		return nil, nil
	}
	return Load(dir)
}

// hub is the options as the Hub client takes them.
func (o ResolveOptions) hub() hfhub.Options {
	return hfhub.Options{Revision: o.Revision, CacheDir: o.CacheDir, Endpoint: o.Endpoint, Token: o.Token,
		Offline: o.Offline, HTTPClient: o.HTTPClient, Logf: func(format string, a ...any) { o.logf("tokenizer: "+format, a...) }}
}

// looksLikePath is a name that can only mean a local file or directory.
func looksLikePath(name string) bool {
	return filepath.IsAbs(name) || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "~") ||
		strings.HasSuffix(name, ".json") || strings.HasPrefix(name, string(filepath.Separator))
}

// loadPath loads an explicit tokenizer path; a path that is not there is a
// NotFoundError, so callers can say how to give one.
func loadPath(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, &NotFoundError{Model: path, Tried: []string{"path: " + err.Error()}}
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		return Load(path)
	}
	// A file: take its directory's config too when it sits beside one.
	if filepath.Base(path) == "tokenizer.json" {
		return Load(filepath.Dir(path))
	}
	return LoadFile(path)
}

func (o ResolveOptions) withDefaults() ResolveOptions {
	h := o.hub().WithDefaults()
	o.Revision, o.CacheDir, o.Endpoint, o.Token, o.Offline, o.HTTPClient = h.Revision, h.CacheDir, h.Endpoint, h.Token, h.Offline, h.HTTPClient
	return o
}

func (o ResolveOptions) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}
