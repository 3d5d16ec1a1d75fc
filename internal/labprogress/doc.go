// Package labprogress is the lab's progress as its consumers see it: the
// events (Event, with the lab's state after each step), the Sink that
// receives them, and the two displays, plain lines for logs (LineProgress)
// and a live bar for a terminal (BarProgress). The lab computes each
// event's state once (lab.Events) and writes it here; this package knows
// nothing of how a lab runs and imports no lab package.
package labprogress
