package main

import (
	"github.com/spf13/pflag"

	"github.com/perflab/perflab/internal/dataset"
)

// addDatasetFlags registers the dataset flags, spelled as `vllm bench serve`
// spells them, on every command that samples a workload (bench, sim
// predict), so the same words pick the same prompts everywhere.
func addDatasetFlags(fl *pflag.FlagSet, d *dataset.Options) {
	fl.StringVar(&d.Name, "dataset-name", dataset.NameRandom, "dataset: sharegpt, random, custom, prefix-shared")
	fl.StringVar(&d.Path, "dataset-path", "", "dataset file")
	fl.IntVar(&d.NumPrompts, "num-prompts", dataset.DefaultNumPrompts, "number of prompts to process")
	fl.BoolVar(&d.NoOversample, "no-oversample", false, "do not oversample if the dataset has fewer prompts than --num-prompts")
	fl.BoolVar(&d.DisableShuffle, "disable-shuffle", false, "disable shuffling of the dataset")
	fl.IntVar(&d.ShareGPTOutputLen, "sharegpt-output-len", 0, "override the output length of each ShareGPT request")
	fl.IntVar(&d.RandomInputLen, "random-input-len", dataset.DefaultRandomInputLen, "random dataset: input tokens per request")
	fl.IntVar(&d.RandomOutputLen, "random-output-len", dataset.DefaultRandomOutputLen, "random dataset: output tokens per request")
	fl.Float64Var(&d.RandomRangeRatio, "random-range-ratio", 0, "random dataset: range ratio of the uniform length sampling")
	fl.IntVar(&d.RandomPrefixLen, "random-prefix-len", 0, "random dataset: fixed prefix tokens before the random context")
	fl.IntVar(&d.CustomOutputLen, "custom-output-len", dataset.DefaultCustomOutputLen, "custom dataset: output tokens per request")
	fl.IntVar(&d.GSPNumGroups, "gsp-num-groups", dataset.DefaultGSPNumGroups, "prefix-shared: number of prefix groups")
	fl.IntVar(&d.GSPPromptsPerGroup, "gsp-prompts-per-group", dataset.DefaultGSPPromptsPerGroup, "prefix-shared: prompts per group")
	fl.IntVar(&d.GSPSystemPromptLen, "gsp-system-prompt-len", dataset.DefaultGSPSystemPromptLen, "prefix-shared: shared prefix tokens")
	fl.IntVar(&d.GSPQuestionLen, "gsp-question-len", dataset.DefaultGSPQuestionLen, "prefix-shared: question tokens")
	fl.IntVar(&d.GSPOutputLen, "gsp-output-len", dataset.DefaultGSPOutputLen, "prefix-shared: output tokens")
}
