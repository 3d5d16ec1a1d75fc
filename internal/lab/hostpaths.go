package lab

import (
	"fmt"
	"path/filepath"
	"strings"
)

// HostPath is a host file or directory a spec names, with the field that
// names it.
type HostPath struct {
	// Field is the spec's field ("tokenizer", "tuning.path",
	// "volumes[0]").
	Field string
	// Path is the path as the lab uses it: absolute once the spec is
	// loaded.
	Path string
}

// HostPaths lists every host path the loaded spec reads or mounts: the
// tokenizer, model and FP8 model when they are paths rather than Hub ids,
// the workloads' dataset files (the default ShareGPT sample included),
// the bind mounts' host sides and the kubernetes HF cache host path. A
// server checks them against the directory it may expose.
func (s *Spec) HostPaths() []HostPath {
	var out []HostPath
	ref := func(field, v string) {
		if v != "" && filepath.IsAbs(v) {
			out = append(out, HostPath{field, v})
		}
	}
	ref("tokenizer", s.Tokenizer)
	ref("model", s.Model)
	ref("fp8_model", s.FP8Model)
	if s.Tuning != nil && s.Tuning.Path != "" {
		out = append(out, HostPath{"tuning.path", s.Tuning.Path})
	}
	for i, w := range s.Generalization {
		if w.Path != "" {
			out = append(out, HostPath{fmt.Sprintf("generalization[%d].path", i), w.Path})
		}
	}
	for i, v := range s.Volumes {
		if host, _, ok := strings.Cut(v, ":"); ok && host != "" {
			out = append(out, HostPath{fmt.Sprintf("volumes[%d]", i), host})
		}
	}
	if s.Kubernetes != nil && s.Kubernetes.HFCacheHostPath != "" {
		out = append(out, HostPath{"kubernetes.hf_cache_host_path", s.Kubernetes.HFCacheHostPath})
	}
	return out
}
