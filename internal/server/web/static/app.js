// app.js draws the dashboard's pages from the REST API. The logic that
// can be tested without a browser lives in lib.js (window.PL); this file
// builds DOM nodes and wires events. Server data enters the page only as
// text nodes or attribute values, never as markup, except the report's own
// HTML, which is shown in a sandboxed frame that runs no script.
(function () {
  "use strict";
  const PL = window.PL;
  const API = "/api/v1";
  const main = document.getElementById("main");
  const TOKEN_KEY = "perflab.token";

  // cleanup holds what the current page must stop when the route changes
  // (event streams, timers, object URLs).
  let cleanups = [];
  function onLeave(f) { cleanups.push(f); }
  function leave() {
    for (const f of cleanups) { try { f(); } catch (e) { /* a page going away must not stop the next */ } }
    cleanups = [];
  }

  // ---- DOM helpers -------------------------------------------------------

  function el(tag, attrs, ...kids) {
    const n = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith("on") && typeof v === "function") n.addEventListener(k.slice(2), v);
      else if (k === "class") n.className = v;
      else if (k === "dataset") Object.assign(n.dataset, v);
      else n.setAttribute(k, v === true ? "" : String(v));
    }
    append(n, kids);
    return n;
  }
  function append(n, kids) {
    for (const k of kids.flat(Infinity)) {
      if (k === undefined || k === null || k === false) continue;
      n.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    }
    return n;
  }
  const SVGNS = "http://www.w3.org/2000/svg";
  function svg(tag, attrs, ...kids) {
    const n = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) n.setAttribute(k, String(v));
    for (const k of kids.flat()) if (k !== undefined && k !== null) n.appendChild(k instanceof Node ? k : document.createTextNode(String(k)));
    return n;
  }
  // gen counts route changes. A page renders only while its route is the
  // current one: a slow answer for a page already left must not replace
  // the page the reader went to (nor start its event stream).
  let gen = 0;
  function render(rt, ...nodes) {
    if (rt.gen !== gen) return false;
    main.replaceChildren(...nodes.flat().filter(Boolean));
    return true;
  }
  function toast(msg) {
    const t = el("div", { class: "toast", role: "status" }, msg);
    document.body.appendChild(t);
    setTimeout(() => t.remove(), 2200);
  }
  function badge(status) {
    const s = status || "unknown";
    return el("span", { class: "badge " + s, dataset: { status: s } }, s);
  }
  function gainSpan(g) {
    if (!PL.finite(g)) return el("span", { class: "muted" }, "–");
    return el("span", { class: g > 0.0005 ? "gain-pos" : g < -0.0005 ? "gain-neg" : "muted" }, PL.fmtPct(g));
  }
  function kpi(label, value, note, cls) {
    // A long value (a stage name) gets a smaller font rather than an ellipsis.
    const long = String(value).length > 14 ? " long" : "";
    return el("div", { class: "kpi " + (cls || ""), dataset: { kpi: label.toLowerCase().replace(/[^a-z]+/g, "-") } },
      el("div", { class: "label" }, label), el("div", { class: "value" + long, title: String(value) }, value),
      note ? el("div", { class: "note", title: String(note) }, note) : null);
  }
  function errorBox(err) {
    return el("div", { class: "error-box", role: "alert" }, err && err.message ? err.message : String(err));
  }
  function gpuText(r) {
    const n = r.gpus || 0, g = r.gpu || "";
    if (!n && !g) return "–";
    return (n ? n + "× " : "") + g;
  }
  function setNav(page) {
    for (const a of document.querySelectorAll("[data-nav]")) {
      a.classList.toggle("active", a.dataset.nav === page || (page === "run" && a.dataset.nav === "runs"));
    }
  }
  function setConn(state) {
    const c = document.getElementById("conn");
    c.className = "conn " + (state === "live" ? "live" : state === "retry" ? "retry" : "");
    c.textContent = state === "live" ? "live" : state === "retry" ? "reconnecting…" : "";
  }

  // ---- API ---------------------------------------------------------------

  function token() { return localStorage.getItem(TOKEN_KEY) || ""; }

  // ApiError carries the status and the server's error body.
  class ApiError extends Error {
    constructor(status, body, path) {
      super((body && body.error ? body.error : "HTTP " + status) + " (" + path + ")");
      this.status = status;
      this.body = body;
    }
  }

  async function call(path, opt) {
    const o = opt || {};
    const headers = Object.assign({}, o.headers || {});
    if (token()) headers.Authorization = "Bearer " + token();
    const res = await fetch(API + path, { method: o.method || "GET", headers, body: o.body });
    if (!res.ok) {
      let body = null;
      try { body = await res.json(); } catch (e) { body = null; }
      if (res.status === 401) showTokenBar(true);
      throw new ApiError(res.status, body, path);
    }
    return res;
  }
  async function getJSON(path) { return (await call(path)).json(); }

  // download fetches a file with the token and saves it under name: a
  // plain link could not send the Authorization header.
  async function download(path, name) {
    try {
      const blob = await (await call(path)).blob();
      const url = URL.createObjectURL(blob);
      const a = el("a", { href: url, download: name });
      document.body.appendChild(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10000);
    } catch (e) {
      toast(e.message);
    }
  }

  function showTokenBar(show) {
    const bar = document.getElementById("token-bar");
    bar.hidden = !show;
    if (show) document.getElementById("token-input").value = token();
  }
  document.getElementById("token-btn").addEventListener("click", () => showTokenBar(document.getElementById("token-bar").hidden));
  document.getElementById("token-save").addEventListener("click", () => {
    localStorage.setItem(TOKEN_KEY, document.getElementById("token-input").value.trim());
    showTokenBar(false);
    route();
  });
  document.getElementById("token-clear").addEventListener("click", () => {
    localStorage.removeItem(TOKEN_KEY);
    document.getElementById("token-input").value = "";
  });

  async function copyText(text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch (e) {
      // Not a secure context or no permission: the old way still works.
      const ta = el("textarea", { style: "position:fixed;left:-9999px" });
      ta.value = text;
      document.body.appendChild(ta);
      ta.select();
      document.execCommand("copy");
      ta.remove();
    }
    toast("Copied");
  }
  function cmdBox(text, label) {
    return el("div", { class: "cmd" }, el("pre", { class: "mono", dataset: { role: label || "command" } }, text || "–"),
      el("button", { type: "button", class: "small ghost", onclick: () => copyText(text || "") }, "Copy"));
  }

  // ---- Runs --------------------------------------------------------------

  const PAGE = 25;
  // picked are the runs ticked for comparison; kept across the list's
  // refreshes while something runs.
  const picked = new Set();

  async function pageRuns(rt) {
    const q = rt.query;
    const status = q.status || "", model = q.model || "", offset = Number(q.offset || 0) || 0;
    const params = new URLSearchParams({ limit: String(PAGE), offset: String(offset) });
    if (status) params.set("status", status);
    if (model) params.set("model", model);
    let page;
    try {
      page = await getJSON("/runs?" + params);
    } catch (e) {
      render(rt, el("h1", {}, "Runs"), errorBox(e));
      return;
    }
    const runs = page.runs || [];
    const selected = picked;
    const cmpBtn = el("button", { type: "button", disabled: selected.size < 2, id: "compare-selected" }, "Compare selected");
    cmpBtn.addEventListener("click", () => {
      const ids = [...selected];
      selected.clear();
      location.hash = "#/compare?runs=" + ids.join(",");
    });

    const go = (patch) => {
      const p = new URLSearchParams(Object.assign({ status, model, offset: String(offset) }, patch));
      for (const [k, v] of [...p]) if (!v || v === "0") p.delete(k);
      location.hash = "#/runs" + (p.toString() ? "?" + p : "");
    };
    const statusSel = el("select", { "aria-label": "status", onchange: (e) => go({ status: e.target.value, offset: "0" }) },
      ["", "queued", "running", "done", "failed", "interrupted"].map((s) => el("option", { value: s, selected: s === status }, s || "any status")));
    const modelIn = el("input", { type: "search", placeholder: "model, e.g. Qwen/Qwen3-14B", value: model, size: 28,
      onchange: (e) => go({ model: e.target.value.trim(), offset: "0" }) });

    const active = runs.filter((r) => r.status === "running");
    const rows = runs.map((r) => {
      const cb = el("input", { type: "checkbox", "aria-label": "select run " + r.id, checked: selected.has(r.id), onclick: (e) => e.stopPropagation(),
        onchange: (e) => { e.target.checked ? selected.add(r.id) : selected.delete(r.id); cmpBtn.disabled = selected.size < 2; } });
      const winner = r.winner ? el("div", {}, el("div", { class: "wrap" }, r.winner),
        PL.finite(r.winner_score) ? el("div", { class: "muted small" }, PL.fmtNum(r.winner_score) + " " + (r.unit || "")) : null)
        : el("span", { class: "muted" }, r.status === "running" ? "running…" : "–");
      return el("tr", { class: "clickable", dataset: { run: r.id, status: r.status }, onclick: () => { location.hash = "#/runs/" + r.id; } },
        el("td", {}, cb),
        el("td", {}, el("a", { href: "#/runs/" + r.id, class: "name nowrap" }, r.name || "run " + r.id), el("div", { class: "muted small" }, "#" + r.id + (r.runtime ? " · " + r.runtime : ""))),
        el("td", {}, badge(r.status), r.resumable && r.status !== "running" ? el("div", { class: "muted small" }, "resumable") : null),
        el("td", { class: "nowrap" }, r.model || "–"),
        el("td", { class: "nowrap" }, gpuText(r)),
        el("td", { class: "winner-cell" }, winner),
        el("td", { class: "num" }, gainSpan(r.best_gain)),
        el("td", { class: "num" }, String(r.trials || 0), r.failed ? el("div", { class: "muted small" }, r.failed + " failed") : null),
        el("td", { class: "num" }, PL.fmtNum(r.gpu_hours || 0, 2)),
        el("td", { title: r.created || "" }, PL.fmtAgo(r.started || r.created)));
    });

    const running = active.length
      ? el("div", { class: "panel", id: "running-now" }, el("h2", {}, "Running now"),
        el("div", { class: "cols" }, active.map((r) => el("a", { href: "#/runs/" + r.id, class: "kpi", style: "display:block" },
          badge("running"),
          el("div", { class: "value" }, r.name),
          el("div", { class: "note" }, (r.model || "") + " · " + gpuText(r) + " · " + (r.trials || 0) + " trials so far")))))
      : null;

    const total = page.total || 0;
    const pager = el("div", { class: "pager" },
      el("span", { class: "muted" }, total ? `${offset + 1}–${offset + runs.length} of ${total}` : ""),
      el("button", { type: "button", class: "ghost small", disabled: offset === 0, onclick: () => go({ offset: String(Math.max(0, offset - PAGE)) }) }, "‹ Newer"),
      el("button", { type: "button", class: "ghost small", disabled: page.next_offset === undefined || page.next_offset === null,
        onclick: () => go({ offset: String(page.next_offset) }) }, "Older ›"));

    if (!render(rt,
      el("div", { class: "head" }, el("div", { class: "grow" }, el("h1", {}, "Runs"),
        el("div", { class: "sub" }, `${total} run${total === 1 ? "" : "s"}` + (active.length ? ` · ${active.length} running` : ""))),
        el("div", { class: "actions" }, cmpBtn, el("a", { href: "#/new", class: "button" }, "New lab"))),
      running,
      el("div", { class: "filters" }, statusSel, modelIn),
      el("div", { class: "panel flush" }, runs.length
        ? el("div", { class: "table-scroll" }, el("table", { id: "runs-table" },
          el("thead", {}, el("tr", {}, el("th", {}, ""), el("th", {}, "Run"), el("th", {}, "Status"), el("th", {}, "Model"), el("th", {}, "GPUs"),
            el("th", {}, "Winner"), el("th", { class: "num" }, "Best gain"), el("th", { class: "num" }, "Trials"), el("th", { class: "num" }, "GPU-h"), el("th", {}, "When"))),
          el("tbody", {}, rows)))
        : el("div", { class: "empty" }, "No runs yet. ", el("a", { href: "#/new" }, "Start a lab"), "."),
      pager))) return;

    // While something runs, the list refreshes itself.
    if (active.length) {
      const t = setTimeout(() => { if (PL.parseRoute(location.hash).page === "runs") route(); }, 4000);
      onLeave(() => clearTimeout(t));
    }
  }

  // ---- Live run ----------------------------------------------------------

  function chartSVG(st) {
    // Only the tuning workload's trials: the generalization workloads'
    // figures are on another scale and no incumbent is chosen on them.
    const tuning = st.tuning || (st.trials[0] && st.trials[0].workload) || "";
    const shown = st.trials.filter((t) => !tuning || !t.workload || t.workload === tuning);
    const g = PL.scoreChart(shown, st.incumbents, { width: 1000, height: 300 });
    const p = g.plot;
    const kids = [];
    for (const t of g.yTicks) {
      kids.push(svg("line", { class: "gridline", x1: p.left, x2: p.left + p.width, y1: t.y, y2: t.y }));
      kids.push(svg("text", { class: "tick", x: p.left - 8, y: t.y + 4, "text-anchor": "end" }, PL.fmtNum(t.v, 0)));
    }
    for (const t of g.xTicks) kids.push(svg("text", { class: "tick", x: t.x, y: p.top + p.height + 16, "text-anchor": "middle" }, String(t.v)));
    kids.push(svg("line", { class: "axis", x1: p.left, x2: p.left + p.width, y1: p.top + p.height, y2: p.top + p.height }));
    kids.push(svg("line", { class: "axis", x1: p.left, x2: p.left, y1: p.top, y2: p.top + p.height }));
    kids.push(svg("text", { class: "tick", x: p.left + p.width / 2, y: g.height - 2, "text-anchor": "middle" }, "trial"));
    kids.push(svg("text", { class: "tick", x: 12, y: p.top + p.height / 2, "text-anchor": "middle", transform: `rotate(-90 12 ${p.top + p.height / 2})` }, st.unit || "score"));
    if (g.incumbentPath) kids.push(svg("path", { class: "inc", d: g.incumbentPath }));
    for (const d of g.dots) {
      const t = shown.find((x) => x.n === d.n);
      kids.push(svg("circle", { class: "dot" + (d.ok ? "" : " failed") + (t && t.reused ? " reused" : ""), cx: d.x, cy: d.y, r: 4.5 },
        svg("title", {}, `#${d.n} ${d.name}: ` + (d.ok ? PL.fmtNum(d.score) + " " + (st.unit || "") : "failed"))));
    }
    return svg("svg", { viewBox: `0 0 ${g.width} ${g.height}`, role: "img", "aria-label": "score by trial with the incumbent", id: "score-chart" }, kids);
  }

  async function pageRun(rt) {
    const id = rt.id;
    let run, trials;
    try {
      [run, trials] = await Promise.all([getJSON("/runs/" + id), getJSON("/runs/" + id + "/trials")]);
    } catch (e) {
      render(rt, el("h1", {}, "Run " + id), errorBox(e));
      return;
    }
    const st = PL.liveState();
    st.status = run.status;
    st.unit = run.unit || "";
    st.gpuHours = run.gpu_hours || 0;
    st.tuning = (run.summary && run.summary.tuning_workload) || "";
    if (run.winner && run.status !== "running") {
      st.incumbent = { name: run.winner, score: run.winner_score, unit: run.unit };
    }
    // The incumbent line of a stored run: the baseline, each kept
    // decision, and the winner (the joint search's pick is no decision).
    const sum = run.summary || {};
    const decs = [].concat(
      sum.baseline ? [{ stage: "baseline", name: sum.baseline.name, decision: "baseline", score: sum.baseline.score }] : [],
      run.decisions || [],
      sum.winner ? [{ stage: "", name: sum.winner.name, decision: "kept", score: sum.winner.score }] : []);
    PL.seedTrials(st, trials.trials || [], run.objective, decs);
    if (run.progress) PL.applyEvent(st, { type: "progress", data: run.progress });
    st.lastId = 0; // the stream replays from the start; rows dedupe by key

    const root = el("div", { id: "run-page", dataset: { run: id } });
    if (!render(rt, root)) return;
    let follower = null;

    let head = null, lastHeadKey = "";
    const headBox = el("div"), topBox = el("div"), bottomBox = el("div");
    // The trials table outlives the frames: a long lab's hundreds of rows
    // are updated by trial (PLLive.RowTable), not rebuilt on each event.
    const trialsNote = el("span", { class: "muted small" });
    const scoreHead = el("th", { class: "num" });
    const trialsBody = el("tbody");
    const trialsTable = el("div", { class: "table-scroll" }, el("table", { id: "trials-table" },
      el("thead", {}, el("tr", {}, el("th", { class: "num" }, "#"), el("th", {}, "Stage"), el("th", {}, "Configuration"), el("th", {}, "Workload"),
        el("th", { class: "num" }, "Rep"), el("th", {}, "Status"), scoreHead)),
      trialsBody));
    const trialsEmpty = el("div", { class: "empty" });
    const trialsPanel = el("div", { class: "panel flush" }, el("h2", {}, "Trials ", trialsNote), trialsTable, trialsEmpty);
    const trialRow = (t) => el("tr", { class: "clickable" + (t.fresh ? " fresh" : ""), dataset: { key: t.key },
      onclick: () => { if (t.key) location.hash = "#/runs/" + id + "/trials/" + encodeURIComponent(t.key); } },
    el("td", { class: "num" }, String(t.n)),
    el("td", {}, t.stage),
    el("td", { class: "wrap" }, t.key ? el("a", { href: "#/runs/" + id + "/trials/" + encodeURIComponent(t.key) }, t.name) : t.name),
    el("td", {}, t.workload),
    el("td", { class: "num" }, String(t.repeat)),
    el("td", {}, badge(t.status === "ok" ? "ok" : "failed"), t.failure ? el("span", { class: "muted small" }, " " + t.failure) : null, t.reused ? el("span", { class: "muted small" }, " stored") : null),
    el("td", { class: "num" }, PL.finite(t.score) ? PL.fmtNum(t.score) : "–"));
    // A row is rebuilt when what it shows changes (fresh only highlights
    // a new row, once).
    const trialRows = new PLLive.RowTable(trialsBody, (t) => (t.key || "") + "#" + t.n,
      (t) => JSON.stringify([t.n, t.stage, t.name, t.workload, t.repeat, t.status, t.failure || "", !!t.reused, PL.finite(t.score) ? t.score : null]),
      trialRow);
    root.append(headBox, topBox, trialsPanel, bottomBox);
    const draw = () => {
      const isRunning = st.status === "running" && run.active && !st.ended;
      const cancelBtn = isRunning ? el("button", { type: "button", class: "danger", id: "cancel-run", onclick: async (e) => {
        if (!confirm("Cancel this lab? Its engines stop; finished trials are kept and the run can be resumed.")) return;
        e.target.disabled = true;
        e.target.textContent = "Cancelling…";
        try { await call("/runs/" + id, { method: "DELETE" }); } catch (err) { toast(err.message); }
        route();
      } }, "Cancel lab") : null;
      const resumable = !isRunning && (run.resumable || st.status === "interrupted");
      const resumeBtn = resumable ? el("button", { type: "button", class: "ghost", id: "resume-run", onclick: async (e) => {
        e.target.disabled = true;
        try { await call("/runs/" + id + "/resume", { method: "POST" }); } catch (err) { toast(err.message); }
        route();
      } }, "Resume") : null;
      const hasReport = st.trials.length > 0 || (run.trials || 0) > 0;

      const winner = st.winner || (run.winner ? { name: run.winner, score: run.winner_score, unit: run.unit } : null);
      const gain = PL.finite(st.gain) ? st.gain : run.best_gain;
      const banner = winner && !isRunning
        ? el("div", { class: "winner", id: "winner" }, el("span", { class: "trophy", "aria-hidden": "true" }, "★"),
          el("div", {}, el("div", { class: "muted small" }, "Recommended configuration"), el("div", { class: "big wrap" }, winner.name),
            el("div", { class: "muted" }, PL.fmtNum(winner.score) + " " + (winner.unit || st.unit) + (st.stopped ? " · stopped early: " + st.stopped : ""))),
          PL.finite(gain) ? el("div", { class: "gain" }, PL.fmtPct(gain), el("div", { class: "muted small", style: "text-align:right;font-weight:400" }, "over the baseline")) : null)
        : null;

      const inc = st.incumbent;
      const kpis = el("div", { class: "kpis" },
        isRunning ? kpi("Stage", st.stage || "starting…", st.running ? "running " + st.running : st.candidates ? st.candidates + " candidates" : "")
          : kpi("Stage", st.status === "done" ? "finished" : st.status, st.stages.length + " stages"),
        kpi("Trials", st.planned && isRunning ? `${st.done} / ≤${Math.max(st.planned, st.done)}` : String(st.done || st.trials.length),
          st.trials.filter((t) => t.status !== "ok").length + " failed"),
        kpi(isRunning ? "Best so far" : "Best", inc && PL.finite(inc.score) ? PL.fmtNum(inc.score) + " " + (inc.unit || st.unit) : "–", inc ? inc.name : "", "win"),
        kpi("ETA", isRunning ? (PL.finite(st.eta) ? PL.fmtDuration(st.eta) : "estimating…") : "–",
          PL.finite(st.elapsed) ? "elapsed " + PL.fmtDuration(st.elapsed) : ""),
        kpi("GPU-hours", PL.fmtNum(st.gpuHours || 0, 2), run.runtime && run.runtime.startsWith("sim") ? "simulated: none held" : ""));

      const stageStrip = st.stages.length ? el("div", { class: "stages", id: "stages" }, st.stages.map((s) =>
        el("span", { class: s === st.stage && isRunning ? "now" : "past" }, s))) : null;

      trialsNote.textContent = isRunning ? "as they end, newest first" : "newest first";
      scoreHead.textContent = "Score" + (st.unit ? " (" + st.unit + ")" : "");
      trialsTable.hidden = !st.trials.length;
      trialsEmpty.hidden = !!st.trials.length;
      trialsEmpty.textContent = isRunning ? "Waiting for the first trial…" : "No trials.";
      trialRows.update(st.trials.slice().reverse());
      for (const t of st.trials) t.fresh = false;

      const decisions = (run.decisions || []).length && !isRunning ? el("div", { class: "panel flush" }, el("h2", {}, "Decisions"),
        el("div", { class: "table-scroll" }, el("table", { id: "decisions" }, el("thead", {}, el("tr", {}, el("th", {}, "Stage"), el("th", {}, "Configuration"), el("th", {}, "Decision"),
          el("th", { class: "num" }, "Score"), el("th", { class: "num" }, "Gain"), el("th", {}, "Why"))),
        el("tbody", {}, run.decisions.map((d) => el("tr", {}, el("td", {}, d.stage), el("td", { class: "wrap" }, d.name),
          el("td", {}, el("span", { class: "badge " + (d.decision === "kept" ? "kept" : d.decision === "failed" ? "failed" : "cancelled") }, d.decision)),
          el("td", { class: "num" }, PL.fmtNum(d.score)), el("td", { class: "num" }, gainSpan(d.gain)), el("td", { class: "wrap muted" }, d.reason || "")))))))
        : null;

      // The header (with its buttons) is rebuilt only when what it shows
      // changes: redrawn on every event, a button could vanish between a
      // press and its release, and the click would be lost.
      const headKey = [st.status, isRunning, resumable, hasReport].join("|");
      if (headKey !== lastHeadKey) {
        lastHeadKey = headKey;
        head = el("div", { class: "head" }, el("div", { class: "grow" },
          el("h1", {}, run.name || "run " + id, " ", badge(st.status)),
          el("div", { class: "sub" }, [run.model, gpuText(run), run.runtime, run.objective].filter(Boolean).join(" · "))),
        el("div", { class: "actions" }, cancelBtn, resumeBtn,
          hasReport ? el("a", { class: "button ghost", href: "#/runs/" + id + "/report", id: "open-report" }, "Report") : null,
          el("a", { class: "button ghost", href: "#/compare?runs=" + id }, "Compare…")));
        headBox.replaceChildren(head);
      }
      topBox.replaceChildren(...[
        st.error || run.error ? errorBox(st.error || run.error) : null,
        banner,
        kpis,
        stageStrip,
        el("div", { class: "panel chart" }, el("h2", {}, "Score by trial"), chartSVG(st),
          el("div", { class: "legend" }, el("span", {}, el("i", { style: "background:#7aa7cc" }), "trial"),
            el("span", {}, el("i", { style: "background:#c62828" }), "failed"),
            el("span", {}, el("i", { class: "l", style: "background:#1a7f37" }), "incumbent (kept so far)"),
            st.top && PL.finite(st.top.score) ? el("span", {}, "top measured: " + st.top.name + " " + PL.fmtNum(st.top.score)) : null)),
      ].filter(Boolean));
      bottomBox.replaceChildren(...[
        decisions,
        run.spec ? el("details", { class: "panel", id: "run-spec" }, el("summary", {}, "Spec ", el("span", { class: "muted small" }, "as the lab ran it (normalized)")),
          el("div", { class: "actions", style: "margin:10px 0" }, el("button", { type: "button", class: "ghost small", id: "edit-as-new", onclick: () => {
            // The next lab starts from this one's spec, in the editor.
            sessionStorage.setItem("perflab.draft", run.spec);
            location.hash = "#/new";
          } }, "Edit as a new lab")),
          el("pre", {}, run.spec)) : null].filter(Boolean));
    };
    draw();

    // Only a lab of this server has a live stream; a run left "running" by
    // a lab that is gone gets an immediate end, and following it would
    // reload the page forever. Such a run is offered Resume instead.
    if (run.active) {
      // Redraws are batched to one per frame: a replay brings many events.
      let queued = false;
      const schedule = () => {
        if (queued) return;
        queued = true;
        requestAnimationFrame(() => { queued = false; draw(); });
      };
      // The token goes in a header (the server refuses it in the URL):
      // the stream is read with fetch, which can send one.
      const url = API + "/runs/" + id + "/events";
      const make = (u) => new PLLive.StreamSource(u, { headers: () => (token() ? { Authorization: "Bearer " + token() } : {}) });
      // The latest event when the page loaded: an `end` before it belongs
      // to an earlier lab of a resumed run.
      const latest = (run.progress && PL.num(run.progress.id)) || 0;
      follower = new PL.Follower(url, {
        onEvent: (ev) => {
          const before = st.trials.length;
          if (!PL.applyEvent(st, ev)) return;
          if (st.trials.length > before) st.trials[st.trials.length - 1].fresh = true;
          schedule();
        },
        onState: (s) => {
          setConn(s === "ended" ? "" : s);
          if (s === "ended") {
            // The run's stored summary, decisions and winner are final now.
            setTimeout(() => { if (PL.parseRoute(location.hash).id === id) route(); }, 300);
          }
        },
        onError: (e) => toast(e.message),
      }, { make, final: (ev) => (PL.num(ev.id) || 0) >= latest });
      onLeave(() => { follower.close(); setConn(""); });
    }
  }

  // ---- Trial -------------------------------------------------------------

  async function pageTrial(rt) {
    const id = rt.id, key = rt.key;
    let t;
    try {
      t = await getJSON("/runs/" + id + "/trials/" + encodeURIComponent(key));
    } catch (e) {
      render(rt, el("h1", {}, "Trial"), errorBox(e));
      return;
    }
    const filter = el("input", { type: "search", class: "metrics-filter", placeholder: "filter metrics, e.g. kv_cache" });
    const metrics = Object.entries(t.engine_metrics || {}).sort((a, b) => a[0].localeCompare(b[0]));
    const tbody = el("tbody");
    const drawMetrics = () => {
      const f = filter.value.trim().toLowerCase();
      tbody.replaceChildren(...metrics.filter(([k]) => !f || k.toLowerCase().includes(f))
        .map(([k, v]) => el("tr", {}, el("td", {}, k), el("td", { class: "num" }, PL.fmtNum(v, Number.isInteger(v) ? 0 : 3)))));
    };
    filter.addEventListener("input", drawMetrics);
    drawMetrics();
    const dur = t.cost && (t.cost.startup_seconds || t.cost.bench_seconds) ? (t.cost.startup_seconds || 0) + (t.cost.bench_seconds || 0) : null;
    const figs = PL.trialFigures(t);
    const fig = (k) => figs[k];

    render(rt,
      el("div", { class: "head" }, el("div", { class: "grow" },
        el("div", { class: "muted small" }, el("a", { href: "#/runs/" + id }, "← run " + id)),
        el("h1", { class: "wrap" }, t.name, " ", badge(t.status)),
        el("div", { class: "sub" }, [t.stage && "stage " + t.stage, t.workload, "repeat " + t.repeat, t.attempt > 1 ? "attempt " + t.attempt : null].filter(Boolean).join(" · "))),
      el("div", { class: "actions" }, el("a", { class: "button ghost", href: "#/compare?trials=" + encodeURIComponent(id + ":" + key) }, "Compare with…"))),
      t.status !== "ok" ? errorBox((t.failure_class || "failed") + (t.reason ? ": " + t.reason : "")) : t.reason ? el("p", { class: "hint" }, t.reason) : null,
      el("div", { class: "kpis" },
        kpi("Total throughput", PL.fmtNum(fig("total_throughput")) + " tok/s"),
        kpi("Output throughput", PL.fmtNum(fig("output_throughput")) + " tok/s"),
        kpi("Mean TTFT", PL.fmtNum(fig("mean_ttft_ms")) + " ms", "p99 " + PL.fmtNum(fig("p99_ttft_ms")) + " ms"),
        kpi("Mean TPOT", PL.fmtNum(fig("mean_tpot_ms")) + " ms", "p99 " + PL.fmtNum(fig("p99_tpot_ms")) + " ms"),
        kpi("Time", dur !== null ? PL.fmtDuration(dur) : PL.fmtDuration(fig("duration")), t.cost && t.cost.engine_start ? "engine started" : "benchmark")),
      el("div", { class: "panel" }, el("h2", {}, "Serving command"), cmdBox(t.command, "command")),
      el("div", { class: "grid2" },
        el("div", { class: "panel" }, el("h2", {}, "Result"), el("pre", { id: "result-block" }, t.result_text || "no result")),
        el("div", { class: "panel" }, el("h2", {}, "Log tail"), el("pre", { id: "log-tail", class: "wrap-pre" }, t.log_tail || "no log"))),
      el("div", { class: "panel" }, el("h2", {}, "Engine /metrics ", el("span", { class: "muted small" }, metrics.length + " series at the end of the run")),
        metrics.length ? [filter, el("div", { class: "kv" }, el("table", { id: "engine-metrics" }, tbody))] : el("div", { class: "muted" }, "The runtime exposed no /metrics for this trial.")),
      t.config ? el("details", { class: "panel" }, el("summary", {}, "Engine config (normalized)"), el("pre", {}, JSON.stringify(t.config, null, 2))) : null);
  }

  // ---- Report ------------------------------------------------------------

  const FORMATS = [["html", "HTML"], ["md", "Markdown"], ["json", "JSON"], ["csv", "CSV"]];

  async function pageReport(rt) {
    const id = rt.id;
    let rep, html;
    try {
      [rep, html] = await Promise.all([getJSON("/runs/" + id + "/report.json"), call("/runs/" + id + "/report.html").then((r) => r.text())]);
    } catch (e) {
      render(rt, el("div", { class: "muted small" }, el("a", { href: "#/runs/" + id }, "← run " + id)), el("h1", {}, "Report"), errorBox(e));
      return;
    }
    const base = (rep.run_name || "run-" + id).replace(/[^A-Za-z0-9._-]+/g, "_");
    const charts = el("div", { class: "charts", id: "charts" });
    for (const c of rep.charts || []) {
      const fig = el("figure", {}, el("div", { class: "muted small" }, "loading…"),
        el("figcaption", {}, el("span", {}, c.title), el("span", {},
          el("a", { href: "#", onclick: (e) => { e.preventDefault(); download("/runs/" + id + "/charts/" + c.svg, c.svg); } }, "SVG"), " · ",
          el("a", { href: "#", onclick: (e) => { e.preventDefault(); download("/runs/" + id + "/charts/" + c.png, c.png); } }, "PNG"))));
      charts.appendChild(fig);
      call("/runs/" + id + "/charts/" + c.svg).then((r) => r.blob()).then((b) => {
        const url = URL.createObjectURL(b);
        onLeave(() => URL.revokeObjectURL(url));
        fig.firstChild.replaceWith(el("img", { src: url, alt: c.title }));
      }).catch((e) => fig.firstChild.replaceWith(errorBox(e)));
    }
    const rec = rep.recommended, bl = rep.baseline;
    const tuning = (rep.cases || [])[0];
    const frame = el("iframe", { class: "report-frame", id: "report-frame", title: "report", sandbox: "allow-same-origin" });
    frame.srcdoc = html;
    frame.addEventListener("load", () => {
      // Grow the frame to its page so the dashboard scrolls, not the frame.
      try { frame.style.height = frame.contentDocument.documentElement.scrollHeight + 20 + "px"; } catch (e) { /* sandboxed elsewhere */ }
    });
    render(rt,
      el("div", { class: "head" }, el("div", { class: "grow" },
        el("div", { class: "muted small" }, el("a", { href: "#/runs/" + id }, "← run " + id)),
        el("h1", {}, rep.title || "Report"),
        el("div", { class: "sub" }, [rep.model, gpuText(rep), rep.runtime, rep.objective].filter(Boolean).join(" · "))),
      el("div", { class: "actions downloads", id: "downloads" }, FORMATS.map(([f, label]) =>
        el("button", { type: "button", class: "ghost small", dataset: { format: f }, onclick: () => download("/runs/" + id + "/report." + f, base + "." + f) }, "⬇ " + label)))),
      rec ? el("div", { class: "winner" }, el("span", { class: "trophy", "aria-hidden": "true" }, "★"),
        el("div", {}, el("div", { class: "muted small" }, "Recommended"), el("div", { class: "big wrap" }, rec.name),
          el("div", { class: "muted" }, PL.fmtNum(rec.metrics && rec.metrics.total_tps) + " tok/s" + (bl ? " vs baseline " + PL.fmtNum(bl.metrics && bl.metrics.total_tps) + " tok/s" : ""))),
        tuning && PL.finite(tuning.change) ? el("div", { class: "gain" }, PL.fmtPct(tuning.change)) : null) : null,
      (rep.charts || []).length ? el("div", { class: "panel" }, el("h2", {}, "Charts"), charts) : null,
      el("div", { class: "panel flush" }, frame));
  }

  // ---- Compare -----------------------------------------------------------

  const RUN_METRICS = [
    ["total_tps", "Total throughput (tok/s)"], ["output_tps", "Output throughput (tok/s)"], ["request_tps", "Requests/s"],
    ["tps_per_gpu", "Throughput per GPU (tok/s)"], ["mean_ttft_ms", "Mean TTFT (ms)"], ["p99_ttft_ms", "P99 TTFT (ms)"],
    ["mean_tpot_ms", "Mean TPOT (ms)"], ["p99_tpot_ms", "P99 TPOT (ms)"], ["success_rate", "Success rate"],
  ];
  const TRIAL_METRICS = [
    ["total_throughput", "Total throughput (tok/s)"], ["output_throughput", "Output throughput (tok/s)"],
    ["request_throughput", "Requests/s"], ["mean_ttft_ms", "Mean TTFT (ms)"], ["p99_ttft_ms", "P99 TTFT (ms)"],
    ["mean_tpot_ms", "Mean TPOT (ms)"], ["p99_tpot_ms", "P99 TPOT (ms)"], ["mean_itl_ms", "Mean ITL (ms)"],
  ];

  function compareTable(id, heads, rows, extra) {
    return el("div", { class: "table-scroll" }, el("table", { id, class: "cmp" },
      el("thead", {}, el("tr", {}, el("th", {}, ""), heads.map((h) => el("th", {}, h)))),
      el("tbody", {}, (extra || []).map((r) => el("tr", {}, el("td", { class: "muted" }, r[0]), r.slice(1).map((c) => el("td", {}, c)))),
        rows.map((r) => el("tr", { dataset: { metric: r.key } }, el("td", { class: "muted" }, r.label), r.cells.map((c, i) => el("td", { class: "metric-val" + (r.best === i ? " best" : "") },
          c.value === null ? "–" : PL.fmtNum(c.value, r.key === "success_rate" ? 3 : undefined),
          i > 0 && c.delta && PL.finite(c.delta.rel) ? el("span", { class: "small delta " + c.verdict }, PL.fmtPct(c.delta.rel)) : null)))))));
  }

  async function comparePicker(rt) {
    let page;
    try { page = await getJSON("/runs?limit=50"); } catch (e) { render(rt, el("h1", {}, "Compare"), errorBox(e)); return; }
    const sel = new Set();
    const btn = el("button", { type: "button", disabled: true }, "Compare");
    btn.addEventListener("click", () => { location.hash = "#/compare?runs=" + [...sel].join(","); });
    const pre = PL.splitList(rt.query.raw.runs || "");
    render(rt, el("h1", {}, "Compare"), el("p", { class: "muted" }, "Pick two or more runs. To compare two trials, open a trial and use “Compare with…”."),
      el("div", { class: "panel flush" }, el("table", {}, el("tbody", {}, (page.runs || []).map((r) => {
        const cb = el("input", { type: "checkbox", checked: pre.includes(String(r.id)), onchange: (e) => {
          e.target.checked ? sel.add(r.id) : sel.delete(r.id); btn.disabled = sel.size < 2; } });
        if (pre.includes(String(r.id))) sel.add(r.id);
        return el("tr", {}, el("td", {}, cb), el("td", {}, el("span", { class: "name" }, r.name), " ", el("span", { class: "muted small" }, "#" + r.id)),
          el("td", {}, badge(r.status)), el("td", {}, r.model || ""), el("td", {}, gpuText(r)), el("td", { class: "num" }, gainSpan(r.best_gain)));
      }))), el("div", { class: "pager" }, btn)));
    btn.disabled = sel.size < 2;
  }

  async function compareRuns(rt, ids) {
    let runs, reps;
    try {
      runs = await Promise.all(ids.map((i) => getJSON("/runs/" + i)));
      reps = await Promise.all(ids.map((i) => getJSON("/runs/" + i + "/report.json").catch(() => null)));
    } catch (e) {
      render(rt, el("h1", {}, "Compare runs"), errorBox(e));
      return;
    }
    const heads = runs.map((r) => el("span", {}, el("a", { href: "#/runs/" + r.id }, r.name), el("div", { class: "muted small" }, "#" + r.id)));
    const items = reps.map((r) => (r && r.recommended ? r.recommended.metrics : {}));
    const rows = PL.compareRows(items, RUN_METRICS);
    const info = [
      ["Status", ...runs.map((r) => badge(r.status))],
      ["Model", ...runs.map((r) => r.model || "–")],
      ["GPUs", ...runs.map(gpuText)],
      ["Runtime", ...runs.map((r) => r.runtime || "–")],
      ["Winner", ...runs.map((r, i) => el("b", { class: "wrap" }, (reps[i] && reps[i].recommended && reps[i].recommended.name) || r.winner || "–"))],
      ["Gain over baseline", ...runs.map((r) => gainSpan(r.best_gain))],
      ["Trials", ...runs.map((r) => String(r.trials || 0) + (r.failed ? ` (${r.failed} failed)` : ""))],
      ["GPU-hours", ...runs.map((r) => PL.fmtNum(r.gpu_hours || 0, 2))],
    ];
    const winners = el("div", { class: "cols" }, runs.map((r, i) => {
      const rec = reps[i] && reps[i].recommended;
      return el("div", {}, el("h3", {}, r.name, el("span", { class: "muted small" }, " winner's command")), cmdBox(rec ? rec.command : "", "command"));
    }));
    render(rt,
      el("div", { class: "head" }, el("div", { class: "grow" }, el("h1", {}, "Compare runs"),
        el("div", { class: "sub" }, "the recommended configuration of each run on its tuning workload; deltas against the first run")),
      el("div", { class: "actions" }, el("a", { class: "button ghost", href: "#/compare?runs=" + ids.join(",") + "&pick=1" }, "Change runs"))),
      el("div", { class: "panel flush", id: "compare" }, compareTable("compare-table", heads, rows, info)),
      el("div", { class: "panel" }, el("h2", {}, "Commands"), winners));
  }

  async function compareTrials(rt, refs) {
    let ts;
    try {
      ts = await Promise.all(refs.map((r) => getJSON("/runs/" + r.run + "/trials/" + encodeURIComponent(r.key))));
    } catch (e) {
      render(rt, el("h1", {}, "Compare trials"), errorBox(e));
      return;
    }
    if (ts.length < 2) {
      // One trial chosen: offer the other trials of its run.
      const r = refs[0];
      let list = { trials: [] };
      try { list = await getJSON("/runs/" + r.run + "/trials"); } catch (e) { /* the picker stays empty */ }
      render(rt, el("h1", {}, "Compare trials"), el("p", {}, "Compare ", el("b", {}, ts[0].name), " with:"),
        el("div", { class: "panel flush" }, el("table", {}, el("tbody", {}, list.trials.filter((t) => t.key !== r.key).map((t) =>
          el("tr", {}, el("td", {}, el("a", { href: "#/compare?trials=" + encodeURIComponent(r.run + ":" + r.key) + "," + encodeURIComponent(r.run + ":" + t.key) }, t.name)),
            el("td", {}, t.stage), el("td", {}, t.workload), el("td", { class: "num" }, "r" + t.repeat), el("td", { class: "num" }, PL.fmtNum(t.total_throughput))))))));
      return;
    }
    const heads = ts.map((t, i) => el("span", {}, el("a", { href: "#/runs/" + refs[i].run + "/trials/" + encodeURIComponent(refs[i].key) }, t.name),
      el("div", { class: "muted small" }, "run " + refs[i].run + " · " + t.stage + " · r" + t.repeat)));
    const rows = PL.compareRows(ts.map(PL.trialFigures), TRIAL_METRICS);
    render(rt,
      el("div", { class: "head" }, el("div", { class: "grow" }, el("h1", {}, "Compare trials"), el("div", { class: "sub" }, "deltas against the first trial"))),
      el("div", { class: "panel flush", id: "compare" }, compareTable("compare-table", heads, rows,
        [["Status", ...ts.map((t) => badge(t.status))], ["Workload", ...ts.map((t) => t.workload)]])),
      el("div", { class: "panel" }, el("h2", {}, "Commands"), el("div", { class: "cols" }, ts.map((t) => el("div", {}, el("h3", { class: "wrap" }, t.name), cmdBox(t.command))))),
      el("div", { class: "cols" }, ts.map((t) => el("div", { class: "panel" }, el("h3", { class: "wrap" }, t.name), el("pre", {}, t.result_text || "no result")))));
  }

  async function pageCompare(rt) {
    const raw = rt.query.raw;
    const ids = PL.splitList(raw.runs || "").filter((s) => /^\d+$/.test(s));
    const refs = PL.splitList(raw.trials || "").map(PL.trialRef).filter(Boolean);
    if (refs.length) return compareTrials(rt, refs);
    if (ids.length >= 2 && !rt.query.pick) return compareRuns(rt, ids);
    return comparePicker(rt);
  }

  // ---- New lab -----------------------------------------------------------

  async function pageNew(rt) {
    let example = "";
    try { example = await (await fetch("example-lab.yaml")).text(); } catch (e) { example = ""; }
    const draft = sessionStorage.getItem("perflab.draft");
    const ta = el("textarea", { id: "spec", spellcheck: "false", "aria-label": "lab spec (YAML)", wrap: "off" });
    ta.value = draft || example;
    const gutter = el("div", { class: "gutter", "aria-hidden": "true" });
    const notes = el("div", { class: "notes", id: "spec-notes" });
    const list = el("ul", { class: "problems", id: "problems" });
    const status = el("div", { id: "submit-status", class: "hint" });
    let problems = new Map();
    const lineH = 20, padTop = 8;

    const drawGutter = () => {
      const n = ta.value.split("\n").length;
      const kids = [];
      for (let i = 1; i <= n; i++) kids.push(el("div", { class: problems.has(i) ? "err" : "", dataset: { line: i } }, String(i)));
      gutter.replaceChildren(...kids);
      gutter.scrollTop = ta.scrollTop;
      notes.replaceChildren(...[...problems.entries()].filter(([l]) => l > 0).map(([l, ps]) =>
        el("div", { class: "note", style: `top:${padTop + (l - 1) * lineH - ta.scrollTop}px`, dataset: { line: l } },
          el("b", {}, "line " + l + ": "), ps.map((p) => (p.field ? p.field + ": " : "") + p.message).join("; "))));
    };
    const jump = (line) => {
      const lines = ta.value.split("\n");
      const start = lines.slice(0, line - 1).reduce((a, l) => a + l.length + 1, 0);
      ta.focus();
      ta.setSelectionRange(start, start + (lines[line - 1] || "").length);
      ta.scrollTop = Math.max(0, (line - 5) * lineH);
      drawGutter();
    };
    ta.addEventListener("input", () => { sessionStorage.setItem("perflab.draft", ta.value); drawGutter(); });
    ta.addEventListener("keydown", (e) => {
      // Tab indents (YAML has no tabs: two spaces); Ctrl/Cmd+Enter submits.
      if (e.key === "Tab" && !e.shiftKey && !e.ctrlKey && !e.metaKey && !e.altKey) {
        e.preventDefault();
        ta.setRangeText("  ", ta.selectionStart, ta.selectionEnd, "end");
        ta.dispatchEvent(new Event("input"));
      } else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        form.requestSubmit();
      }
    });
    ta.addEventListener("scroll", drawGutter);

    const fresh = el("input", { type: "checkbox", id: "fresh" });
    const submit = el("button", { type: "submit", id: "start-lab" }, "Start lab");
    const form = el("form", { id: "new-lab", onsubmit: async (e) => {
      e.preventDefault();
      submit.disabled = true;
      status.className = "hint";
      status.textContent = "Validating and starting…";
      problems = new Map();
      list.replaceChildren();
      drawGutter();
      try {
        const res = await call("/labs" + (fresh.checked ? "?fresh=true" : ""), { method: "POST", headers: { "Content-Type": "application/yaml" }, body: ta.value });
        const started = await res.json();
        sessionStorage.removeItem("perflab.draft");
        location.hash = "#/runs/" + started.id;
      } catch (err) {
        submit.disabled = false;
        if (err instanceof ApiError && err.status === 400) {
          const ps = PL.extractProblems(err.body);
          problems = PL.problemsByLine(ps);
          status.className = "hint worse";
          status.textContent = ps.length === 1 ? "The spec has a problem; nothing ran." : `The spec has ${ps.length} problems; nothing ran.`;
          list.replaceChildren(...ps.map((p) => el("li", {}, p.line ? el("a", { href: "#", onclick: (ev) => { ev.preventDefault(); jump(p.line); } }, "line " + p.line) : null,
            p.line ? ": " : "", p.field ? el("code", {}, p.field) : null, p.field ? " " : "", p.message, p.path ? el("span", {}, " (" + p.path + ")") : null)));
          drawGutter();
          if (ps[0] && ps[0].line) jump(ps[0].line);
        } else {
          status.className = "hint worse";
          status.textContent = err.message;
        }
      }
    } },
    el("div", { class: "editor" }, gutter, ta, notes),
    list,
    el("div", { class: "actions", style: "margin-top:12px" }, submit,
      el("label", { class: "hint" }, fresh, " start over (--fresh): ignore stored trials of the same spec"),
      el("button", { type: "button", class: "ghost small", onclick: () => { ta.value = example; sessionStorage.removeItem("perflab.draft"); problems = new Map(); list.replaceChildren(); drawGutter(); } }, "Reset to the example")),
    status);

    render(rt,
      el("div", { class: "head" }, el("div", { class: "grow" }, el("h1", {}, "New lab"),
        el("div", { class: "sub" }, "A lab spec in YAML, validated by the server exactly as ", el("code", {}, "perflab lab"),
          " does. Relative paths resolve against the server's --data-root."))),
      el("div", { class: "panel" }, form));
    drawGutter();
  }

  // ---- Router ------------------------------------------------------------

  let lastPlace = "";
  async function route() {
    leave();
    const rt = PL.parseRoute(location.hash);
    rt.gen = ++gen;
    // A new page starts at its top; a page redrawn in place (the runs
    // list refreshing, a run that just ended) keeps the reader's place.
    const place = rt.page + "/" + (rt.id || "") + "/" + (rt.key || "");
    if (place !== lastPlace) window.scrollTo(0, 0);
    lastPlace = place;
    setNav(rt.page);
    document.title = "perflab · " + rt.page;
    main.setAttribute("aria-busy", "true");
    try {
      switch (rt.page) {
        case "runs": await pageRuns(rt); break;
        case "run": await pageRun(rt); break;
        case "trial": await pageTrial(rt); break;
        case "report": await pageReport(rt); break;
        case "compare": await pageCompare(rt); break;
        case "new": await pageNew(rt); break;
        default: render(rt, el("h1", {}, "Not found"), el("p", {}, el("a", { href: "#/runs" }, "Back to the runs")));
      }
    } catch (e) {
      render(rt, errorBox(e));
    } finally {
      main.setAttribute("aria-busy", "false");
      main.dataset.page = rt.page;
    }
  }
  window.addEventListener("hashchange", route);
  route();
})();
