package labspec

import (
	"maps"
	"slices"
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
			if h := SameServer(cfg); !seen[h] {
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
