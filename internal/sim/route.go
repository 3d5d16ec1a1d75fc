package sim

import (
	"math"
	"strings"
)

// Route is how a data-parallel front end picks the replica for a new
// request. One Router implements every route, for both faces of the
// simulator: predictions (PredictWith with Params.DP > 1) and sim serve.
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

// RouteFor is the routing an engine's DP front end uses for argv: its
// Kind's (SGLang's --load-balance-method), else vLLM's load balancer.
func RouteFor(engine string, argv []string) Route {
	if k, ok := KindOf(engine); ok && k.route != nil {
		return k.route(argv)
	}
	return RouteLeastLoaded
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

// Router picks replicas for one front end.
type Router struct {
	route  Route
	next   int      // round robin
	counts [][2]int // vLLM's published (waiting, running), plus local increments
	pubAt  float64  // model time of the next publication
}

// NewRouter routes over n replicas with r.
func NewRouter(r Route, n int) *Router {
	return &Router{route: r, counts: make([][2]int, n), pubAt: math.Inf(-1)}
}

// Route is the router's policy.
func (rt *Router) Route() Route { return rt.route }

// Pick chooses the replica for a request arriving at t; stats reads
// replica k's state now.
func (rt *Router) Pick(t float64, stats func(k int) Stats) int {
	n := len(rt.counts)
	switch rt.route {
	case RouteRoundRobin:
		k := rt.next
		rt.next = (k + 1) % n
		return k
	case RouteShortestQueue:
		best, bestLoad := 0, math.MaxInt
		for k := range n {
			st := stats(k)
			if l := st.Running + st.Waiting; l < bestLoad {
				best, bestLoad = k, l
			}
		}
		return best
	}
	if t >= rt.pubAt {
		for k := range n {
			st := stats(k)
			rt.counts[k] = [2]int{st.Waiting, st.Running}
		}
		rt.pubAt = t + countsPeriod
	}
	best, bestScore := 0, math.MaxInt
	for k, c := range rt.counts {
		if s := c[0]*4 + c[1]; s < bestScore {
			best, bestScore = k, s
		}
	}
	rt.counts[best][0]++
	return best
}
