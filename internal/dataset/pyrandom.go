package dataset

import "math/bits"

// pyRandom reproduces CPython's random.Random (MT19937) closely enough that a
// seeded sequence of shuffle/choice/choices/random calls yields the same
// values as Python does. vLLM's ShareGPT and custom samplers use the global
// random module, so matching it bit for bit is what makes "same seed, same
// conversations" hold.
type pyRandom struct {
	mt  [624]uint32
	mti int
}

const (
	mtN         = 624
	mtM         = 397
	mtMatrixA   = 0x9908b0df
	mtUpperMask = 0x80000000
	mtLowerMask = 0x7fffffff
)

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
	r.initByArray(key)
	return r
}

func (r *pyRandom) initGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < mtN; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = mtN
}

func (r *pyRandom) initByArray(key []uint32) {
	r.initGenrand(19650218)
	i, j := 1, 0
	k := max(mtN, len(key))
	for ; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k = mtN - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= mtN {
			r.mt[0] = r.mt[mtN-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// uint32 is genrand_uint32.
func (r *pyRandom) uint32() uint32 {
	if r.mti >= mtN {
		var kk int
		for kk = 0; kk < mtN-mtM; kk++ {
			y := (r.mt[kk] & mtUpperMask) | (r.mt[kk+1] & mtLowerMask)
			r.mt[kk] = r.mt[kk+mtM] ^ (y >> 1) ^ (mtMatrixA * (y & 1))
		}
		for ; kk < mtN-1; kk++ {
			y := (r.mt[kk] & mtUpperMask) | (r.mt[kk+1] & mtLowerMask)
			r.mt[kk] = r.mt[kk+(mtM-mtN)] ^ (y >> 1) ^ (mtMatrixA * (y & 1))
		}
		y := (r.mt[mtN-1] & mtUpperMask) | (r.mt[0] & mtLowerMask)
		r.mt[mtN-1] = r.mt[mtM-1] ^ (y >> 1) ^ (mtMatrixA * (y & 1))
		r.mti = 0
	}
	y := r.mt[r.mti]
	r.mti++
	y ^= y >> 11
	y ^= (y << 7) & 0x9d2c5680
	y ^= (y << 15) & 0xefc60000
	y ^= y >> 18
	return y
}

// random is random.random(): 53 bits from two draws.
func (r *pyRandom) random() float64 {
	a := r.uint32() >> 5
	b := r.uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) * (1.0 / 9007199254740992.0)
}

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
