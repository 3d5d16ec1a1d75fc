package dataset

import (
	"math/bits"

	"github.com/perflab/perflab/internal/mt19937"
)

// pyRandom reproduces CPython's random.Random (MT19937) closely enough that a
// seeded sequence of shuffle/choice/choices/random calls yields the same
// values as Python does. vLLM's ShareGPT and custom samplers use the global
// random module, so matching it bit for bit is what makes "same seed, same
// conversations" hold.
type pyRandom struct {
	mt mt19937.MT
}

// newPyRandom is random.seed(seed) for an int seed: CPython takes abs(seed),
// splits it into little-endian 32-bit words and runs init_by_array.
func newPyRandom(seed int64) *pyRandom {
	u := uint64(seed)
	if seed < 0 {
		u = uint64(-seed)
	}
	key := []uint32{uint32(u)}
	if hi := uint32(u >> 32); hi != 0 {
		key = append(key, hi)
	}
	r := &pyRandom{}
	r.mt.InitByArray(key)
	return r
}

// uint32 is genrand_uint32.
func (r *pyRandom) uint32() uint32 { return r.mt.Uint32() }

// random is random.random(): 53 bits from two draws.
func (r *pyRandom) random() float64 { return r.mt.Float53() }

// getrandbits is random.getrandbits(k) for 0 <= k <= 32 (all the samplers
// need: every population here is far below 2**32).
func (r *pyRandom) getrandbits(k int) uint32 {
	if k == 0 {
		return 0
	}
	return r.uint32() >> (32 - k)
}

// randbelow is Random._randbelow_with_getrandbits: rejection sampling on
// bit_length(n) bits.
func (r *pyRandom) randbelow(n int) int {
	if n <= 0 {
		return 0
	}
	k := bits.Len64(uint64(n))
	v := int(r.getrandbits(k))
	for v >= n {
		v = int(r.getrandbits(k))
	}
	return v
}

// shuffle is random.shuffle on a sequence of length n, calling swap(i, j)
// exactly where Python swaps x[i] and x[j].
func (r *pyRandom) shuffle(n int, swap func(i, j int)) {
	for i := n - 1; i >= 1; i-- {
		j := r.randbelow(i + 1)
		swap(i, j)
	}
}

// choice is random.choice over a population of n: an index.
func (r *pyRandom) choice(n int) int { return r.randbelow(n) }

// choices is random.choices(population, k=k) without weights: Python picks
// floor(random() * n) per draw, not _randbelow, so the streams differ.
func (r *pyRandom) choices(n, k int) []int {
	out := make([]int, k)
	fn := float64(n)
	for i := range out {
		out[i] = int(r.random() * fn)
	}
	return out
}
