//go:build !linux

package engine

import (
	"os"
	"os/exec"
	"syscall"
)

// groupCommand runs argv directly as the leader of a new process group.
// Outside Linux there is no parent-death signal to build a reaper on, so a
// SIGKILLed perflab can leave the group behind; a graceful perflab exit
// still kills it (KillAll). The nil status pipe makes the leader's own wait
// status the engine's.
func groupCommand(argv []string, dir, removeDir string) (*exec.Cmd, *os.File, error) {
	c := exec.Command(argv[0], argv[1:]...)
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return c, nil, nil
}
