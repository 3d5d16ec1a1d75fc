package report

// The kinds of reasons behind a candidate's decision (Why), which the
// lab's decisions set and test; SummaryCandidate.Reason is the same reason
// as a sentence for people, and nothing branches on its text.
const (
	// WhyFailed: the trial failed (Candidate.FailureClass says how).
	WhyFailed Why = "failed"
	// WhyLowSuccess: too few requests succeeded (min_success_rate).
	WhyLowSuccess Why = "low_success"
	// WhySLO: a P99 bound was broken, or the result lacks the figure a
	// bound needs.
	WhySLO Why = "slo"
	// WhyNoScore: the objective is not a positive number.
	WhyNoScore Why = "no_score"
	// WhyUnmeasured: a load search stopped below a point the client could
	// not deliver (or decide within its limits), so its load is a lower
	// bound and no score: no gain is reported against it.
	WhyUnmeasured Why = "unmeasured"
	// WhyUnsupported: the engine version cannot run the config (not run).
	WhyUnsupported Why = "unsupported"
	// WhyHopeless: not searched, as the top of the guide's range for it
	// lies below the incumbent's measured score (max_load_under_slo, where
	// a candidate costs a whole load search).
	WhyHopeless Why = "hopeless"
	// WhyUnreached: not run, as its batch limit is above the most
	// requests the tuning workload has in flight, where a smaller limit of
	// the stage admits the same batches (labspec.TrimUnbinding).
	WhyUnreached Why = "unreached"
	// WhyIncumbentServer: not run, as it starts the incumbent's own
	// server: the value is the incumbent's, or what the engine picks for
	// the knob unset on this GPU and model (engine.Kind.BatchDefaults,
	// labspec.Hardware.AttentionDefaults).
	WhyIncumbentServer Why = "incumbent_server"
	// WhyBudget: the budget stopped it before a decision.
	WhyBudget Why = "budget"
	// WhyNotBest: another candidate of the step scored higher.
	WhyNotBest Why = "not_best"
	// WhyNoGain: it did not beat the incumbent.
	WhyNoGain Why = "no_gain"
	// WhyBelowNoise: its gain did not clear the noise floor.
	WhyBelowNoise Why = "below_noise_floor"
	// WhyRepeatFailed: one of its repeats failed.
	WhyRepeatFailed Why = "repeat_failed"
	// WhyNoIncumbentScore: the incumbent's score cannot be compared with.
	WhyNoIncumbentScore Why = "no_incumbent_score"
	// WhyFirstWorking: kept as the first configuration that worked.
	WhyFirstWorking Why = "first_working"
	// WhyBeatNoise: kept, its gain cleared the noise floor.
	WhyBeatNoise Why = "beat_noise_floor"
)
