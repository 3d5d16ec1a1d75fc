package serve

import (
	"fmt"
	"math"
	"strings"

	"github.com/perflab/perflab/internal/sim"
)

// Route is how a data-parallel front end picks the replica for a new
// request.
type Route int

const (
	// RouteLeastLoaded is vLLM's DP load balancer (DPLBAsyncMPClient): the
	// replica with the lowest waiting×4 + running, from counts the
	// coordinator publishes every 100 ms, each routed request adding one
	// to its replica's waiting count until the next publication; ties go to
	// the lowest index.
	RouteLeastLoaded Route = iota
	// RouteRoundRobin is SGLang's default (--load-balance-method round_robin).
	RouteRoundRobin
	// RouteShortestQueue is SGLang's shortest_queue: the replica with the
	// fewest running and waiting requests, read live.
	RouteShortestQueue
)

// String names the policy as the engines spell it.
func (r Route) String() string {
	switch r {
	case RouteRoundRobin:
		return "round_robin"
	case RouteShortestQueue:
		return "shortest_queue"
	}
	return "least_loaded (waiting*4+running)"
}

// RouteFor is the routing an engine's DP front end uses for argv: vLLM's
// load balancer; SGLang's --load-balance-method (round_robin by default;
// minimum_tokens is taken as shortest_queue, which the simulator cannot
// tell apart for requests it has only counted).
func RouteFor(engine string, argv []string) Route {
	if engine != sim.EngineSGLang {
		return RouteLeastLoaded
	}
	switch flagValue(argv, "--load-balance-method") {
	case "shortest_queue", "minimum_tokens":
		return RouteShortestQueue
	}
	return RouteRoundRobin
}

// flagValue is the last value argv gives name ("--name v" or "--name=v").
func flagValue(argv []string, name string) string {
	v := ""
	for i, a := range argv {
		if a == name && i+1 < len(argv) {
			v = argv[i+1]
		} else if val, ok := strings.CutPrefix(a, name+"="); ok {
			v = val
		}
	}
	return v
}

// countsPeriod is how often vLLM's DP coordinator publishes the replicas'
// request counts to the front end (stats_update_interval_ms), model time.
const countsPeriod = 0.1

// Replicas is a data-parallel deployment: independent engines (each with
// its own scheduler and KV cache) behind one API endpoint whose front end
// routes every new request to one of them. It is a Model; the serve loop
// owns it.
type Replicas struct {
	engines []Model
	route   Route
	owner   map[string]int // request -> replica, until it ends
	next    int            // round robin
	counts  [][2]int       // vLLM's published (waiting, running), plus local increments
	pubAt   float64        // model time of the next publication
	routed  []int64
	success []int64
	evs     []sim.Event
}

var (
	_ Model    = (*Replicas)(nil)
	_ Canceler = (*Replicas)(nil)
)

// NewReplicas puts engines behind one front end that routes with r.
func NewReplicas(engines []Model, r Route) (*Replicas, error) {
	if len(engines) == 0 {
		return nil, fmt.Errorf("serve: no replicas")
	}
	return &Replicas{engines: engines, route: r, owner: map[string]int{},
		counts: make([][2]int, len(engines)), routed: make([]int64, len(engines)), success: make([]int64, len(engines)), pubAt: math.Inf(-1)}, nil
}

// pick chooses the replica for a request arriving at t.
func (rs *Replicas) pick(t float64) int {
	n := len(rs.engines)
	switch rs.route {
	case RouteRoundRobin:
		k := rs.next
		rs.next = (k + 1) % n
		return k
	case RouteShortestQueue:
		best, bestLoad := 0, math.MaxInt
		for k, e := range rs.engines {
			st := e.Stats()
			if l := st.Running + st.Waiting; l < bestLoad {
				best, bestLoad = k, l
			}
		}
		return best
	}
	if t >= rs.pubAt {
		for k, e := range rs.engines {
			st := e.Stats()
			rs.counts[k] = [2]int{st.Waiting, st.Running}
		}
		rs.pubAt = t + countsPeriod
	}
	best, bestScore := 0, math.MaxInt
	for k, c := range rs.counts {
		if s := c[0]*4 + c[1]; s < bestScore {
			best, bestScore = k, s
		}
	}
	rs.counts[best][0]++
	return best
}

// Submit routes r to a replica.
func (rs *Replicas) Submit(r sim.Req) {
	k := rs.pick(r.Arrival)
	rs.owner[r.ID] = k
	rs.routed[k]++
	rs.engines[k].Submit(r)
}

// NextEventTime is the earliest next event of any replica.
func (rs *Replicas) NextEventTime() (float64, bool) {
	t, found := math.Inf(1), false
	for _, e := range rs.engines {
		if et, ok := e.NextEventTime(); ok {
			t, found = math.Min(t, et), true
		}
	}
	return t, found
}

// Advance advances every replica to the same time. Events of one request
// stay in order; events of different replicas are not interleaved by time
// (the serve loop orders deliveries by deadline).
func (rs *Replicas) Advance(to float64) []sim.Event {
	rs.evs = rs.evs[:0]
	for k, e := range rs.engines {
		for _, ev := range e.Advance(to) {
			if ev.Done {
				delete(rs.owner, ev.ReqID)
				if ev.Err == nil {
					rs.success[k]++
				}
			}
			rs.evs = append(rs.evs, ev)
		}
	}
	out := make([]sim.Event, len(rs.evs))
	copy(out, rs.evs)
	return out
}

// Cancel drops a request from the replica that has it.
// ResetPrefixCache resets every replica's prefix cache (vLLM's endpoint
// resets all data-parallel ranks); false if any refused.
func (rs *Replicas) ResetPrefixCache() bool {
	ok := true
	for _, e := range rs.engines {
		if r, can := e.(PrefixResetter); can && !r.ResetPrefixCache() {
			ok = false
		}
	}
	return ok
}

func (rs *Replicas) Cancel(id string) bool {
	k, ok := rs.owner[id]
	if !ok {
		return false
	}
	delete(rs.owner, id)
	if c, ok := rs.engines[k].(Canceler); ok {
		return c.Cancel(id)
	}
	return false
}

// Stats sums the replicas' counts; KV usage is their mean.
func (rs *Replicas) Stats() sim.Stats {
	var s sim.Stats
	for _, e := range rs.engines {
		st := e.Stats()
		s.Running += st.Running
		s.Waiting += st.Waiting
		s.KVUsage += st.KVUsage / float64(len(rs.engines))
		s.Preemptions += st.Preemptions
		s.PromptTokens += st.PromptTokens
		s.GenerationTokens += st.GenerationTokens
	}
	return s
}

// ReplicaStats appends each replica's own state to dst, in rank order.
func (rs *Replicas) ReplicaStats(dst []ReplicaStat) []ReplicaStat {
	for k, e := range rs.engines {
		dst = append(dst, ReplicaStat{Stats: e.Stats(), Routed: rs.routed[k], Finished: rs.success[k]})
	}
	return dst
}

// ReplicaStat is one replica's state as its own /metrics series show it.
type ReplicaStat struct {
	sim.Stats
	// Routed is how many requests the front end gave it; Finished how many
	// it completed (the model's end, not the client's).
	Routed, Finished int64
}

// replicaStater is a model with data-parallel replicas.
type replicaStater interface {
	ReplicaStats(dst []ReplicaStat) []ReplicaStat
}

var _ replicaStater = (*Replicas)(nil)

// Routed is how many requests each replica was given.
func (rs *Replicas) Routed() []int64 { return append([]int64(nil), rs.routed...) }
