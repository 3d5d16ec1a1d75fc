package tokenizer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// ResolveOptions says where Resolve may look for a model's tokenizer. Zero
// values fall back to the environment variables huggingface_hub reads.
type ResolveOptions struct {
	// Path, when set, is a tokenizer directory or tokenizer.json file used
	// instead of the model name; nothing else is tried.
	Path string
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

var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

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
	if st, err := os.Stat(model); err == nil && (st.IsDir() || strings.HasSuffix(model, ".json")) {
		return loadPath(model)
	}
	opt = opt.withDefaults()
	var tried []string
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

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("tokenizer: no tokenizer for %q; tried:\n  %s", e.Model, strings.Join(e.Tried, "\n  "))
}

// resolveRepo tries the cache then the Hub for one repository. It returns
// nil, nil when the tokenizer is simply not there, and an error for a
// tokenizer that is there but broken (or a cancelled context).
func resolveRepo(ctx context.Context, repo string, opt ResolveOptions, tried *[]string) (*Tokenizer, error) {
	if dir, ok := cachedSnapshot(opt.CacheDir, repo, opt.Revision); ok {
		return Load(dir)
	} else {
		*tried = append(*tried, "cache: "+dir+" (no tokenizer.json)")
	}
	if opt.Offline {
		*tried = append(*tried, fmt.Sprintf("hub: %s skipped (offline: HF_HUB_OFFLINE is set)", repo))
		return nil, nil
	}
	dir, err := download(ctx, repo, opt)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("tokenizer: download %s: %w", repo, ctx.Err())
		}
		*tried = append(*tried, fmt.Sprintf("hub: %v", err))
		return nil, nil
	}
	return Load(dir)
}

func loadPath(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
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
	if o.Revision == "" {
		o.Revision = "main"
	}
	if o.CacheDir == "" {
		o.CacheDir = defaultCacheDir()
	}
	if o.Endpoint == "" {
		o.Endpoint = os.Getenv("HF_ENDPOINT")
	}
	if o.Endpoint == "" {
		o.Endpoint = "https://huggingface.co"
	}
	o.Endpoint = strings.TrimRight(o.Endpoint, "/")
	if o.Token == "" {
		o.Token = os.Getenv("HF_TOKEN")
	}
	if !o.Offline {
		switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
		case "1", "true", "yes", "on":
			o.Offline = true
		}
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 5 * time.Minute}
	}
	return o
}

func (o ResolveOptions) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

func defaultCacheDir() string {
	if d := os.Getenv("HF_HUB_CACHE"); d != "" {
		return d
	}
	if d := os.Getenv("HF_HOME"); d != "" {
		return filepath.Join(d, "hub")
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "huggingface", "hub")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(".cache", "huggingface", "hub")
	}
	return filepath.Join(home, ".cache", "huggingface", "hub")
}

// repoDir is the hub cache folder of a model repository.
func repoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// cachedSnapshot returns the snapshot directory for repo at rev (a branch or
// tag resolved through refs/, or a commit) and whether it holds a
// tokenizer.json.
func cachedSnapshot(cache, repo, rev string) (string, bool) {
	root := repoDir(cache, repo)
	commit := rev
	if !commitRe.MatchString(rev) {
		data, err := os.ReadFile(filepath.Join(root, "refs", rev))
		if err != nil {
			return filepath.Join(root, "refs", rev), false
		}
		commit = strings.TrimSpace(string(data))
	}
	dir := filepath.Join(root, "snapshots", commit)
	_, err := os.Stat(filepath.Join(dir, "tokenizer.json"))
	return dir, err == nil
}

// download fetches the tokenizer files into the cache layout
// (snapshots/COMMIT/FILE and refs/REV) and returns the snapshot directory.
func download(ctx context.Context, repo string, opt ResolveOptions) (string, error) {
	var commit string
	files := map[string][]byte{}
	for i, name := range tokenizerFiles {
		u := fmt.Sprintf("%s/%s/resolve/%s/%s", opt.Endpoint, repo, url.PathEscape(opt.Revision), name)
		data, c, err := fetchFile(ctx, opt, u)
		if err != nil {
			if i == 0 {
				return "", err
			}
			if !errors.Is(err, errNotFound) {
				return "", err
			}
			continue
		}
		if commit == "" {
			commit = c
		}
		files[name] = data
	}
	if commit == "" || strings.ContainsAny(commit, `/\`) || commit == "." || commit == ".." {
		commit = opt.Revision
	}
	root := repoDir(opt.CacheDir, repo)
	dir := filepath.Join(root, "snapshots", commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: save: %w", repo, err)
	}
	for name, data := range files {
		if err := writeAtomic(filepath.Join(dir, name), data); err != nil {
			return "", fmt.Errorf("%s: save: %w", repo, err)
		}
	}
	if commit != opt.Revision {
		if err := os.MkdirAll(filepath.Join(root, "refs"), 0o755); err != nil {
			return "", fmt.Errorf("%s: save: %w", repo, err)
		}
		if err := writeAtomic(filepath.Join(root, "refs", opt.Revision), []byte(commit)); err != nil {
			return "", fmt.Errorf("%s: save: %w", repo, err)
		}
	}
	opt.logf("tokenizer: downloaded %s (%s) into %s", repo, commit, dir)
	return dir, nil
}

var errNotFound = errors.New("not found")

// fetchFile GETs u and returns the body and the X-Repo-Commit header.
func fetchFile(ctx context.Context, opt ResolveOptions, u string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", u, err)
	}
	if opt.Token != "" {
		req.Header.Set("Authorization", "Bearer "+opt.Token)
	}
	req.Header.Set("User-Agent", "perflab")
	resp, err := opt.HTTPClient.Do(req)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", fmt.Errorf("%s: %w (HTTP 404)", u, errNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint := "set HF_TOKEN to a token with access"
		if opt.Token != "" {
			hint = "the HF_TOKEN given has no access"
		}
		return nil, "", fmt.Errorf("%s: HTTP %d (gated or private repository: %s)", u, resp.StatusCode, hint)
	default:
		return nil, "", fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, "", fmt.Errorf("%s: read: %w", u, err)
	}
	return data, resp.Header.Get("X-Repo-Commit"), nil
}

func writeAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}
