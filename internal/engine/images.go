package engine

// The engines' official images: the container and cluster runtimes run a
// config in the image of its engine's version.

import (
	"fmt"
	"strings"
)

// Images is the official image of each engine, per version perflab pins
// (DefaultVersions and the versions its renderer knows). A version
// missing here gets the engine's repository with the tag its release uses.
var Images = map[string]map[string]string{
	VLLM: {
		"0.11.0": "vllm/vllm-openai:v0.11.0",
		"0.17.1": "vllm/vllm-openai:v0.17.1",
	},
	SGLang: {
		"0.5.5.post1": "lmsysorg/sglang:v0.5.5.post1",
		"0.5.9":       "lmsysorg/sglang:v0.5.9",
	},
	TRTLLM: {
		"1.2.0rc1": "nvcr.io/nvidia/tensorrt-llm/release:1.2.0rc1",
	},
}

// repositories and tag spellings for versions outside the table: vLLM and
// SGLang tag "v0.11.0", NVIDIA's registry tags "1.2.0rc1".
var repositories = map[string]struct{ repo, prefix string }{
	VLLM:   {"vllm/vllm-openai", "v"},
	SGLang: {"lmsysorg/sglang", "v"},
	TRTLLM: {"nvcr.io/nvidia/tensorrt-llm/release", ""},
}

// ImageFor is the official image of an engine at a version ("" = the
// engine's default version).
func ImageFor(eng, version string) (string, error) {
	if version == "" {
		version = DefaultVersions[eng]
	}
	if img, ok := Images[eng][version]; ok {
		return img, nil
	}
	r, ok := repositories[eng]
	if !ok {
		return "", fmt.Errorf("engine: no image for engine %q (want vllm, sglang or trtllm)", eng)
	}
	return r.repo + ":" + r.prefix + strings.TrimPrefix(version, "v"), nil
}

// EnvEngineVersion is set in every container or pod to the engine version the
// config names, so an image that serves several versions (the simulated
// engine image) knows which one to be; real engines ignore it.
const EnvEngineVersion = "PERFLAB_ENGINE_VERSION"
