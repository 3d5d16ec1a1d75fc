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
// cap per body (Config.MaxBodyBytes), and a budget for all the bodies
// being read at once (Config.MaxInflightBodyBytes).

// Defaults for the body bounds.
const (
	defaultBodyTimeout          = 30 * time.Second
	defaultMaxBodyBytes         = 64 << 20
	defaultMaxInflightBodyBytes = 256 << 20
)

// errBodyBudget is a read refused because the bodies being read at once
// already take the whole budget.
var errBodyBudget = errors.New("the request bodies being read take the whole in-flight budget")

// budget counts the bytes of the bodies being read.
type budget struct {
	limit int64
	used  atomic.Int64
}

// budgetReader reads a body, charging every byte to the budget until
// release gives them back.
type budgetReader struct {
	r     io.Reader
	b     *budget
	taken int64
}

func (b *budget) reader(r io.Reader) *budgetReader { return &budgetReader{r: r, b: b} }

func (br *budgetReader) Read(p []byte) (int, error) {
	n, err := br.r.Read(p)
	if n > 0 {
		if br.b.used.Add(int64(n)) > br.b.limit {
			br.b.used.Add(-int64(n))
			return 0, fmt.Errorf("serve: %w (%d MiB)", errBodyBudget, br.b.limit>>20)
		}
		br.taken += int64(n)
	}
	return n, err
}

// release gives the body's bytes back to the budget (once the body is
// decoded, the buffer it was read into is garbage).
func (br *budgetReader) release() {
	br.b.used.Add(-br.taken)
	br.taken = 0
}
