package dataset

import "math/bits"

// npGenerator reproduces numpy.random.default_rng(seed): SeedSequence
// entropy mixing, a PCG64 (XSL-RR 128/64) bit generator, and the bounded
// integer algorithm Generator.integers uses for int64 output. vLLM's random
// dataset draws all its lengths and offsets from it.
type npGenerator struct {
	hi, lo       uint64 // 128-bit LCG state
	incHi, incLo uint64 // 128-bit increment (odd)
	hasUint32    bool
	uinteger     uint32
}

// SeedSequence constants (numpy/random/bit_generator.pyx).
const (
	ssInitA    = 0x43b0d7e5
	ssMultA    = 0x931e8875
	ssInitB    = 0x8b51f9dd
	ssMultB    = 0x58f38ded
	ssMixMultL = 0xca01f9dd
	ssMixMultR = 0x4973f715
	ssXShift   = 16
	ssPoolSize = 4
)

// PCG64 default multiplier, 0x2360ED051FC65DA44385DF649FCCF645.
const (
	pcgMulHi = 0x2360ED051FC65DA4
	pcgMulLo = 0x4385DF649FCCF645
)

// seedSequenceState is SeedSequence(entropy=seed).generate_state(nWords, uint32).
func seedSequenceState(seed uint64, nWords int) []uint32 {
	entropy := []uint32{uint32(seed)}
	if hi := uint32(seed >> 32); hi != 0 {
		entropy = append(entropy, hi)
	}
	var pool [ssPoolSize]uint32
	hashConst := uint32(ssInitA)
	hashmix := func(v uint32) uint32 {
		v ^= hashConst
		hashConst *= ssMultA
		v *= hashConst
		v ^= v >> ssXShift
		return v
	}
	mix := func(x, y uint32) uint32 {
		r := ssMixMultL*x - ssMixMultR*y
		r ^= r >> ssXShift
		return r
	}
	for i := range pool {
		if i < len(entropy) {
			pool[i] = hashmix(entropy[i])
		} else {
			pool[i] = hashmix(0)
		}
	}
	for src := range pool {
		for dst := range pool {
			if src != dst {
				pool[dst] = mix(pool[dst], hashmix(pool[src]))
			}
		}
	}
	for src := ssPoolSize; src < len(entropy); src++ {
		for dst := range pool {
			pool[dst] = mix(pool[dst], hashmix(entropy[src]))
		}
	}
	out := make([]uint32, nWords)
	hc := uint32(ssInitB)
	for i := range out {
		v := pool[i%ssPoolSize]
		v ^= hc
		hc *= ssMultB
		v *= hc
		v ^= v >> ssXShift
		out[i] = v
	}
	return out
}

// newNPGenerator is numpy.random.default_rng(seed) for a non-negative seed.
func newNPGenerator(seed uint64) *npGenerator {
	w := seedSequenceState(seed, 8)
	u := func(i int) uint64 { return uint64(w[2*i]) | uint64(w[2*i+1])<<32 }
	// generate_state(4, uint64) viewed as [s_hi, s_lo, inc_hi, inc_lo].
	g := &npGenerator{}
	initHi, initLo := u(0), u(1)
	seqHi, seqLo := u(2), u(3)
	// pcg_setseq_128_srandom_r: inc = (initseq << 1) | 1.
	g.incHi = seqHi<<1 | seqLo>>63
	g.incLo = seqLo<<1 | 1
	g.step()
	var c uint64
	g.lo, c = bits.Add64(g.lo, initLo, 0)
	g.hi, _ = bits.Add64(g.hi, initHi, c)
	g.step()
	return g
}

func (g *npGenerator) step() {
	// state = state * mult + inc (mod 2**128)
	hi, lo := bits.Mul64(g.lo, pcgMulLo)
	hi += g.hi*pcgMulLo + g.lo*pcgMulHi
	var c uint64
	lo, c = bits.Add64(lo, g.incLo, 0)
	hi, _ = bits.Add64(hi, g.incHi, c)
	g.hi, g.lo = hi, lo
}

// next64 is pcg64_random_r: advance, then XSL-RR output.
func (g *npGenerator) next64() uint64 {
	g.step()
	return bits.RotateLeft64(g.hi^g.lo, -int(g.hi>>58))
}

// next32 is pcg64_next32: low half first, high half buffered for the next
// call (the buffer survives across Generator method calls).
func (g *npGenerator) next32() uint32 {
	if g.hasUint32 {
		g.hasUint32 = false
		return g.uinteger
	}
	n := g.next64()
	g.hasUint32 = true
	g.uinteger = uint32(n >> 32)
	return uint32(n)
}

// integers is Generator.integers(low, high, size=n) with the default int64
// dtype and endpoint=False: random_bounded_uint64_fill with use_masked=False,
// i.e. Lemire's method on 32-bit draws when the range fits in 32 bits.
func (g *npGenerator) integers(low, high int64, n int) []int64 {
	out := make([]int64, n)
	rng := uint64(high - 1 - low)
	off := low
	switch {
	case high-1 < low || rng == 0:
		for i := range out {
			out[i] = off
		}
	case rng <= 0xFFFFFFFF:
		if rng == 0xFFFFFFFF {
			for i := range out {
				out[i] = off + int64(g.next32())
			}
			return out
		}
		for i := range out {
			out[i] = off + int64(g.lemire32(uint32(rng)))
		}
	case rng == 0xFFFFFFFFFFFFFFFF:
		for i := range out {
			out[i] = off + int64(g.next64())
		}
	default:
		for i := range out {
			out[i] = off + int64(g.lemire64(rng))
		}
	}
	return out
}

func (g *npGenerator) lemire32(rng uint32) uint32 {
	excl := rng + 1
	m := uint64(g.next32()) * uint64(excl)
	left := uint32(m)
	if left < excl {
		threshold := (0xFFFFFFFF - rng) % excl
		for left < threshold {
			m = uint64(g.next32()) * uint64(excl)
			left = uint32(m)
		}
	}
	return uint32(m >> 32)
}

func (g *npGenerator) lemire64(rng uint64) uint64 {
	excl := rng + 1
	hi, lo := bits.Mul64(g.next64(), excl)
	if lo < excl {
		threshold := (0xFFFFFFFFFFFFFFFF - rng) % excl
		for lo < threshold {
			hi, lo = bits.Mul64(g.next64(), excl)
		}
	}
	return hi
}
