package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/perflab/perflab/internal/metrics"
)

// resultBlock renders a stored result as vLLM's printed result block, with
// the metrics package's own printer, so the report shows exactly what
// `perflab bench` printed.
func resultBlock(raw json.RawMessage) (string, error) {
	var res metrics.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", fmt.Errorf("decode result: %w", err)
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		return "", fmt.Errorf("print result: %w", err)
	}
	return b.String(), nil
}
