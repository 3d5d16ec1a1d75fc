package server

import (
	"context"
	"slices"
	"sync"
	"time"
)

// DefaultKeepEnded and DefaultKeepEndedFor bound what the server holds in
// memory of its ended labs and benchmarks (their event hubs, errors and
// handles): the latest DefaultKeepEnded, none older than
// DefaultKeepEndedFor. The store keeps every run and trial; a pruned
// run's stream and page are answered from the store.
const (
	DefaultKeepEnded    = 64
	DefaultKeepEndedFor = time.Hour
)

// figureCacheSize bounds the list figures cached (figuresOf): a few
// dozen bytes each, enough for the trials of the runs a team has open.
const figureCacheSize = 8192

// jobs is the one registry of the labs and benchmarks this server
// started, by run id: the queued and running ones, and the ended ones
// until pruned (Config.KeepEnded, Config.KeepEndedFor).
type jobs struct {
	mu      sync.Mutex
	byRun   map[int64]*labRun
	keep    int
	keepFor time.Duration
	now     func() time.Time
}

func newJobs(keep int, keepFor time.Duration) *jobs {
	if keep <= 0 {
		keep = DefaultKeepEnded
	}
	if keepFor <= 0 {
		keepFor = DefaultKeepEndedFor
	}
	return &jobs{byRun: map[int64]*labRun{}, keep: keep, keepFor: keepFor, now: time.Now}
}

// get returns the job of run id, running or ended, if still held.
func (j *jobs) get(id int64) *labRun {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.byRun[id]
}

// active returns the job that runs (or waits to run) run id, if any.
func (j *jobs) active(id int64) *labRun {
	if lr := j.get(id); lr != nil && lr.active() {
		return lr
	}
	return nil
}

// counts are the jobs that run, and those queued.
func (j *jobs) counts() (running, queued int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, lr := range j.byRun {
		switch {
		case !lr.active():
		case lr.queued.Load():
			queued++
		default:
			running++
		}
	}
	return running, queued
}

// held is how many jobs the registry holds, ended ones included.
func (j *jobs) held() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.byRun)
}

// begin registers a new job on run id, under base. It refuses with
// errBusy while another job runs it, and with check's error (run under
// the registry's lock, so two starts cannot both pass it); check also
// says whether the job waits in the queue. A job on a run this server
// ran before takes over its hub: event ids go on across a resume.
func (j *jobs) begin(id int64, base context.Context, check func() (queued bool, err error)) (*labRun, context.Context, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	prev := j.byRun[id]
	if prev != nil && prev.active() {
		return nil, nil, errBusy
	}
	queued := false
	if check != nil {
		var err error
		if queued, err = check(); err != nil {
			return nil, nil, err
		}
	}
	h := newHub(id)
	if prev != nil {
		h = prev.hub
		h.reopen()
	}
	ctx, cancel := context.WithCancel(base)
	lr := &labRun{id: id, hub: h, cancel: cancel, done: make(chan struct{})}
	lr.queued.Store(queued)
	j.byRun[id] = lr
	return lr, ctx, nil
}

// finish ends a job: its error, its stream's last event (status), done;
// then the ended jobs beyond the bounds are dropped.
func (j *jobs) finish(lr *labRun, status string, err error) {
	lr.err = err
	lr.hub.end(status, err)
	compactLater(lr.hub)
	j.mu.Lock()
	lr.ended = j.now()
	j.mu.Unlock()
	close(lr.done)
	j.prune()
}

// prune drops the ended jobs older than keepFor, then the oldest ended
// ones beyond keep. Running and queued jobs are never dropped.
func (j *jobs) prune() {
	j.mu.Lock()
	defer j.mu.Unlock()
	now := j.now()
	var ended []*labRun
	for id, lr := range j.byRun {
		if lr.active() {
			continue
		}
		if now.Sub(lr.ended) > j.keepFor {
			delete(j.byRun, id)
			continue
		}
		ended = append(ended, lr)
	}
	if len(ended) <= j.keep {
		return
	}
	slices.SortFunc(ended, func(a, b *labRun) int { return a.ended.Compare(b.ended) })
	for _, lr := range ended[:len(ended)-j.keep] {
		delete(j.byRun, lr.id)
	}
}

// figureCache holds the list figures of the latest size trial results
// read (figuresOf); the oldest entry goes first.
type figureCache struct {
	mu    sync.Mutex
	size  int
	m     map[figureKey]figures
	order []figureKey // insertion order, oldest first
}

func newFigureCache(size int) *figureCache {
	return &figureCache{size: size, m: map[figureKey]figures{}}
}

func (c *figureCache) get(k figureKey) (figures, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, ok := c.m[k]
	return f, ok
}

func (c *figureCache) put(k figureKey, f figures) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k]; ok {
		c.m[k] = f
		return
	}
	for len(c.order) >= c.size {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[k] = f
	c.order = append(c.order, k)
}

func (c *figureCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
