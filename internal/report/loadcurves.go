package report

import (
	"fmt"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/perflab/perflab/internal/loadsearch"
)

// Chart titles of max_load_under_slo.
const (
	chartLoadTTFT = "Throughput vs P99 TTFT across loads"
	chartLoadTPOT = "Throughput vs P99 TPOT across loads"
)

// LoadReport is max_load_under_slo's part of the report: the SLO and the
// measured curve of the baseline, the winner and every kept config.
type LoadReport struct {
	SLO       string  `json:"slo"`
	Axis      string  `json:"axis"`
	Unit      string  `json:"unit"`
	Tolerance float64 `json:"tolerance"`
	// Curves are the configs plotted, baseline first.
	Curves []LoadCurve `json:"curves"`
	// Searches counts every search the lab ran (repeats and configs not
	// plotted included) and PointsPerSearch their mean number of points.
	Searches        int     `json:"searches"`
	PointsPerSearch float64 `json:"points_per_search"`
}

// LoadCurve is one config's load search.
type LoadCurve struct {
	Name string `json:"name"`
	// Role is "baseline", "winner", "kept" or a combination.
	Role        string             `json:"role"`
	Sustainable float64            `json:"sustainable"`
	Found       bool               `json:"found"`
	Limit       string             `json:"limit,omitempty"`
	Points      []loadsearch.Point `json:"points"`
}

// At returns the point at the sustainable load.
func (c LoadCurve) At() (loadsearch.Point, bool) {
	for _, p := range c.Points {
		if c.Found && p.Load == c.Sustainable {
			return p, true
		}
	}
	return loadsearch.Point{}, false
}

// loadReport picks the searches of the baseline, the winner and each kept
// config (the search whose points hold the candidate's trial).
func loadReport(sum *Summary) *LoadReport {
	if sum.Load == nil || len(sum.LoadSearches) == 0 {
		return nil
	}
	lr := &LoadReport{SLO: sum.Load.SLO, Axis: nonEmpty(sum.Load.Axis, string(loadsearch.AxisRate)), Tolerance: sum.Load.Tolerance,
		Searches: len(sum.LoadSearches)}
	if lr.Tolerance == 0 {
		lr.Tolerance = loadsearch.DefaultTolerance
	}
	lr.Unit = loadsearch.Axis(lr.Axis).Unit()
	pts := 0
	byRef := map[string]int{}
	for i, s := range sum.LoadSearches {
		if s.Result == nil {
			continue
		}
		pts += len(s.Result.Points)
		for _, p := range s.Result.Points {
			byRef[p.Ref] = i
		}
	}
	lr.PointsPerSearch = float64(pts) / float64(len(sum.LoadSearches))
	at := map[int]int{} // search → curve
	add := func(c *SummaryCandidate, role string) {
		if c == nil {
			return
		}
		i, ok := byRef[c.TrialKey]
		if !ok {
			return
		}
		if j, ok := at[i]; ok {
			if !strings.Contains(lr.Curves[j].Role, role) {
				lr.Curves[j].Role += ", " + role
			}
			return
		}
		s := sum.LoadSearches[i]
		at[i] = len(lr.Curves)
		lr.Curves = append(lr.Curves, LoadCurve{Name: nonEmpty(c.Name, s.Name), Role: role, Sustainable: s.Result.Sustainable,
			Found: s.Result.Found, Limit: s.Result.Limit, Points: s.Result.Points})
	}
	add(sum.Baseline, "baseline")
	add(sum.Winner, "winner")
	for _, st := range sum.Stages {
		for i := range st.Candidates {
			if st.Candidates[i].Decision == "kept" {
				add(&st.Candidates[i], "kept")
			}
		}
	}
	if sum.Joint != nil {
		for i := range sum.Joint.Tried {
			if sum.Joint.Tried[i].Decision == "kept" {
				add(&sum.Joint.Tried[i], "kept")
			}
		}
	}
	return lr
}

var curvePalette = []color.RGBA{
	{R: 0x99, G: 0x99, B: 0x99, A: 0xff}, {R: 0x2c, G: 0x7f, B: 0xb8, A: 0xff}, {R: 0x1b, G: 0x9e, B: 0x77, A: 0xff},
	{R: 0x75, G: 0x70, B: 0xb3, A: 0xff}, {R: 0xe7, G: 0x29, B: 0x8a, A: 0xff}, {R: 0x66, G: 0xa6, B: 0x1e, A: 0xff},
	{R: 0xa6, G: 0x76, B: 0x1d, A: 0xff},
}

// loadChart plots each curve's total throughput against a latency figure
// (log scale: near saturation it grows by orders of magnitude), marks each
// sustainable load, the SLO's bound on that figure, the flagged points
// (hollow) and the frontier across configs.
func loadChart(r *Report, metric string) (*plot.Plot, error) {
	if r.Load == nil || len(r.Load.Curves) == 0 {
		return nil, nil
	}
	key := metric + "_p99"
	p := plot.New()
	p.X.Label.Text = fmt.Sprintf("P99 %s (ms, log scale)", strings.ToUpper(metric))
	p.Y.Label.Text = "Total token throughput (tok/s)"
	p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
	var all plotter.XYs
	flaggedLegend := false
	for i, c := range r.Load.Curves {
		col := curvePalette[i%len(curvePalette)]
		var line, flagged plotter.XYs
		for _, pt := range c.Points {
			x, ok := pt.Latencies[key]
			if !ok || !(x > 0) {
				continue
			}
			xy := plotter.XY{X: x, Y: pt.TotalThroughput}
			if pt.Scored() {
				line = append(line, xy)
				all = append(all, xy)
			} else {
				flagged = append(flagged, xy)
			}
		}
		if len(line) > 0 {
			l, s, err := plotter.NewLinePoints(line)
			if err != nil {
				return nil, fmt.Errorf("report: load chart: %w", err)
			}
			l.Color, l.Width = col, vg.Points(1.2)
			s.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = col, vg.Points(2), draw.CircleGlyph{}
			p.Add(l, s)
			p.Legend.Add(fmt.Sprintf("%s (%s)", c.Name, c.Role), l, s)
		}
		if len(flagged) > 0 {
			s, err := plotter.NewScatter(flagged)
			if err != nil {
				return nil, fmt.Errorf("report: load chart: %w", err)
			}
			s.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = col, vg.Points(3), draw.RingGlyph{}
			p.Add(s)
			if !flaggedLegend {
				p.Legend.Add("flagged: client fell behind (not scored)", s)
				flaggedLegend = true
			}
		}
		if at, ok := c.At(); ok {
			if x := at.Latencies[key]; x > 0 {
				s, _ := plotter.NewScatter(plotter.XYs{{X: x, Y: at.TotalThroughput}})
				s.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = col, vg.Points(6), draw.PyramidGlyph{}
				p.Add(s)
				lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: at.TotalThroughput}},
					Labels: []string{fmt.Sprintf("%.3g %s", c.Sustainable, shortUnit(r.Load.Axis))}})
				if err == nil {
					// Left of the triangle, clear of it: a curve comes up
					// steeply from the lower left (lighter loads) and runs
					// on to the right (heavier ones), and the SLO's bound
					// lies just right of the sustainable load, so its left
					// is where neither is. The label sat on the marker;
					// centred above it, it crossed the bound.
					lb.TextStyle[0].Color = col
					lb.TextStyle[0].XAlign, lb.TextStyle[0].YAlign = draw.XRight, draw.YCenter
					lb.Offset = vg.Point{X: -s.GlyphStyle.Radius - vg.Points(3)}
					p.Add(lb)
				}
			}
		}
	}
	if len(all) == 0 {
		return nil, nil
	}
	if front := latencyFrontier(all); len(front) > 1 {
		l, err := plotter.NewLine(front)
		if err != nil {
			return nil, fmt.Errorf("report: load frontier: %w", err)
		}
		l.Color, l.Width, l.Dashes = colFrontier, vg.Points(1.5), []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(l)
		p.Legend.Add("frontier across configs", l)
	}
	padRange(&p.Y, 0.08)
	if slo, err := loadsearch.ParseSLO(r.Load.SLO); err == nil {
		if bound, ok := slo.Bound(metric, 99); ok {
			l, err := plotter.NewLine(plotter.XYs{{X: bound, Y: p.Y.Min}, {X: bound, Y: p.Y.Max}})
			if err == nil {
				l.Color, l.Width, l.Dashes = color.RGBA{R: 0xcc, A: 0xff}, vg.Points(1.5), []vg.Length{vg.Points(2), vg.Points(2)}
				p.Add(l)
				p.Legend.Add(fmt.Sprintf("SLO: P99 %s <= %g ms", strings.ToUpper(metric), bound), l)
			}
			p.X.Min, p.X.Max = math.Min(p.X.Min, bound/1.5), math.Max(p.X.Max, bound*1.5)
		}
	}
	// Sans: the default serif face kerns a hyphen under a T's arm, which
	// at 8 points drew "TensorRT-LLM" as "TensorRFLLM".
	p.Legend.TextStyle.Font.Variant = "Sans"
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
}

func shortUnit(axis string) string {
	if axis == string(loadsearch.AxisConcurrency) {
		return "conc."
	}
	return "req/s"
}

// latencyFrontier keeps the points no other beats on both axes (lower
// latency, higher throughput), by latency.
func latencyFrontier(pts plotter.XYs) plotter.XYs {
	s := append(plotter.XYs(nil), pts...)
	sort.Slice(s, func(i, j int) bool { return s[i].X < s[j].X || s[i].X == s[j].X && s[i].Y > s[j].Y })
	var out plotter.XYs
	best := math.Inf(-1)
	for _, q := range s {
		if q.Y > best {
			out = append(out, q)
			best = q.Y
		}
	}
	return out
}

// writeLoadSection is the Markdown of max_load_under_slo: each plotted
// config's sustainable load with its figures there, then every measured
// point, flagged ones marked.
func writeLoadSection(p func(string, ...any), r *Report) {
	lr := r.Load
	if lr == nil {
		return
	}
	p("## Load within the SLO\n\n")
	p("Each configuration was scored by the highest %s at which it meets `%s`: a doubling bracket, then bisection to %.0f%%. %d searches measured %.2f points each on average. A point where the client fell behind the offered schedule by more than 1%%, or where a concurrency cap closed the loop, is flagged and not scored.\n\n",
		lr.Axis+" ("+lr.Unit+")", lr.SLO, 100*lr.Tolerance, lr.Searches, lr.PointsPerSearch)
	for _, c := range r.Charts {
		if c.Title == chartLoadTTFT || c.Title == chartLoadTPOT {
			p("![%s](%s)\n\n", c.Title, c.PNG)
		}
	}
	p("| Configuration | Role | Sustainable load (%s) | Points | Total TPS there | P99 TTFT (ms) | P99 TPOT (ms) | Offered / achieved req/s | Note |\n|---|---|---|---|---|---|---|---|---|\n", lr.Unit)
	for _, c := range lr.Curves {
		at, ok := c.At()
		if !ok {
			p("| %s | %s | none | %d | - | - | - | - | %s |\n", c.Name, c.Role, len(c.Points), nonEmpty(c.Limit, "no load met the SLO"))
			continue
		}
		p("| %s | %s | %.4g | %d | %.2f | %.1f | %.2f | %s | %s |\n", c.Name, c.Role, c.Sustainable, len(c.Points), at.TotalThroughput,
			at.Latencies["ttft_p99"], at.Latencies["tpot_p99"], offeredCell(at), c.Limit)
	}
	p("\n")
	for _, c := range lr.Curves {
		p("#### Curve: %s\n\n| Load | Offered / achieved req/s | Dispatch lag p99 (ms) | Requests counted (warm-up) | Requests sent, seconds | Total TPS | P99 TTFT (ms) | P99 TPOT (ms) | Verdict |\n|---|---|---|---|---|---|---|---|---|\n", c.Name)
		for _, pt := range c.Points {
			v := "meets"
			switch {
			case !pt.Scored():
				v = "**flagged, not scored**: " + pt.Flag
			case !pt.Meets:
				v = "breaks: " + pt.Why
			}
			if c.Found && pt.Load == c.Sustainable {
				v += " (sustainable)"
			}
			p("| %.4g | %s | %.2f | %d (%d) | %d, %.1f s | %.2f | %.1f | %.2f | %s |\n", pt.Load, offeredCell(pt), pt.DispatchLagP99Ms, pt.Completed, pt.Warmup,
				pt.Requests, pt.Seconds, pt.TotalThroughput, pt.Latencies["ttft_p99"], pt.Latencies["tpot_p99"], v)
		}
		p("\n")
	}
}

func offeredCell(pt loadsearch.Point) string {
	if pt.OfferedRate == 0 {
		return "closed loop"
	}
	return fmt.Sprintf("%.4g / %.4g", pt.OfferedRate, pt.AchievedRate)
}

// logTicks labels 1, 2 and 5 of every decade: plot.LogTicks labels only
// the powers of ten, often one or none on a latency axis.
type logTicks struct{}

func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	var out []plot.Tick
	for e := math.Floor(math.Log10(lo)); e <= math.Ceil(math.Log10(hi)); e++ {
		for m := 1.0; m < 10; m++ {
			v := m * math.Pow(10, e)
			if v < lo || v > hi {
				continue
			}
			t := plot.Tick{Value: v}
			if m == 1 || m == 2 || m == 5 || hi/lo < 10 {
				t.Label = strconv.FormatFloat(v, 'g', -1, 64)
			}
			out = append(out, t)
		}
	}
	return out
}
