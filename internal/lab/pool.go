package lab

import (
	"context"

	"github.com/perflab/perflab/internal/engine"
)

// The runner's servers are an engine.Fleet (see LiveRunner.fleet): it
// starts them, keeps an idle one for the next measurement of its config
// (a repeat, another workload) instead of paying another start, resets or
// salts its prefix cache, and stops the least recently used idle servers
// when a trial needs their GPUs.

// Close stops every server the runner keeps up; call it when the lab is
// done with the runner. It is safe to call more than once.
func (r *LiveRunner) Close() error {
	r.fleet().Close()
	return nil
}

// Sweep removes the servers an earlier lab of this run left when it was
// killed (containers outlive perflab; local processes do not), where the
// runtime can find them. The lab calls it once it holds the run, so it
// never removes the servers of a lab still running it.
func (r *LiveRunner) Sweep(ctx context.Context) ([]string, error) {
	return r.fleet().Sweep(ctx)
}

// How a trial's server came to it without an earlier measurement's
// prefix cache (store.Trial.Cache); see engine.ReuseFresh and the rest.
const (
	CacheFresh         = engine.ReuseFresh
	CacheResetVerified = engine.ReuseResetVerified
	CacheReset         = engine.ReuseReset
	CacheSalted        = engine.ReuseSalted
	CacheOff           = engine.ReuseOff
)
