package metrics

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// schedule builds records from a fixed per-request plan: request i is sent
// at sent[i], its first chunk arrives ttft[i] later, then one chunk every
// gap[i] seconds, n[i] chunks in all, each carrying tok[i] tokens.
type plan struct {
	sent, ttft, gap float64
	chunks, tok     int
	prompt          int
	fail            bool
	queue           float64
}

func recordsFrom(ps []plan) []Record {
	var recs []Record
	for i, p := range ps {
		r := Record{ID: string(rune('a' + i)), PromptLen: p.prompt, Scheduled: p.sent - p.queue, Sent: p.sent, QueueTime: p.queue}
		if p.fail {
			r.Error, r.ErrorClass = "HTTP 500", "http_status"
			r.Latency = 0.05
			recs = append(recs, r)
			continue
		}
		r.Success = true
		r.TTFT = p.ttft
		r.ChunkTokens = []int{p.tok}
		for k := 1; k < p.chunks; k++ {
			r.ITL = append(r.ITL, p.gap)
			r.ChunkTokens = append(r.ChunkTokens, p.tok)
		}
		r.Latency = p.ttft + p.gap*float64(p.chunks-1)
		r.OutputLen = p.chunks * p.tok
		r.OutputLenSource = "usage"
		recs = append(recs, r)
	}
	return recs
}

var fixedPlan = []plan{
	{sent: 0.0, ttft: 0.100, gap: 0.020, chunks: 50, tok: 1, prompt: 100},
	{sent: 0.0, ttft: 0.150, gap: 0.025, chunks: 40, tok: 1, prompt: 200},
	{sent: 0.5, ttft: 0.120, gap: 0.030, chunks: 30, tok: 2, prompt: 150, queue: 0.2},
	{sent: 1.0, ttft: 0.300, gap: 0.010, chunks: 1, tok: 1, prompt: 50},
	{sent: 1.2, fail: true, prompt: 70},
	{sent: 1.5, ttft: 0.080, gap: 0.040, chunks: 25, tok: 1, prompt: 120},
}

// refPercentile is an independent numpy-linear percentile: rank = p(n-1)/100
// from a fresh sort, plain interpolation.
func refPercentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := p / 100 * float64(len(s)-1)
	i := int(rank)
	if i+1 >= len(s) {
		return s[len(s)-1]
	}
	return s[i] + (rank-float64(i))*(s[i+1]-s[i])
}

func refMean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func refStd(xs []float64) float64 {
	m := refMean(xs)
	s := 0.0
	for _, x := range xs {
		s += (x - m) * (x - m)
	}
	if len(xs) == 0 {
		return 0
	}
	return math.Sqrt(s / float64(len(xs)))
}

func near(a, b float64) bool {
	return math.Abs(a-b) <= 1e-9*max(1, math.Abs(a), math.Abs(b))
}

func TestComputeMatchesVLLMFormulas(t *testing.T) {
	recs := recordsFrom(fixedPlan)
	const dur = 3.0
	opt := Options{
		PercentileMetrics: []string{"ttft", "tpot", "itl", "e2el"},
		Percentiles:       []float64{50, 90, 99},
		Goodput:           map[string]float64{"ttft": 130, "tpot": 25},
	}
	r := Compute(recs, dur, opt)

	// Independent reference, written from vLLM's definitions.
	var ttft, tpot, itl, e2el []float64
	in, out, completed, good := 0, 0, 0, 0
	for _, p := range fixedPlan {
		if p.fail {
			continue
		}
		completed++
		in += p.prompt
		n := p.chunks * p.tok
		out += n
		lat := p.ttft + p.gap*float64(p.chunks-1)
		tp := 0.0
		if n > 1 {
			tp = (lat - p.ttft) / float64(n-1)
			tpot = append(tpot, tp)
		}
		for k := 1; k < p.chunks; k++ {
			itl = append(itl, p.gap)
		}
		ttft = append(ttft, p.ttft)
		e2el = append(e2el, lat)
		if p.ttft <= 0.130 && tp <= 0.025 {
			good++
		}
	}
	if r.Completed != completed || r.Failed != 1 || r.TotalInputTokens != in || r.TotalOutputTokens != out {
		t.Fatalf("counts: got %d/%d in %d out %d, want %d/1 in %d out %d", r.Completed, r.Failed, r.TotalInputTokens, r.TotalOutputTokens, completed, in, out)
	}
	checks := []struct {
		name      string
		got, want float64
	}{
		{"request_throughput", r.RequestThroughput, float64(completed) / dur},
		{"request_goodput", r.RequestGoodput, float64(good) / dur},
		{"output_throughput", r.OutputThroughput, float64(out) / dur},
		{"total_token_throughput", r.TotalTokenThroughput, float64(in+out) / dur},
	}
	for _, m := range []struct {
		name string
		xs   []float64
	}{{"ttft", ttft}, {"tpot", tpot}, {"itl", itl}, {"e2el", e2el}} {
		s, _ := r.Stats(m.name)
		checks = append(checks,
			struct {
				name      string
				got, want float64
			}{"mean_" + m.name, s.Mean, refMean(m.xs) * 1000},
			struct {
				name      string
				got, want float64
			}{"median_" + m.name, s.Median, refPercentile(m.xs, 50) * 1000},
			struct {
				name      string
				got, want float64
			}{"std_" + m.name, s.Std, refStd(m.xs) * 1000})
		for _, p := range []float64{50, 90, 99} {
			v, ok := r.Percentile(m.name, p)
			if !ok {
				t.Fatalf("percentile %s p%v missing", m.name, p)
			}
			checks = append(checks, struct {
				name      string
				got, want float64
			}{"p" + pWord(p) + "_" + m.name, v, refPercentile(m.xs, p) * 1000})
		}
	}
	for _, c := range checks {
		if !near(c.got, c.want) {
			t.Errorf("%s = %.12g, want %.12g", c.name, c.got, c.want)
		}
	}
	if good == 0 || good == completed {
		t.Fatalf("plan should make goodput discriminate, good=%d", good)
	}
}

func TestPeaks(t *testing.T) {
	recs := recordsFrom(fixedPlan)
	r := Compute(recs, 3, DefaultOptions())
	// Count chunk arrivals per second by brute force, one per chunk and
	// weighted by tokens.
	var buckets, weighted [10]float64
	for _, rec := range recs {
		if !rec.Success {
			continue
		}
		t0 := rec.Sent + rec.TTFT
		times := []float64{t0}
		for _, g := range rec.ITL {
			t0 += g
			times = append(times, t0)
		}
		for k, tm := range times {
			buckets[int(tm)]++
			weighted[int(tm)] += float64(rec.ChunkTokens[k])
		}
	}
	if want := slices.Max(buckets[:]); r.MaxOutputTokensPerS != want {
		t.Errorf("vLLM peak = %v, want %v", r.MaxOutputTokensPerS, want)
	}
	if want := slices.Max(weighted[:]); r.Perflab.PeakOutputTokensPerS != want {
		t.Errorf("weighted peak = %v, want %v", r.Perflab.PeakOutputTokensPerS, want)
	}
	if r.Perflab.PeakOutputTokensPerS <= r.MaxOutputTokensPerS {
		t.Errorf("plan has 2-token chunks; weighted peak %v should exceed vLLM's %v", r.Perflab.PeakOutputTokensPerS, r.MaxOutputTokensPerS)
	}
	// In flight: a [0,1.08) b [0,1.125) c [0.5,1.49) d [1.0,1.3) e(failed) [1.2,1.25) f [1.5,2.54)
	if r.MaxConcurrentRequests != 4 {
		t.Errorf("sweep-line peak (successful) = %d, want 4", r.MaxConcurrentRequests)
	}
	if r.Perflab.PeakConcurrency != 4 {
		t.Errorf("perflab peak (all) = %d, want 4", r.Perflab.PeakConcurrency)
	}
	// v0.11 buckets: second 0: a,b,c; second 1: a,b,c,d,f(start 1)? f starts 1.5 → bucket 1.
	if r.Perflab.MaxConcurrentRequestsV011 != 5 {
		t.Errorf("v0.11 bucket peak = %d, want 5", r.Perflab.MaxConcurrentRequestsV011)
	}
	sumE2E := 0.0
	for _, rec := range recs {
		if rec.Success {
			sumE2E += rec.Latency
		}
	}
	if !near(r.Perflab.MeanConcurrency, sumE2E/3) {
		t.Errorf("mean concurrency = %v, want %v", r.Perflab.MeanConcurrency, sumE2E/3)
	}
	if r.Perflab.ErrorsByClass["http_status"] != 1 || r.Perflab.OutputLenSources["usage"] != 5 {
		t.Errorf("class counts wrong: %+v %+v", r.Perflab.ErrorsByClass, r.Perflab.OutputLenSources)
	}
}

func TestComputeEmptyAndAllFailed(t *testing.T) {
	for _, recs := range [][]Record{nil, {{Success: false, ErrorClass: "timeout"}}} {
		r := Compute(recs, 1, DefaultOptions())
		if r.MeanTTFTMs != 0 || r.MaxOutputTokensPerS != 0 || r.Completed != 0 {
			t.Fatalf("empty compute not zero: %+v", r)
		}
		var b bytes.Buffer
		if err := r.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		if _, err := json.Marshal(r); err != nil {
			t.Fatal(err)
		}
	}
}

func TestIncludeQueueInTTFT(t *testing.T) {
	recs := recordsFrom(fixedPlan)
	a := Compute(recs, 3, DefaultOptions())
	o := DefaultOptions()
	o.IncludeQueueInTTFT = true
	b := Compute(recs, 3, o)
	// Only request c waited 0.2 s: the mean TTFT rises by 200ms/5.
	if !near(b.MeanTTFTMs-a.MeanTTFTMs, 200.0/5) {
		t.Errorf("queue in TTFT moved mean by %v, want 40", b.MeanTTFTMs-a.MeanTTFTMs)
	}
	if !near(a.MeanTPOTMs, b.MeanTPOTMs) {
		t.Errorf("TPOT must not change with IncludeQueueInTTFT")
	}
}

func TestSaveResultKeys(t *testing.T) {
	recs := recordsFrom(fixedPlan)
	r := Compute(recs, 3, Options{Detailed: true, Goodput: map[string]float64{"e2el": 1000}, MaxConcurrency: 4})
	r.Date, r.Backend, r.EndpointType, r.ModelID = "20250101-000000", "openai-chat", "openai-chat", "Qwen/Qwen3-14B"
	r.Metadata = map[string]string{"tp": "1"}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	// Every key vLLM's --save-result (with --save-detailed) writes.
	want := []string{"date", "endpoint_type", "backend", "label", "model_id", "tokenizer_id", "num_prompts",
		"request_rate", "burstiness", "max_concurrency", "duration", "completed", "failed",
		"total_input_tokens", "total_output_tokens", "request_throughput", "request_goodput",
		"output_throughput", "total_token_throughput", "input_lens", "output_lens", "ttfts", "itls",
		"latencies", "start_times", "queue_times", "generated_texts", "errors",
		"max_output_tokens_per_s", "max_concurrent_requests", "rtfx",
		"mean_ttft_ms", "median_ttft_ms", "std_ttft_ms", "p99_ttft_ms",
		"mean_tpot_ms", "median_tpot_ms", "std_tpot_ms", "p99_tpot_ms",
		"mean_itl_ms", "median_itl_ms", "std_itl_ms", "p99_itl_ms", "tp", "perflab"}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("saved JSON lacks vLLM key %q", k)
		}
	}
	if m["request_rate"] != "inf" || m["max_concurrency"].(float64) != 4 {
		t.Errorf("request_rate/max_concurrency encoded wrongly: %v %v", m["request_rate"], m["max_concurrency"])
	}
	// Without Detailed the per-request arrays are left out.
	r2 := Compute(recs, 3, DefaultOptions())
	b2, _ := json.Marshal(r2)
	for _, k := range []string{"ttfts", "itls", "input_lens", "generated_texts", "errors"} {
		if strings.Contains(string(b2), `"`+k+`"`) {
			t.Errorf("summary JSON carries array %q", k)
		}
	}
	// Round trip.
	back, err := ParseJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	b3, err := json.Marshal(back)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, b3) {
		t.Errorf("JSON round trip differs:\n%s\n%s", b, b3)
	}
}

func TestWriteTextGolden(t *testing.T) {
	recs := recordsFrom(fixedPlan)
	cases := []struct {
		name string
		opt  Options
		text TextOptions
	}{
		{"default", DefaultOptions(), TextOptions{}},
		{"all_metrics", Options{PercentileMetrics: AllMetrics, Percentiles: []float64{50, 95, 99, 99.9},
			Goodput: map[string]float64{"ttft": 130}, MaxConcurrency: 4, RequestRate: 8}, TextOptions{}},
		{"perflab", DefaultOptions(), TextOptions{Perflab: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := Compute(recs, 3, c.opt)
			var b bytes.Buffer
			if err := r.WriteTextWith(&b, c.text); err != nil {
				t.Fatal(err)
			}
			golden(t, "text_"+c.name+".txt", b.Bytes())
			lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
			for i, l := range lines {
				// Headers are 50 wide; rows are "{:<40} {:<10}", 51 for short values.
				want := 51
				if strings.Trim(l, "=-") != l || strings.HasPrefix(l, "=") {
					want = 50
				}
				if len(l) != want && !strings.HasPrefix(l, "WARNING") {
					t.Errorf("line %d is %d wide, want %d: %q", i+1, len(l), want, l)
				}
			}
		})
	}
}

func TestCenter(t *testing.T) {
	// Python: "{s:{c}^{n}}".format(s=..., n=50, c="-")
	for s, want := range map[string]string{
		"Time to First Token":                     "---------------Time to First Token----------------",
		"Time per Output Token (excl. 1st token)": "-----Time per Output Token (excl. 1st token)------",
		"Inter-token Latency":                     "---------------Inter-token Latency----------------",
		"End-to-end Latency":                      "----------------End-to-end Latency----------------",
	} {
		if got := center(s, 50, '-'); got != want {
			t.Errorf("center(%q) = %q, want %q", s, got, want)
		}
	}
	if got := center(" Serving Benchmark Result ", 50, '='); got != "============ Serving Benchmark Result ============" {
		t.Errorf("title = %q", got)
	}
}

// The saved distribution is numpy's linear percentiles at every 5%, in ms.
func TestQuantiles(t *testing.T) {
	var recs []Record
	for i := 0; i <= 100; i++ { // TTFTs 0, 10, …, 1000 ms
		recs = append(recs, Record{ID: fmt.Sprint(i), Success: true, OutputLen: 3, TTFT: float64(i) / 100,
			ITL: []float64{0.01, 0.03}, Latency: float64(i)/100 + 0.04})
	}
	r := Compute(recs, 2, Options{})
	q := r.Perflab.Quantiles["ttft"]
	if len(q) != 21 {
		t.Fatalf("ttft quantiles = %v", q)
	}
	for i, v := range q {
		if want := float64(50 * i); math.Abs(v-want) > 1e-9 {
			t.Fatalf("p%d = %v ms, want %v", 5*i, v, want)
		}
	}
	if tp := r.Perflab.Quantiles["tpot"]; len(tp) != 21 || math.Abs(tp[0]-20) > 1e-9 || math.Abs(tp[20]-20) > 1e-9 {
		t.Fatalf("tpot quantiles = %v", tp)
	}
	var back Result
	b, _ := json.Marshal(r)
	if err := json.Unmarshal(b, &back); err != nil || len(back.Perflab.Quantiles["ttft"]) != 21 {
		t.Fatalf("round trip: %v, %v", back.Perflab, err)
	}
}

// TestStretchedScalesEveryTime: every time a Record holds is stretched,
// so a field added later cannot be forgotten by the sim runtime's scaling
// (found by reflection: every float64 and []float64 field is a time).
func TestStretchedScalesEveryTime(t *testing.T) {
	var r Record
	v := reflect.ValueOf(&r).Elem()
	for i := 0; i < v.NumField(); i++ {
		switch f := v.Field(i); f.Kind() {
		case reflect.Float64:
			f.SetFloat(float64(i + 1))
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Float64 {
				f.Set(reflect.ValueOf([]float64{float64(i + 1)}))
			}
		}
	}
	itl0 := r.ITL[0]
	s := reflect.ValueOf(r.Stretched(4))
	for i := 0; i < v.NumField(); i++ {
		name := v.Type().Field(i).Name
		switch f := s.Field(i); f.Kind() {
		case reflect.Float64:
			if f.Float() != 4*float64(i+1) {
				t.Errorf("%s = %v, want %v", name, f.Float(), 4*float64(i+1))
			}
		case reflect.Slice:
			if f.Type().Elem().Kind() == reflect.Float64 && f.Index(0).Float() != 4*float64(i+1) {
				t.Errorf("%s[0] = %v, want %v", name, f.Index(0).Float(), 4*float64(i+1))
			}
		}
	}
	if r.ITL[0] != itl0 {
		t.Error("Stretched changed the original's ITL in place")
	}
}
