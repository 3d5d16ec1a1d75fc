package serve

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// DownloadEnv names the variable of the simulated engine's environment that
// asks for a cold-cache model download before loading: the model seconds
// it takes (divided by the time scale on the wall clock). A variable, not
// a flag, so that any runtime's config `env` can ask for it.
const DownloadEnv = "PERFLAB_SIM_DOWNLOAD_S"

// downloadFrame is tqdm's default mininterval (tqdm/std.py, 0.1 s): a bar
// is redrawn at most this often on the wall clock.
const downloadFrame = 100 * time.Millisecond

// downloadShards is how many weight files the simulated checkpoint has.
const downloadShards = 4

// downloadShardBytes is the size of each: what a 14B bf16 checkpoint's
// shards weigh (the printed figures only).
const downloadShardBytes = 3.96e9

// downloadFor is the model time of the download Options or the env asks
// for (0: the cache is warm). A malformed value is an error, as an engine
// option would be.
func downloadFor(o Options) (time.Duration, error) {
	if o.Download > 0 {
		return o.Download, nil
	}
	v, ok := o.Env[DownloadEnv]
	if !ok || v == "" {
		return 0, nil
	}
	s, err := strconv.ParseFloat(v, 64)
	if err != nil || !(s >= 0) || s > 7*24*3600 {
		return 0, fmt.Errorf("serve: %s=%q: want the download's seconds, 0 to 604800", DownloadEnv, v)
	}
	return time.Duration(s * float64(time.Second)), nil
}

// download prints a cold-cache download of the checkpoint over wall time
// l.dlWall (l.dlModel in model time)
// the way the engines' logs show it: huggingface_hub's per-file bars
// (src/huggingface_hub/file_download.py, http_get, v0.35.0 0f12365e: desc
// is the file name, unit "B" scaled), drawn by tqdm. tqdm draws each frame
// as '\r' + the bar and ends the bar with '\n' only when it closes
// (tqdm/std.py, status_printer and close), so a whole file's progress is
// one "line" to a reader that waits for '\n'. Files come one after
// another (snapshot_download's thread pool draws them in parallel; one
// bar at a time is what one large last shard looks like). vLLM then logs
// the time spent (vllm/model_executor/model_loader/weight_utils.py,
// download_weights_from_hf). It returns false if ctx ended first.
func (l *startupLog) download(ctx context.Context) bool {
	d, model := l.dlWall, l.dlModel
	if d <= 0 {
		return true
	}
	l.style.downloadBegin(l)
	per := d / downloadShards
	scale := float64(model) / float64(d) // model time per wall time
	for i := 1; i <= downloadShards; i++ {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i, downloadShards)
		fileStart := time.Now()
		for k := 0; ; k++ {
			el := min(time.Duration(k)*downloadFrame, per)
			frac := 1.0
			if per > 0 {
				frac = float64(el) / float64(per)
			}
			io.WriteString(l.w, "\r"+tqdmFrame(name, frac, downloadShardBytes, time.Duration(float64(el)*scale)))
			if el >= per {
				break
			}
			t := time.NewTimer(time.Until(fileStart.Add(min(time.Duration(k+1)*downloadFrame, per))))
			select {
			case <-ctx.Done():
				t.Stop()
				io.WriteString(l.w, "\n")
				return false
			case <-t.C:
			}
		}
		io.WriteString(l.w, "\n")
	}
	l.style.downloadEnd(l, model)
	return true
}

// tqdmFrame is one frame of tqdm's default bar without a terminal (ncols
// unknown: a 10-cell bar), e.g.
// "model-00001-of-00004.safetensors:  45%|████▌     | 1.78G/3.96G [00:09<00:11, 190MB/s]".
func tqdmFrame(desc string, frac, total float64, el time.Duration) string {
	const cells = 10
	full := frac * cells
	n := int(full)
	bar := strings.Repeat("█", n)
	if n < cells {
		if part := int((full - float64(n)) * 8); part > 0 {
			bar += string([]rune("▏▎▍▌▋▊▉")[part-1])
		} else {
			bar += " "
		}
		bar += strings.Repeat(" ", cells-n-1)
	}
	done := frac * total
	rate, remain := "?B/s", "?"
	if s := el.Seconds(); s > 0 && done > 0 {
		r := done / s
		rate = sizeof(r) + "B/s"
		remain = tqdmClock(time.Duration((total - done) / r * float64(time.Second)))
	}
	return fmt.Sprintf("%s: %3.0f%%|%s| %s/%s [%s<%s, %s]", desc, frac*100, bar, sizeof(done), sizeof(total), tqdmClock(el), remain, rate)
}

// sizeof is tqdm's format_sizeof: three significant figures and an SI
// prefix.
func sizeof(n float64) string {
	for _, u := range []string{"", "k", "M", "G", "T"} {
		if n < 999.5 {
			switch {
			case n < 9.995:
				return fmt.Sprintf("%.2f%s", n, u)
			case n < 99.95:
				return fmt.Sprintf("%.1f%s", n, u)
			}
			return fmt.Sprintf("%.0f%s", n, u)
		}
		n /= 1000
	}
	return fmt.Sprintf("%.1fP", n)
}

// tqdmClock is tqdm's format_interval: mm:ss, or h:mm:ss.
func tqdmClock(d time.Duration) string {
	s := int(d.Round(time.Second) / time.Second)
	if s >= 3600 {
		return fmt.Sprintf("%d:%02d:%02d", s/3600, s/60%60, s%60)
	}
	return fmt.Sprintf("%02d:%02d", s/60, s%60)
}
