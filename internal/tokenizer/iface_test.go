package tokenizer

import "github.com/perflab/perflab/internal/dataset"

// *Tokenizer is what the dataset package samples with.
var _ dataset.Tokenizer = (*Tokenizer)(nil)
