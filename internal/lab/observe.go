package lab

import (
	"fmt"

	"github.com/perflab/perflab/internal/metrics"
)

// scaleResult multiplies a result's throughputs by f and its times by 1/f:
// the shape of run-to-run noise on a serving benchmark. It acts on the
// typed result (metrics.Result.ScaleSpeed), read as perflab wrote it, so
// noise adds no key and no warning the prediction did not have.
func scaleResult(result []byte, f float64) ([]byte, error) {
	r, err := metrics.DecodeStored(result)
	if err != nil {
		return nil, fmt.Errorf("lab: noise: decode result: %w", err)
	}
	r.ScaleSpeed(f)
	b, err := r.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("lab: noise: encode result: %w", err)
	}
	return b, nil
}
