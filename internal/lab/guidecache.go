package lab

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/perflab/perflab/internal/engine"
	"github.com/perflab/perflab/internal/labspec"
)

// guideCache is the part of *store.Store that keeps guiding predictions
// across invocations; a Store without it predicts every time.
type guideCache interface {
	Guess(ctx context.Context, key string) ([]byte, bool, error)
	SaveGuess(ctx context.Context, key string, value []byte) error
}

// cachedGuide answers a Guess from the store when the same simulator has
// predicted the same config on the same workload before: a resumed lab
// reads its joint search's hundreds of predictions instead of making them
// again (they were 80% of a resume's time).
type cachedGuide struct {
	inner Guide
	cache guideCache
	// prefix identifies everything else a prediction depends on: the
	// guide's own fingerprint, the hardware and the SLO.
	prefix string
}

// guessRecord is a cached prediction: the measurement's result JSON, or
// why there is none (a config the simulator cannot run). Entries written
// before Measurement hold the same vLLM keys and read back alike.
type guessRecord struct {
	Obs json.RawMessage `json:"obs,omitempty"`
	Err string          `json:"err,omitempty"`
}

// errGuess is a cached failure to predict.
var errGuess = errors.New("lab: no prediction")

func (g *cachedGuide) Guess(ctx context.Context, cfg engine.Config, w labspec.Workload, prompts int) (Measurement, error) {
	h := sha256.Sum256(fmt.Appendf(nil, "%s|%s|%s|%d", g.prefix, labspec.ConfigHash(cfg), w.KeyName(), prompts))
	key := hex.EncodeToString(h[:16])
	if b, ok, err := g.cache.Guess(ctx, key); err == nil && ok {
		var rec guessRecord
		if json.Unmarshal(b, &rec) == nil {
			if len(rec.Obs) > 0 {
				if m, err := decodeMeasurement(rec.Obs); err == nil {
					return m, nil
				}
			} else {
				return Measurement{}, fmt.Errorf("%w: %s", errGuess, rec.Err)
			}
		}
	}
	o, err := g.inner.Guess(ctx, cfg, w, prompts)
	if ctx.Err() != nil {
		return o, err // a canceled prediction says nothing of the config
	}
	var rec guessRecord
	if err != nil {
		rec = guessRecord{Err: err.Error()}
	} else if rec.Obs, err = encodeMeasurement(o); err != nil {
		return o, nil // uncached: the prediction itself stands
	}
	if b, merr := json.Marshal(rec); merr == nil {
		// A cache that cannot be written only costs the next resume time.
		_ = g.cache.SaveGuess(context.WithoutCancel(ctx), key, b)
	}
	return o, err
}

// Upside implements Ranged: a range is the calibration's, not the
// prediction's, so it is asked of the inner guide every time.
func (g *cachedGuide) Upside(cfg engine.Config) (float64, bool) { return upside(g.inner, cfg) }

var (
	_ Guide  = (*cachedGuide)(nil)
	_ Ranged = (*cachedGuide)(nil)
)
