package report

import (
	"image"
	"image/color"
	"strings"
	"testing"

	"gonum.org/v1/plot/text"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/recorder"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/perflab/perflab/internal/loadsearch"
)

// hyphenClearOfT draws "T" and "T-" in sty as the PNG charts are drawn
// (96 dpi) and says whether the hyphen (the pixels the second drawing
// inked and the first did not) has a blank pixel left of it in some row:
// the serif face kerns the hyphen under the T's arm, against its stem, and
// at 8 points the pair drew an F.
func hyphenClearOfT(sty text.Style) bool {
	draws := func(s string) image.Image {
		c := vgimg.NewWith(vgimg.UseWH(12*vg.Millimeter, 6*vg.Millimeter), vgimg.UseDPI(96), vgimg.UseBackgroundColor(color.White))
		sty.Color = color.Black
		dc := draw.New(c)
		dc.FillText(sty, vg.Point{X: vg.Millimeter, Y: vg.Millimeter}, s)
		return c.Image()
	}
	lum := func(img image.Image, x, y int) uint32 { r, _, _, _ := img.At(x, y).RGBA(); return r }
	t, th := draws("T"), draws("T-")
	b := th.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X + 1; x < b.Max.X; x++ {
			if lum(th, x, y) < lum(t, x, y) { // the hyphen's leftmost pixel in this row
				if lum(th, x-1, y) >= 0xf000 {
					return true
				}
				break
			}
		}
	}
	return false
}

// loadChartReport is the 14B SLO example's three curves as its report
// drew them (docs/img/qwen3-14b-h100-slo-load-ttft.png): the names, the
// loads and figures near the run's.
func loadChartReport() *Report {
	curve := func(name, role string, sust float64, pts [][3]float64) LoadCurve {
		c := LoadCurve{Name: name, Role: role, Sustainable: sust, Found: true}
		for _, p := range pts {
			c.Points = append(c.Points, loadsearch.Point{Load: p[0], TotalThroughput: p[1],
				Latencies: map[string]float64{"ttft_p99": p[2], "tpot_p99": p[2] / 20}})
		}
		return c
	}
	return &Report{Load: &LoadReport{SLO: "ttft_p99<=2s,tpot_p99<=50ms,success>=99%", Axis: "rate", Unit: "req/s", Tolerance: 0.05,
		Curves: []LoadCurve{
			curve("vLLM", "baseline", 12, [][3]float64{{2, 400, 93}, {4, 800, 103}, {8, 1600, 117}, {12, 4100, 197}, {13, 4300, 220}, {14, 4600, 250}, {15, 4900, 270}}),
			curve("TensorRT-LLM + FP8", "winner, kept", 26, [][3]float64{{2, 400, 62}, {4, 800, 64}, {8, 1600, 72}, {16, 3200, 90}, {24, 5900, 140}, {26, 8000, 280}, {27, 7800, 310}, {28, 7800, 400}}),
			curve("TensorRT-LLM", "kept", 20, [][3]float64{{2, 400, 82}, {4, 800, 84}, {8, 1600, 92}, {16, 3000, 130}, {20, 6100, 250}, {21, 6000, 300}, {22, 6100, 330}, {24, 6200, 520}}),
		}}}
}

// The load chart's legend sits right of the data, its rows apart, and each
// sustainable load's label clear of its triangle: the legend used to sit on
// the curves with rows spaced by the height of their capitals (the
// brackets of one row ran into the next: "TensorRT-LLM" read
// "TensorRFLLM"), and the labels started on their markers.
func TestLoadChartLegendAndLabels(t *testing.T) {
	for _, metric := range []string{"ttft", "tpot"} {
		p, err := loadChart(loadChartReport(), metric)
		if err != nil || p == nil {
			t.Fatalf("%s: %v, %v", metric, p, err)
		}
		legend := map[string]bool{}
		for _, e := range []string{"vLLM (baseline)", "TensorRT-LLM + FP8 (winner, kept)", "TensorRT-LLM (kept)", "frontier across configs"} {
			legend[e] = true
		}
		sty := p.Legend.TextStyle
		if !hyphenClearOfT(sty) {
			t.Errorf("%s: in the legend's font (%s %s, %v) the hyphen of \"T-\" touches the T: \"TensorRT-LLM\" reads \"TensorRFLLM\"", metric, sty.Font.Typeface, sty.Font.Variant, sty.Font.Size)
		}
		rec := &recorder.Canvas{}
		drawLegendRight(p, draw.NewCanvas(rec, 24*vg.Centimeter, 11*vg.Centimeter))

		var axisEnd vg.Length // the right end of the x axis: the data area's
		var rows []vg.Length
		var labels []*recorder.FillString
		var triangles []vg.Rectangle
		for _, a := range rec.Actions {
			switch a := a.(type) {
			case *recorder.Stroke:
				if len(a.Path) == 2 && a.Path[0].Pos.Y == a.Path[1].Pos.Y {
					if l := a.Path[1].Pos.X - a.Path[0].Pos.X; l > 0 && a.Path[1].Pos.X > axisEnd && l > 5*vg.Centimeter {
						axisEnd = a.Path[1].Pos.X
					}
				}
			case *recorder.Fill:
				// A pyramid glyph: move, two lines, close.
				if len(a.Path) == 4 && a.Path[3].Type == vg.CloseComp {
					r := vg.Rectangle{Min: a.Path[0].Pos, Max: a.Path[0].Pos}
					for _, c := range a.Path[:3] {
						r.Min.X, r.Min.Y = min(r.Min.X, c.Pos.X), min(r.Min.Y, c.Pos.Y)
						r.Max.X, r.Max.Y = max(r.Max.X, c.Pos.X), max(r.Max.Y, c.Pos.Y)
					}
					triangles = append(triangles, r)
				}
			case *recorder.FillString:
				switch {
				case legend[a.String]:
					rows = append(rows, a.Point.Y)
					if a.Point.X < axisEnd {
						t.Errorf("%s: legend entry %q starts at x=%.1f, on the data area (to x=%.1f)", metric, a.String, a.Point.X, axisEnd)
					}
				case strings.HasSuffix(a.String, "req/s"):
					labels = append(labels, a)
				}
			}
		}
		if axisEnd == 0 || len(rows) != len(legend) {
			t.Fatalf("%s: x axis to %.1f, %d legend rows drawn, want %d", metric, axisEnd, len(rows), len(legend))
		}
		h := sty.FontExtents().Height
		for i := 1; i < len(rows); i++ {
			if gap := rows[i-1] - rows[i]; gap < h {
				t.Errorf("%s: legend rows %d and %d %.1f apart, under the font's height %.1f", metric, i-1, i, gap, h)
			}
		}
		if len(labels) != 3 || len(triangles) < 3 {
			t.Fatalf("%s: %d load labels, %d triangles drawn, want 3 each", metric, len(labels), len(triangles))
		}
		for _, l := range labels {
			r := sty.Rectangle(l.String)
			box := vg.Rectangle{Min: l.Point.Add(vg.Point{Y: -sty.FontExtents().Descent}), Max: l.Point.Add(vg.Point{X: r.Max.X, Y: r.Max.Y})}
			for _, tr := range triangles {
				if box.Min.X < tr.Max.X && tr.Min.X < box.Max.X && box.Min.Y < tr.Max.Y && tr.Min.Y < box.Max.Y {
					t.Errorf("%s: label %q at %v overlaps a sustainable-load marker at %v", metric, l.String, box, tr)
				}
			}
		}
	}
}
