// Package labspec is the lab's spec language: a spec's types and how it is
// read (strict decoding, unknown fields with suggestions, the runtime
// section), checked (ranges, limits, objective sections, host paths),
// normalized (defaults, paths made absolute) and keyed (the run key, files
// by content); the knobs and how a point of them becomes an engine
// config; the grid a spec spans; the sim clock's scale. It knows nothing of
// how a lab runs: package lab imports it, never the other way.
package labspec
