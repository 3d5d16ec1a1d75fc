package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/perflab/perflab/internal/sim"
)

// fakeModel emits a request's first token ttft after arrival and then one
// token every itl, all requests stepping together like a batch.
type fakeModel struct {
	mu       sync.Mutex
	ttft     float64
	itl      float64
	reqs     map[string]*fakeReq
	now      float64
	prompt   int64
	gen      int64
	canceled []string
}

type fakeReq struct {
	next float64
	left int
}

func newFake(ttft, itl float64) *fakeModel {
	return &fakeModel{ttft: ttft, itl: itl, reqs: map[string]*fakeReq{}}
}

func (f *fakeModel) Submit(r sim.Req) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs[r.ID] = &fakeReq{next: r.Arrival + f.ttft, left: r.OutputLen}
	f.prompt += int64(r.PromptLen)
}

func (f *fakeModel) NextEventTime() (float64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := math.Inf(1), false
	for _, r := range f.reqs {
		t, ok = math.Min(t, r.next), true
	}
	return t, ok
}

func (f *fakeModel) Advance(to float64) []sim.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var evs []sim.Event
	for id, r := range f.reqs {
		for r.left > 0 && r.next <= to {
			r.left--
			f.gen++
			evs = append(evs, sim.Event{ReqID: id, Time: r.next, Tokens: 1, Done: r.left == 0})
			r.next += f.itl
		}
		if r.left == 0 {
			delete(f.reqs, id)
		}
	}
	sort.Slice(evs, func(i, j int) bool { return evs[i].Time < evs[j].Time })
	f.now = math.Max(f.now, to)
	return evs
}

func (f *fakeModel) Stats() sim.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sim.Stats{Running: len(f.reqs), PromptTokens: f.prompt, GenerationTokens: f.gen}
}

func (f *fakeModel) Cancel(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.reqs[id]
	delete(f.reqs, id)
	f.canceled = append(f.canceled, id)
	return ok
}

func (f *fakeModel) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

func newTestServer(t *testing.T, cfg Config) (*Server, *httptest.Server) {
	t.Helper()
	if cfg.Root == "" {
		cfg.Root = "Qwen/Qwen3-14B"
	}
	if cfg.MaxModelLen == 0 {
		cfg.MaxModelLen = 4096
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(func() { ts.Close(); s.Close() })
	return s, ts
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// readSSE returns the decoded data events and whether [DONE] ended them.
func readSSE(t *testing.T, r io.Reader) ([]map[string]any, bool) {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not an SSE data line: %q", line)
		}
		if data == "[DONE]" {
			return out, true
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		out = append(out, m)
	}
	return out, false
}

func TestChatStreamShape(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: newFake(0.01, 0.002)})
	resp := post(t, ts.URL+"/v1/chat/completions", `{"model":"Qwen/Qwen3-14B","messages":[{"role":"user","content":"hello world, how are you"}],"max_tokens":5,"stream":true,"stream_options":{"include_usage":true}}`)
	defer resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	chunks, done := readSSE(t, resp.Body)
	if !done {
		t.Fatal("stream did not end with data: [DONE]")
	}
	// role chunk + 5 token chunks + usage chunk
	if len(chunks) != 7 {
		t.Fatalf("got %d chunks, want 7: %v", len(chunks), chunks)
	}
	var text strings.Builder
	for i, c := range chunks {
		if c["object"] != "chat.completion.chunk" || c["model"] != "Qwen/Qwen3-14B" || !strings.HasPrefix(c["id"].(string), "chatcmpl-") {
			t.Errorf("chunk %d header: %v", i, c)
		}
		if i == len(chunks)-1 {
			break
		}
		ch := c["choices"].([]any)[0].(map[string]any)
		delta := ch["delta"].(map[string]any)
		if i == 0 {
			if delta["role"] != "assistant" || delta["content"] != "" {
				t.Errorf("first chunk delta = %v, want the assistant role", delta)
			}
			continue
		}
		text.WriteString(delta["content"].(string))
		wantFinish := any(nil)
		if i == 5 {
			wantFinish = "length"
		}
		if ch["finish_reason"] != wantFinish {
			t.Errorf("chunk %d finish_reason = %v, want %v", i, ch["finish_reason"], wantFinish)
		}
	}
	if got := text.String(); got != " the of and to in" {
		t.Errorf("text = %q", got)
	}
	u := chunks[6]
	if len(u["choices"].([]any)) != 0 {
		t.Errorf("usage chunk has choices: %v", u)
	}
	usage := u["usage"].(map[string]any)
	wantPrompt, _ := EstimateCounter{}.CountChat([]Message{{"user", "hello world, how are you"}})
	if usage["completion_tokens"] != 5.0 || usage["prompt_tokens"] != float64(wantPrompt) || usage["total_tokens"] != float64(wantPrompt+5) {
		t.Errorf("usage = %v (prompt estimate %d)", usage, wantPrompt)
	}
}

func TestCompletionsStreamNoUsage(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001)})
	resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"abcdefgh","max_tokens":3,"stream":true}`)
	defer resp.Body.Close()
	chunks, done := readSSE(t, resp.Body)
	if !done || len(chunks) != 3 {
		t.Fatalf("done=%v, %d chunks: %v", done, len(chunks), chunks)
	}
	for i, c := range chunks {
		ch := c["choices"].([]any)[0].(map[string]any)
		if c["object"] != "text_completion" || ch["text"] != filler[i] {
			t.Errorf("chunk %d = %v", i, c)
		}
		if _, ok := c["usage"]; ok {
			t.Errorf("usage without include_usage: %v", c)
		}
	}
}

func TestNonStreaming(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001)})
	for _, tc := range []struct{ path, body, object string }{
		{"/v1/chat/completions", `{"model":"Qwen/Qwen3-14B","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_completion_tokens":4}`, "chat.completion"},
		{"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":[1,2,3,4,5,6,7],"max_tokens":4}`, "text_completion"},
	} {
		resp := post(t, ts.URL+tc.path, tc.body)
		var m struct {
			Object  string
			Choices []struct {
				Text         string
				Message      struct{ Role, Content string }
				FinishReason string `json:"finish_reason"`
			}
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
				TotalTokens      int `json:"total_tokens"`
			}
		}
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		text := m.Choices[0].Text + m.Choices[0].Message.Content
		if m.Object != tc.object || text != " the of and to" || m.Choices[0].FinishReason != "length" || m.Usage.CompletionTokens != 4 || m.Usage.TotalTokens != m.Usage.PromptTokens+4 {
			t.Errorf("%s: %+v", tc.path, m)
		}
		if tc.object == "text_completion" && m.Usage.PromptTokens != 7 {
			t.Errorf("token-id prompt counted %d, want 7", m.Usage.PromptTokens)
		}
	}
}

func TestErrors(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001), MaxModelLen: 100})
	long := strings.Repeat("abcd", 200)
	cases := []struct {
		name, path, body string
		code             int
		msg              string
	}{
		{"prompt over context", "/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"` + long + `","max_tokens":1}`, 400,
			"This model's maximum context length is 100 tokens. However, your request has 200 input tokens."},
		{"max_tokens over context", "/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"abcdabcd","max_tokens":99}`, 400,
			"'max_tokens' or 'max_completion_tokens' is too large: 99. This model's maximum context length is 100 tokens and your request has 2 input tokens (99 > 100 - 2)."},
		{"unknown model", "/v1/chat/completions", `{"model":"nope","messages":[{"role":"user","content":"x"}]}`, 404, "The model `nope` does not exist."},
		{"bad json", "/v1/completions", `{"model":`, 400, "invalid JSON body"},
		{"no messages", "/v1/chat/completions", `{"model":"Qwen/Qwen3-14B","messages":[]}`, 400, "messages must be a non-empty list"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp := post(t, ts.URL+tc.path, tc.body)
			defer resp.Body.Close()
			var m struct {
				Error struct {
					Message, Type string
					Code          int
				}
			}
			json.NewDecoder(resp.Body).Decode(&m)
			if resp.StatusCode != tc.code || m.Error.Code != tc.code || !strings.Contains(m.Error.Message, tc.msg) {
				t.Errorf("status %d, body %+v; want %d with %q", resp.StatusCode, m, tc.code, tc.msg)
			}
		})
	}
}

func TestModelsHealthAuth(t *testing.T) {
	_, ts := newTestServer(t, Config{Model: newFake(0.001, 0.001), ServedModelNames: []string{"qwen"}, APIKey: "k"})
	resp, _ := http.Get(ts.URL + "/health")
	if resp.StatusCode != 200 {
		t.Errorf("/health = %d", resp.StatusCode)
	}
	resp, _ = http.Get(ts.URL + "/v1/models")
	if resp.StatusCode != 401 {
		t.Errorf("/v1/models without key = %d, want 401", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", ts.URL+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Object string
		Data   []struct {
			ID, Object, Root string
			MaxModelLen      int `json:"max_model_len"`
		}
	}
	json.NewDecoder(resp.Body).Decode(&m)
	if m.Object != "list" || len(m.Data) != 1 || m.Data[0].ID != "qwen" || m.Data[0].Root != "Qwen/Qwen3-14B" || m.Data[0].MaxModelLen != 4096 {
		t.Errorf("/v1/models = %+v", m)
	}
}

// TestTimeScale checks that K× time scale runs the model K× faster in wall
// time: 1 s of model time (TTFT 0.2 s + 80 tokens × 10 ms) at K=10 takes
// about 0.1 s.
func TestTimeScale(t *testing.T) {
	for _, k := range []float64{1, 10} {
		_, ts := newTestServer(t, Config{Model: newFake(0.2, 0.01), TimeScale: k})
		start := time.Now()
		resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":81,"stream":true}`)
		var first time.Duration
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if first == 0 && strings.HasPrefix(sc.Text(), "data: {") {
				first = time.Since(start)
			}
		}
		resp.Body.Close()
		total := time.Since(start)
		wantFirst, wantTotal := time.Duration(0.2/k*1e9), time.Duration(1.0/k*1e9)
		if first < wantFirst || first > wantFirst+wantFirst/2+30*time.Millisecond {
			t.Errorf("K=%g: first token after %v, want about %v", k, first, wantFirst)
		}
		if total < wantTotal || total > wantTotal+wantTotal/2+50*time.Millisecond {
			t.Errorf("K=%g: stream took %v, want about %v", k, total, wantTotal)
		}
	}
}

// TestCancelFreesSlot disconnects a client mid-stream and checks the model
// was told, so its batch slot is free for others.
func TestCancelFreesSlot(t *testing.T) {
	fake := newFake(0.001, 0.01)
	_, ts := newTestServer(t, Config{Model: fake})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":1000,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	if fake.running() != 1 {
		t.Fatalf("running = %d before cancel", fake.running())
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(2 * time.Second)
	for fake.running() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if fake.running() != 0 || len(fake.canceled) != 1 {
		t.Errorf("after disconnect: running %d, canceled %v", fake.running(), fake.canceled)
	}
}

func TestMetrics(t *testing.T) {
	fake := newFake(0.001, 0.001)
	_, ts := newTestServer(t, Config{Model: fake})
	for i := 0; i < 3; i++ {
		resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":[1,2,3,4,5,6,7,8,9,10],"max_tokens":7}`)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	time.Sleep(20 * time.Millisecond) // the loop publishes stats after each advance
	resp, _ := http.Get(ts.URL + "/metrics")
	b, _ := io.ReadAll(resp.Body)
	text := string(b)
	for _, want := range []string{
		`vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-14B"} 0`,
		`vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-14B"} 0`,
		`vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-14B"} 30`,
		`vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-14B"} 21`,
		`vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-14B"} 3`,
		"# TYPE vllm:kv_cache_usage_perc gauge", "# TYPE vllm:gpu_cache_usage_perc gauge", "# TYPE vllm:num_preemptions_total counter",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, text)
		}
	}
}

// TestRealModel streams through the real simulated engine.
func TestRealModel(t *testing.T) {
	eng, err := sim.New(sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctxLen := eng.Params().MaxModelLen
	_, ts := newTestServer(t, Config{Model: eng, MaxModelLen: ctxLen, TimeScale: 50})
	var wg sync.WaitGroup
	errs := make(chan string, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(
				`{"model":"Qwen/Qwen3-14B","messages":[{"role":"user","content":"`+strings.Repeat("word ", 200)+`"}],"max_tokens":50,"stream":true,"stream_options":{"include_usage":true}}`))
			if err != nil {
				errs <- err.Error()
				return
			}
			defer resp.Body.Close()
			chunks, done := readSSE(t, resp.Body)
			if !done || len(chunks) < 3 {
				errs <- "stream ended early"
				return
			}
			usage := chunks[len(chunks)-1]["usage"].(map[string]any)
			if usage["completion_tokens"] != 50.0 {
				errs <- "usage " + fmt.Sprint(usage["completion_tokens"]) + " completion tokens"
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	st := eng.Stats()
	if st.GenerationTokens != 20*50 {
		t.Errorf("engine generated %d tokens, want 1000", st.GenerationTokens)
	}
	resp := post(t, ts.URL+"/v1/completions", `{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":`+strconv.Itoa(ctxLen)+`}`)
	resp.Body.Close()
	if resp.StatusCode != 400 {
		t.Errorf("request over the %d-token context: status %d, want 400", ctxLen, resp.StatusCode)
	}
}

// The same with the real simulated engine: a disconnect frees the running
// slot, as /metrics shows.
func TestCancelFreesSlotRealEngine(t *testing.T) {
	eng, err := sim.New(sim.Params{Engine: "vllm", Version: "0.11.0", Model: "Qwen/Qwen3-14B", GPU: "H100"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, ts := newTestServer(t, Config{Model: eng, MaxModelLen: eng.Params().MaxModelLen, TimeScale: 1})
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/completions", strings.NewReader(`{"model":"Qwen/Qwen3-14B","prompt":"x","max_tokens":5000,"stream":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	for i := 0; i < 3; i++ {
		if _, err := br.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	running := func() string {
		r, err := http.Get(ts.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer r.Body.Close()
		b, _ := io.ReadAll(r.Body)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "vllm:num_requests_running{") {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		return "?"
	}
	if got := running(); got != "1" {
		t.Fatalf("running = %s before the disconnect", got)
	}
	cancel()
	resp.Body.Close()
	deadline := time.Now().Add(3 * time.Second)
	for running() != "0" && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := running(); got != "0" {
		t.Fatalf("running = %s after the disconnect, want 0", got)
	}
}
