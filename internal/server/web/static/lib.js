// lib.js holds the dashboard's logic that touches no DOM: formatting,
// deltas, the live run's state built from the event stream, the score
// chart's geometry, the stream follower with its reconnect backoff, the
// hash routes and the spec problems. It is a plain
// script (window.PL in the browser, module.exports under node) so that
// `node --test internal/server/web/lib.test.js` tests it without a bundler.
(function (root) {
  "use strict";

  // finite is true for a number that can be shown; NaN and ±Inf never reach
  // the page (the report package keeps them out for the same reason).
  function finite(x) {
    return typeof x === "number" && isFinite(x);
  }

  // fmtNum formats with thousands separators and a fixed number of decimals;
  // "–" for anything that is not a finite number.
  function fmtNum(x, digits) {
    if (!finite(x)) return "–";
    const d = digits === undefined ? (Math.abs(x) >= 100 ? 0 : Math.abs(x) >= 10 ? 1 : 2) : digits;
    const s = Math.abs(x).toFixed(d);
    const [int, frac] = s.split(".");
    const grouped = int.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
    return (x < 0 && Number(s) !== 0 ? "-" : "") + grouped + (frac ? "." + frac : "");
  }

  // fmtPct formats a relative change (0.581 → "+58.1%"); the sign is always
  // shown because a gain and a loss must not look alike.
  function fmtPct(r, digits) {
    if (!finite(r)) return "–";
    const d = digits === undefined ? 1 : digits;
    const v = (r * 100).toFixed(d);
    if (Number(v) === 0) return (0).toFixed(d) + "%";
    return (r > 0 ? "+" : "") + v + "%";
  }

  // fmtDuration formats seconds the way a person reads a wait: "45s",
  // "3m 05s", "2h 04m".
  function fmtDuration(sec) {
    if (!finite(sec) || sec < 0) return "–";
    sec = Math.round(sec);
    if (sec < 60) return sec + "s";
    const m = Math.floor(sec / 60), s = sec % 60;
    if (m < 60) return m + "m " + String(s).padStart(2, "0") + "s";
    const h = Math.floor(m / 60);
    return h + "h " + String(m % 60).padStart(2, "0") + "m";
  }

  // parseDuration reads a Go duration string ("1m30s", "6s", "1h2m3.5s",
  // "250ms") into seconds; null for "-" or anything else it cannot read,
  // so the page shows "–" rather than a wrong number.
  function parseDuration(s) {
    if (finite(s)) return s;
    if (typeof s !== "string" || s === "" || s === "-") return null;
    const re = /(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)/g;
    let total = 0, seen = 0, m;
    while ((m = re.exec(s)) !== null) {
      const v = parseFloat(m[1]);
      seen += m[0].length;
      switch (m[2]) {
        case "h": total += v * 3600; break;
        case "m": total += v * 60; break;
        case "s": total += v; break;
        case "ms": total += v / 1e3; break;
        case "us": case "µs": total += v / 1e6; break;
        case "ns": total += v / 1e9; break;
      }
    }
    return seen === s.length ? total : null;
  }

  // fmtAgo says how long ago a time was ("just now", "5 min ago",
  // "3 h ago", "2 d ago"), or the date past a week.
  function fmtAgo(when, now) {
    const t = when instanceof Date ? when.getTime() : Date.parse(when);
    if (!finite(t) || t <= 0) return "–";
    const n = now === undefined ? Date.now() : (now instanceof Date ? now.getTime() : now);
    const s = Math.max(0, (n - t) / 1000);
    if (s < 45) return "just now";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    if (s < 7 * 86400) return Math.round(s / 86400) + " d ago";
    return new Date(t).toISOString().slice(0, 10);
  }

  // delta is b against a: the absolute and relative change; rel is null when
  // a is 0 or either side is missing, so no division by zero shows up as
  // "Infinity%".
  function delta(a, b) {
    if (!finite(a) || !finite(b)) return { abs: null, rel: null };
    return { abs: b - a, rel: a === 0 ? null : (b - a) / Math.abs(a) };
  }

  // LOWER_IS_BETTER lists the figures where a smaller number wins: the
  // latencies (every *_ms figure) and failures.
  function lowerIsBetter(metric) {
    return /_ms$|^failed$|ttft|tpot|itl|e2el|latency/i.test(metric);
  }

  // verdict classes a change for colouring: "better", "worse" or "same"
  // (within tol, 0.5% by default: the noise floor of a repeatable run).
  function verdict(metric, rel, tol) {
    if (!finite(rel)) return "same";
    const t = tol === undefined ? 0.005 : tol;
    if (Math.abs(rel) <= t) return "same";
    const up = rel > 0;
    return up !== lowerIsBetter(metric) ? "better" : "worse";
  }

  // compareRows lays out figures of two or more items side by side: for
  // each metric, each item's value and its delta against the first item.
  // items are objects of metric → number; metrics the keys to show, in
  // order, as [key, label] pairs.
  // best is the index of the winning item for the metric (null when fewer
  // than two have it, or when they tie), so the page can mark it.
  function compareRows(items, metrics) {
    return metrics.map(([key, label]) => {
      const base = items.length ? items[0][key] : undefined;
      const vals = items.map((it) => (it && finite(it[key]) ? it[key] : null));
      const have = vals.filter((v) => v !== null);
      let best = null;
      if (have.length >= 2) {
        const top = lowerIsBetter(key) ? Math.min(...have) : Math.max(...have);
        if (have.some((v) => v !== top)) best = vals.indexOf(top);
      }
      return {
        key,
        label,
        best,
        cells: items.map((it, i) => {
          const v = it ? it[key] : undefined;
          if (i === 0) return { value: finite(v) ? v : null, delta: null, verdict: "same" };
          const d = delta(base, v);
          return { value: finite(v) ? v : null, delta: d, verdict: verdict(key, d.rel) };
        }),
      };
    });
  }

  // liveState is the live page's model. It is seeded from the stored
  // trials (seedTrials) and then follows the event stream, whose events
  // each carry the lab's state after them (done, planned, ETA, incumbent,
  // top, GPU-hours): the page shows those figures as the server computed
  // them for the terminal too, so the two never disagree.
  function liveState() {
    return {
      status: "running", // the RunStatus: running, done, failed, interrupted
      stage: "",
      tuning: "", // the tuning workload's name, when known
      stages: [], // stage names in the order they began
      candidates: 0,
      planned: 0,
      done: 0,
      running: "", // the trial running now, by name
      trials: [], // {n, key, name, stage, workload, repeat, status, score, reused, failure}
      byKey: {},
      incumbent: null, // {name, score, unit}
      incumbents: [], // {at, score, name}: the incumbent line, by trials ended
      top: null, // {name, score}
      eta: null, // seconds; null when unknown
      gpuHours: 0,
      elapsed: null,
      unit: "",
      lastId: 0,
      winner: null,
      gain: null,
      stopped: "",
      error: "",
      ended: false,
    };
  }

  // num reads a number that may come as a string; null otherwise.
  function num(x) {
    if (finite(x)) return x;
    if (typeof x === "string" && x.trim() !== "" && isFinite(Number(x))) return Number(x);
    return null;
  }

  // pick returns the first of the named fields that is present.
  function pick(o, ...names) {
    if (!o) return undefined;
    for (const n of names) if (o[n] !== undefined && o[n] !== null) return o[n];
    return undefined;
  }

  // addTrial records an ended trial once: a replayed or reconnected stream,
  // or a trial both stored and streamed, updates the row it already has.
  function addTrial(st, t) {
    const have = t.key ? st.byKey[t.key] : undefined;
    if (have) {
      Object.assign(have, t, { n: have.n });
      return have;
    }
    const row = Object.assign({ n: st.trials.length + 1 }, t);
    st.trials.push(row);
    if (row.key) st.byKey[row.key] = row;
    return row;
  }

  // TRIAL_FIGURES maps the figures the pages show to the trial's own field
  // and the stored result's (vLLM --save-result) key.
  const TRIAL_FIGURES = [
    ["total_throughput", "total_token_throughput"], ["output_throughput", "output_throughput"],
    ["request_throughput", "request_throughput"], ["mean_ttft_ms", "mean_ttft_ms"], ["p99_ttft_ms", "p99_ttft_ms"],
    ["mean_tpot_ms", "mean_tpot_ms"], ["p99_tpot_ms", "p99_tpot_ms"], ["mean_itl_ms", "mean_itl_ms"],
    ["duration", "duration"], ["completed", "completed"], ["failed", "failed"],
  ];

  // trialFigures reads a trial's figures: its own fields first (the list
  // carries a few), then its stored result's; a figure neither has is null.
  function trialFigures(t) {
    const res = (t && t.result) || {};
    const out = {};
    for (const [k, rk] of TRIAL_FIGURES) {
      const v = num(t ? t[k] : undefined);
      out[k] = v !== null ? v : num(res[rk]);
    }
    return out;
  }

  // seedTrials puts the stored trials (GET /runs/{id}/trials) into the state,
  // with the incumbent line rebuilt from the run's decisions: each kept
  // configuration (or the baseline) becomes the incumbent after its last
  // trial. A run followed live gets its line from the best events instead.
  // Each trial's score is the API's (GET /runs/{id}/trials scores it under
  // the run's objective, null when it has none): the page derives none, so
  // goodput and SLO runs show theirs after a reload too. _objective is
  // unused, kept for callers.
  function seedTrials(st, trials, _objective, decisions) {
    for (const t of trials || []) {
      addTrial(st, {
        key: t.key, name: t.name, stage: t.stage, workload: t.workload, repeat: t.repeat || 0,
        status: t.status, score: t.status === "ok" ? num(t.score) : null, reused: false, failure: t.failure_class || "",
      });
    }
    st.done = Math.max(st.done, st.trials.length);
    for (const t of st.trials) {
      // Only the tuning workload's figures compete (st.tuning, when known).
      const tuning = !st.tuning || t.workload === st.tuning;
      if (tuning && finite(t.score) && (st.top === null || t.score > st.top.score)) st.top = { name: t.name, score: t.score };
      if (t.stage && !st.stages.includes(t.stage)) st.stages.push(t.stage);
    }
    if (!st.incumbents.length) {
      st.incumbents = incumbentsFromDecisions(st.trials.filter((t) => !st.tuning || t.workload === st.tuning), decisions);
    }
    return st;
  }

  // incumbentsFromDecisions rebuilds the incumbent line of a stored run: the
  // baseline and each kept decision, at the last trial of that
  // configuration in its stage (or anywhere when the stage has none).
  function incumbentsFromDecisions(trials, decisions) {
    const out = [];
    for (const d of decisions || []) {
      if (d.decision !== "kept" && d.decision !== "baseline") continue;
      const score = num(d.score);
      if (score === null) continue;
      let at = 0;
      for (const t of trials) {
        if (t.name === d.name && (t.stage === d.stage || !d.stage)) at = t.n;
      }
      if (at === 0) for (const t of trials) if (t.name === d.name) at = t.n;
      if (at === 0) continue;
      out.push({ at, score, name: d.name });
    }
    out.sort((a, b) => a.at - b.at);
    return out;
  }

  // applyEvent folds one stream event into the state: ev is {type, id, data}
  // with data the Event JSON. An event whose id is not past the last one
  // seen is a replay after a reconnect and is dropped. Unknown types only
  // update the common figures, so a newer server does not break the page.
  function applyEvent(st, ev) {
    const id = num(ev.id);
    if (id !== null) {
      if (id <= st.lastId) return false;
      st.lastId = id;
    }
    const d = ev.data || {};
    switch (ev.type) {
      case "start":
        st.status = "running";
        st.ended = false;
        break;
      case "stage":
        st.candidates = num(d.candidates) || 0;
        break;
      case "trial_started":
        st.running = (d.trial && d.trial.name) || "";
        break;
      case "trial_ended": {
        const t = d.trial || {};
        const status = t.status || "ok";
        addTrial(st, {
          key: t.key || "", name: t.name || "", stage: t.stage || d.stage || st.stage, workload: t.workload || "",
          repeat: num(t.repeat) || 0, status, score: status === "ok" ? num(t.score) : null,
          reused: !!t.reused, failure: t.failure_class || "",
        });
        st.running = "";
        break;
      }
      case "best": {
        const inc = d.incumbent;
        if (inc && finite(inc.score)) {
          const at = num(d.done) !== null ? d.done : st.trials.length;
          const last = st.incumbents[st.incumbents.length - 1];
          if (!last || last.at !== at || last.score !== inc.score) st.incumbents.push({ at, score: inc.score, name: inc.name });
        }
        break;
      }
      case "done":
        st.winner = d.winner || null;
        st.gain = num(d.gain);
        st.stopped = d.stopped || "";
        break;
      case "end":
        st.status = d.status || "done";
        st.error = d.error || "";
        st.ended = true;
        st.running = "";
        st.eta = null;
        break;
    }
    if (d.stage) {
      st.stage = d.stage;
      if (!st.stages.includes(d.stage)) st.stages.push(d.stage);
    }
    if (d.unit) st.unit = d.unit;
    if (num(d.planned) !== null) st.planned = d.planned;
    if (num(d.done) !== null) st.done = d.done;
    if (ev.type !== "end" && "eta_seconds" in d) st.eta = num(d.eta_seconds);
    if (d.incumbent) st.incumbent = d.incumbent;
    if (d.top) st.top = d.top;
    if (num(d.gpu_hours) !== null) st.gpuHours = d.gpu_hours;
    if (num(d.elapsed_seconds) !== null) st.elapsed = d.elapsed_seconds;
    return true;
  }

  // Follower follows a run's event stream with EventSource: it hands each
  // event to onEvent, closes the stream at the final `end` event (an
  // EventSource left open would reconnect forever), and reconnects with backoff when
  // the browser gives up (a restarted server answers an error, and
  // EventSource then stays closed). EventSource itself resends
  // Last-Event-ID when it reconnects; a fresh one after a give-up replays
  // from the start, and applyEvent drops what was seen.
  class Follower {
    constructor(url, handlers, opts) {
      this.url = url;
      this.h = handlers || {};
      const o = opts || {};
      this.make = o.make || ((u) => new EventSource(u));
      this.setTimer = o.setTimeout || ((f, ms) => setTimeout(f, ms));
      this.clearTimer = o.clearTimeout || ((t) => clearTimeout(t));
      this.types = o.types || ["start", "stage", "trial_started", "trial_ended", "best", "done", "end"];
      // final says whether an `end` event ends the stream: a resumed run's
      // replay holds the end of its earlier lab, with more events after it.
      this.final = o.final || (() => true);
      this.attempt = 0;
      this.closed = false;
      this.es = null;
      this.timer = null;
      this.open();
    }

    open() {
      if (this.closed) return;
      const es = this.make(this.url);
      this.es = es;
      es.onopen = () => {
        this.attempt = 0;
        if (this.h.onState) this.h.onState("live");
      };
      for (const type of this.types) {
        es.addEventListener(type, (m) => this.message(type, m));
      }
      es.onerror = () => {
        if (this.closed) return;
        // readyState 2 is CLOSED: the browser will not retry by itself.
        if (es.readyState === 2) {
          es.close();
          const wait = backoff(this.attempt++);
          if (this.h.onState) this.h.onState("retry", wait);
          this.timer = this.setTimer(() => { this.timer = null; this.open(); }, wait);
        } else if (this.h.onState) {
          this.h.onState("retry");
        }
      };
    }

    message(type, m) {
      let data;
      try {
        data = JSON.parse(m.data);
      } catch (e) {
        if (this.h.onError) this.h.onError(new Error("events: bad JSON in " + type + " event: " + e.message));
        return;
      }
      const ev = { type, id: m.lastEventId !== undefined && m.lastEventId !== "" ? m.lastEventId : data.id, data };
      if (this.h.onEvent) this.h.onEvent(ev);
      if (type === "end" && this.final(ev)) {
        this.close();
        if (this.h.onState) this.h.onState("ended");
      }
    }

    close() {
      this.closed = true;
      if (this.timer !== null) this.clearTimer(this.timer);
      this.timer = null;
      if (this.es) this.es.close();
    }
  }

  // terminal says whether a run status will not change again by itself.
  function terminal(status) {
    return ["done", "finished", "succeeded", "failed", "cancelled", "canceled", "interrupted", "error"].includes(status);
  }

  // niceTicks returns about n round tick values covering [lo, hi].
  function niceTicks(lo, hi, n) {
    if (!finite(lo) || !finite(hi)) return [];
    if (hi === lo) { hi = lo + 1; lo = lo - 1; }
    const raw = (hi - lo) / Math.max(1, n);
    const mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 2.5, 5, 10].map((m) => m * mag).find((s) => s >= raw);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Number(v.toFixed(10)));
    return out;
  }

  // scoreChart lays out the score-by-trial chart: one dot per trial (failed
  // trials sit on the axis, in red), and the incumbent as a step line that
  // holds its score until the next incumbent. It returns geometry only;
  // the page turns it into SVG elements.
  function scoreChart(trials, incumbents, opt) {
    const o = Object.assign({ width: 720, height: 260, left: 64, right: 16, top: 14, bottom: 34 }, opt || {});
    const scores = trials.filter((t) => finite(t.score)).map((t) => t.score).concat(incumbents.map((i) => i.score).filter(finite));
    // x is the trial's number in the run, so a chart of one workload's
    // trials keeps the run's numbering (with gaps for the others).
    const n = Math.max(1, ...trials.map((t) => t.n || 0));
    let lo = scores.length ? Math.min(...scores) : 0;
    let hi = scores.length ? Math.max(...scores) : 1;
    const pad = (hi - lo) * 0.08 || Math.abs(hi) * 0.05 || 1;
    lo = Math.max(0, lo - pad);
    hi = hi + pad;
    const yTicks = niceTicks(lo, hi, 4).filter((v) => v >= lo && v <= hi);
    const pw = o.width - o.left - o.right, ph = o.height - o.top - o.bottom;
    const x = (i) => o.left + (n === 1 ? pw / 2 : ((i - 1) / (n - 1)) * pw);
    const y = (v) => o.top + ph - ((v - lo) / (hi - lo)) * ph;
    const dots = trials.map((t) => ({
      x: x(t.n), y: finite(t.score) ? y(t.score) : o.top + ph, ok: finite(t.score), n: t.n, name: t.name, score: t.score,
    }));
    // The step line: from each incumbent's trial to the next one's, then
    // on to the last trial.
    let path = "";
    // An incumbent is placed within the trials shown (a line past the last
    // one would leave the plot).
    const at = (inc) => x(Math.min(n, Math.max(1, inc.at)));
    incumbents.forEach((inc, i) => {
      const x0 = at(inc), y0 = y(inc.score);
      const next = i + 1 < incumbents.length ? incumbents[i + 1] : null;
      const x1 = next ? at(next) : x(n);
      path += (i === 0 ? "M" : "L") + r1(x0) + "," + r1(y0) + " H" + r1(x1);
      if (next) path += " V" + r1(y(next.score));
      path += " ";
    });
    const xStep = Math.max(1, Math.ceil(n / 10));
    const xTicks = [];
    for (let i = 1; i <= n; i += xStep) xTicks.push({ v: i, x: x(i) });
    return {
      width: o.width, height: o.height, plot: { left: o.left, top: o.top, width: pw, height: ph },
      dots, incumbentPath: path.trim(),
      yTicks: yTicks.map((v) => ({ v, y: y(v) })), xTicks,
    };
  }

  function r1(v) { return Math.round(v * 10) / 10; }

  // backoff is the wait before reconnect attempt n (0-based): doubling
  // from 500 ms, capped at 15 s, so a server that is back soon is found
  // soon and one that is gone is not hammered.
  function backoff(attempt) {
    return Math.min(15000, 500 * Math.pow(2, Math.max(0, attempt)));
  }

  // parseRoute reads the page's hash route: "#/runs", "#/runs/7",
  // "#/runs/7/trials/<key>", "#/runs/7/report", "#/compare?runs=1,2",
  // "#/compare?run=3&trials=a,b", "#/new".
  function parseRoute(hash) {
    let h = (hash || "").replace(/^#/, "");
    if (h === "" || h === "/") h = "/runs";
    const qi = h.indexOf("?");
    const path = qi < 0 ? h : h.slice(0, qi);
    // raw keeps the values undecoded, for lists whose items are each
    // encoded (trial keys may hold any character but the comma's %2C).
    const query = {}, raw = {};
    if (qi >= 0) {
      for (const part of h.slice(qi + 1).split("&")) {
        if (!part) continue;
        const eq = part.indexOf("=");
        const k = decodeURIComponent(eq < 0 ? part : part.slice(0, eq));
        raw[k] = eq < 0 ? "" : part.slice(eq + 1);
        query[k] = decodeURIComponent(raw[k].replace(/\+/g, " "));
      }
    }
    query.raw = raw;
    const seg = path.split("/").filter(Boolean).map(decodeURIComponent);
    if (seg[0] === "runs" && seg.length === 1) return { page: "runs", query };
    if (seg[0] === "runs" && seg.length === 2) return { page: "run", id: seg[1], query };
    if (seg[0] === "runs" && seg[2] === "report" && seg.length === 3) return { page: "report", id: seg[1], query };
    if (seg[0] === "runs" && seg[2] === "trials" && seg.length >= 4) return { page: "trial", id: seg[1], key: seg.slice(3).join("/"), query };
    if (seg[0] === "compare") return { page: "compare", query };
    if (seg[0] === "new") return { page: "new", query };
    return { page: "notfound", path, query };
  }

  // splitList reads a raw query value "1,2,%2Fa" into ["1", "2", "/a"]:
  // split first, then decode each item.
  function splitList(s) {
    return (s || "").split(",").map((x) => decodeURIComponent(x.trim())).filter(Boolean);
  }

  // trialRef reads "7:engine/abc/ShareGPT~1/r0" into {run: "7", key}; the
  // run id is digits, so the first colon splits.
  function trialRef(s) {
    const i = s.indexOf(":");
    if (i <= 0 || !/^\d+$/.test(s.slice(0, i))) return null;
    return { run: s.slice(0, i), key: s.slice(i + 1) };
  }

  // problemsByLine groups the server's validation problems ({field, line,
  // message}) by spec line for the editor's gutter; problems without a
  // line go under 0, shown above the editor.
  function problemsByLine(problems) {
    const out = new Map();
    for (const p of problems || []) {
      const line = finite(p.line) && p.line > 0 ? p.line : 0;
      if (!out.has(line)) out.set(line, []);
      out.get(line).push(p);
    }
    return out;
  }

  // extractProblems reads a 400 body into a list of {field, line, column,
  // message}: the server may answer one problem or a list of them.
  function extractProblems(body) {
    if (!body || typeof body !== "object") return [{ line: 0, field: "", message: String(body || "invalid spec") }];
    const list = pick(body, "problems", "errors", "details");
    const one = (p) => ({
      field: pick(p, "field") || "",
      path: pick(p, "path") || "",
      line: num(pick(p, "line")) || 0,
      column: num(pick(p, "column", "col")) || 0,
      message: pick(p, "message", "error", "msg") || "invalid",
    });
    if (Array.isArray(list) && list.length) return list.map(one);
    const e = body.error && typeof body.error === "object" ? body.error : body;
    return [one(e)];
  }

  const api = {
    finite, fmtNum, fmtPct, fmtDuration, parseDuration, fmtAgo, delta, lowerIsBetter, verdict,
    compareRows, liveState, applyEvent, addTrial, trialFigures, seedTrials, incumbentsFromDecisions, Follower,
    terminal, niceTicks, scoreChart, backoff, parseRoute, splitList, trialRef, problemsByLine, extractProblems, pick, num,
  };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.PL = api;
})(typeof window !== "undefined" ? window : globalThis);
