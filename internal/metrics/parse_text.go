package metrics

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"
)

var (
	titleRE   = regexp.MustCompile(`=+[ \t]*Serving Benchmark Result[ \t]*=+`)
	endRE     = regexp.MustCompile(`^={10,}`)
	sectionRE = regexp.MustCompile(`^-{3,}[ \t]*([A-Za-z][^\n:]*?)[ \t]*-{3,}`)
	rowRE     = regexp.MustCompile(`^([A-Za-z][^:\n]{0,80}?)[ \t]*:[ \t]+([^\s]+)`)
	bareRE    = regexp.MustCompile(`^([A-Za-z][^:\n]{0,80}?)[ \t]*:[ \t]*(?:\n|$)`)
	sepRE     = regexp.MustCompile(`^[\s#>|]+`)
	metricRE  = regexp.MustCompile(`^(mean|median|std|max|p([0-9]+(?:\.[0-9]+)?))[ \t]+(.+?)[ \t]*\((ms|s)\)$`)
)

// topRows maps a printed row label (lower case, single spaces) to its vLLM
// JSON key. Labels from every vLLM layout are listed, and SGLang's
// bench_serving spellings where they mean the same thing.
var topRows = map[string]string{
	"successful requests":                  "completed",
	"failed requests":                      "failed",
	"maximum request concurrency":          "max_concurrency",
	"max request concurrency":              "max_concurrency",
	"request rate configured (rps)":        "request_rate",
	"traffic request rate":                 "request_rate",
	"benchmark duration (s)":               "duration",
	"total input tokens":                   "total_input_tokens",
	"total generated tokens":               "total_output_tokens",
	"request throughput (req/s)":           "request_throughput",
	"request goodput (req/s)":              "request_goodput",
	"output token throughput (tok/s)":      "output_throughput",
	"peak output token throughput (tok/s)": "max_output_tokens_per_s",
	"peak concurrent requests":             "max_concurrent_requests",
	"total token throughput (tok/s)":       "total_token_throughput",
	"rtfx (inverse real-time factor)":      "rtfx",
	"backend":                              "backend",
}

// extraRows are printed rows kept in Result.Extra under vLLM's JSON key.
var extraRows = map[string]string{
	"input token throughput (tok/s)":       "input_throughput",
	"input throughput (inputs/s)":          "input_sequence_throughput",
	"acceptance rate (%)":                  "spec_decode_acceptance_rate",
	"acceptance length":                    "spec_decode_acceptance_length",
	"drafts":                               "spec_decode_num_drafts",
	"draft tokens":                         "spec_decode_draft_tokens",
	"accepted tokens":                      "spec_decode_accepted_tokens",
	"probe requests completed":             "probe_completed",
	"probe requests failed":                "probe_failed",
	"median probe e2el (ms)":               "probe_median_e2el_ms",
	"p99 probe e2el (ms)":                  "probe_p99_e2el_ms",
	"max probe e2el (ms)":                  "probe_max_e2el_ms",
	"total generated tokens (retokenized)": "total_output_tokens_retokenized",
	"concurrency":                          "concurrency",
	"accept length":                        "accept_length",
}

// metricNames maps the metric word of a "Mean X (ms)" row to a metric.
// "Latency" in seconds is GPUStack's rendering of guidellm's request latency.
var metricNames = map[string]string{
	"ttft":                    MetricTTFT,
	"tpot":                    MetricTPOT,
	"itl":                     MetricITL,
	"e2el":                    MetricE2EL,
	"e2e latency":             MetricE2EL,
	"latency":                 MetricE2EL,
	"client queue time":       MetricClientQueueTime,
	"e2el incl. client queue": MetricE2ELIncludingQueue,
}

// ParseText finds every printed "Serving Benchmark Result" block in r and
// returns one Result per block, in order. It accepts any vLLM version's
// layout (rows missing or added across versions), GPUStack's rendering of
// guidellm results (latency in seconds, "N/A" cells), blocks indented or
// fenced inside Markdown, commented with "#", or flattened onto one line.
// Only rows present in a block are marked present (Result.Has); unknown rows
// and impossible values are reported in Perflab.Warnings. An error is
// returned only when reading fails or a block is malformed beyond recovery
// (a row whose value is not a number where a number is required).
func ParseText(r io.Reader) ([]*Result, error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("metrics: read benchmark text: %w", err)
	}
	var out []*Result
	prevEnd := 0
	for _, loc := range titleRE.FindAllIndex(data, -1) {
		if loc[0] < prevEnd {
			continue // a title inside the previous block cannot happen; be safe
		}
		res, end, err := parseBlock(data, loc[1])
		if err != nil {
			line := 1 + bytes.Count(data[:loc[0]], []byte("\n"))
			return out, fmt.Errorf("metrics: benchmark block at line %d (byte %d): %w", line, loc[0], err)
		}
		res.Perflab.Origin = &Origin{
			Line:      1 + bytes.Count(data[:loc[0]], []byte("\n")),
			Offset:    loc[0],
			Preceding: preceding(data[prevEnd:loc[0]]),
			Index:     len(out),
		}
		for _, w := range res.Validate() {
			res.warn(w)
		}
		out = append(out, res)
		prevEnd = end
	}
	return out, nil
}

// preceding returns the last ~200 characters of text before a block,
// whitespace collapsed, Markdown fence and admonition noise trimmed.
func preceding(b []byte) string {
	s := strings.Join(strings.Fields(string(b)), " ")
	s = strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), "```"))
	s = strings.TrimSpace(strings.TrimSuffix(s, "```bash"))
	if len(s) > 200 {
		cut := len(s) - 200
		for cut < len(s) && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 rune
			cut++
		}
		s = s[cut:]
	}
	return s
}

// parseBlock parses rows from data[pos:] until the closing "=" line and
// returns the result and the offset just past the block.
func parseBlock(data []byte, pos int) (*Result, int, error) {
	r := &Result{Present: map[string]bool{}, Perflab: &Perflab{Source: "vllm-text"}}
	section := ""
	seen := map[string]bool{}
	for {
		if m := sepRE.Find(data[pos:]); m != nil {
			pos += len(m)
		}
		rest := data[pos:]
		if len(rest) == 0 {
			r.warn("block ends at end of input without its closing '=' line")
			break
		}
		if m := endRE.Find(rest); m != nil {
			pos += len(m)
			break
		}
		if m := sectionRE.FindSubmatch(rest); m != nil {
			section = string(m[1])
			pos += len(m[0])
			continue
		}
		if m := rowRE.FindSubmatch(rest); m != nil {
			label := strings.Join(strings.Fields(strings.ToLower(string(m[1]))), " ")
			if err := r.setRow(label, string(m[1]), string(m[2]), section, seen); err != nil {
				return nil, pos, fmt.Errorf("row %q: %w", string(m[1]), err)
			}
			pos += len(m[0])
			continue
		}
		if m := bareRE.Find(rest); m != nil {
			pos += len(m) // a sub-heading such as "Per-position acceptance (%):"
			continue
		}
		r.warn(fmt.Sprintf("block ends without its closing '=' line, at %q", snippet(rest)))
		break
	}
	for _, m := range AllMetrics {
		if seen[m] {
			r.PercentileMetrics = append(r.PercentileMetrics, m)
			sortPercentiles(r.Percentiles[m])
		}
	}
	// The printed block has no num_prompts; completed+failed is the closest
	// thing, but it is not vLLM's key, so it is left absent.
	if r.Has("max_concurrency") && r.MaxConcurrency == 0 {
		delete(r.Present, "max_concurrency")
	}
	if !r.Has("request_rate") {
		r.RequestRate = math.Inf(1)
	}
	return r, pos, nil
}

func snippet(b []byte) string {
	if len(b) > 40 {
		b = b[:40]
	}
	return string(b)
}

// parseNum reads a printed number: digits with optional thousands
// separators, nan, inf.
func parseNum(s string) (float64, error) {
	t := strings.ReplaceAll(s, ",", "")
	switch strings.ToLower(t) {
	case "inf", "+inf", "infinity":
		return math.Inf(1), nil
	case "-inf", "-infinity":
		return math.Inf(-1), nil
	case "nan":
		return math.NaN(), nil
	}
	x, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("value %q is not a number", s)
	}
	return x, nil
}

func (r *Result) setRow(label, rawLabel, value, section string, seen map[string]bool) error {
	na := strings.EqualFold(value, "N/A") || value == "-"
	if key, ok := topRows[label]; ok {
		if r.Has(key) {
			r.warn(fmt.Sprintf("row %q repeated; last value kept", rawLabel))
		}
		if key == "backend" {
			r.Backend = value
			r.markPresent(key)
			return nil
		}
		if na {
			r.warn(fmt.Sprintf("row %q is N/A", rawLabel))
			return nil
		}
		x, err := parseNum(value)
		if err != nil {
			return err
		}
		r.markPresent(key)
		asInt := func(dst *int) {
			if x != math.Trunc(x) || math.IsInf(x, 0) || math.IsNaN(x) {
				r.warn(fmt.Sprintf("row %q should be a whole number, got %s", rawLabel, value))
			}
			if math.Abs(x) < 1<<53 {
				*dst = int(math.Round(x))
			}
		}
		switch key {
		case "completed":
			asInt(&r.Completed)
		case "failed":
			asInt(&r.Failed)
		case "max_concurrency":
			asInt(&r.MaxConcurrency)
		case "request_rate":
			r.RequestRate = x
		case "duration":
			r.Duration = x
		case "total_input_tokens":
			asInt(&r.TotalInputTokens)
		case "total_output_tokens":
			asInt(&r.TotalOutputTokens)
		case "request_throughput":
			r.RequestThroughput = x
		case "request_goodput":
			r.RequestGoodput, r.GoodputConfigured = x, true
		case "output_throughput":
			r.OutputThroughput = x
		case "max_output_tokens_per_s":
			r.MaxOutputTokensPerS = x
		case "max_concurrent_requests":
			asInt(&r.MaxConcurrentRequests)
		case "total_token_throughput":
			r.TotalTokenThroughput = x
		case "rtfx":
			r.RTFx = x
		}
		return nil
	}
	if key, ok := extraRows[label]; ok {
		if na {
			return nil
		}
		x, err := parseNum(value)
		if err != nil {
			return err
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra[key] = x
		return nil
	}
	if m := metricRE.FindStringSubmatch(label); m != nil {
		metric, ok := metricNames[m[3]]
		if !ok {
			r.warn(fmt.Sprintf("unrecognised metric row %q", rawLabel))
			return nil
		}
		which := m[1]
		var key string
		var p float64
		switch {
		case which == "max":
			p, key = 100, "p100_"+metric+"_ms"
		case m[2] != "":
			p, _ = strconv.ParseFloat(m[2], 64)
			key = "p" + pWord(p) + "_" + metric + "_ms"
		default:
			key = which + "_" + metric + "_ms"
		}
		if na {
			r.warn(fmt.Sprintf("row %q is N/A", rawLabel))
			r.perflab().Source = "gpustack-text"
			return nil
		}
		x, err := parseNum(value)
		if err != nil {
			return err
		}
		if m[4] == "s" {
			x *= 1000 // GPUStack prints request latency in seconds
			r.perflab().Source = "gpustack-text"
		}
		if r.Has(key) {
			r.warn(fmt.Sprintf("row %q repeated; last value kept", rawLabel))
		}
		r.markPresent(key)
		seen[metric] = true
		if key[0] == 'p' {
			r.setPercentile(metric, p, x)
		} else {
			*r.statField(metric, which) = x
		}
		return nil
	}
	r.warn(fmt.Sprintf("unrecognised row %q (section %q)", rawLabel, section))
	return nil
}
