//go:build !linux

package tokenizer

func threadCPU() (float64, bool) { return 0, false }
