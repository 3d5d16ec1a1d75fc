package sim

import (
	"errors"
	"strings"
	"testing"
)

// TestKnownFaultMTPHybrid: vLLM 0.17 with MTP on Qwen3.5 crashes under
// high concurrency (vllm#36613) as the 9B report's run did, failing what
// was in flight (reset) and what came after (connect), and keeps what
// finished before; the same load without MTP, at low concurrency, on a
// fixed version or with NoFaults runs to the end.
func TestKnownFaultMTPHybrid(t *testing.T) {
	mtp := Params{Engine: "vllm", Version: "0.17.1", Model: "Qwen3.5-9B", GPU: "H100", MaxModelLen: 32768,
		SpecMethod: "mtp", SpecTokens: 4}
	// ShareGPT-like spread of output lengths (mean ~280), so that requests
	// finish throughout the run and not all at once.
	reqs := fixedReqs(1000, 340, 0)
	for i := range reqs {
		reqs[i].OutputLen = 20 + (i*137)%520
	}
	burst := Load{MaxConcurrency: 512}

	pr, err := Predict(mtp, reqs, burst)
	if err != nil {
		t.Fatal(err)
	}
	ok, classes := 0, map[string]int{}
	for _, r := range pr.Records {
		if r.Success {
			ok++
			continue
		}
		classes[r.ErrorClass]++
		if !strings.Contains(r.Error, "illegal memory access") || !strings.Contains(r.Error, "36613") {
			t.Fatalf("failure %q does not name the crash and its issue", r.Error)
		}
	}
	t.Logf("crash run: %d of 1000 succeeded, failures %v", ok, classes)
	if ok < 50 || ok > 900 || classes["reset"] == 0 || classes["connect"] == 0 {
		t.Errorf("crash run: %d of 1000 succeeded, failures %v; want some done before, some cut, some refused", ok, classes)
	}

	for _, tc := range []struct {
		name string
		edit func(*Params, *Load)
	}{
		{"no MTP", func(p *Params, _ *Load) { p.SpecMethod, p.SpecTokens = "", 0 }},
		{"concurrency 64", func(_ *Params, l *Load) { l.MaxConcurrency = 64 }},
		{"fixed version", func(p *Params, _ *Load) { p.Version = "0.21.0" }},
		// Qwen3-8B has no MTP layers (vLLM refuses MTP on it), so the dense
		// model drafts the same steps with EAGLE-3.
		{"dense model", func(p *Params, _ *Load) { p.Model, p.SpecMethod = "Qwen3-8B", "eagle3" }},
		{"NoFaults", func(p *Params, _ *Load) { p.NoFaults = true }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, l := mtp, burst
			tc.edit(&p, &l)
			pr, err := Predict(p, reqs, l)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range pr.Records {
				if !r.Success {
					t.Fatalf("request %s failed: %s", r.ID, r.Error)
				}
			}
		})
	}

	// The live engine API reports the crash too.
	e, err := New(mtp, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, q := range reqs[:600] {
		e.Submit(Req{ID: "r" + itoa(i), PromptLen: q.PromptLen, OutputLen: q.OutputLen})
	}
	var crashed int
	for tm := 0.0; tm < 120 && e.Crashed() == nil; tm += 0.5 {
		for _, ev := range e.Advance(tm) {
			if errors.Is(ev.Err, ErrCrashed) {
				crashed++
			}
		}
	}
	if e.Crashed() == nil || crashed == 0 {
		t.Errorf("live engine: crashed %v, %d requests failed with ErrCrashed", e.Crashed(), crashed)
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
