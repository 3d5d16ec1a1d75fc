// Package mt19937 is the Mersenne Twister that CPython's random module and
// numpy's legacy RandomState share, with both of their seeding routines.
// perflab reproduces vLLM's Python-side random choices bit for bit (dataset
// sampling with random.shuffle, request pacing with np.random.gamma), and
// both start from this one generator.
package mt19937

const (
	n         = 624
	m         = 397
	matrixA   = 0x9908b0df
	upperMask = 0x80000000
	lowerMask = 0x7fffffff
)

// MT is one generator state. The zero value is unseeded: call InitGenrand or
// InitByArray first.
type MT struct {
	mt  [n]uint32
	mti int
}

// InitGenrand seeds from one 32-bit word (numpy's np.random.seed(int)).
func (r *MT) InitGenrand(s uint32) {
	r.mt[0] = s
	for i := 1; i < n; i++ {
		r.mt[i] = 1812433253*(r.mt[i-1]^(r.mt[i-1]>>30)) + uint32(i)
	}
	r.mti = n
}

// InitByArray seeds from a key of 32-bit words (CPython's random.seed(int),
// which splits abs(seed) into little-endian words).
func (r *MT) InitByArray(key []uint32) {
	r.InitGenrand(19650218)
	i, j := 1, 0
	for k := max(n, len(key)); k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1664525)) + key[j] + uint32(j)
		i++
		j++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
		if j >= len(key) {
			j = 0
		}
	}
	for k := n - 1; k > 0; k-- {
		r.mt[i] = (r.mt[i] ^ ((r.mt[i-1] ^ (r.mt[i-1] >> 30)) * 1566083941)) - uint32(i)
		i++
		if i >= n {
			r.mt[0] = r.mt[n-1]
			i = 1
		}
	}
	r.mt[0] = 0x80000000
}

// Uint32 is genrand_uint32: the next tempered 32-bit output.
func (r *MT) Uint32() uint32 {
	if r.mti >= n {
		var kk int
		for kk = 0; kk < n-m; kk++ {
			y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
			r.mt[kk] = r.mt[kk+m] ^ (y >> 1) ^ (matrixA * (y & 1))
		}
		for ; kk < n-1; kk++ {
			y := (r.mt[kk] & upperMask) | (r.mt[kk+1] & lowerMask)
			r.mt[kk] = r.mt[kk+(m-n)] ^ (y >> 1) ^ (matrixA * (y & 1))
		}
		y := (r.mt[n-1] & upperMask) | (r.mt[0] & lowerMask)
		r.mt[n-1] = r.mt[m-1] ^ (y >> 1) ^ (matrixA * (y & 1))
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

// Float53 is a double in [0, 1) from two draws with 53 random bits, the way
// both random.random() and numpy's legacy random_sample make it.
func (r *MT) Float53() float64 {
	a := r.Uint32() >> 5
	b := r.Uint32() >> 6
	return (float64(a)*67108864.0 + float64(b)) / 9007199254740992.0
}
