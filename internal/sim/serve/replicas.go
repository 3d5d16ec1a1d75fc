package serve

import (
	"fmt"
	"math"

	"github.com/perflab/perflab/internal/sim"
)

// Route is the simulator's data-parallel routing (sim.Route), under the
// names this package's callers and tests already use.
type Route = sim.Route

// The routes (see sim.Route).
const (
	RouteLeastLoaded   = sim.RouteLeastLoaded
	RouteRoundRobin    = sim.RouteRoundRobin
	RouteShortestQueue = sim.RouteShortestQueue
)

// RouteFor is sim.RouteFor.
func RouteFor(engine string, argv []string) Route { return sim.RouteFor(engine, argv) }

// Replicas is a data-parallel deployment: independent engines (each with
// its own scheduler and KV cache) behind one API endpoint whose front end
// routes every new request to one of them. It is a Model; the serve loop
// owns it.
type Replicas struct {
	engines []Model
	router  *sim.Router
	owner   map[string]int // request -> replica, until it ends
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
	return &Replicas{engines: engines, router: sim.NewRouter(r, len(engines)), owner: map[string]int{},
		routed: make([]int64, len(engines)), success: make([]int64, len(engines))}, nil
}

// pick chooses the replica for a request arriving at t, with the one
// router the predictor uses too.
func (rs *Replicas) pick(t float64) int {
	return rs.router.Pick(t, func(k int) sim.Stats { return rs.engines[k].Stats() })
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
