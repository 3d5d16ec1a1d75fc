package report

import (
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/perflab/perflab/internal/atomicfile"
)

// Chart titles; the Markdown writer places the first in the Conclusion.
const (
	chartBaselineVsOptimized = "Baseline vs optimized"
	chartStageGains          = "Throughput stage by stage"
	chartPareto              = "Throughput per GPU vs tokens/s per user"
	chartTPOTCDF             = "TPOT CDF (tuning workload)"
	chartTTFTCDF             = "TTFT CDF (tuning workload)"
)

var (
	colBaseline  = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	colOptimized = color.RGBA{R: 0x2c, G: 0x7f, B: 0xb8, A: 0xff}
	colTried     = color.RGBA{R: 0x9e, G: 0xca, B: 0xe1, A: 0xff}
	colFrontier  = color.RGBA{R: 0xd9, G: 0x5f, B: 0x02, A: 0xff}
)

// WriteCharts draws the report's charts into dir as PNG and SVG and records
// them in r.Charts (paths relative to dir).
func WriteCharts(r *Report, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: charts dir %s: %w", dir, err)
	}
	r.Charts = nil
	type maker struct {
		title, file string
		build       func(*Report) (*plot.Plot, error)
		// legendRight draws the legend in a band right of the plot,
		// where the plot's data cannot run under it.
		legendRight bool
	}
	for _, m := range []maker{
		{chartBaselineVsOptimized, "baseline-vs-optimized", baselineChart, false},
		{chartStageGains, "stage-gains", stageChart, false},
		{chartPareto, "pareto", paretoChart, false},
		{chartTPOTCDF, "tpot-cdf", func(r *Report) (*plot.Plot, error) {
			return cdfChart(r, "TPOT (ms)", func(c *Candidate) []float64 { return c.TPOTs })
		}, false},
		{chartTTFTCDF, "ttft-cdf", func(r *Report) (*plot.Plot, error) {
			return cdfChart(r, "TTFT (ms)", func(c *Candidate) []float64 { return c.TTFTs })
		}, false},
		{chartLoadTTFT, "load-ttft", func(r *Report) (*plot.Plot, error) { return loadChart(r, "ttft") }, true},
		{chartLoadTPOT, "load-tpot", func(r *Report) (*plot.Plot, error) { return loadChart(r, "tpot") }, true},
	} {
		p, err := m.build(r)
		if err != nil {
			return err
		}
		if p == nil {
			continue // nothing to draw (e.g. no per-request samples)
		}
		p.Title.Text = m.title
		c := Chart{Title: m.title, PNG: m.file + ".png", SVG: m.file + ".svg"}
		for _, f := range []string{c.PNG, c.SVG} {
			format := strings.TrimPrefix(filepath.Ext(f), ".")
			var wt io.WriterTo
			if m.legendRight {
				wt, err = legendRightOf(p, 24*vg.Centimeter, 11*vg.Centimeter, format)
			} else {
				wt, err = p.WriterTo(20*vg.Centimeter, 11*vg.Centimeter, format)
			}
			if err != nil {
				return fmt.Errorf("report: chart %s: %w", f, err)
			}
			if err := atomicfile.Write(filepath.Join(dir, f), 0o644, func(w io.Writer) error {
				_, err := wt.WriteTo(w)
				return err
			}); err != nil {
				return fmt.Errorf("report: chart %s: %w", f, err)
			}
		}
		r.Charts = append(r.Charts, c)
	}
	return nil
}

// legendRightOf draws p on a w×h canvas of the format with its legend in
// a band of its own right of the plot. gonum/plot draws a legend inside
// the data area, where on the load charts it sat on the curves and the
// SLO's bound, and its rows, spaced by the height of their capitals, ran
// into each other ("TensorRT-LLM" read "TensorRFLLM").
func legendRightOf(p *plot.Plot, w, h vg.Length, format string) (io.WriterTo, error) {
	c, err := draw.NewFormattedCanvas(w, h, format)
	if err != nil {
		return nil, err
	}
	drawLegendRight(p, draw.New(c))
	return c, nil
}

// drawLegendRight draws p on dc, its legend in a band right of the plot.
func drawLegendRight(p *plot.Plot, dc draw.Canvas) {
	leg := p.Legend
	leg.Top, leg.Left = true, true
	// A row as high as the font's full height: descenders and brackets
	// of one row clear the capitals of the next.
	ext := leg.TextStyle.FontExtents()
	leg.Padding = ext.Height - leg.TextStyle.Rectangle("T").Max.Y
	gap := vg.Points(8)
	band := leg.Rectangle(dc).Size().X + 2*gap
	p.Legend = plot.NewLegend() // drawn here, not over the data
	defer func() { p.Legend = leg }()
	p.Draw(draw.Crop(dc, 0, -band, 0, 0))
	// Below the title, level with the top of the data area.
	top := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding + gap
	leg.Draw(draw.Crop(dc, dc.Size().X-band+gap, 0, 0, -top))
}

func baselineChart(r *Report) (*plot.Plot, error) {
	var names []string
	var caseIdx []int
	var base, opt plotter.Values
	for ci, c := range r.Cases {
		if c.Baseline == nil || c.Optimized == nil {
			continue
		}
		names = append(names, c.Workload)
		caseIdx = append(caseIdx, ci)
		base = append(base, c.Baseline.Metrics.TotalTPS)
		opt = append(opt, c.Optimized.Metrics.TotalTPS)
	}
	if len(names) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.Y.Label.Text = "Total token throughput (tok/s)"
	w := barWidth(len(names), 2)
	b1, err := plotter.NewBarChart(base, w)
	if err != nil {
		return nil, fmt.Errorf("report: baseline chart: %w", err)
	}
	b1.Color, b1.LineStyle.Width, b1.Offset = colBaseline, 0, -w/2
	b2, err := plotter.NewBarChart(opt, w)
	if err != nil {
		return nil, fmt.Errorf("report: baseline chart: %w", err)
	}
	b2.Color, b2.LineStyle.Width, b2.Offset = colOptimized, 0, w/2
	p.Add(b1, b2)
	p.Legend.Add("baseline (vLLM defaults)", b1)
	p.Legend.Add("optimized", b2)
	p.Legend.Top = true
	p.NominalX(names...)
	// Label each optimized bar with its change.
	labels := make([]string, len(names))
	pts := make(plotter.XYs, len(names))
	for i := range names {
		labels[i] = pctOf(rel(base[i], opt[i]))
		if c := r.Cases[caseIdx[i]]; c.Baseline.Status != "ok" || c.Optimized.Status != "ok" {
			labels[i] = "failed"
		}
		pts[i].X, pts[i].Y = float64(i), math.Max(base[i], opt[i])*1.03
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
	if err != nil {
		return nil, fmt.Errorf("report: baseline chart labels: %w", err)
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign = -0.5
	}
	p.Add(lab)
	p.Legend.Left = true
	padNominal(p, len(names))
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.15
	return p, nil
}

func stageChart(r *Report) (*plot.Plot, error) {
	if r.Baseline == nil || len(r.Stages) == 0 {
		return nil, nil
	}
	names := []string{"baseline"}
	vals := plotter.Values{r.Baseline.Metrics.TotalTPS}
	for _, st := range r.Stages {
		// A stage that ran nothing has no bar: drawn, it read as a stage
		// that ran and gained 0%.
		if st.Winner == nil || st.Skipped != "" {
			continue
		}
		names = append(names, st.Name)
		vals = append(vals, st.Winner.Metrics.TotalTPS)
	}
	if r.Search.tookLead() && r.Recommended != nil {
		names = append(names, "joint search")
		vals = append(vals, r.Recommended.Metrics.TotalTPS)
	}
	p := plot.New()
	p.Y.Label.Text = "Incumbent Total TPS after the stage"
	bars, err := plotter.NewBarChart(vals, barWidth(len(vals), 1))
	if err != nil {
		return nil, fmt.Errorf("report: stage chart: %w", err)
	}
	bars.Color, bars.LineStyle.Width = colOptimized, 0
	p.Add(bars)
	p.NominalX(names...)
	pts := make(plotter.XYs, len(vals))
	labels := make([]string, len(vals))
	for i, v := range vals {
		pts[i] = plotter.XY{X: float64(i), Y: v * 1.02}
		labels[i] = fmt.Sprintf("%.0f", v)
		if i > 0 {
			labels[i] += " (" + pctOf(rel(vals[0], v)) + ")"
		}
	}
	lab, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: labels})
	if err != nil {
		return nil, fmt.Errorf("report: stage chart labels: %w", err)
	}
	for i := range lab.TextStyle {
		lab.TextStyle[i].XAlign = -0.5
	}
	p.Add(lab)
	padNominal(p, len(vals))
	p.Y.Min, p.Y.Max = 0, p.Y.Max*1.12
	return p, nil
}

func paretoChart(r *Report) (*plot.Plot, error) {
	var pts plotter.XYs
	tried := r.Tried
	if r.Baseline != nil {
		tried = append([]Candidate{*r.Baseline}, tried...)
	}
	for _, c := range tried {
		if c.Status != "ok" || c.Metrics.TokensPerUser == 0 {
			continue
		}
		pts = append(pts, plotter.XY{X: c.Metrics.TokensPerUser, Y: c.Metrics.TPSPerGPU})
	}
	if len(pts) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.X.Label.Text = "Tokens/s per user (1000 / mean TPOT)"
	p.Y.Label.Text = "Total TPS per GPU"
	sc, err := plotter.NewScatter(pts)
	if err != nil {
		return nil, fmt.Errorf("report: pareto chart: %w", err)
	}
	sc.Color = colTried
	sc.GlyphStyle.Radius = vg.Points(3.5)
	sc.GlyphStyle.Shape = draw.CircleGlyph{}
	p.Add(sc)
	p.Legend.Add("configurations tried", sc)
	if front := frontier(pts); len(front) > 1 {
		l, err := plotter.NewLine(front)
		if err != nil {
			return nil, fmt.Errorf("report: pareto frontier: %w", err)
		}
		l.Color, l.Width = colFrontier, vg.Points(1.5)
		p.Add(l)
		p.Legend.Add("Pareto frontier", l)
	}
	if r.Recommended != nil && r.Recommended.Metrics.TokensPerUser > 0 {
		w, _ := plotter.NewScatter(plotter.XYs{{X: r.Recommended.Metrics.TokensPerUser, Y: r.Recommended.Metrics.TPSPerGPU}})
		w.Color, w.GlyphStyle.Radius, w.GlyphStyle.Shape = colOptimized, vg.Points(5), draw.CircleGlyph{}
		p.Add(w)
		p.Legend.Add("recommended", w)
	}
	// The legend gets a band of its own below the lowest point, so that no
	// point can sit under it (a slow baseline lies bottom left, where the
	// trade-off's empty corner usually is).
	p.Legend.Top, p.Legend.Left = false, true
	padRange(&p.X, 0.08)
	padRange(&p.Y, 0.08)
	reserveLegendBand(p, pts, 3)
	return p, nil
}

// reserveLegendBand lowers the y axis so that a bottom legend of n entries
// sits in a band that holds no point of pts.
func reserveLegendBand(p *plot.Plot, pts plotter.XYs, n int) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, q := range pts {
		lo, hi = math.Min(lo, q.Y), math.Max(hi, q.Y)
	}
	span := hi - lo
	if span <= 0 {
		span = math.Max(math.Abs(hi), 1)
	}
	// Each legend entry takes about 7% of the plot's height.
	band := 0.07 * float64(n+1)
	p.Y.Min = lo - span*band/(1-band)
	p.Y.Max = math.Max(p.Y.Max, hi+0.05*span)
}

// barWidth sizes bars so that groups of k bars fill about 60% of each of n
// category slots on the chart's 20 cm width.
func barWidth(n, k int) vg.Length {
	w := 0.6 * 17 * vg.Centimeter / vg.Length(max(n, 1)*k)
	return min(w, vg.Points(60))
}

// padNominal leaves half a slot of room left and right of n categories.
func padNominal(p *plot.Plot, n int) {
	p.X.Min, p.X.Max = -0.6, float64(n)-0.4
}

// padRange widens an axis by frac of its span on each side, so points are
// not drawn on the frame.
func padRange(a *plot.Axis, frac float64) {
	span := a.Max - a.Min
	if span == 0 {
		span = math.Max(math.Abs(a.Max), 1)
	}
	a.Min -= frac * span
	a.Max += frac * span
}

// frontier returns the points not dominated in both coordinates (more is
// better in both), sorted by X.
func frontier(pts plotter.XYs) plotter.XYs {
	s := append(plotter.XYs(nil), pts...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].X != s[j].X {
			return s[i].X > s[j].X
		}
		return s[i].Y > s[j].Y
	})
	var out plotter.XYs
	best := -1.0
	for _, q := range s {
		if q.Y > best {
			out = append(out, q)
			best = q.Y
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].X < out[j].X })
	return out
}

// cdfChart draws the baseline's and the winner's distribution of one
// latency; samples are per-request values or evenly spaced quantiles, and
// either reads as an empirical CDF.
func cdfChart(r *Report, label string, samples func(*Candidate) []float64) (*plot.Plot, error) {
	type series struct {
		name string
		xs   []float64
	}
	var ss []series
	if r.Baseline != nil && len(samples(r.Baseline)) > 0 {
		ss = append(ss, series{"baseline", samples(r.Baseline)})
	}
	if r.Recommended != nil && len(samples(r.Recommended)) > 0 {
		ss = append(ss, series{"optimized", samples(r.Recommended)})
	}
	if len(ss) == 0 {
		return nil, nil
	}
	p := plot.New()
	p.X.Label.Text = label
	p.Y.Label.Text = "share of requests"
	for _, s := range ss {
		xs := append([]float64(nil), s.xs...)
		sort.Float64s(xs)
		pts := make(plotter.XYs, len(xs))
		for j, x := range xs {
			pts[j] = plotter.XY{X: x, Y: float64(j) / float64(max(len(xs)-1, 1))}
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return nil, fmt.Errorf("report: cdf chart: %w", err)
		}
		l.Color = colBaseline
		if s.name == "optimized" {
			l.Color = colOptimized
		}
		l.Width = vg.Points(1.5)
		p.Add(l)
		p.Legend.Add(s.name, l)
	}
	// CDFs climb from bottom left to top right: the bottom right is free.
	p.Legend.Top, p.Legend.Left = false, false
	padRange(&p.X, 0.05)
	p.Y.Min, p.Y.Max = 0, 1.02
	return p, nil
}
