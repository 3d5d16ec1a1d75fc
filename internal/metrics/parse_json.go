package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// metricKeyRE matches vLLM's per-metric keys: mean_ttft_ms, p99.9_itl_ms, ...
var metricKeyRE = regexp.MustCompile(`^(mean|median|std|p[0-9]+(?:\.[0-9]+)?)_(ttft|tpot|itl|e2el|client_queue_time|e2el_including_client_queue)_ms$`)

// ParseJSON reads one vLLM --save-result JSON object (any version; Python's
// bare NaN/Infinity tokens are accepted) or perflab's own result JSON. Keys
// perflab does not model are kept in Extra (non-string values) or Metadata
// (string values, as vLLM's --metadata writes them). Impossible values are
// flagged in Perflab.Warnings, not rejected.
func ParseJSON(data []byte) (*Result, error) {
	clean := pythonJSONToStrict(data)
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(clean))
	if err := dec.Decode(&raw); err != nil {
		return nil, fmt.Errorf("metrics: parse result JSON: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("metrics: parse result JSON: not an object")
	}
	return ParseJSONFields(raw)
}

// ParseJSONFields is ParseJSON on a result object's keys, each value as
// strict JSON (PythonJSONReader's output): what a caller that streams
// the object key by key has (report's import).
func ParseJSONFields(raw map[string]json.RawMessage) (*Result, error) {
	return parseFields(raw, true)
}

// DecodeStored reads a result JSON that perflab wrote itself (a stored
// trial, a prediction): as ParseJSON, but it is no import, so it is neither
// marked as one nor validated again; re-encoded, it gives back the same keys.
func DecodeStored(data []byte) (*Result, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(pythonJSONToStrict(data), &raw); err != nil {
		return nil, fmt.Errorf("metrics: decode stored result: %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("metrics: decode stored result: not an object")
	}
	return parseFields(raw, false)
}

// parseFields reads a result object's keys; an import is marked as such
// and validated.
func parseFields(raw map[string]json.RawMessage, imported bool) (*Result, error) {
	r := &Result{Present: map[string]bool{}}
	var errs []string
	fail := func(k string, err error) {
		errs = append(errs, fmt.Sprintf("key %q: %v", k, err))
	}
	str := func(k string, dst *string) {
		if v, ok := raw[k]; ok {
			r.Present[k] = true
			if string(v) == "null" {
				return
			}
			if err := json.Unmarshal(v, dst); err != nil {
				fail(k, err)
			}
		}
	}
	flt := func(k string, dst *float64) bool {
		v, ok := raw[k]
		if !ok {
			return false
		}
		r.Present[k] = true
		x, isNull, err := jsonNumber(v)
		if err != nil {
			fail(k, err)
			return false
		}
		if isNull {
			*dst = math.NaN()
			return false
		}
		*dst = x
		return true
	}
	integer := func(k string, dst *int) bool {
		var x float64
		if !flt(k, &x) {
			return false
		}
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			fail(k, fmt.Errorf("want an integer, got %v", x))
			return false
		}
		*dst = int(x)
		return true
	}
	for _, k := range setupKeys[:6] {
		switch k {
		case "date":
			str(k, &r.Date)
		case "endpoint_type":
			str(k, &r.EndpointType)
		case "backend":
			str(k, &r.Backend)
		case "label":
			str(k, &r.Label)
		case "model_id":
			str(k, &r.ModelID)
		case "tokenizer_id":
			str(k, &r.TokenizerID)
		}
	}
	integer("num_prompts", &r.NumPrompts)
	if !flt("request_rate", &r.RequestRate) && r.Present["request_rate"] && math.IsNaN(r.RequestRate) {
		r.RequestRate = math.Inf(1)
	}
	flt("burstiness", &r.Burstiness)
	integer("max_concurrency", &r.MaxConcurrency)
	str("ramp_up_strategy", &r.RampUpStrategy)
	integer("ramp_up_start_rps", &r.RampUpStartRPS)
	integer("ramp_up_end_rps", &r.RampUpEndRPS)
	flt("duration", &r.Duration)
	integer("completed", &r.Completed)
	integer("failed", &r.Failed)
	integer("total_input_tokens", &r.TotalInputTokens)
	integer("total_output_tokens", &r.TotalOutputTokens)
	flt("request_throughput", &r.RequestThroughput)
	r.GoodputConfigured = flt("request_goodput", &r.RequestGoodput)
	if !r.GoodputConfigured {
		r.RequestGoodput = 0
	}
	flt("output_throughput", &r.OutputThroughput)
	flt("total_token_throughput", &r.TotalTokenThroughput)
	flt("max_output_tokens_per_s", &r.MaxOutputTokensPerS)
	var mcr float64
	if flt("max_concurrent_requests", &mcr) {
		r.MaxConcurrentRequests = int(math.Round(mcr))
	}
	flt("rtfx", &r.RTFx)

	arr := func(k string, dst any) {
		if v, ok := raw[k]; ok {
			r.Present[k] = true
			r.Detailed = true
			if err := json.Unmarshal(v, dst); err != nil {
				fail(k, err)
			}
		}
	}
	var ttfts, lats, starts, queues []*float64
	var itls [][]*float64
	arr("input_lens", &r.InputLens)
	arr("output_lens", &r.OutputLens)
	arr("ttfts", &ttfts)
	arr("itls", &itls)
	arr("latencies", &lats)
	arr("start_times", &starts)
	arr("queue_times", &queues)
	arr("generated_texts", &r.GeneratedTexts)
	var errStrs []*string
	arr("errors", &errStrs)
	r.TTFTs, r.Latencies, r.StartTimes, r.QueueTimes = derefs(ttfts), derefs(lats), derefs(starts), derefs(queues)
	for _, x := range itls {
		r.ITLs = append(r.ITLs, derefs(x))
	}
	for _, s := range errStrs {
		if s == nil {
			r.Errors = append(r.Errors, "")
		} else {
			r.Errors = append(r.Errors, *s)
		}
	}
	if !r.Detailed {
		// A summary without arrays: keep the (nil) arrays out of re-encoding.
		r.Detailed = false
	}

	seen := map[string]bool{}
	handled := map[string]bool{
		"date": true, "endpoint_type": true, "backend": true, "label": true, "model_id": true,
		"tokenizer_id": true, "num_prompts": true, "request_rate": true, "burstiness": true,
		"max_concurrency": true, "ramp_up_strategy": true, "ramp_up_start_rps": true,
		"ramp_up_end_rps": true, "duration": true, "completed": true, "failed": true,
		"total_input_tokens": true, "total_output_tokens": true, "request_throughput": true,
		"request_goodput": true, "output_throughput": true, "total_token_throughput": true,
		"max_output_tokens_per_s": true, "max_concurrent_requests": true, "rtfx": true,
		"input_lens": true, "output_lens": true, "ttfts": true, "itls": true, "latencies": true,
		"start_times": true, "queue_times": true, "generated_texts": true, "errors": true,
		"perflab": true,
	}
	for _, k := range sortedKeys(raw) {
		if handled[k] {
			continue
		}
		v := raw[k]
		if m := metricKeyRE.FindStringSubmatch(k); m != nil {
			var x float64
			flt(k, &x)
			metric, which := m[2], m[1]
			seen[metric] = true
			if which == "mean" || which == "median" || which == "std" {
				*r.statField(metric, which) = x
			} else {
				p, _ := strconv.ParseFloat(which[1:], 64)
				r.setPercentile(metric, p, x)
			}
			continue
		}
		var s string
		if err := json.Unmarshal(v, &s); err == nil {
			if r.Metadata == nil {
				r.Metadata = map[string]string{}
			}
			r.Metadata[k] = s
			continue
		}
		var anyV any
		if err := json.Unmarshal(v, &anyV); err != nil {
			fail(k, err)
			continue
		}
		if r.Extra == nil {
			r.Extra = map[string]any{}
		}
		r.Extra[k] = anyV
	}
	for _, m := range AllMetrics {
		if seen[m] {
			r.PercentileMetrics = append(r.PercentileMetrics, m)
			sortPercentiles(r.Percentiles[m])
		}
	}
	if v, ok := raw["perflab"]; ok && string(v) != "null" {
		var p Perflab
		if err := json.Unmarshal(v, &p); err != nil {
			// The perflab section uses "inf" strings for rates; decode leniently.
			if p2, err2 := decodePerflabLenient(v); err2 == nil {
				p = *p2
			} else {
				fail("perflab", err)
			}
		}
		r.Perflab = &p
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("metrics: result JSON: %s", strings.Join(errs, "; "))
	}
	// A perflab-computed result carries every key; treat it as complete so
	// it re-encodes identically.
	if r.Perflab != nil && r.Perflab.Source == "perflab" {
		r.Present = nil
	} else if imported {
		r.perflab().Source = "vllm-json"
	}
	if !imported {
		return r, nil
	}
	for _, w := range r.Validate() {
		r.warn(w)
	}
	return r, nil
}

// decodePerflabLenient decodes a perflab section whose rate fields may be
// "inf" strings.
func decodePerflabLenient(v json.RawMessage) (*Perflab, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, err
	}
	fix := map[string]float64{}
	for _, k := range []string{"offered_rate", "achieved_rate", "mean_concurrency", "peak_output_tokens_per_s"} {
		if raw, ok := m[k]; ok {
			x, _, err := jsonNumber(raw)
			if err != nil {
				return nil, err
			}
			fix[k] = x
			delete(m, k)
		}
	}
	b, _ := json.Marshal(m)
	var p Perflab
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, err
	}
	p.OfferedRate, p.AchievedRate = fix["offered_rate"], fix["achieved_rate"]
	p.MeanConcurrency, p.PeakOutputTokensPerS = fix["mean_concurrency"], fix["peak_output_tokens_per_s"]
	return &p, nil
}

func sortPercentiles(ps []PercentileValue) {
	for i := 1; i < len(ps); i++ {
		for j := i; j > 0 && ps[j].P < ps[j-1].P; j-- {
			ps[j], ps[j-1] = ps[j-1], ps[j]
		}
	}
}

func derefs(xs []*float64) []float64 {
	if xs == nil {
		return nil
	}
	out := make([]float64, len(xs))
	for i, p := range xs {
		if p == nil {
			out[i] = math.NaN()
		} else {
			out[i] = *p
		}
	}
	return out
}

// jsonNumber reads a JSON number, null, or one of the strings "inf",
// "-inf", "nan" (any case).
func jsonNumber(v json.RawMessage) (x float64, isNull bool, err error) {
	s := strings.TrimSpace(string(v))
	if s == "null" {
		return math.NaN(), true, nil
	}
	if strings.HasPrefix(s, `"`) {
		var str string
		if err := json.Unmarshal(v, &str); err != nil {
			return 0, false, err
		}
		switch strings.ToLower(strings.TrimSpace(str)) {
		case "inf", "+inf", "infinity":
			return math.Inf(1), false, nil
		case "-inf", "-infinity":
			return math.Inf(-1), false, nil
		case "nan":
			return math.NaN(), false, nil
		}
		return 0, false, fmt.Errorf("want a number, got %s", s)
	}
	x, err = strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("want a number, got %.40s", s)
	}
	return x, false, nil
}

// pythonJSONToStrict rewrites the bare NaN, Infinity and -Infinity tokens that
// Python's json module writes into JSON that strict decoders accept (null,
// "inf", "-inf"), leaving string contents untouched.
func pythonJSONToStrict(data []byte) []byte {
	if !bytes.Contains(data, []byte("NaN")) && !bytes.Contains(data, []byte("Infinity")) {
		return data
	}
	var out bytes.Buffer
	inStr, esc := false, false
	for i := 0; i < len(data); i++ {
		c := data[i]
		if inStr {
			out.WriteByte(c)
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch {
		case c == '"':
			inStr = true
			out.WriteByte(c)
		case bytes.HasPrefix(data[i:], []byte("NaN")):
			out.WriteString("null")
			i += 2
		case bytes.HasPrefix(data[i:], []byte("-Infinity")):
			out.WriteString(`"-inf"`)
			i += 8
		case bytes.HasPrefix(data[i:], []byte("Infinity")):
			out.WriteString(`"inf"`)
			i += 7
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}
