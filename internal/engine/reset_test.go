package engine

import "testing"

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
