package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
)

// vLLM's setup keys, in the order its main writes them.
var setupKeys = []string{"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts"}

type kv struct {
	k string
	v any
}

// jf is a float that JSON-encodes NaN as null and ±Inf as "inf"/"-inf":
// Python's json writes bare NaN/Infinity tokens, which strict parsers (Go's
// included) reject, and vLLM itself writes an infinite request rate as "inf".
type jf float64

func (f jf) MarshalJSON() ([]byte, error) {
	x := float64(f)
	switch {
	case math.IsNaN(x):
		return []byte("null"), nil
	case math.IsInf(x, 1):
		return []byte(`"inf"`), nil
	case math.IsInf(x, -1):
		return []byte(`"-inf"`), nil
	}
	// Python's repr: positional unless the exponent is below -4 or at least 16.
	if a := math.Abs(x); a != 0 && (a < 1e-4 || a >= 1e16) {
		return strconv.AppendFloat(nil, x, 'e', -1, 64), nil
	}
	return strconv.AppendFloat(nil, x, 'f', -1, 64), nil
}

func jfs(xs []float64) []jf {
	out := make([]jf, len(xs))
	for i, x := range xs {
		out[i] = jf(x)
	}
	return out
}

// MarshalJSON writes the result with vLLM's --save-result keys in vLLM's
// order, metadata merged at the top level, per-request arrays only when
// Detailed, and perflab's additions under "perflab".
func (r *Result) MarshalJSON() ([]byte, error) {
	var kvs []kv
	add := func(k string, v any) {
		if r.Has(k) {
			kvs = append(kvs, kv{k, v})
		}
	}
	nullIfEmpty := func(s string) any {
		if s == "" {
			return nil
		}
		return s
	}
	add("date", r.Date)
	add("endpoint_type", r.EndpointType)
	add("backend", r.Backend)
	add("label", nullIfEmpty(r.Label))
	add("model_id", r.ModelID)
	add("tokenizer_id", nullIfEmpty(r.TokenizerID))
	add("num_prompts", r.NumPrompts)
	mkeys := make([]string, 0, len(r.Metadata))
	for k := range r.Metadata {
		mkeys = append(mkeys, k)
	}
	slices.Sort(mkeys)
	for _, k := range mkeys {
		kvs = append(kvs, kv{k, r.Metadata[k]})
	}
	if r.RateIsInf() {
		add("request_rate", "inf")
	} else {
		add("request_rate", jf(r.RequestRate))
	}
	add("burstiness", jf(r.Burstiness))
	if r.MaxConcurrency > 0 {
		add("max_concurrency", r.MaxConcurrency)
	} else {
		add("max_concurrency", nil)
	}
	if r.RampUpStrategy != "" {
		kvs = append(kvs, kv{"ramp_up_strategy", r.RampUpStrategy}, kv{"ramp_up_start_rps", r.RampUpStartRPS}, kv{"ramp_up_end_rps", r.RampUpEndRPS})
	}
	add("duration", jf(r.Duration))
	add("completed", r.Completed)
	add("failed", r.Failed)
	add("total_input_tokens", r.TotalInputTokens)
	add("total_output_tokens", r.TotalOutputTokens)
	add("request_throughput", jf(r.RequestThroughput))
	if r.GoodputConfigured {
		add("request_goodput", jf(r.RequestGoodput))
	} else {
		add("request_goodput", nil)
	}
	add("output_throughput", jf(r.OutputThroughput))
	add("total_token_throughput", jf(r.TotalTokenThroughput))
	if r.Detailed {
		itls := make([][]jf, len(r.ITLs))
		for i, x := range r.ITLs {
			itls[i] = jfs(x)
		}
		kvs = append(kvs,
			kv{"input_lens", r.InputLens}, kv{"output_lens", r.OutputLens},
			kv{"ttfts", jfs(r.TTFTs)}, kv{"itls", itls},
			kv{"latencies", jfs(r.Latencies)}, kv{"start_times", jfs(r.StartTimes)},
			kv{"queue_times", jfs(r.QueueTimes)},
			kv{"generated_texts", r.GeneratedTexts}, kv{"errors", r.Errors})
	}
	add("max_output_tokens_per_s", jf(r.MaxOutputTokensPerS))
	add("max_concurrent_requests", r.MaxConcurrentRequests)
	add("rtfx", jf(r.RTFx))
	ekeys := make([]string, 0, len(r.Extra))
	for k := range r.Extra {
		ekeys = append(ekeys, k)
	}
	slices.Sort(ekeys)
	for _, k := range ekeys {
		kvs = append(kvs, kv{k, r.Extra[k]})
	}
	for _, m := range r.PercentileMetrics {
		s, ok := r.Stats(m)
		if !ok {
			continue
		}
		add("mean_"+m+"_ms", jf(s.Mean))
		add("median_"+m+"_ms", jf(s.Median))
		add("std_"+m+"_ms", jf(s.Std))
		for _, pv := range s.Percentiles {
			add("p"+pWord(pv.P)+"_"+m+"_ms", jf(pv.Value))
		}
	}
	if r.Perflab != nil {
		kvs = append(kvs, kv{"perflab", perflabJSON(r.Perflab)})
	}
	return encodeOrdered(kvs)
}

// perflabJSON makes the perflab section JSON-safe (infinite rates, NaN).
func perflabJSON(p *Perflab) any {
	if p.Source != "" && p.Source != "perflab" {
		// An imported result has none of perflab's measurements; zeros
		// would read as measured values.
		return struct {
			Source   string   `json:"source"`
			Origin   *Origin  `json:"origin,omitempty"`
			Warnings []string `json:"warnings,omitempty"`
		}{p.Source, p.Origin, p.Warnings}
	}
	type alias Perflab
	return struct {
		*alias
		OfferedRate  jf `json:"offered_rate"`
		AchievedRate jf `json:"achieved_rate"`
		MeanConc     jf `json:"mean_concurrency"`
		PeakOut      jf `json:"peak_output_tokens_per_s"`
	}{(*alias)(p), jf(p.OfferedRate), jf(p.AchievedRate), jf(p.MeanConcurrency), jf(p.PeakOutputTokensPerS)}
}

func encodeOrdered(kvs []kv) ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range kvs {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, err := json.Marshal(e.k)
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		vb, err := json.Marshal(e.v)
		if err != nil {
			return nil, fmt.Errorf("metrics: encode %q: %w", e.k, err)
		}
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// UnmarshalJSON reads vLLM's --save-result JSON (or perflab's own); see
// ParseJSON.
func (r *Result) UnmarshalJSON(data []byte) error {
	res, err := ParseJSON(data)
	if err != nil {
		return err
	}
	*r = *res
	return nil
}
