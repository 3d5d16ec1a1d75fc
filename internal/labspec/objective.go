package labspec

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/perflab/perflab/internal/objective"
)

// objectiveRule is the spec language's part of one objective: how its
// objective section is checked and what a spec naming it means. How the
// objective scores and runs a candidate is the lab's (lab.ObjectiveKind,
// registered by the same name; the lab refuses a kind without a rule
// here).
type objectiveRule struct {
	// check says what is wrong with the spec's objective section, as the
	// JSON path and the reason (nil: nothing to check).
	check func(obj Objective) (path string, err error)
	// normalized is the metric a spec with this objective means (nil:
	// the objective's own name).
	normalized func(obj Objective) string
}

// objectiveRules are the objectives a spec may name in objective.metric.
var objectiveRules = map[string]objectiveRule{
	objective.TotalThroughput:  {},
	objective.ThroughputPerGPU: {},
	objective.Goodput:          {check: checkGoodput, normalized: normalizedGoodput},
	objective.MaxLoadUnderSLO:  {check: checkMaxLoadUnderSLO},
}

// KnownObjective says whether a spec may name the objective (the empty
// name is the default, total_throughput).
func KnownObjective(name string) bool {
	_, ok := lookupRule(name)
	return ok
}

// ObjectiveNames lists the objectives a spec may name, sorted.
func ObjectiveNames() []string {
	names := make([]string, 0, len(objectiveRules))
	for n := range objectiveRules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// lookupRule returns the rule of the objective named name ("" names the
// default, total_throughput).
func lookupRule(name string) (objectiveRule, bool) {
	if name == "" {
		name = ObjectiveTotalThroughput
	}
	r, ok := objectiveRules[name]
	return r, ok
}

func checkGoodput(obj Objective) (string, error) {
	slo := obj.SLO
	if slo.TPOTMs == 0 && slo.TTFTMs == 0 && slo.E2ELMs == 0 && slo.P99TPOTMs == 0 && slo.P99TTFTMs == 0 {
		return "$.objective", errors.New("objective goodput needs an slo (e.g. tpot_ms: 100)")
	}
	return "", nil
}

// normalizedGoodput: goodput is requests/s meeting per-request bounds; with only
// P99 bounds there is nothing per request to count (vLLM's
// request_goodput is absent and every trial would score 0). The meaning is
// then "the most throughput whose P99 stays within the bounds": total
// throughput, with the P99 bounds as constraints.
func normalizedGoodput(obj Objective) string {
	if !obj.SLO.PerRequest() {
		return ObjectiveTotalThroughput
	}
	return ObjectiveGoodput
}

func checkMaxLoadUnderSLO(obj Objective) (string, error) {
	if err := obj.Load.Validate(); err != nil {
		return "$.objective.load", fmt.Errorf("objective max_load_under_slo: %w", err)
	}
	return "", nil
}

// Check validates the objective section of a spec: the JSON path at fault
// and the reason.
func (obj Objective) Check() (path string, err error) {
	r, ok := lookupRule(obj.Metric)
	if !ok {
		return "$.objective.metric", fmt.Errorf("objective %q: want %s", obj.Metric, strings.Join(ObjectiveNames(), ", "))
	}
	if r.check == nil {
		return "", nil
	}
	return r.check(obj)
}

// Normalized is the objective as the lab runs it: the default metric
// filled in and goodput without a per-request bound read as total
// throughput (see normalizedGoodput). A metric the rules lack stays.
func (obj Objective) Normalized() Objective {
	r, ok := lookupRule(obj.Metric)
	if !ok {
		return obj
	}
	if r.normalized != nil {
		obj.Metric = r.normalized(obj)
	} else {
		obj.Metric = cmp.Or(obj.Metric, ObjectiveTotalThroughput)
	}
	return obj
}
