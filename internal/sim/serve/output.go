package serve

import (
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// filler is the generated text: common English words, each one token in
// byte-level BPE vocabularies (leading space included), so a client that
// re-tokenizes the output counts what usage reports.
var filler = []string{" the", " of", " and", " to", " in", " is", " that", " for", " it", " as", " with", " on", " was", " at", " by", " be"}

func appendFiller(b []byte, from, n int) []byte {
	for i := from; i < from+n; i++ {
		b = append(b, filler[i%len(filler)]...)
	}
	return b
}

// output formats one request's response from its stream's events.
type output struct {
	s                    *Server
	st                   *stream
	chat, usage          bool
	id, model            string
	promptLen, maxTokens int
	sent                 int
	head                 string // every chunk's JSON up to the choices
}

// wait blocks for events; ok is false when the client left or the server closed.
func (o *output) wait(r *http.Request) bool {
	select {
	case <-o.st.notify:
		return true
	case <-r.Context().Done():
		o.s.cancel(o.st.id)
		return false
	case <-o.s.closing:
		return false
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// setHead fixes the chunk prefix (id, object, created, model).
func (o *output) setHead() {
	created := strconv.FormatInt(time.Now().Unix(), 10)
	object := "text_completion"
	if o.chat {
		object = "chat.completion.chunk"
	}
	o.head = `data: {"id":` + jsonString(o.id) + `,"object":"` + object + `","created":` + created + `,"model":` + jsonString(o.model) + `,"choices":[`
}

// appendEvents appends the SSE frames for evs to buf; finished reports that
// the response is complete ([DONE] included).
func (o *output) appendEvents(buf []byte, evs []tokenEvent) ([]byte, bool) {
	head := o.head
	finished := false
	for i := 0; i < len(evs); i++ {
		ev := evs[i]
		// Outputs the model gives the same time are one output: the API
		// server merged them (the engine's frontend coalescing a lagging
		// stream), so they go out as one chunk, as vLLM sends them and as
		// sim.Predict counts them.
		for ev.err == nil && !ev.done && i+1 < len(evs) && evs[i+1].err == nil && evs[i+1].deadline.Equal(ev.deadline) {
			i++
			ev.tokens += evs[i].tokens
			ev.done = evs[i].done
		}
		if ev.err != nil {
			b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": ev.err.Error(), "type": "BadRequestError", "param": nil, "code": 400}})
			buf = append(buf, "data: "...)
			buf = append(buf, b...)
			buf = append(buf, "\n\n"...)
			finished = true
			break
		}
		if o.chat && o.sent == 0 && ev.tokens > 0 {
			// vLLM's first chunk carries the role, sent with the first output.
			buf = append(buf, head...)
			buf = append(buf, `{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`+"\n\n"...)
		}
		if ev.tokens > 0 || ev.done {
			buf = append(buf, head...)
			if o.chat {
				buf = append(buf, `{"index":0,"delta":{"content":"`...)
			} else {
				buf = append(buf, `{"index":0,"text":"`...)
			}
			buf = appendFiller(buf, o.sent, ev.tokens)
			o.sent += ev.tokens
			if o.chat {
				buf = append(buf, `"},"logprobs":null,"finish_reason":`...)
			} else {
				buf = append(buf, `","logprobs":null,"finish_reason":`...)
			}
			if ev.done {
				buf = append(buf, `"length","stop_reason":null}]}`+"\n\n"...)
			} else {
				buf = append(buf, `null}]}`+"\n\n"...)
			}
		}
		if ev.done {
			finished = true
			break
		}
	}
	if finished && o.usage && o.sent > 0 {
		buf = append(buf, head[:len(head)-len(`"choices":[`)]...)
		buf = append(buf, `"choices":[],"usage":{"prompt_tokens":`...)
		buf = strconv.AppendInt(buf, int64(o.promptLen), 10)
		buf = append(buf, `,"total_tokens":`...)
		buf = strconv.AppendInt(buf, int64(o.promptLen+o.sent), 10)
		buf = append(buf, `,"completion_tokens":`...)
		buf = strconv.AppendInt(buf, int64(o.sent), 10)
		buf = append(buf, "}}\n\n"...)
	}
	if finished {
		buf = append(buf, "data: [DONE]\n\n"...)
	}
	return buf, finished
}

// streamResponse writes a streamed response through net/http from the
// handler goroutine: the path for connections that cannot be hijacked.
func (o *output) streamResponse(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	rc.Flush()
	buf := make([]byte, 0, 1024)
	var evs []tokenEvent
	for {
		if !o.wait(r) {
			return
		}
		evs = o.st.take(evs)
		var finished bool
		buf, finished = o.appendEvents(buf[:0], evs)
		if len(buf) > 0 {
			if _, err := w.Write(buf); err != nil {
				o.s.cancel(o.st.id)
				return
			}
			rc.Flush()
			now := time.Now()
			for _, ev := range evs {
				if ev.tokens > 0 {
					o.s.loop.late.add(now.Sub(ev.deadline), ev.tokens)
				}
			}
		}
		if finished {
			o.s.ok.Add(1)
			return
		}
	}
}

func (o *output) whole(w http.ResponseWriter, r *http.Request) {
	var evs []tokenEvent
	for {
		if !o.wait(r) {
			if r.Context().Err() == nil {
				// The server is going down (shutdown or a reproduced
				// engine crash) with the answer unwritten: drop the
				// connection, as a dying engine does, rather than let
				// net/http send an empty 200.
				panic(http.ErrAbortHandler)
			}
			return
		}
		evs = o.st.take(evs)
		for _, ev := range evs {
			if ev.err != nil {
				apiError(w, http.StatusBadRequest, "BadRequestError", ev.err.Error())
				return
			}
			o.sent += ev.tokens
			if ev.done {
				o.finishWhole(w)
				return
			}
		}
	}
}

func (o *output) finishWhole(w http.ResponseWriter) {
	text := string(appendFiller(nil, 0, o.sent))
	usage := map[string]any{"prompt_tokens": o.promptLen, "total_tokens": o.promptLen + o.sent, "completion_tokens": o.sent, "prompt_tokens_details": nil}
	var choice map[string]any
	object := "text_completion"
	if o.chat {
		object = "chat.completion"
		choice = map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text, "reasoning_content": nil, "tool_calls": []any{}},
			"logprobs": nil, "finish_reason": "length", "stop_reason": nil}
	} else {
		choice = map[string]any{"index": 0, "text": text, "logprobs": nil, "finish_reason": "length", "stop_reason": nil, "prompt_logprobs": nil}
	}
	o.s.ok.Add(1)
	writeJSON(w, map[string]any{"id": o.id, "object": object, "created": time.Now().Unix(), "model": o.model,
		"choices": []any{choice}, "usage": usage})
}

// metrics writes Prometheus text with the imitated engine's metric names
// (face.names; a series the engine lacks is left out). With data-parallel
// replicas each engine series comes once per replica, labeled engine="0",
// engine="1", ... as vLLM's DP deployments label them.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	st, reps := s.loop.snapshot()
	model := strconv.Quote(s.cfg.ServedModelNames[0])
	type engineStat struct {
		sim.Stats
		ok int64
	}
	engines := []engineStat{{st, s.ok.Load()}}
	if len(reps) > 1 {
		engines = engines[:0]
		for _, rp := range reps {
			engines = append(engines, engineStat{rp.Stats, rp.Finished})
		}
	}
	n := s.face.names
	var b strings.Builder
	num := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	series := func(typ, name, help string, v func(e engineStat) float64) {
		if name == "" {
			return
		}
		b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n")
		for k, e := range engines {
			b.WriteString(name + `{engine="` + strconv.Itoa(k) + `",model_name=` + model + "} " + num(v(e)) + "\n")
		}
	}
	series("gauge", n.running, "Number of requests in model execution batches.", func(e engineStat) float64 { return float64(e.Running) })
	series("gauge", n.waiting, "Number of requests waiting to be processed.", func(e engineStat) float64 { return float64(e.Waiting) })
	series("gauge", n.kvUsage, "KV-cache usage. 1 means 100 percent usage.", func(e engineStat) float64 { return e.KVUsage })
	series("gauge", n.kvUsageOld, "GPU KV-cache usage. 1 means 100 percent usage. (deprecated name)", func(e engineStat) float64 { return e.KVUsage })
	series("counter", n.preemptions, "Cumulative number of preemption from the engine.", func(e engineStat) float64 { return float64(e.Preemptions) })
	series("counter", n.promptTokens, "Number of prefill tokens processed.", func(e engineStat) float64 { return float64(e.PromptTokens) })
	series("counter", n.generationTokens, "Number of generation tokens processed.", func(e engineStat) float64 { return float64(e.GenerationTokens) })
	if n.success != "" {
		b.WriteString("# HELP " + n.success + " Count of successfully processed requests.\n# TYPE " + n.success + " counter\n")
		for k, e := range engines {
			b.WriteString(n.success + `{engine="` + strconv.Itoa(k) + `",finished_reason="length",model_name=` + model + "} " + strconv.FormatInt(e.ok, 10) + "\n")
		}
	}
	// Prefix-cache lookups and hits are counted on the prompts' text at the
	// front end, once for all replicas.
	q, h := s.prefix.counts()
	one := func(typ, name, help string, v float64) {
		if name == "" {
			return
		}
		b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " " + typ + "\n" + name + `{engine="0",model_name=` + model + "} " + num(v) + "\n")
	}
	one("counter", n.prefixQueries, "Prefix cache queries, in terms of number of queried tokens.", float64(q))
	one("counter", n.prefixHits, "Prefix cache hits, in terms of number of cached tokens.", float64(h))
	rate := 0.0
	if q > 0 {
		rate = float64(h) / float64(q)
	}
	one("gauge", n.prefixHitRate, "The prefix cache hit rate.", rate)
	labels := `{engine="0",model_name=` + model + `}`
	gauge := func(name, help string, v float64) {
		b.WriteString("# HELP " + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + labels + " " + num(v) + "\n")
	}
	late, hand := s.Lateness(), s.HandoffLateness()
	gauge("perflab:sim_token_lateness_p50_seconds", "Median of how late tokens were written to the socket relative to the simulated time.", late.P50.Seconds())
	gauge("perflab:sim_token_lateness_p99_seconds", "p99 of how late tokens were written to the socket relative to the simulated time.", late.P99.Seconds())
	gauge("perflab:sim_token_lateness_max_seconds", "Largest token lateness seen.", late.Max.Seconds())
	gauge("perflab:sim_token_handoff_lateness_p99_seconds", "p99 of how late the event loop handed tokens to their streams.", hand.P99.Seconds())
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	w.Write([]byte(b.String()))
}
