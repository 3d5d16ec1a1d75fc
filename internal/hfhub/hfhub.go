// Package hfhub finds a Hugging Face model repository's files the way
// huggingface_hub does: in the local hub cache (models--ORG--NAME with
// refs/ and snapshots/), else by a download from the Hub into that cache,
// honouring HF_HOME, HF_HUB_CACHE, HF_ENDPOINT, HF_TOKEN and
// HF_HUB_OFFLINE. The tokenizer and the simulator's model configs both
// resolve through it.
package hfhub

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

	"github.com/perflab/perflab/internal/atomicfile"
)

// Options say where to look. Zero values fall back to the environment
// variables huggingface_hub reads.
type Options struct {
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
	// Logf, when set, hears of downloads.
	Logf func(format string, args ...any)
}

// WithDefaults fills the zero fields from the environment.
func (o Options) WithDefaults() Options {
	if o.Revision == "" {
		o.Revision = "main"
	}
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
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

func (o Options) logf(format string, args ...any) {
	if o.Logf != nil {
		o.Logf(format, args...)
	}
}

// DefaultCacheDir is the hub cache huggingface_hub would use.
func DefaultCacheDir() string {
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

var commitRe = regexp.MustCompile(`^[0-9a-f]{40}$`)

// RepoDir is the hub cache folder of a model repository.
func RepoDir(cache, repo string) string {
	return filepath.Join(cache, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

// Cached returns the snapshot directory for repo at the revision (a
// branch or tag resolved through refs/, or a commit) and whether it holds
// file.
func (o Options) Cached(repo, file string) (string, bool) {
	root := RepoDir(o.CacheDir, repo)
	commit := o.Revision
	if !commitRe.MatchString(commit) {
		data, err := os.ReadFile(filepath.Join(root, "refs", commit))
		if err != nil {
			return filepath.Join(root, "refs", commit), false
		}
		commit = strings.TrimSpace(string(data))
	}
	dir := filepath.Join(root, "snapshots", commit)
	_, err := os.Stat(filepath.Join(dir, file))
	return dir, err == nil
}

// ErrNotFound is wrapped when the Hub has no such file.
var ErrNotFound = errors.New("not found")

// ErrOffline is returned by Download under HF_HUB_OFFLINE.
var ErrOffline = errors.New("offline: HF_HUB_OFFLINE is set")

// Download fetches files of repo into the cache layout (snapshots/COMMIT
// and refs/REVISION) and returns the snapshot directory. The first file
// is required; the others are taken when the Hub has them.
func (o Options) Download(ctx context.Context, repo string, files []string) (string, error) {
	if o.Offline {
		return "", fmt.Errorf("%s: %w", repo, ErrOffline)
	}
	var commit string
	got := map[string][]byte{}
	for i, name := range files {
		u := fmt.Sprintf("%s/%s/resolve/%s/%s", o.Endpoint, repo, url.PathEscape(o.Revision), name)
		data, c, err := o.fetch(ctx, u)
		if err != nil {
			if i == 0 || !errors.Is(err, ErrNotFound) {
				return "", err
			}
			continue
		}
		if commit == "" {
			commit = c
		}
		got[name] = data
	}
	if commit == "" || strings.ContainsAny(commit, `/\`) || commit == "." || commit == ".." {
		commit = o.Revision
	}
	root := RepoDir(o.CacheDir, repo)
	dir := filepath.Join(root, "snapshots", commit)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("%s: save: %w", repo, err)
	}
	for name, data := range got {
		if err := atomicfile.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("%s: save: %w", repo, err)
		}
	}
	if commit != o.Revision {
		if err := os.MkdirAll(filepath.Join(root, "refs"), 0o755); err != nil {
			return "", fmt.Errorf("%s: save: %w", repo, err)
		}
		if err := atomicfile.WriteFile(filepath.Join(root, "refs", o.Revision), []byte(commit), 0o644); err != nil {
			return "", fmt.Errorf("%s: save: %w", repo, err)
		}
	}
	o.logf("downloaded %s (%s) into %s", repo, commit, dir)
	return dir, nil
}

// fetch GETs u and returns the body and the X-Repo-Commit header.
func (o Options) fetch(ctx context.Context, u string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", u, err)
	}
	if o.Token != "" {
		req.Header.Set("Authorization", "Bearer "+o.Token)
	}
	req.Header.Set("User-Agent", "perflab")
	resp, err := o.HTTPClient.Do(req)
	if err != nil {
		return nil, "", err // a *url.Error: it names the method and u
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusOK:
	case resp.StatusCode == http.StatusNotFound:
		return nil, "", fmt.Errorf("%s: %w (HTTP 404)", u, ErrNotFound)
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		hint := "set HF_TOKEN to a token with access"
		if o.Token != "" {
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
