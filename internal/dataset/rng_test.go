package dataset

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

type rngGolden struct {
	Python []struct {
		Seed          int64    `json:"seed"`
		Getrandbits32 []uint32 `json:"getrandbits32"`
		Random        []string `json:"random"`
		Shuffle50     []int    `json:"shuffle50"`
		Choice1000    []int    `json:"choice_1000"`
		Choices7K10   []int    `json:"choices_7_k10"`
		Choices941K59 []int    `json:"choices_941_k59"`
		Shuffle3      []int    `json:"shuffle3"`
	} `json:"python"`
	Numpy []struct {
		Seed     uint64 `json:"seed"`
		Integers []struct {
			Low, High int64
			N         int
			Values    []int64
		} `json:"integers"`
	} `json:"numpy"`
}

func loadRNGGolden(t *testing.T) rngGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "rng.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g rngGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Python) == 0 || len(g.Numpy) == 0 {
		t.Fatal("empty rng golden")
	}
	return g
}

func shuffled(r *pyRandom, n int) []int {
	xs := make([]int, n)
	for i := range xs {
		xs[i] = i
	}
	r.shuffle(n, func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	return xs
}

func TestPyRandomMatchesCPython(t *testing.T) {
	g := loadRNGGolden(t)
	for _, c := range g.Python {
		t.Run(strconv.FormatInt(c.Seed, 10), func(t *testing.T) {
			r := newPyRandom(c.Seed)
			var got []uint32
			for range c.Getrandbits32 {
				got = append(got, r.getrandbits(32))
			}
			if !slices.Equal(got, c.Getrandbits32) {
				t.Fatalf("getrandbits(32) = %v, want %v", got, c.Getrandbits32)
			}
			for i, want := range c.Random {
				wf, err := strconv.ParseFloat(want, 64)
				if err != nil {
					t.Fatal(err)
				}
				if v := r.random(); v != wf {
					t.Fatalf("random()[%d] = %v, want %v", i, v, wf)
				}
			}
			if s := shuffled(r, 50); !slices.Equal(s, c.Shuffle50) {
				t.Fatalf("shuffle(50) = %v, want %v", s, c.Shuffle50)
			}
			var ch []int
			for range c.Choice1000 {
				ch = append(ch, r.choice(1000))
			}
			if !slices.Equal(ch, c.Choice1000) {
				t.Fatalf("choice = %v, want %v", ch, c.Choice1000)
			}
			if v := r.choices(7, 10); !slices.Equal(v, c.Choices7K10) {
				t.Fatalf("choices(7,k=10) = %v, want %v", v, c.Choices7K10)
			}
			if v := r.choices(941, 59); !slices.Equal(v, c.Choices941K59) {
				t.Fatalf("choices(941,k=59) = %v, want %v", v, c.Choices941K59)
			}
			if s := shuffled(r, 3); !slices.Equal(s, c.Shuffle3) {
				t.Fatalf("shuffle(3) = %v, want %v", s, c.Shuffle3)
			}
		})
	}
}

func TestNPGeneratorMatchesNumpy(t *testing.T) {
	g := loadRNGGolden(t)
	for _, c := range g.Numpy {
		t.Run(strconv.FormatUint(c.Seed, 10), func(t *testing.T) {
			r := newNPGenerator(c.Seed)
			for i, call := range c.Integers {
				got := r.integers(call.Low, call.High, call.N)
				if !slices.Equal(got, call.Values) {
					t.Fatalf("call %d integers(%d, %d, size=%d) = %v, want %v",
						i, call.Low, call.High, call.N, got, call.Values)
				}
			}
		})
	}
}
