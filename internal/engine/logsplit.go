package engine

import (
	"bytes"
	"io"
)

// A server's log is not only '\n'-ended lines. Progress bars (tqdm, as
// huggingface_hub prints them while it downloads weights:
// src/huggingface_hub/file_download.py, http_get, v0.35.0 0f12365e) redraw
// one line in place: each frame starts with '\r' and only the bar's close
// writes '\n'. A reader that waits for '\n' sees nothing for the whole
// download of a file, minutes for a large checkpoint, and a stall detector
// on top of it calls a downloading server hung. The two helpers below let
// a log reader count each frame as output.

// ScanLogLines is a bufio.SplitFunc for engine logs: a line ends at '\n',
// at "\r\n", or at a lone '\r' (a progress bar's redraw), so each frame of
// a bar is a token of its own. Tokens carry no terminator; the empty token
// before a frame's leading '\r' is returned as is (it is output too).
func ScanLogLines(data []byte, atEOF bool) (advance int, token []byte, err error) {
	if atEOF && len(data) == 0 {
		return 0, nil, nil
	}
	if i := bytes.IndexAny(data, "\r\n"); i >= 0 {
		if data[i] == '\n' {
			return i + 1, data[:i], nil
		}
		// '\r': one line with a following '\n', a redraw otherwise;
		// which needs the next byte.
		if i+1 < len(data) {
			if data[i+1] == '\n' {
				return i + 2, data[:i], nil
			}
			return i + 1, data[:i], nil
		}
		if atEOF {
			return i + 1, data[:i], nil
		}
		return 0, nil, nil
	}
	if atEOF {
		return len(data), data, nil
	}
	return 0, nil, nil
}

// WatchRedraws returns a reader that passes r's bytes through unchanged
// and calls redraw for each lone '\r' in them (one not followed by '\n'):
// a progress bar drawing a new frame over the last. A log reader that
// splits at '\n' keeps its lines, its log file and its ring as they are,
// and counts the frames in between as progress by wrapping its source:
//
//	br := bufio.NewReaderSize(engine.WatchRedraws(r, touch), 64<<10)
//
// redraw runs on the reading goroutine; it must be quick (a time stamp).
func WatchRedraws(r io.Reader, redraw func()) io.Reader {
	return &redrawReader{r: r, redraw: redraw}
}

type redrawReader struct {
	r      io.Reader
	redraw func()
	// pendingCR: the last byte read was '\r'; whether it was a redraw
	// depends on the next byte, which has not come yet.
	pendingCR bool
}

func (w *redrawReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	for _, b := range p[:n] {
		if w.pendingCR && b != '\n' {
			w.redraw()
		}
		w.pendingCR = b == '\r'
	}
	if err != nil && w.pendingCR {
		// The stream ended on '\r': a last frame.
		w.pendingCR = false
		w.redraw()
	}
	return n, err
}
