//go:build !(linux || darwin)

package doctor

import "errors"

var errUnsupported = errors.New("not supported on this OS")

func diskSpace(string) (uint64, uint64, error) { return 0, 0, errUnsupported }
func processMemlock() (uint64, bool, error)    { return 0, false, errUnsupported }
