package loadsearch

import (
	"reflect"
	"strings"
	"testing"
)

func TestParseSLO(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    SLO
		wantErr string
	}{
		{in: "ttft_p99<=200ms,tpot_p99<=30ms,success>=99%", want: SLO{Bounds: []Bound{{"ttft", 99, 200}, {"tpot", 99, 30}}, MinSuccess: 0.99}},
		{in: " e2e_p50<=2s , itl_p95<=500us", want: SLO{Bounds: []Bound{{"e2el", 50, 2000}, {"itl", 95, 0.5}}}},
		{in: "TTFT_p90<=150,success>=0.995", want: SLO{Bounds: []Bound{{"ttft", 90, 150}}, MinSuccess: 0.995}},
		{in: "", wantErr: "empty"},
		{in: "ttft_p99<200ms", wantErr: "want METRIC_pNN<=VALUE"},
		{in: "ttft_p98<=200ms", wantErr: "want p50, p90, p95 or p99"},
		{in: "ttft_p099<=200ms", wantErr: "want p50, p90, p95 or p99"},
		{in: "foo_p99<=200ms", wantErr: `unknown metric "foo"`},
		{in: "ttft<=200ms", wantErr: "want METRIC_pNN"},
		{in: "ttft_p99<=-1ms", wantErr: "positive duration"},
		{in: "ttft_p99<=fast", wantErr: "positive duration"},
		{in: "success>=101%", wantErr: "within 0% and 100%"},
		{in: "ttft_p99>=1ms", wantErr: "only success takes >="},
		{in: "ttft_p99<=1ms,ttft_p99<=2ms", wantErr: "given twice"},
		{in: "success>=90%,success>=91%", wantErr: "given twice"},
	} {
		got, err := ParseSLO(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("ParseSLO(%q) error %v, want it to contain %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseSLO(%q): %v", tc.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSLO(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
		back, err := ParseSLO(got.String())
		if err != nil || !reflect.DeepEqual(back, got) {
			t.Errorf("round trip of %q through %q: %+v, %v", tc.in, got.String(), back, err)
		}
	}
}

func TestMinRequests(t *testing.T) {
	for _, tc := range []struct {
		slo  string
		want int
	}{
		{"ttft_p99<=1s", 500}, {"ttft_p95<=1s,tpot_p50<=1ms", 100}, {"e2el_p90<=1s", 50}, {"itl_p50<=1s", 10}, {"success>=99%", 10},
	} {
		s, err := ParseSLO(tc.slo)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.MinRequests(); got != tc.want {
			t.Errorf("%s: MinRequests = %d, want %d", tc.slo, got, tc.want)
		}
	}
}

func TestCheck(t *testing.T) {
	s, _ := ParseSLO("ttft_p99<=200ms,tpot_p99<=30ms,success>=99%")
	p := Point{SuccessRate: 1, Latencies: map[string]float64{"ttft_p99": 150, "tpot_p99": 30}}
	if ok, why := s.Check(p); !ok {
		t.Errorf("a point on the bound should meet it: %s", why)
	}
	p.Latencies["tpot_p99"] = 30.1
	if ok, why := s.Check(p); ok || !strings.Contains(why, "tpot p99") {
		t.Errorf("tpot over the bound: ok=%v why=%q", ok, why)
	}
	p.Latencies["tpot_p99"] = 10
	p.SuccessRate = 0.98
	if ok, why := s.Check(p); ok || !strings.Contains(why, "success") {
		t.Errorf("low success: ok=%v why=%q", ok, why)
	}
	delete(p.Latencies, "ttft_p99")
	p.SuccessRate = 1
	if ok, why := s.Check(p); ok || !strings.Contains(why, "no ttft p99") {
		t.Errorf("a missing figure must not pass: ok=%v why=%q", ok, why)
	}
}

func FuzzParseSLO(f *testing.F) {
	for _, s := range []string{"ttft_p99<=200ms,tpot_p99<=30ms,success>=99%", "e2e_p50<=2s", "itl_p95<=500us,success>=0.5",
		"ttft_p99<=", "<=,>=", "success>=%", "ttft_p99<=1e309ms", "tpot_p90<=NaNms"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		s, err := ParseSLO(in)
		if err != nil {
			return
		}
		back, err := ParseSLO(s.String())
		if err != nil {
			t.Fatalf("String() of a parsed SLO does not parse: %q: %v", s.String(), err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("round trip changed %+v to %+v", s, back)
		}
		for _, b := range s.Bounds {
			if !(b.MaxMs > 0) {
				t.Fatalf("bound %+v not positive", b)
			}
		}
		if s.MinSuccess < 0 || s.MinSuccess > 1 {
			t.Fatalf("success %v out of range", s.MinSuccess)
		}
	})
}
