package serve

import (
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"
)

// Request bodies are read under three bounds, so that clients that never
// finish a body, or many that send huge ones, cannot hold the server's
// connections or memory: a deadline on the read (Config.BodyTimeout), a
// cap per body (Config.MaxBodyBytes), and a budget for the memory of all
// the bodies being read and decoded at once (Config.MaxInflightBodyBytes).

// Defaults for the body bounds. No prompt a simulated model takes comes
// near 16 MiB (a 1M-token context is about 4 MB of text).
const (
	defaultBodyTimeout          = 30 * time.Second
	defaultMaxBodyBytes         = 16 << 20
	defaultMaxInflightBodyBytes = 256 << 20
)

// bodyCostFactor is how many times its size a body is charged to the
// budget: it is held as the read buffer, as the raw prompt or messages
// json.Unmarshal copies out of it, and as the prompt text decoded from
// those, until its prompt is counted. Charging the size alone let 256 MiB
// of bodies take a gigabyte.
const bodyCostFactor = 3

// errBodyBudget is a read refused because the bodies being read at once
// already take the whole budget.
var errBodyBudget = errors.New("the request bodies being read take the whole in-flight budget")

// budget counts the memory of the bodies being read and decoded.
type budget struct {
	limit int64
	used  atomic.Int64
}

// take charges n bytes, or nothing and false when they do not fit.
func (b *budget) take(n int64) bool {
	if b.used.Add(n) > b.limit {
		b.used.Add(-n)
		return false
	}
	return true
}

// give returns n charged bytes.
func (b *budget) give(n int64) { b.used.Add(-n) }

// budgetReader reads a body of unknown length (chunked), charging each
// byte's cost as it arrives, until release gives them back.
type budgetReader struct {
	r     io.Reader
	b     *budget
	taken int64
}

func (b *budget) reader(r io.Reader) *budgetReader { return &budgetReader{r: r, b: b} }

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 {
		cost := bodyCostFactor * int64(n)
		if !br.b.take(cost) {
			return 0, fmt.Errorf("serve: %w (%d MiB)", errBodyBudget, br.b.limit>>20)
		}
		br.taken += cost
	}
	return n, err
}

// release gives the body's charge back to the budget.
func (br *budgetReader) release() {
	br.b.give(br.taken)
	br.taken = 0
}
