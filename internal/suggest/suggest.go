// Package suggest finds the word a mistyped one most likely meant, for
// the "did you mean" of an error about an unknown flag or field.
package suggest

// Distance is the Levenshtein distance between a and b, in bytes. Words
// over 64 bytes are no one's typo of a flag or field name: their distance
// is reported as larger than any other.
func Distance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 30
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
