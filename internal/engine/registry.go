package engine

import (
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The registry of live process groups this process started, so that nothing
// outlives perflab: KillAll runs on SIGINT/SIGTERM (InstallSignalHandler) and
// from a deferred call in main that also covers panics.
var (
	regMu  sync.Mutex
	groups = map[int]struct{}{}
	// shuttingDown makes deaths caused by KillAll count as stops, not
	// failures.
	shuttingDown atomic.Bool
)

func register(pgid int) {
	regMu.Lock()
	groups[pgid] = struct{}{}
	regMu.Unlock()
}

func unregister(pgid int) {
	regMu.Lock()
	delete(groups, pgid)
	regMu.Unlock()
}

// LiveGroups returns the process group ids still registered.
func LiveGroups() []int {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]int, 0, len(groups))
	for g := range groups {
		out = append(out, g)
	}
	return out
}

// KillAll terminates every process group started by this process: SIGTERM,
// up to grace for them to go, then SIGKILL. It is safe to call repeatedly
// and from a deferred function during a panic.
func KillAll(grace time.Duration) {
	shuttingDown.Store(true)
	live := LiveGroups()
	for _, g := range live {
		_ = syscall.Kill(-g, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		alive := false
		for _, g := range live {
			if syscall.Kill(-g, 0) == nil {
				alive = true
				break
			}
		}
		if !alive {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, g := range live {
		_ = syscall.Kill(-g, syscall.SIGKILL)
	}
}

var installOnce sync.Once

// InstallSignalHandler makes SIGINT and SIGTERM tear down every engine
// process group (grace 5 s). It does not exit: the CLI's own context
// cancellation still runs its cleanup. A second signal kills what is left
// at once and exits with status 130.
func InstallSignalHandler() {
	installOnce.Do(func() {
		ch := make(chan os.Signal, 2)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			<-ch
			go KillAll(5 * time.Second)
			<-ch
			KillAll(0)
			os.Exit(130)
		}()
	})
}
