package engine

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestResetFor: which engines reset by endpoint, which salt their
// requests, and so which servers a lab may reuse between measurements.
func TestResetFor(t *testing.T) {
	off := false
	for _, tc := range []struct {
		name     string
		cfg      Config
		path     string
		salt     bool
		reusable bool
	}{
		{"vllm", Config{Engine: VLLM, Version: "0.11.0"}, "/reset_prefix_cache", false, true},
		{"sglang", Config{Engine: SGLang, Version: "0.5.5.post1"}, "/flush_cache", false, true},
		{"trtllm 1.2.0rc1 salts", Config{Engine: TRTLLM, Version: "1.2.0rc1"}, "", true, true},
		{"trtllm default version salts", Config{Engine: TRTLLM}, "", true, true},
		{"trtllm 1.0.0 has neither", Config{Engine: TRTLLM, Version: "1.0.0"}, "", false, false},
		{"trtllm 1.0.0 without prefix caching", Config{Engine: TRTLLM, Version: "1.0.0", PrefixCaching: &off}, "", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ResetFor(tc.cfg)
			if c.Path != tc.path || c.Salt != tc.salt {
				t.Errorf("ResetFor = path %q salt %v, want %q %v", c.Path, c.Salt, tc.path, tc.salt)
			}
			if got := Reusable(tc.cfg); got != tc.reusable {
				t.Errorf("Reusable = %v, want %v", got, tc.reusable)
			}
		})
	}
}

// TestResetFromKind: the reset is the Kind's, so an engine registered with
// a reset endpoint, env and salt version gets them from ResetFor with no
// other code naming it; and a caller that edits the env it got does not
// edit the registry's.
func TestResetFromKind(t *testing.T) {
	saved := kinds
	t.Cleanup(func() { kinds = saved })
	kinds = append(append([]*Kind(nil), saved...), &Kind{
		Name: "toyengine", DefaultVersion: "2.0",
		Reset:     CacheReset{Method: "PUT", Path: "/forget", Env: map[string]string{"TOY_RESET": "1"}},
		SaltSince: "2.1",
	})
	for _, tc := range []struct {
		version string
		salt    bool
	}{{"2.0", false}, {"2.1", true}, {"3.0", true}, {"", false}} {
		c := ResetFor(Config{Engine: "toyengine", Version: tc.version})
		if c.Method != "PUT" || c.Path != "/forget" || c.Env["TOY_RESET"] != "1" || c.Salt != tc.salt {
			t.Errorf("version %q: ResetFor = %+v, want PUT /forget TOY_RESET=1 salt %v", tc.version, c, tc.salt)
		}
		if !Reusable(Config{Engine: "toyengine", Version: tc.version}) {
			t.Errorf("version %q: not reusable with a reset endpoint", tc.version)
		}
	}
	ResetFor(Config{Engine: VLLM}).Env["VLLM_SERVER_DEV_MODE"] = "0"
	if got := ResetFor(Config{Engine: VLLM}).Env["VLLM_SERVER_DEV_MODE"]; got != "1" {
		t.Errorf("a caller's edit reached the registry: VLLM_SERVER_DEV_MODE=%q", got)
	}
	if c := ResetFor(Config{Engine: "unregistered"}); c.Path != "" || c.Salt || c.Env != nil {
		t.Errorf("unregistered engine: ResetFor = %+v, want none", c)
	}
}

// TestResetRefused: a reset endpoint's refusal is typed, and says whether
// another try may succeed: SGLang's 400 while requests run is busy, an
// endpoint the server does not serve (vLLM outside its dev mode, 404) is
// not.
func TestResetRefused(t *testing.T) {
	for _, tt := range []struct {
		code int
		busy bool
	}{{http.StatusBadRequest, true}, {http.StatusNotFound, false}, {http.StatusServiceUnavailable, true}, {http.StatusInternalServerError, false}} {
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no", tt.code)
		}))
		err := CacheReset{Method: http.MethodPost, Path: "/flush_cache"}.Do(context.Background(), hs.URL)
		hs.Close()
		var refused *ResetRefused
		if !errors.As(err, &refused) || refused.Code != tt.code || refused.Busy() != tt.busy {
			t.Errorf("%d: %v (busy %v), want a ResetRefused, busy %v", tt.code, err, refused != nil && refused.Busy(), tt.busy)
		}
	}
}
