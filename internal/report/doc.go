// Package report writes the lab's report (Markdown, HTML, JSON, CSV, charts)
// from stored results, and imports vLLM and GPUStack/guidellm results.
package report
