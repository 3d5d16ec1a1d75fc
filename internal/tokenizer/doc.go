// Package tokenizer loads Hugging Face tokenizer.json files and encodes and
// decodes byte-level BPE with ids identical to HF tokenizers, and resolves a
// model's tokenizer from a path, the HF cache or the Hub.
package tokenizer
