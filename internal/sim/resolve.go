package sim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/perflab/perflab/internal/hfhub"
)

// ModelSource is where a model's architecture comes from.
type ModelSource struct {
	// ConfigPath is the config.json to read ("" when the catalog serves).
	ConfigPath string
	// From says which: "--model-config", "local directory", "HF cache",
	// "Hub" or "catalog (NAME)".
	From string
}

// ResolveModel finds a model's config.json the way the tokenizer is found:
// a local directory, then the HF cache; a model the catalog knows by name
// (release suffixes such as -Instruct-2507 and -FP8 included) is then
// served by the catalog without a network call; any other is downloaded
// from the Hub (HF_TOKEN, HF_HUB_OFFLINE honoured) into the cache. The
// error lists what was tried.
func ResolveModel(ctx context.Context, model string, opt hfhub.Options) (ModelSource, error) {
	var tried []string
	if st, err := os.Stat(model); err == nil && st.IsDir() {
		p := filepath.Join(model, "config.json")
		if _, err := os.Stat(p); err == nil {
			return ModelSource{ConfigPath: p, From: "local directory"}, nil
		}
		tried = append(tried, "local: "+p+" (missing)")
	}
	repo := model
	opt = opt.WithDefaults()
	if strings.Count(repo, "/") == 1 {
		if dir, ok := opt.Cached(repo, "config.json"); ok {
			return ModelSource{ConfigPath: filepath.Join(dir, "config.json"), From: "HF cache"}, nil
		} else {
			tried = append(tried, "cache: "+dir+" (no config.json)")
		}
	}
	if a, err := LookupModel(model); err == nil {
		return ModelSource{From: "catalog (" + a.Name + ")"}, nil
	}
	tried = append(tried, "catalog: no architecture of that name (known: "+strings.Join(ModelNames(), ", ")+")")
	if strings.Count(repo, "/") != 1 {
		return ModelSource{}, fmt.Errorf("sim: model %q: not a Hub repository id, a local directory or a catalog name; tried:\n  %s", model, strings.Join(tried, "\n  "))
	}
	dir, err := opt.Download(ctx, repo, []string{"config.json"})
	if err != nil {
		if ctx.Err() != nil {
			return ModelSource{}, fmt.Errorf("sim: model %s: %w", model, ctx.Err())
		}
		if errors.Is(err, hfhub.ErrOffline) {
			tried = append(tried, "hub: skipped (HF_HUB_OFFLINE is set)")
		} else {
			tried = append(tried, "hub: "+err.Error())
		}
		return ModelSource{}, fmt.Errorf("sim: no architecture for model %q; tried:\n  %s\n(--model-config takes a config.json)", model, strings.Join(tried, "\n  "))
	}
	return ModelSource{ConfigPath: filepath.Join(dir, "config.json"), From: "Hub"}, nil
}
