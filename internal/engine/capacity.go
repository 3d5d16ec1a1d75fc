package engine

import "fmt"

// CapacityWait is how a server whose start failed for want of capacity,
// not because of its config, is started again: a trait of the failure's
// class, so that a runner asks the class rather than branch on its name.
type CapacityWait struct {
	// Retries is how many times the start is tried again (0: the
	// failure stands).
	Retries int
	// NeedsRoom: a retry is worth it only once the runner has freed
	// capacity of its own (stopped an idle server, or seen one of its
	// running trials end); when it holds none, the failure stands.
	NeedsRoom bool
	// Settle: after the room is made, wait try × the runner's settle time
	// before the next start. A stopped server's GPU memory is released by
	// the driver a while after its process is gone, and nothing signals
	// when; every other wait is on an event.
	Settle bool
	// again says, for the trial's record, why the server was started
	// again after a failure with this reason.
	again func(reason string) string
}

// Again is the note for the trial's record that the server was started
// again after a failure with this reason ("" for a class that waits for
// nothing).
func (w CapacityWait) Again(reason string) string {
	if w.again == nil {
		return ""
	}
	return w.again(reason)
}

// capacityWaits are the classes whose failure a wait may cure.
var capacityWaits = map[FailureClass]CapacityWait{
	// The GPU was not yet free (a server just stopped may still be
	// releasing its memory): make room, let it settle, start again.
	ClassGPUBusy: {Retries: 3, Settle: true, again: func(reason string) string {
		return fmt.Sprintf("GPU not yet free at start (%s); started again", reason)
	}},
	// The cluster could not place the server: the runner's own servers
	// may be what it is short of (the spec's hardware.count can be more
	// than the cluster has free); start again each time one of them goes.
	ClassUnschedulable: {Retries: 50, NeedsRoom: true, again: func(string) string {
		return "not placed while this lab's own servers held the GPUs; started again"
	}},
}

// Capacity says whether and how a failure of this class waits for
// capacity and is started again; the zero CapacityWait for every class a
// wait cannot cure.
func (c FailureClass) Capacity() CapacityWait { return capacityWaits[c] }
