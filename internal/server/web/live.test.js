// Unit tests of static/live.js, run with
//   node --test internal/server/web/
// No npm packages: node's own test runner, assert, and a loopback server.
"use strict";
const test = require("node:test");
const assert = require("node:assert/strict");
const http = require("node:http");
const LV = require("./static/live.js");
const PL = require("./static/lib.js");

test("SSEParser: fields, multi-line data, comments, lines split across chunks", () => {
  const got = [];
  const p = new LV.SSEParser((e) => got.push(e));
  p.push(": keepalive\n\nid: 1\nevent: stage\nda");
  p.push("ta: {\"a\":1}\r");
  p.push("\n\r\nid: 2\ndata: x\ndata: y\n\nevent: ignored\n\n");
  assert.deepEqual(got, [
    { type: "stage", data: "{\"a\":1}", lastEventId: "1" },
    { type: "message", data: "x\ny", lastEventId: "2" },
  ]);
});

// serve answers the event stream: each connection gets the next of
// answers (a function of the request) and the requests are kept.
function serve(answers) {
  const reqs = [];
  const srv = http.createServer((req, res) => {
    reqs.push({ url: req.url, headers: req.headers });
    answers[Math.min(reqs.length, answers.length) - 1](req, res);
  });
  return new Promise((resolve) => srv.listen(0, "127.0.0.1", () => resolve({ srv, reqs, url: "http://127.0.0.1:" + srv.address().port })));
}

const stream = (body) => (req, res) => {
  res.writeHead(200, { "Content-Type": "text/event-stream" });
  res.end(body);
};

test("StreamSource: the token in a header, never in the URL; Last-Event-ID on reconnect; Follower ends at end", async () => {
  const { srv, reqs, url } = await serve([
    stream("id: 1\nevent: stage\ndata: {\"stage\":\"engine\"}\n\n"), // then the connection drops
    stream("id: 2\nevent: end\ndata: {\"status\":\"done\"}\n\n"),
  ]);
  try {
    const got = [];
    await new Promise((resolve) => {
      new PL.Follower(url + "/api/v1/runs/7/events", {
        onEvent: (e) => got.push(e.type + ":" + e.id),
        onState: (s) => { if (s === "ended") resolve(); },
      }, { make: (u) => new LV.StreamSource(u, { headers: () => ({ Authorization: "Bearer s3cret" }), retry: 10 }) });
    });
    assert.deepEqual(got, ["stage:1", "end:2"]);
    assert.equal(reqs.length, 2);
    for (const r of reqs) {
      assert.equal(r.url, "/api/v1/runs/7/events", "no token in the URL");
      assert.equal(r.headers.authorization, "Bearer s3cret");
    }
    assert.equal(reqs[0].headers["last-event-id"], undefined);
    assert.equal(reqs[1].headers["last-event-id"], "1", "a reconnect resumes after the last event seen");
  } finally {
    srv.close();
  }
});

test("StreamSource: a 401 gives up (readyState 2) and closes, as EventSource does", async () => {
  const { srv, reqs, url } = await serve([(req, res) => { res.writeHead(401, { "Content-Type": "application/json" }); res.end("{}"); }]);
  try {
    const es = new LV.StreamSource(url + "/e", { retry: 10 });
    await new Promise((resolve) => { es.onerror = resolve; });
    assert.equal(es.readyState, 2);
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(reqs.length, 1, "no retry of its own after a refusal");
  } finally {
    srv.close();
  }
});

test("StreamSource: close stops the stream and any reconnect", async () => {
  const { srv, reqs, url } = await serve([(req, res) => {
    res.writeHead(200, { "Content-Type": "text/event-stream" });
    res.write("id: 1\nevent: stage\ndata: {}\n\n"); // held open
  }]);
  try {
    const es = new LV.StreamSource(url + "/e", { retry: 10 });
    await new Promise((resolve) => es.addEventListener("stage", resolve));
    es.close();
    await new Promise((r) => setTimeout(r, 50));
    assert.equal(es.readyState, 2);
    assert.equal(reqs.length, 1);
  } finally {
    srv.closeAllConnections();
    srv.close();
  }
});

// FakeNode is the part of a DOM node RowTable uses; ops counts the
// changes made to the tbody's children.
class FakeNode {
  constructor(name) { this.name = name; this.children = []; this.parentNode = null; this.ops = 0; }
  get firstChild() { return this.children[0] || null; }
  get nextSibling() {
    const c = this.parentNode ? this.parentNode.children : [];
    return c[c.indexOf(this) + 1] || null;
  }
  detach(n) {
    if (n.parentNode) n.parentNode.children.splice(n.parentNode.children.indexOf(n), 1);
    n.parentNode = null;
  }
  insertBefore(n, ref) {
    this.ops++;
    this.detach(n);
    const i = ref ? this.children.indexOf(ref) : this.children.length;
    this.children.splice(i, 0, n);
    n.parentNode = this;
  }
  replaceChild(n, old) {
    this.ops++;
    this.detach(n);
    this.children[this.children.indexOf(old)] = n;
    n.parentNode = this;
    old.parentNode = null;
  }
  removeChild(n) { this.ops++; this.detach(n); }
}

test("RowTable: a frame with one changed trial of 450 touches one row", () => {
  const tbody = new FakeNode("tbody");
  let made = 0;
  const rt = new LV.RowTable(tbody, (t) => t.key, (t) => t.status + "|" + t.score, (t) => { made++; return new FakeNode(t.key); });
  let trials = Array.from({ length: 450 }, (_, i) => ({ key: "t" + i, status: "ok", score: i }));
  const newestFirst = () => trials.slice().reverse();
  assert.equal(rt.update(newestFirst()), 450);
  assert.deepEqual(tbody.children.map((n) => n.name), newestFirst().map((t) => t.key));

  // The same frame again: nothing built, nothing moved.
  made = 0;
  tbody.ops = 0;
  assert.equal(rt.update(newestFirst()), 0);
  assert.equal(tbody.ops, 0);

  // One trial's score changes: one row built, one replaced in place.
  const before = tbody.children.slice();
  trials[200] = Object.assign({}, trials[200], { score: 9999 });
  tbody.ops = 0;
  assert.equal(rt.update(newestFirst()), 1);
  assert.equal(tbody.ops, 1);
  const changed = tbody.children.filter((n, i) => n !== before[i]);
  assert.deepEqual(changed.map((n) => n.name), ["t200"]);

  // A new trial ends: one row built and put first, the rest untouched.
  trials.push({ key: "t450", status: "failed", score: null });
  tbody.ops = 0;
  assert.equal(rt.update(newestFirst()), 1);
  assert.equal(tbody.ops, 1);
  assert.equal(tbody.children[0].name, "t450");
  assert.equal(tbody.children.length, 451);

  // A trial gone from the list (a replay deduped) loses its row.
  trials = trials.filter((t) => t.key !== "t3");
  assert.equal(rt.update(newestFirst()), 0);
  assert.deepEqual(tbody.children.map((n) => n.name), newestFirst().map((t) => t.key));
});
