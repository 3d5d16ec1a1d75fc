package engine

// The engines' official images: the container and cluster runtimes run a
// config in the image of its engine's version.

import (
	"fmt"
	"strings"
)

// Images is each registered engine's pinned images (Kind.Image.Pinned),
// by engine and version. A version missing here gets the engine's
// repository with the tag its release uses.
var Images = func() map[string]map[string]string {
	m := map[string]map[string]string{}
	for _, k := range kinds {
		m[k.Name] = k.Image.Pinned
	}
	return m
}()

// ImageFor is the official image of an engine at a version ("" = the
// engine's default version).
func ImageFor(eng, version string) (string, error) {
	k, ok := KindOf(eng)
	if !ok {
		return "", fmt.Errorf("engine: no image for engine %q (want %s)", eng, KindList())
	}
	if version == "" {
		version = k.DefaultVersion
	}
	if img, ok := k.Image.Pinned[version]; ok {
		return img, nil
	}
	return k.Image.Repo + ":" + k.Image.TagPrefix + strings.TrimPrefix(version, "v"), nil
}

// EnvEngineVersion is set in every container or pod to the engine version the
// config names, so an image that serves several versions (the simulated
// engine image) knows which one to be; real engines ignore it.
const EnvEngineVersion = "PERFLAB_ENGINE_VERSION"
