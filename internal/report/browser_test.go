package report

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/browsertest"
)

// TestHTMLInChromium opens the self-contained HTML report in headless
// Chromium and checks the screenshot: a page that rendered (non-blank, with
// the inlined charts drawing coloured bars), not merely a file that exists.
// .ci/run installs Debian's chromium; under CI=true its absence fails.
func TestHTMLInChromium(t *testing.T) {
	bin := browsertest.Chromium(t)
	run, trials := fixture(t)
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if _, err := WriteAll(r, dir, "html"); err != nil {
		t.Fatal(err)
	}
	// Only the HTML file travels: remove the chart files to prove that the
	// page needs nothing beside it.
	for _, c := range r.Charts {
		os.Remove(filepath.Join(dir, c.PNG))
		os.Remove(filepath.Join(dir, c.SVG))
	}
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(headless(dir), "--hide-scrollbars", "--window-size=1200,1600",
		"--screenshot="+shot, "file://"+filepath.Join(dir, "report.html"))...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() != 1200 || b.Dy() != 1600 {
		t.Fatalf("screenshot is %v", b)
	}
	dark, blue := count(img)
	if dark < 2000 {
		t.Errorf("screenshot has only %d dark pixels: no text rendered", dark)
	}
	// The optimized bars of the inlined baseline-vs-optimized SVG are #2c7fb8.
	if blue < 2000 {
		t.Errorf("screenshot has only %d chart-blue pixels: the inlined chart did not render", blue)
	}
}

// headless are the flags a test's Chromium runs with: no sandbox (root),
// and none of the background connections this machine refuses.
func headless(dir string) []string {
	return []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + filepath.Join(dir, "profile")}
}

func count(img image.Image) (dark, blue int) {
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, _ := img.At(x, y).RGBA()
			r, g, bl = r>>8, g>>8, bl>>8
			if r < 80 && g < 80 && bl < 80 {
				dark++
			}
			if r < 70 && g > 100 && g < 150 && bl > 160 && bl < 210 {
				blue++
			}
		}
	}
	return dark, blue
}

// TestHTMLNoSidewaysScroll (issue 11, defect 7: the page scrolled sideways
// at 1400 px): in Chromium at 1400 px wide, the page is no wider than the
// window, even with a long unbreakable reason in a table cell. A script
// appended to a copy of the page writes the widths into the DOM, which
// Chromium dumps.
func TestHTMLNoSidewaysScroll(t *testing.T) {
	bin := browsertest.Chromium(t)
	run, trials := fixture(t)
	r, err := Build(run, trials)
	if err != nil {
		t.Fatal(err)
	}
	long := "--speculative-config=" + strings.Repeat("x", 400)
	r.Tried = append(r.Tried, Candidate{Stage: "joint search", Name: "vLLM + " + long, Status: "ok", Decision: "skipped", Reason: long})
	dir := t.TempDir()
	if _, err := WriteAll(r, dir, "html"); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	probe := strings.Replace(string(page), "</body>",
		`<script>document.body.setAttribute("data-widths", document.documentElement.scrollWidth + " " + document.documentElement.clientWidth)</script></body>`, 1)
	path := filepath.Join(dir, "probe.html")
	if err := os.WriteFile(path, []byte(probe), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, append(headless(dir), "--window-size=1400,1000", "--dump-dom", "file://"+path)...).Output()
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	m := regexp.MustCompile(`data-widths="(\d+) (\d+)"`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("no widths in the dumped page")
	}
	sw, _ := strconv.Atoi(string(m[1]))
	cw, _ := strconv.Atoi(string(m[2]))
	if sw > cw {
		t.Errorf("the page is %d px wide in a %d px window: it scrolls sideways", sw, cw)
	}
}
