package report

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/perflab/perflab/internal/metrics"
)

// resultBlock renders a stored result as vLLM's printed result block, with
// the metrics package's own printer, so the report shows exactly what
// `perflab bench` printed. It also returns the result's warnings: those
// stored with it (an import's findings, in perflab.warnings) and those the
// metrics package's Validate raises on reading it again (decoding runs
// Validate), so a result stored before a check existed is still checked.
func resultBlock(raw json.RawMessage) (block string, warnings, assumptions []string, err error) {
	var res metrics.Result
	if err := json.Unmarshal(raw, &res); err != nil {
		return "", nil, nil, fmt.Errorf("decode result: %w", err)
	}
	if res.Perflab != nil {
		warnings, assumptions = res.Perflab.Warnings, res.Perflab.Assumptions
	}
	var b strings.Builder
	if err := res.WriteText(&b); err != nil {
		return "", nil, nil, fmt.Errorf("print result: %w", err)
	}
	return b.String(), warnings, assumptions, nil
}
