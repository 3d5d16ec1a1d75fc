// Package objective is what any package may know of a lab objective from
// its name alone: the names a spec's objective.metric accepts and the words
// a report says of each. It is a leaf (it imports nothing of perflab), so
// the report, which never imports the lab, reads the same words the lab's
// registry (lab/objective.go) is checked against; a stored summary carries
// only the objective's name, so its words are looked up, not stored.
package objective

// The objective names a spec's objective.metric accepts.
const (
	TotalThroughput  = "total_throughput"
	ThroughputPerGPU = "throughput_per_gpu"
	Goodput          = "goodput"
	// MaxLoadUnderSLO scores a config by the highest load it sustains
	// within objective.load's SLO.
	MaxLoadUnderSLO = "max_load_under_slo"
)

// Words is what a report says of an objective.
type Words struct {
	// Noun completes "Recommended configuration for optimizing …".
	Noun string
	// Sentence is the report's Optimization Objective section.
	Sentence string
}

// words holds each objective's words, by name.
var words = map[string]Words{
	TotalThroughput: {
		Noun:     "throughput",
		Sentence: "Achieve high throughput under high-concurrency request scenarios.",
	},
	ThroughputPerGPU: {
		Noun:     "throughput per GPU",
		Sentence: "Achieve high throughput per GPU under high-concurrency request scenarios.",
	},
	Goodput: {
		Noun:     "goodput",
		Sentence: "Achieve the highest goodput (requests per second that meet every SLO) under high-concurrency request scenarios: " + Goodput + ".",
	},
	MaxLoadUnderSLO: {
		Noun:     "the load sustained within the SLO",
		Sentence: "Sustain the highest load (request rate or concurrent requests) that still meets the latency SLO: each configuration is scored by its sustainable load (see Load within the SLO).",
	},
}

// WordsOf returns the words of the objective named name; a name it does
// not know (a summary written before objectives had names, an imported
// result) reads as total throughput, the default objective.
func WordsOf(name string) Words {
	if w, ok := words[name]; ok {
		return w
	}
	return words[TotalThroughput]
}

// Known reports whether name has words here: the lab registers no
// objective this package cannot describe.
func Known(name string) bool {
	_, ok := words[name]
	return ok
}
