package labspec

import (
	"maps"
	"slices"
	"strconv"
)

// DefaultSearchKnobs are the knobs that interact and are searched jointly
// after the staged pass: engine × quantization × parallelism × batching ×
// chunked prefill.
var DefaultSearchKnobs = []string{KnobEngine, KnobQuantization, KnobParallelism, KnobMaxNumSeqs, KnobMaxNumBatchedTokens, KnobChunkedPrefill}

// SearchKnobs are the knobs the joint search varies: search.knobs, or
// DefaultSearchKnobs.
func (s *Spec) SearchKnobs() []string {
	if len(s.Search.Knobs) > 0 {
		return s.Search.Knobs
	}
	return DefaultSearchKnobs
}

// Axes lists, per knob, every candidate value across engines plus the
// default (""): from the knob's stage when there is one, else the knob's
// default candidates.
func (s *Spec) Axes(ks []string) map[string][]string {
	out := map[string][]string{}
	for _, k := range ks {
		set := map[string]bool{}
		found := false
		for _, st := range s.Stages {
			if st.Knob != k {
				continue
			}
			found = true
			for _, e := range s.Engines {
				for _, v := range s.StageValues(st, e.Name) {
					set[v] = true
				}
			}
		}
		if !found {
			st := Stage{Name: k, Knob: k, Values: defaultValues(k), PerEngine: perEngineDefaults(k)}
			for _, e := range s.Engines {
				for _, v := range s.StageValues(st, e.Name) {
					set[v] = true
				}
			}
		}
		if k != KnobEngine {
			set[""] = true
		}
		delete(set, "default")
		out[k] = slices.Sorted(maps.Keys(set))
	}
	return out
}

// GridKnobs is the space --grid covers: every stage knob and every search
// knob.
func (s *Spec) GridKnobs() []string {
	set := map[string]bool{}
	for _, st := range s.Stages {
		set[st.Knob] = true
	}
	if !s.Search.Disable {
		for _, k := range s.SearchKnobs() {
			set[k] = true
		}
	}
	var out []string
	for _, k := range KnobOrder {
		if set[k] {
			out = append(out, k)
		}
	}
	return out
}

// Enumerate lists the distinct applicable configs of the cartesian product
// of axes around from (knobs not in axes keep from's value; a value that
// does not apply to an engine makes the point invalid and it is dropped).
func (s *Spec) Enumerate(from Point, axes map[string][]string, limit int) []Point {
	ks := make([]string, 0, len(axes))
	for _, k := range KnobOrder {
		if _, ok := axes[k]; ok {
			ks = append(ks, k)
		}
	}
	seen := map[string]bool{}
	var out []Point
	var rec func(i int, p Point)
	rec = func(i int, p Point) {
		if limit > 0 && len(out) >= limit {
			return
		}
		if i == len(ks) {
			cfg, ok := s.Config(p)
			if !ok || Unsupported(cfg) != "" {
				return
			}
			if h := SameServer(cfg, s.Hardware.Device); !seen[h] {
				seen[h] = true
				out = append(out, p)
			}
			return
		}
		k := ks[i]
		for _, v := range axes[k] {
			q := p.With(k, v)
			if k == KnobEngine && v != p[KnobEngine] {
				// Engine-specific values of from (backend names) do not
				// carry over to another engine.
				for _, kk := range KnobOrder[1:] {
					if _, inAxes := axes[kk]; inAxes {
						continue
					}
					if _, has := q[kk]; has {
						if _, ok := s.Config(Point{KnobEngine: v, kk: q[kk]}); !ok {
							delete(q, kk)
						}
					}
				}
			}
			rec(i+1, q)
		}
	}
	rec(0, from.Clone())
	return out
}

// InFlightCap is the most requests the workload can have in flight at
// once: its max_concurrency, or its num_prompts when that is fewer; 0 when
// neither is set.
func (w Workload) InFlightCap() int {
	c := w.MaxConcurrency
	if w.NumPrompts > 0 && (c == 0 || w.NumPrompts < c) {
		c = w.NumPrompts
	}
	return c
}

// TrimUnbinding trims a max_num_seqs axis for a workload that never has
// more than inFlight requests in flight. Every limit at or above inFlight
// admits every request, so on that workload they run the same batches, and
// measuring more than one of them spends trials on one server's figures.
// (The engines size a few buffers by the limit, vLLM's sampler warm-up and
// SGLang's request pool, which moves the KV cache by far less than noise.)
// It keeps the limits below inFlight, the smallest at or above it, the
// engine's default ("") and keep (the incumbent's), and returns the rest as
// dropped. When defaultAdmits says the engine's default already admits
// inFlight requests, no limit at or above it is kept but keep: each is the
// default's server. inFlight 0 keeps everything.
func TrimUnbinding(values []string, inFlight int, keep string, defaultAdmits bool) (kept, dropped []string) {
	if inFlight <= 0 {
		return values, nil
	}
	least := -1 // the smallest limit at or above inFlight, kept unless the default admits
	for _, v := range values {
		if n, err := strconv.Atoi(v); err == nil && !defaultAdmits && n >= inFlight && (least < 0 || n < least) {
			least = n
		}
	}
	for _, v := range values {
		n, err := strconv.Atoi(v)
		if v == "" || v == keep || err != nil || n < inFlight || n == least {
			kept = append(kept, v)
			continue
		}
		dropped = append(dropped, v)
	}
	slices.SortFunc(dropped, func(a, b string) int {
		x, _ := strconv.Atoi(a)
		y, _ := strconv.Atoi(b)
		return x - y
	})
	return kept, dropped
}
