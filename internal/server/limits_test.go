package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/perflab/perflab/internal/store"
)

// TestSpecLimits is issue 23's item 1 over the API: each reproduction, which
// ran the server out of memory, is a 400 naming the field, the value and the
// limit; so are a deep and a wide body, refused before they are parsed.
func TestSpecLimits(t *testing.T) {
	ts := newTestServer(t, stores(t)["sqlite"](t), Config{})
	for _, tc := range []struct {
		name, body, field, has string
		path                   string
	}{
		{"num_prompts", strings.Replace(smallSpec, "num_prompts: 200", "num_prompts: 1000000000000", 1), "tuning.num_prompts", "1000000000000 is out of range: want 0 to 100000", "/api/v1/labs"},
		{"input_len", strings.Replace(smallSpec, "input_len: 512", "input_len: 99999999999", 1), "tuning.input_len", "99999999999 is out of range", "/api/v1/labs"},
		{"repeats", strings.Replace(smallSpec, "repeats: 2", "repeats: 1000000000", 1), "repeats", "repeats 1000000000 is out of range: want 0 to 100", "/api/v1/labs"},
		{"nested 100,000 deep (200 KB)", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), "", "nested more than 100 deep", "/api/v1/labs"},
		{"200,000 keys (2 MB)", "{" + strings.Repeat(`"k": 1, `, 200_000) + "}", "", "more than 10000 entries", "/api/v1/labs"},
		{"a document the YAML decoder panics on", "name: 0\nmodel: 1\nengines:\n  - {name: vllm}\ngeneralization:\n ! 00000000\n000008: #0\n", "", "the YAML decoder failed", "/api/v1/labs"},
		{"benchmark max_seconds", `{"base_url": "http://127.0.0.1:1", "model": "m", "profile": "short", "max_seconds": 1e308}`, "", "max_seconds 1e+308 is out of range", "/api/v1/benchmarks"},
		{"benchmark num_prompts", `{"base_url": "http://127.0.0.1:1", "model": "m", "profile": "short", "num_prompts": 1000000000000}`, "", "num_prompts 1000000000000 is out of range", "/api/v1/benchmarks"},
		{"benchmark profile tokens", `{"base_url": "http://127.0.0.1:1", "model": "m", "profile": "very-long", "num_prompts": 100000}`, "", "num_prompts 100000 × input_len 32000 = 3200000000 tokens", "/api/v1/benchmarks"},
		{"benchmark nested", strings.Repeat("[", 100_000) + strings.Repeat("]", 100_000), "", "nested more than 100 deep", "/api/v1/benchmarks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, b := ts.do(t, "POST", tc.path, "application/json", strings.NewReader(tc.body))
			var e apiError
			json.Unmarshal(b, &e)
			if code != http.StatusBadRequest || !strings.Contains(e.Error, tc.has) || e.Field != tc.field {
				t.Errorf("%d %.300s\nwant 400 naming %q, field %q", code, b, tc.has, tc.field)
			}
		})
	}
}

// TestRefusedSpecNotResumable: a stopped run whose stored spec is refused
// now (the repeats: 1000000000, stored before the limit) is not
// listed resumable, says why, and its resume is a 400, not a crash.
func TestRefusedSpecNotResumable(t *testing.T) {
	st := stores(t)["sqlite"](t)
	spec := strings.Replace(smallSpec, "repeats: 2", "repeats: 1000000000", 1)
	ctx := context.Background()
	run, err := st.EnsureRun(ctx, "k-old", "old", spec, false)
	if err != nil {
		t.Fatal(err)
	}
	run.Status = store.StatusInterrupted
	if err := st.UpdateRun(ctx, &run); err != nil {
		t.Fatal(err)
	}
	ts := newTestServer(t, st, Config{})
	var got runDetail
	ts.getJSON(t, fmt.Sprintf("/api/v1/runs/%d", run.ID), &got)
	if got.Resumable || !strings.Contains(got.NotResumable, "repeats 1000000000 is out of range") {
		t.Errorf("resumable %v, not_resumable %q", got.Resumable, got.NotResumable)
	}
	var page struct {
		Runs []runInfo `json:"runs"`
	}
	ts.getJSON(t, "/api/v1/runs?resumable=true", &page)
	if len(page.Runs) != 0 {
		t.Errorf("listed resumable: %+v", page.Runs)
	}
	code, b := ts.do(t, "POST", fmt.Sprintf("/api/v1/runs/%d/resume", run.ID), "", nil)
	if code != http.StatusBadRequest || !strings.Contains(string(b), "repeats 1000000000 is out of range") {
		t.Errorf("resume: %d %s", code, b)
	}
}
