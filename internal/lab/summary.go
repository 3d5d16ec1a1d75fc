package lab

import (
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/report"
)

// SummaryVersion is bumped when a JSON tag of report.Summary changes
// meaning: the tag names are a contract with every stored run, documented
// in docs/lab.md.
const SummaryVersion = 1

// The lab's account of a run is the report's type (report.Summary), which
// the lab fills and the report reads back from the store: one type, so a
// field cannot be added to one side and missed on the other. The names
// below keep the lab's callers as they were.
type (
	// Summary is the lab's account of a run (report.Summary).
	Summary = report.Summary
	// WorkloadInfo describes one workload for the report.
	WorkloadInfo = report.Workload
	// Candidate is one configuration as measured (or skipped) in a stage.
	Candidate = report.SummaryCandidate
	// StageSummary is one stage of the staged pass (or the combinations step).
	StageSummary = report.StageSummary
	// JointSummary is the simulator-guided joint search after the staged pass.
	JointSummary = report.JointSummary
	// GeneralizationPair is the baseline and the winner on one workload.
	GeneralizationPair = report.GeneralizationPair
	// GridSummary compares the lab with an exhaustive grid over the same space.
	GridSummary = report.GridSummary
)

// engineVersions is the summary's record of the spec's engines.
func engineVersions(es []labspec.EngineSpec) []report.EngineVersion {
	if es == nil {
		return nil
	}
	out := make([]report.EngineVersion, len(es))
	for i, e := range es {
		out[i] = report.EngineVersion{Name: e.Name, Version: e.Version}
	}
	return out
}

// summaryLoad is the summary's record of max_load_under_slo's question and
// of each config's search (the same fields: converted, not copied by hand).
func summaryLoad(o *labspec.LoadObjective, searches []*LoadSearch) (*report.SummaryLoad, []*report.LoadSearch) {
	var out []*report.LoadSearch
	for _, s := range searches {
		out = append(out, (*report.LoadSearch)(s))
	}
	return (*report.SummaryLoad)(o), out
}
