package engine

// The failure rules process.go applies, for runtimes in other packages
// (docker, and the kubernetes runtime to come) until the readiness wait and
// the classification are shared outright.

// OOMLine returns the first of lines that reports an out-of-memory error in
// an engine's own words, or "".
func OOMLine(lines []string) string { return oomLine(lines) }

// LastLine is the last non-blank line, shortened, for one-line reasons.
func LastLine(lines []string) string { return lastLine(lines) }
