package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/perflab/perflab/internal/app"
	"github.com/perflab/perflab/internal/lab"
	"github.com/perflab/perflab/internal/labprogress"
	"github.com/perflab/perflab/internal/labspec"
	"github.com/perflab/perflab/internal/store"
)

// eventEnd is the stream's last event: the lab has stopped.
const eventEnd labprogress.EventType = "end"

// wireEvent is one event as the stream sends it.
type wireEvent struct {
	ID    int64 `json:"id"`
	RunID int64 `json:"run_id"`
	labprogress.Event
	Status string `json:"status,omitempty"`
	Error  string `json:"error,omitempty"`
}

// hub keeps a run's events, numbered from 1, for the life of the server
// (across cancel and resume), and wakes the streams that follow them. It
// is a lab.Sink.
type hub struct {
	runID int64

	mu     sync.Mutex
	events []wireEvent // in id order; compact drops some
	n      int64       // events ever added: the last id
	wake   chan struct{}
	ended  bool
}

var _ labprogress.Sink = (*hub)(nil)

func newHub(runID int64) *hub { return &hub{runID: runID, wake: make(chan struct{})} }

func (h *hub) add(ev wireEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	ev.ID, ev.RunID = h.n, h.runID
	h.events = append(h.events, ev)
	close(h.wake)
	h.wake = make(chan struct{})
}

// Event implements lab.Sink.
func (h *hub) Event(e labprogress.Event) { h.add(wireEvent{Event: e}) }

// end records the lab's end; streams close after it.
func (h *hub) end(status string, err error) {
	// The end carries the lab's last state (counts, incumbent, GPU-hours),
	// so a client that sees only it still knows how the lab stood.
	var ev wireEvent
	if last := h.last(); last != nil {
		ev.Event = last.Event
		ev.Trial, ev.Candidates, ev.Summary = nil, 0, nil
	}
	ev.Type, ev.Time, ev.Status, ev.ETASeconds = eventEnd, time.Now(), status, nil
	if err != nil {
		ev.Error = err.Error()
	}
	h.add(ev)
	h.mu.Lock()
	h.ended = true
	h.mu.Unlock()
}

// reopen readies the hub for another lab on the run (a resume).
func (h *hub) reopen() {
	h.mu.Lock()
	h.ended = false
	h.mu.Unlock()
}

// after returns the events after id, a channel closed at the next one, and
// whether the lab has ended.
func (h *hub) after(id int64) ([]wireEvent, <-chan struct{}, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := sort.Search(len(h.events), func(i int) bool { return h.events[i].ID > id })
	var out []wireEvent
	if i < len(h.events) {
		out = append(out, h.events[i:]...)
	}
	return out, h.wake, h.ended
}

// compact drops what an ended lab's stream no longer needs: the progress
// events but the last, and the end; the incumbents stay (a run without a
// summary shows them). The server keeps a hub for every run it ran, for
// as long as it runs, and a long lab's holds thousands of events: what
// stays of an ended lab should not grow with it. Ids go on from where
// they were.
func (h *hub) compact() {
	h.mu.Lock()
	defer h.mu.Unlock()
	lastProgress := -1
	for i := len(h.events) - 1; i >= 0; i-- {
		if h.events[i].Type != eventEnd {
			lastProgress = i
			break
		}
	}
	var keep []wireEvent
	for i, e := range h.events {
		if e.Type == eventEnd || e.Type == labprogress.EventBest || i == lastProgress {
			keep = append(keep, e)
		}
	}
	h.events = keep
}

// last is the latest progress event (not end), if any.
func (h *hub) last() *wireEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.events) - 1; i >= 0; i-- {
		if h.events[i].Type != eventEnd {
			e := h.events[i]
			return &e
		}
	}
	return nil
}

// incumbents are the best events of the lab so far: the configurations it
// kept, in order.
func (h *hub) incumbents() []decision {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []decision
	for _, e := range h.events {
		if e.Type == labprogress.EventBest && e.Incumbent != nil {
			out = append(out, decision{Stage: e.Stage, Name: e.Incumbent.Name, Decision: "kept", Score: e.Incumbent.Score})
		}
	}
	return out
}

// labRun is a lab this server started on a run: queued, running, or
// ended with its error.
type labRun struct {
	id     int64
	hub    *hub
	cancel context.CancelFunc
	done   chan struct{}
	err    error
	// queued is set while the lab waits for a slot (Config.MaxLabs).
	queued atomic.Bool
	// ended is when it ended (set by jobs.finish, under its lock).
	ended time.Time
}

// result is the error the lab ended with; nil while it runs (err is
// written before done is closed, and read only after).
func (lr *labRun) result() error {
	select {
	case <-lr.done:
		return lr.err
	default:
		return nil
	}
}

func (lr *labRun) active() bool {
	select {
	case <-lr.done:
		return false
	default:
		return true
	}
}

// activeLab returns the lab running run id here, if any.
func (s *Server) activeLab(id int64) *labRun { return s.jobs.active(id) }

// labsRunning counts this server's labs that run, and those queued.
func (s *Server) labsRunning() (running, queued int) { return s.jobs.counts() }

// StatusQueued is the status the API gives a run whose lab waits for a
// slot (Config.MaxLabs); the store never holds it.
const StatusQueued = "queued"

// eventQueued is a queued lab's first event; its start follows when it
// gets a slot.
const eventQueued labprogress.EventType = "queued"

// errBusy says that a lab of this server already runs the run.
var errBusy = errors.New("a lab of this server is already running this run")

// start starts the spec's lab in the background as `perflab lab` would
// (app.Setup.Run) and returns its run.
func (s *Server) start(ctx context.Context, spec *labspec.Spec, su *app.Setup, fresh bool) (store.Run, error) {
	if s.base.Err() != nil {
		return store.Run{}, errors.New("server: stopping")
	}
	if fresh {
		// The earlier run is archived, not emptied: a fresh lab stopped
		// at once (DELETE) must not take its trials with it.
		if old, err := s.cfg.Store.RunByKey(ctx, spec.Key()); err == nil && s.activeLab(old.ID) != nil {
			return old, errBusy
		}
		if err := app.StartOver(ctx, s.cfg.Store, spec.Key()); err != nil {
			return store.Run{}, err
		}
	}
	// The run exists before the lab does, so its id can be answered now;
	// the lab's own EnsureRun finds the same one by key.
	run, err := s.cfg.Store.EnsureRun(ctx, spec.Key(), spec.Name, spec.YAML(), false)
	if err != nil {
		return store.Run{}, fmt.Errorf("server: open run: %w", err)
	}
	// A lab of another server (or a perflab lab) holding the run would
	// make this one's lab fail at its start: refused now, not answered
	// 202 and then ended. A slot now, or a place in the queue: decided
	// here, so the answer says which.
	lr, lctx, err := s.jobs.begin(run.ID, s.base, func() (bool, error) {
		if err := s.cfg.Store.Holder(ctx, run.ID); err != nil {
			return false, err
		}
		select {
		case s.slots <- struct{}{}:
			return false, nil
		default:
			return true, nil
		}
	})
	if err != nil {
		return run, err
	}
	s.wg.Add(1)
	h, cancel := lr.hub, lr.cancel
	if lr.queued.Load() {
		h.add(wireEvent{Event: labprogress.Event{Type: eventQueued, Time: time.Now()}, Status: StatusQueued})
	}

	events := lab.NewEvents(h)
	if s.cfg.Log != nil {
		events.Add(&labprogress.LineProgress{W: s.cfg.Log})
	}
	queuedStatus := run.Status
	go func() {
		defer s.wg.Done()
		defer cancel()
		if lr.queued.Load() {
			select {
			case s.slots <- struct{}{}:
				lr.queued.Store(false)
			case <-lctx.Done():
				s.endQueued(lr, run, queuedStatus)
				return
			}
		}
		defer s.releaseSlot()
		_, stored, err := su.Run(lctx, spec, s.cfg.Store, app.RunOptions{Progress: events, Fresh: fresh})
		status := stored.Status
		if stored.ID == 0 {
			status = "failed" // it stopped before storing anything
		} else if err == nil {
			err = allFailed(lctx, s.cfg.Store, stored.ID)
		}
		s.jobs.finish(lr, status, err)
	}()
	run.Status = "running"
	if lr.queued.Load() {
		run.Status = StatusQueued
	}
	return run, nil
}

// endQueued ends a lab stopped (DELETE, or the server stopping) before it
// left the queue: nothing ran, so a run created for it is left
// interrupted, resumable, and one that existed keeps its status.
func (s *Server) endQueued(lr *labRun, run store.Run, status string) {
	err := errors.New("stopped while queued: nothing ran")
	if status == "running" {
		run.Status = store.StatusInterrupted
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if uerr := s.cfg.Store.UpdateRun(ctx, &run); uerr != nil {
			err = errors.Join(err, uerr)
		}
		cancel()
		status = store.StatusInterrupted
	}
	lr.queued.Store(false)
	s.jobs.finish(lr, status, err)
}

// compactDelay is how long an ended lab's whole stream stays, for the
// clients that reconnect (Last-Event-ID) to read to its end.
var compactDelay = time.Minute

// compactLater compacts an ended lab's hub after compactDelay, unless it
// was reopened (a resume) meanwhile.
func compactLater(h *hub) {
	time.AfterFunc(compactDelay, func() {
		h.mu.Lock()
		ended := h.ended
		h.mu.Unlock()
		if ended {
			h.compact()
		}
	})
}

// releaseSlot gives a lab's slot back; when no lab runs any more, the
// memory the labs took goes back to the system now rather than over the
// runtime's minutes (a lab's requests and tokenizer are hundreds of MB).
func (s *Server) releaseSlot() {
	<-s.slots
	if len(s.slots) == 0 {
		go debug.FreeOSMemory()
	}
}

// allFailed is app.AllFailed on the stored trials: a lab none of whose
// trials ran has failed, as the CLI says.
func allFailed(ctx context.Context, st *store.Store, runID int64) error {
	trials, err := st.Trials(context.WithoutCancel(ctx), runID)
	if err != nil {
		return err
	}
	return app.AllFailed(trials)
}

// started is the answer to a lab started.
type started struct {
	ID     int64  `json:"id"`
	Name   string `json:"name"`
	Key    string `json:"key"`
	Status string `json:"status"`
	URL    string `json:"url"`
	Events string `json:"events"`
}

func startedOf(r store.Run) started {
	u := "/api/v1/runs/" + strconv.FormatInt(r.ID, 10)
	return started{ID: r.ID, Name: r.Name, Key: r.Key, Status: r.Status, URL: u, Events: u + "/events"}
}

// postLab validates a spec as the CLI does and starts its lab.
func (s *Server) postLab(w http.ResponseWriter, r *http.Request) {
	ct := r.Header.Get("Content-Type")
	if ct != "" && !strings.Contains(ct, "yaml") && !strings.Contains(ct, "json") && !strings.HasPrefix(ct, "text/plain") {
		refuse(w, r, http.StatusUnsupportedMediaType, apiError{Error: "content type " + ct + ": want application/yaml or application/json"})
		return
	}
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	// JSON is YAML: one parser, with lines, for both.
	spec, err := labspec.ParseSpecConfined("spec", body, s.cfg.DataRoot)
	if err != nil {
		writeSpecError(w, err)
		return
	}
	s.launch(w, r, spec, r.URL.Query().Get("fresh") == "true", http.StatusAccepted)
}

// launch checks a parsed spec's paths, prepares its lab as the CLI does,
// and starts it.
func (s *Server) launch(w http.ResponseWriter, r *http.Request, spec *labspec.Spec, fresh bool, code int) {
	if e, bad := s.outsideRoot(spec); bad {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	coef, err := app.Apply(spec, s.cfg.Options)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	su, err := app.NewSetup(r.Context(), spec, coef, s.cfg.Options)
	if err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	if err := su.Preflight(spec); err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	run, err := s.start(r.Context(), spec, su, fresh)
	var held *store.HeldError
	if errors.Is(err, errBusy) || errors.As(err, &held) {
		writeError(w, http.StatusConflict, apiError{Error: fmt.Sprintf("run %d: %v", run.ID, err)})
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, apiError{Error: err.Error()})
		return
	}
	writeJSON(w, code, startedOf(run))
}

// paths is the resolver every host path sent to this server goes
// through: confined to the data root.
func (s *Server) paths() labspec.PathResolver {
	return labspec.PathResolver{Base: s.cfg.DataRoot, Confined: true}
}

// outsideRoot finds the first host path of the parsed spec outside the
// data root: the parse confined those the spec names, this checks the
// ones filled in since (the default dataset).
func (s *Server) outsideRoot(spec *labspec.Spec) (apiError, bool) {
	for _, hp := range spec.HostPaths() {
		if err := s.paths().Check(hp.Path); err != nil {
			return apiError{Error: fmt.Sprintf("spec: %s: %v", hp.Field, err), Field: hp.Field, Path: hp.Path}, true
		}
	}
	return apiError{}, false
}

// writeSpecError answers 400 with the spec error's line and message.
func writeSpecError(w http.ResponseWriter, err error) {
	e := apiError{Error: err.Error()}
	var se *labspec.SpecError
	if errors.As(err, &se) {
		e.Line, e.Error = se.Line, se.Msg
		if se.Line > 0 {
			e.Error = fmt.Sprintf("spec:%d: %s", se.Line, se.Msg)
		}
		e.Field = strings.TrimPrefix(strings.TrimPrefix(se.Field, "$"), ".")
		if e.Field == "" {
			e.Field = fieldOf(se.Msg)
		}
	}
	var pe *labspec.PathError
	if errors.As(err, &pe) {
		e.Path = pe.Value
	}
	writeError(w, http.StatusBadRequest, e)
}

// fieldOf takes the field a spec message starts with ("stages[1].knob:
// ..." or "unknown field \"x\""); "" when it names none.
func fieldOf(msg string) string {
	if i := strings.Index(msg, `unknown field "`); i >= 0 {
		rest := msg[i+len(`unknown field "`):]
		if j := strings.IndexByte(rest, '"'); j > 0 {
			return rest[:j]
		}
	}
	head, _, ok := strings.Cut(msg, ":")
	if ok && head != "" && !strings.ContainsAny(head, " \t") {
		return head
	}
	return ""
}

// resumeRun resumes a stored run from its spec.
func (s *Server) resumeRun(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	run, err := s.cfg.Store.Run(r.Context(), id)
	if err != nil {
		writeStoreError(w, err)
		return
	}
	if s.activeLab(id) != nil {
		writeError(w, http.StatusConflict, apiError{Error: fmt.Sprintf("run %d: %v", id, errBusy)})
		return
	}
	if strings.TrimSpace(run.Spec) == "" {
		writeError(w, http.StatusConflict, apiError{Error: fmt.Sprintf("run %d (%s) has no spec to resume from (an import)", id, run.Name)})
		return
	}
	spec, err := labspec.ParseSpecConfined(fmt.Sprintf("run %d", id), []byte(run.Spec), s.cfg.DataRoot)
	if err != nil {
		writeSpecError(w, err)
		return
	}
	if e, bad := s.outsideRoot(spec); bad {
		writeError(w, http.StatusBadRequest, e)
		return
	}
	if _, err := app.Apply(spec, s.cfg.Options); err != nil {
		writeError(w, http.StatusBadRequest, apiError{Error: err.Error()})
		return
	}
	if spec.Key() != run.Key {
		writeError(w, http.StatusConflict, apiError{Error: fmt.Sprintf("run %d: its stored spec now gives run key %s, not %s (the simulator or perflab changed): submit the spec again to start a new run", id, spec.Key(), run.Key)})
		return
	}
	// Parsed again for the lab: Apply above was to check the key.
	spec, _ = labspec.ParseSpecConfined(fmt.Sprintf("run %d", id), []byte(run.Spec), s.cfg.DataRoot)
	s.launch(w, r, spec, false, http.StatusAccepted)
}

// cancelRun stops a lab this server runs and answers the run once it has
// stopped: engines stopped, finished trials kept, status interrupted.
func (s *Server) cancelRun(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	lr := s.activeLab(id)
	if lr == nil {
		if _, err := s.cfg.Store.Run(r.Context(), id); err != nil {
			writeStoreError(w, err)
			return
		}
		writeError(w, http.StatusConflict, apiError{Error: fmt.Sprintf("run %d is not running in this server", id)})
		return
	}
	lr.cancel()
	select {
	case <-lr.done:
	case <-r.Context().Done():
		return
	}
	// Stopping engines may take longer than a call's write deadline.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.Limits.WriteTimeout))
	s.writeRun(w, r, id)
}

// events streams the run's progress as server-sent events, from after
// Last-Event-ID, until the lab ends.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	id, ok := runID(w, r)
	if !ok {
		return
	}
	lr := s.jobs.get(id)
	var h *hub
	if lr != nil {
		h = lr.hub
	} else {
		run, err := s.cfg.Store.Run(r.Context(), id)
		if err != nil {
			writeStoreError(w, err)
			return
		}
		// No lab of this server ran it: the stream says how it stands.
		h = newHub(id)
		h.end(run.Status, nil)
	}
	after := int64(0)
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, apiError{Error: "Last-Event-ID " + v + ": want an event id"})
			return
		}
		after = n
	}
	rc := http.NewResponseController(w)
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		evs, wake, ended := h.after(after)
		// Each write has its own deadline: a client that stops reading
		// is cut, a stream that is only long lives on.
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.Limits.WriteTimeout))
		for _, ev := range evs {
			b, err := json.Marshal(ev)
			if err != nil {
				return
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", ev.ID, ev.Type, b); err != nil {
				return
			}
			after = ev.ID
		}
		if len(evs) > 0 {
			if rc.Flush() != nil {
				return
			}
		}
		if ended {
			return
		}
		select {
		case <-wake:
		case <-keepalive.C:
			_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.Limits.WriteTimeout))
			if _, err := fmt.Fprint(w, ": keepalive\n\n"); err != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		}
	}
}
