// Unit tests of the dashboard's logic (static/lib.js), run with
//   node --test internal/server/web/
// No npm packages: node's own test runner and assert.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const PL = require("./static/lib.js");

test("fmtNum groups thousands and picks decimals by size", () => {
  const cases = [
    [4123.4, undefined, "4,123"],
    [1234567.891, 2, "1,234,567.89"],
    [42.25, undefined, "42.3"], // 10 ≤ x < 100: one decimal
    [3.14159, undefined, "3.14"],
    [-1234.5, 0, "-1,235"],
    [-0.001, 1, "0.0"], // no "-0.0"
    [0, 2, "0.00"],
    [NaN, 1, "–"],
    [Infinity, 1, "–"],
    [null, 1, "–"],
    ["12", 1, "–"],
  ];
  for (const [x, d, want] of cases) assert.equal(PL.fmtNum(x, d), want, `fmtNum(${x}, ${d})`);
});

test("fmtPct always signs a change and never shows NaN", () => {
  assert.equal(PL.fmtPct(0.581), "+58.1%");
  assert.equal(PL.fmtPct(-0.0349), "-3.5%");
  assert.equal(PL.fmtPct(0), "0.0%");
  assert.equal(PL.fmtPct(0.00001), "0.0%");
  assert.equal(PL.fmtPct(1.5, 0), "+150%");
  assert.equal(PL.fmtPct(NaN), "–");
  assert.equal(PL.fmtPct(undefined), "–");
});

test("fmtDuration and parseDuration", () => {
  assert.equal(PL.fmtDuration(45.4), "45s");
  assert.equal(PL.fmtDuration(185), "3m 05s");
  assert.equal(PL.fmtDuration(7440), "2h 04m");
  assert.equal(PL.fmtDuration(-1), "–");
  assert.equal(PL.fmtDuration(null), "–");
  const cases = [["6s", 6], ["1m30s", 90], ["1h2m3.5s", 3723.5], ["250ms", 0.25], ["-", null], ["", null], ["5 parsecs", null], [12, 12]];
  for (const [s, want] of cases) assert.equal(PL.parseDuration(s), want, `parseDuration(${s})`);
});

test("fmtAgo", () => {
  const now = Date.parse("2026-11-25T12:00:00Z");
  assert.equal(PL.fmtAgo("2026-11-25T11:59:40Z", now), "just now");
  assert.equal(PL.fmtAgo("2026-11-25T11:55:00Z", now), "5 min ago");
  assert.equal(PL.fmtAgo("2026-11-25T09:00:00Z", now), "3 h ago");
  assert.equal(PL.fmtAgo("2026-11-23T12:00:00Z", now), "2 d ago");
  assert.equal(PL.fmtAgo("2026-10-01T12:00:00Z", now), "2026-10-01");
  assert.equal(PL.fmtAgo("not a date", now), "–");
  assert.equal(PL.fmtAgo("0001-01-01T00:00:00Z", now), "–"); // Go's zero time
});

test("delta and verdict: latencies win by going down", () => {
  assert.deepEqual(PL.delta(100, 150), { abs: 50, rel: 0.5 });
  assert.deepEqual(PL.delta(0, 5), { abs: 5, rel: null });
  assert.deepEqual(PL.delta(null, 5), { abs: null, rel: null });
  assert.equal(PL.verdict("total_tps", 0.2), "better");
  assert.equal(PL.verdict("total_tps", -0.2), "worse");
  assert.equal(PL.verdict("mean_tpot_ms", -0.2), "better");
  assert.equal(PL.verdict("p99_ttft_ms", 0.2), "worse");
  assert.equal(PL.verdict("total_tps", 0.003), "same");
  assert.equal(PL.verdict("total_tps", null), "same");
});

test("compareRows: values side by side, deltas against the first", () => {
  const rows = PL.compareRows(
    [{ total_tps: 1000, mean_tpot_ms: 20 }, { total_tps: 1500, mean_tpot_ms: 25 }, { total_tps: 900 }],
    [["total_tps", "Total"], ["mean_tpot_ms", "TPOT"]],
  );
  assert.equal(rows.length, 2);
  assert.equal(rows[0].label, "Total");
  assert.deepEqual(rows[0].cells.map((c) => c.value), [1000, 1500, 900]);
  assert.equal(rows[0].cells[0].delta, null);
  assert.equal(rows[0].cells[1].delta.rel, 0.5);
  assert.equal(rows[0].cells[1].verdict, "better");
  assert.ok(Math.abs(rows[0].cells[2].delta.rel + 0.1) < 1e-12);
  assert.equal(rows[0].cells[2].verdict, "worse");
  assert.equal(rows[1].cells[1].verdict, "worse"); // TPOT up 25%
  assert.equal(rows[1].cells[2].value, null); // missing stays missing
  assert.equal(rows[1].cells[2].delta.rel, null);
  assert.equal(rows[0].best, 1, "the highest throughput wins");
  assert.equal(rows[1].best, 0, "the lowest TPOT wins");
  const tie = PL.compareRows([{ x: 1 }, { x: 1 }], [["x", "X"]]);
  assert.equal(tie[0].best, null);
  const one = PL.compareRows([{ x: 1 }, {}], [["x", "X"]]);
  assert.equal(one[0].best, null);
});

// A stream as the server sends it (openapi.json's Event): every event
// carries the lab's state after it.
function stream() {
  const base = { planned: 10, unit: "tok/s" };
  let id = 0;
  const ev = (type, data) => ({ type, id: String(++id), data: Object.assign({ id, type }, base, data) });
  const trial = (n, name, score, extra) => ev("trial_ended", {
    stage: n <= 2 ? "engine" : "quantization", done: n, eta_seconds: (10 - n) * 2,
    trial: Object.assign({ key: `k${n}`, name, stage: n <= 2 ? "engine" : "quantization", workload: "ShareGPT", repeat: 0, status: "ok", score }, extra || {}),
  });
  return [
    ev("start", { name: "lab", done: 0, eta_seconds: null }),
    ev("stage", { stage: "engine", candidates: 2, done: 0 }),
    ev("trial_started", { stage: "engine", done: 0, trial: { key: "k1", name: "vLLM" } }),
    trial(1, "vLLM", 1000),
    ev("best", { stage: "engine", done: 1, incumbent: { name: "vLLM", score: 1000, unit: "tok/s" } }),
    trial(2, "SGLang", 1200),
    ev("best", { stage: "engine", done: 2, incumbent: { name: "SGLang", score: 1200, unit: "tok/s" } }),
    ev("stage", { stage: "quantization", candidates: 1, done: 2 }),
    trial(3, "SGLang + FP8", null, { status: "failed", failure_class: "oom" }),
    ev("done", { done: 3, winner: { name: "SGLang", score: 1200 }, gain: 0.2, gpu_hours: 0.5 }),
    ev("end", { done: 3, status: "done", gpu_hours: 0.5 }),
  ];
}

test("applyEvent builds the live state from the stream", () => {
  const st = PL.liveState();
  const evs = stream();
  evs.slice(0, 6).forEach((e) => PL.applyEvent(st, e));
  assert.equal(st.stage, "engine");
  assert.equal(st.trials.length, 2);
  assert.equal(st.done, 2);
  assert.equal(st.eta, 16);
  assert.deepEqual(st.incumbent, { name: "vLLM", score: 1000, unit: "tok/s" });
  evs.slice(6).forEach((e) => PL.applyEvent(st, e));
  assert.deepEqual(st.stages, ["engine", "quantization"]);
  assert.equal(st.trials.length, 3);
  assert.equal(st.trials[2].status, "failed");
  assert.equal(st.trials[2].score, null);
  assert.equal(st.trials[2].failure, "oom");
  assert.deepEqual(st.incumbents, [{ at: 1, score: 1000, name: "vLLM" }, { at: 2, score: 1200, name: "SGLang" }]);
  assert.deepEqual(st.winner, { name: "SGLang", score: 1200 });
  assert.equal(st.gain, 0.2);
  assert.equal(st.gpuHours, 0.5);
  assert.equal(st.status, "done");
  assert.equal(st.ended, true);
  assert.equal(st.eta, null);
});

test("applyEvent drops a replay: nothing counts twice after a reconnect", () => {
  const st = PL.liveState();
  const evs = stream();
  evs.slice(0, 7).forEach((e) => PL.applyEvent(st, e));
  // A fresh EventSource after a give-up replays from the start.
  const took = evs.map((e) => PL.applyEvent(st, e));
  assert.deepEqual(took, evs.map((_, i) => i >= 7));
  assert.equal(st.trials.length, 3);
  assert.equal(st.incumbents.length, 2);
});

test("a trial both stored and streamed is one row", () => {
  const st = PL.liveState();
  PL.seedTrials(st, [{ key: "k1", name: "vLLM", stage: "engine", workload: "ShareGPT", repeat: 0, status: "ok", total_throughput: 999, score: 999 }], "total_throughput", []);
  stream().forEach((e) => PL.applyEvent(st, e));
  assert.equal(st.trials.length, 3);
  assert.equal(st.trials[0].n, 1);
  assert.equal(st.trials[0].score, 1000); // the stream's figure wins
});

test("seedTrials: the top figure is the tuning workload's", () => {
  const st = PL.liveState();
  st.tuning = "ShareGPT";
  PL.seedTrials(st, [
    { key: "a", name: "x", workload: "ShareGPT", status: "ok", total_throughput: 100, score: 100 },
    { key: "b", name: "y", workload: "Short Prompt", status: "ok", total_throughput: 900, score: 900 },
  ], "total_throughput", []);
  assert.deepEqual(st.top, { name: "x", score: 100 });
  // The winner's last trial on the tuning workload places it, not its
  // generalization trials after.
  const st2 = PL.liveState();
  st2.tuning = "ShareGPT";
  PL.seedTrials(st2, [
    { key: "a", name: "w", workload: "ShareGPT", status: "ok", total_throughput: 100, score: 100 },
    { key: "b", name: "w", workload: "Short Prompt", status: "ok", total_throughput: 900, score: 900 },
  ], "total_throughput", [{ name: "w", decision: "kept", score: 100 }]);
  assert.deepEqual(st2.incumbents, [{ at: 1, score: 100, name: "w" }]);
});

test("trialFigures: the trial's fields, else its result's", () => {
  const f = PL.trialFigures({ total_throughput: 100, mean_tpot_ms: 5, result: { total_token_throughput: 99, p99_tpot_ms: 9, output_throughput: "x" } });
  assert.equal(f.total_throughput, 100);
  assert.equal(f.mean_tpot_ms, 5);
  assert.equal(f.p99_tpot_ms, 9);
  assert.equal(f.output_throughput, null);
  assert.equal(f.mean_itl_ms, null);
  assert.equal(PL.trialFigures(null).total_throughput, null);
});

test("seedTrials shows the API's score and derives none", () => {
  // A goodput run: the list's throughput is no score; the API's is.
  const st = PL.seedTrials(PL.liveState(), [
    { key: "a", name: "x", workload: "ShareGPT", status: "ok", total_throughput: 4000, score: 1.5, unit: "req/s within SLO", cost: { gpus: 2 } },
    { key: "b", name: "y", workload: "ShareGPT", status: "ok", total_throughput: 9000, score: null },
    { key: "c", name: "z", workload: "ShareGPT", status: "failed", total_throughput: 1, score: 7 },
  ], "goodput", []);
  assert.deepEqual(st.trials.map((t) => t.score), [1.5, null, null]);
  assert.deepEqual(st.top, { name: "x", score: 1.5 });
  assert.equal(PL.scoreOf, undefined);
});

test("seedTrials rebuilds the incumbent line of a stored run from its decisions", () => {
  const trials = [
    ["engine", "vLLM"], ["engine", "vLLM"], ["engine", "SGLang"], ["engine", "SGLang"],
    ["quantization", "SGLang + FP8"], ["quantization", "SGLang + FP8"], ["attention", "SGLang + FP8 + fa3"],
  ].map(([stage, name], i) => ({ key: "k" + i, stage, name, workload: "w", repeat: i % 2, status: "ok", total_throughput: 1000 + i * 100, score: 1000 + i * 100 }));
  const decisions = [
    { stage: "engine", name: "vLLM", decision: "baseline", score: 1050 },
    { stage: "engine", name: "SGLang", decision: "kept", score: 1250 },
    { stage: "quantization", name: "SGLang + FP8", decision: "kept", score: 1450 },
    { stage: "attention", name: "SGLang + FP8 + fa3", decision: "skipped", score: 1600 },
    { stage: "x", name: "never ran", decision: "kept", score: 9 },
  ];
  const st = PL.seedTrials(PL.liveState(), trials, "total_throughput", decisions);
  assert.deepEqual(st.incumbents.map((i) => [i.at, i.score]), [[2, 1050], [4, 1250], [6, 1450]]);
  assert.deepEqual(st.top, { name: "SGLang + FP8 + fa3", score: 1600 });
  assert.deepEqual(st.stages, ["engine", "quantization", "attention"]);
  assert.equal(st.done, 7);
});

test("scoreChart: dots inside the plot, failures on the axis, a step line for the incumbent", () => {
  const trials = [
    { n: 1, name: "a", score: 1000 }, { n: 2, name: "b", score: 1200 }, { n: 3, name: "c", score: null }, { n: 4, name: "d", score: 1100 },
  ];
  const inc = [{ at: 1, score: 1000 }, { at: 2, score: 1200 }];
  const g = PL.scoreChart(trials, inc, { width: 400, height: 200, left: 40, right: 10, top: 10, bottom: 30 });
  const p = g.plot;
  assert.equal(g.dots.length, 4);
  for (const d of g.dots) {
    assert.ok(d.x >= p.left && d.x <= p.left + p.width, `x ${d.x}`);
    assert.ok(d.y >= p.top && d.y <= p.top + p.height, `y ${d.y}`);
  }
  assert.equal(g.dots[0].x, p.left);
  assert.equal(g.dots[3].x, p.left + p.width);
  assert.ok(g.dots[1].y < g.dots[0].y, "a higher score sits higher");
  assert.equal(g.dots[2].ok, false);
  assert.equal(g.dots[2].y, p.top + p.height);
  // M x1,y(1000) H x2 V y(1200) L x2,y(1200) H x4
  const m = g.incumbentPath.match(/^M([\d.]+),([\d.]+) H([\d.]+) V([\d.]+) L([\d.]+),([\d.]+) H([\d.]+)$/);
  assert.ok(m, g.incumbentPath);
  const [x0, y0, x1, v, x2, y2, x3] = m.slice(1).map(Number);
  assert.equal(x0, g.dots[0].x);
  assert.ok(Math.abs(y0 - g.dots[0].y) < 0.1);
  assert.ok(Math.abs(x1 - g.dots[1].x) < 0.1);
  assert.ok(Math.abs(v - g.dots[1].y) < 0.1);
  assert.equal(x2, x1);
  assert.equal(y2, v);
  assert.ok(Math.abs(x3 - g.dots[3].x) < 0.1, "the last incumbent holds to the last trial");
  for (const t of g.yTicks) assert.ok(t.y >= p.top - 0.01 && t.y <= p.top + p.height + 0.01);
});

test("scoreChart keeps an incumbent past the last trial inside the plot", () => {
  const g = PL.scoreChart([{ n: 1, score: 10 }, { n: 2, score: 20 }], [{ at: 1, score: 10 }, { at: 9, score: 20 }], { width: 200, height: 100, left: 10, right: 10, top: 10, bottom: 10 });
  for (const m of g.incumbentPath.matchAll(/[MLH]([\d.]+)/g)) assert.ok(Number(m[1]) <= 190, g.incumbentPath);
});

test("scoreChart with one trial or none draws without NaN", () => {
  for (const trials of [[], [{ n: 1, score: 500 }], [{ n: 1, score: null }]]) {
    const g = PL.scoreChart(trials, [], {});
    const all = JSON.stringify(g);
    assert.ok(!all.includes("NaN") && !all.includes("null,") , all);
    assert.equal(g.incumbentPath, "");
  }
});

test("niceTicks picks round steps", () => {
  assert.deepEqual(PL.niceTicks(0, 100, 4), [0, 25, 50, 75, 100]);
  assert.deepEqual(PL.niceTicks(930, 1270, 4), [1000, 1100, 1200]);
  assert.deepEqual(PL.niceTicks(5, 5, 2), [4, 5, 6]);
  assert.deepEqual(PL.niceTicks(NaN, 1, 4), []);
});

test("backoff doubles from 500 ms and stops at 15 s", () => {
  assert.deepEqual([0, 1, 2, 3, 4, 5, 6, 10].map((a) => PL.backoff(a)), [500, 1000, 2000, 4000, 8000, 15000, 15000, 15000]);
});

// FakeES is an EventSource as the Follower uses it.
class FakeES {
  constructor(url) {
    this.url = url;
    this.readyState = 0;
    this.listeners = {};
    this.closed = false;
    FakeES.made.push(this);
  }
  addEventListener(type, f) { (this.listeners[type] = this.listeners[type] || []).push(f); }
  close() { this.closed = true; this.readyState = 2; }
  open() { this.readyState = 1; this.onopen && this.onopen(); }
  emit(type, id, data) { for (const f of this.listeners[type] || []) f({ data: typeof data === "string" ? data : JSON.stringify(data), lastEventId: String(id) }); }
  fail(closed) { this.readyState = closed ? 2 : 0; this.onerror && this.onerror(); }
}

test("Follower: events in order, closed at end", () => {
  FakeES.made = [];
  const got = [], states = [];
  const f = new PL.Follower("/api/v1/runs/1/events", { onEvent: (e) => got.push(e), onState: (s) => states.push(s) }, { make: (u) => new FakeES(u) });
  const es = FakeES.made[0];
  assert.equal(es.url, "/api/v1/runs/1/events");
  es.open();
  es.emit("stage", 1, { stage: "engine" });
  es.emit("trial_ended", 2, { trial: { key: "a" } });
  es.emit("end", 3, { status: "done" });
  assert.deepEqual(got.map((e) => [e.type, e.id]), [["stage", "1"], ["trial_ended", "2"], ["end", "3"]]);
  assert.equal(got[1].data.trial.key, "a");
  assert.equal(es.closed, true, "an EventSource left open would reconnect forever");
  assert.equal(f.closed, true);
  assert.deepEqual(states, ["live", "ended"]);
});

test("Follower: reconnects with backoff when the browser gives up, and a replay is dropped", () => {
  FakeES.made = [];
  const timers = [];
  const st = PL.liveState();
  const states = [];
  const f = new PL.Follower("/e", { onEvent: (e) => PL.applyEvent(st, e), onState: (s, w) => states.push([s, w]) }, {
    make: (u) => new FakeES(u), setTimeout: (fn, ms) => { timers.push([fn, ms]); return timers.length; }, clearTimeout: () => {},
  });
  const evs = stream();
  const first = FakeES.made[0];
  first.open();
  for (const e of evs.slice(0, 5)) first.emit(e.type, e.id, e.data);
  first.fail(false); // the browser retries by itself (with Last-Event-ID)
  assert.equal(timers.length, 0);
  first.fail(true); // the browser gave up: the follower retries
  assert.equal(first.closed, true);
  assert.deepEqual(timers.map((t) => t[1]), [500]);
  timers[0][0]();
  const second = FakeES.made[1];
  assert.ok(second, "a new EventSource after the backoff");
  second.fail(true);
  assert.deepEqual(timers.map((t) => t[1]), [500, 1000], "the wait doubles");
  timers[1][0]();
  const third = FakeES.made[2];
  third.open();
  for (const e of evs) third.emit(e.type, e.id, e.data); // the whole stream again
  assert.equal(st.trials.length, 3);
  assert.equal(st.incumbents.length, 2);
  assert.equal(st.status, "done");
  assert.equal(third.closed, true);
  f.close();
  assert.equal(FakeES.made.length, 3);
  assert.deepEqual(states.map((s) => s[0]), ["live", "retry", "retry", "retry", "live", "ended"]);
});

test("Follower: a resumed run's earlier end does not close the stream", () => {
  FakeES.made = [];
  const st = PL.liveState();
  const states = [];
  // The page loaded when the latest event was 5: an end before it is history.
  new PL.Follower("/e", { onEvent: (e) => PL.applyEvent(st, e), onState: (s) => states.push(s) }, {
    make: (u) => new FakeES(u), final: (ev) => Number(ev.id) >= 5,
  });
  const es = FakeES.made[0];
  es.open();
  es.emit("start", 1, { done: 0 });
  es.emit("trial_ended", 2, { done: 1, trial: { key: "a", name: "A", status: "ok", score: 1 } });
  es.emit("end", 3, { status: "interrupted", done: 1 });
  assert.equal(es.closed, false, "the replay goes on past the earlier lab's end");
  assert.equal(st.status, "interrupted");
  es.emit("start", 4, { done: 1 });
  assert.equal(st.status, "running");
  assert.equal(st.ended, false);
  es.emit("trial_ended", 5, { done: 2, trial: { key: "b", name: "B", status: "ok", score: 2 } });
  es.emit("end", 6, { status: "done", done: 2 });
  assert.equal(es.closed, true);
  assert.equal(st.status, "done");
  assert.equal(st.trials.length, 2);
  assert.deepEqual(states, ["live", "ended"]);
});

test("Follower: bad JSON is reported, not thrown", () => {
  FakeES.made = [];
  const errs = [], got = [];
  new PL.Follower("/e", { onEvent: (e) => got.push(e), onError: (e) => errs.push(e.message) }, { make: (u) => new FakeES(u) });
  FakeES.made[0].emit("stage", 1, "{not json");
  assert.equal(got.length, 0);
  assert.match(errs[0], /bad JSON in stage event/);
});

test("Follower: close stops a pending reconnect", () => {
  FakeES.made = [];
  const timers = [], cleared = [];
  const f = new PL.Follower("/e", {}, { make: (u) => new FakeES(u), setTimeout: (fn) => { timers.push(fn); return 7; }, clearTimeout: (t) => cleared.push(t) });
  FakeES.made[0].fail(true);
  f.close();
  assert.deepEqual(cleared, [7]);
  timers[0](); // a timer that fires anyway opens nothing
  assert.equal(FakeES.made.length, 1);
});

test("parseRoute", () => {
  const cases = [
    ["", { page: "runs" }],
    ["#/", { page: "runs" }],
    ["#/runs?status=running", { page: "runs" }],
    ["#/runs/7", { page: "run", id: "7" }],
    ["#/runs/7/report", { page: "report", id: "7" }],
    ["#/runs/7/trials/engine%2Fabc%2FShareGPT~1%2Fr0", { page: "trial", id: "7", key: "engine/abc/ShareGPT~1/r0" }],
    ["#/runs/7/trials/engine/abc/ShareGPT~1/r0", { page: "trial", id: "7", key: "engine/abc/ShareGPT~1/r0" }],
    ["#/compare?runs=1,2", { page: "compare" }],
    ["#/new", { page: "new" }],
    ["#/nowhere", { page: "notfound" }],
  ];
  for (const [hash, want] of cases) {
    const got = PL.parseRoute(hash);
    for (const [k, v] of Object.entries(want)) assert.equal(got[k], v, `${hash}: ${k}`);
  }
  assert.equal(PL.parseRoute("#/runs?status=running&model=Qwen%2FQwen3-14B").query.model, "Qwen/Qwen3-14B");
});

test("trial lists survive keys with commas and colons", () => {
  const refs = [["7", "engine/a,b/W~1/r0"], ["12", "x:y/r1"]];
  const hash = "#/compare?trials=" + refs.map(([r, k]) => encodeURIComponent(r + ":" + k)).join(",");
  const rt = PL.parseRoute(hash);
  const got = PL.splitList(rt.query.raw.trials).map(PL.trialRef);
  assert.deepEqual(got, refs.map(([run, key]) => ({ run, key })));
  assert.equal(PL.trialRef("nokey"), null);
  assert.equal(PL.trialRef("x:key"), null);
  assert.deepEqual(PL.splitList(" 1, 2,,3 "), ["1", "2", "3"]);
});

test("extractProblems and problemsByLine read the server's 400", () => {
  const one = PL.extractProblems({ error: "objective \"x\": want total_throughput, throughput_per_gpu or goodput", field: "$.objective.metric", line: 21 });
  assert.deepEqual(one, [{ field: "$.objective.metric", path: "", line: 21, column: 0, message: "objective \"x\": want total_throughput, throughput_per_gpu or goodput" }]);
  const path = PL.extractProblems({ error: "path outside the data root", path: "/etc/passwd", field: "$.tokenizer", line: 3 });
  assert.equal(path[0].path, "/etc/passwd");
  const none = PL.extractProblems({ error: "yaml: bad indentation" });
  assert.equal(none[0].line, 0);
  assert.deepEqual(PL.extractProblems(null)[0].message, "invalid spec");
  const byLine = PL.problemsByLine([...one, ...none, { line: 21, message: "again" }]);
  assert.deepEqual([...byLine.keys()].sort(), [0, 21]);
  assert.equal(byLine.get(21).length, 2);
});

test("terminal statuses", () => {
  for (const s of ["done", "failed", "interrupted"]) assert.equal(PL.terminal(s), true, s);
  assert.equal(PL.terminal("running"), false);
});

test("the page's scripts parse", () => {
  const fs = require("node:fs");
  const vm = require("node:vm");
  for (const f of ["static/app.js", "static/lib.js"]) {
    assert.doesNotThrow(() => new vm.Script(fs.readFileSync(require("node:path").join(__dirname, f), "utf8"), { filename: f }), f);
  }
});
