package bench

import (
	"encoding/json"
	"math"
	"os"
	"testing"
)

// TestNumpyStream pins the MT19937 + legacy gamma port to numpy 1.24's
// np.random.seed / np.random.gamma output (values printed by numpy).
func TestNumpyStream(t *testing.T) {
	if got := newNumpyRand(0).double(); got != 0.5488135039273248 {
		t.Fatalf("np.random.seed(0); random() = %v, want 0.5488135039273248", got)
	}
	want := map[float64][]float64{
		1.0: {0.04692680899768591, 0.3010121430917521, 0.13167456935454494, 0.09129425537759533, 0.01696248704623463},
		0.5: {0.014028030062619642, 0.0659018032842185, 0.002434181616550629, 0.0003373706002505809, 0.03757291395473922},
		2.0: {0.23936793898692366, 0.14944647302155875, 0.13822835843709536, 0.13823022943318006, 0.4649714412230651},
		0.1: {5.432296168160873e-06, 0.004416465755011473, 8.546039407159353e-10, 4.3705507666050615e-14, 0.0006159929448787459},
	}
	for shape, ws := range want {
		r := newNumpyRand(42)
		for i, w := range ws {
			if got := r.gamma(shape, 0.1); !closeRel(got, w, 1e-13) {
				t.Errorf("shape %v draw %d = %v, want %v", shape, i, got, w)
			}
		}
	}
}

func closeRel(a, b, tol float64) bool {
	return math.Abs(a-b) <= tol*math.Max(math.Abs(a), math.Abs(b))
}

// TestScheduleMatchesVLLM compares against offsets computed by vLLM's
// get_request arithmetic run under numpy (scripts/bench-numpy-golden.sh).
func TestScheduleMatchesVLLM(t *testing.T) {
	raw, err := os.ReadFile("testdata/numpy_schedules.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		N          int             `json:"n"`
		Rate       json.RawMessage `json:"rate"`
		Burstiness json.RawMessage `json:"burstiness"`
		Seed       int64           `json:"seed"`
		Ramp       string          `json:"ramp"`
		Start, End float64
		Offsets    []float64 `json:"offsets"`
	}
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	num := func(m json.RawMessage) float64 {
		if string(m) == `"inf"` {
			return math.Inf(1)
		}
		var f float64
		if err := json.Unmarshal(m, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	for _, c := range cases {
		o := ScheduleOptions{N: c.N, Rate: num(c.Rate), Burstiness: num(c.Burstiness), Seed: c.Seed,
			RampUpStrategy: c.Ramp, RampUpStartRPS: c.Start, RampUpEndRPS: c.End}
		got, err := ScheduleWith(o)
		if err != nil {
			t.Fatalf("%+v: %v", o, err)
		}
		if len(got) != len(c.Offsets) {
			t.Fatalf("%+v: %d offsets, want %d", o, len(got), len(c.Offsets))
		}
		for i := range got {
			if !closeRel(got[i], c.Offsets[i], 1e-12) {
				t.Errorf("%+v: offset %d = %v, want %v", o, i, got[i], c.Offsets[i])
			}
		}
	}
}

func TestScheduleShapes(t *testing.T) {
	if got := Schedule(5, math.Inf(1), 1, 0); len(got) != 5 || got[0] != 0 || got[4] != 0 {
		t.Errorf("rate inf: %v", got)
	}
	s := Schedule(1000, 10, 1, 1)
	if s[len(s)-1] != 100 {
		t.Errorf("rescaled end = %v, want n/rate = 100", s[len(s)-1])
	}
	for i := 1; i < len(s); i++ {
		if s[i] < s[i-1] {
			t.Fatalf("offsets not monotone at %d", i)
		}
	}
	c := Schedule(4, 2, math.Inf(1), 0)
	for i, w := range []float64{0.5, 1, 1.5, 2} {
		if math.Abs(c[i]-w) > 1e-12 {
			t.Errorf("constant rate offset %d = %v, want %v", i, c[i], w)
		}
	}
	for _, bad := range []ScheduleOptions{
		{N: 3, Rate: 0},
		{N: 3, Rate: 1, Burstiness: -1},
		{N: 3, Rate: math.Inf(1), RampUpStrategy: "sideways", RampUpStartRPS: 1, RampUpEndRPS: 2},
		{N: 3, Rate: math.Inf(1), RampUpStrategy: RampExponential, RampUpStartRPS: 0, RampUpEndRPS: 2},
		{N: 3, Rate: 5, RampUpStrategy: RampLinear, RampUpStartRPS: 1, RampUpEndRPS: 2},
		{N: 3, Rate: math.Inf(1), RampUpStrategy: RampLinear, RampUpStartRPS: 3, RampUpEndRPS: 2},
	} {
		if _, err := ScheduleWith(bad); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	if Schedule(3, -1, 1, 0) != nil {
		t.Error("Schedule with bad rate should return nil")
	}
}
