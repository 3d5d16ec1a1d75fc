// Live parts of the dashboard that talk to the network or the DOM:
// StreamSource reads a run's server-sent events with fetch(), so the API
// token travels in the Authorization header (EventSource cannot set
// headers, and a token in the URL lands in access logs and history);
// RowTable updates a live table by row.
// Loaded as a plain script (window.PLLive) and by node's test runner
// (module.exports), with no dependencies.
(function (root) {
  "use strict";

  // SSEParser splits a text/event-stream into events, as the HTML
  // standard's "interpret an event stream" does: fields id, event, data
  // (several data lines joined by "\n"), comments ignored, an event
  // dispatched at a blank line. Text is pushed in chunks that may split
  // lines anywhere.
  class SSEParser {
    constructor(onEvent) {
      this.onEvent = onEvent;
      this.buf = "";
      this.lastEventId = "";
      this.reset();
    }

    reset() {
      this.type = "";
      this.data = [];
    }

    push(text) {
      this.buf += text;
      for (;;) {
        const m = /\r\n|\r|\n/.exec(this.buf);
        // A trailing "\r" may be the first half of "\r\n": wait for more.
        if (!m || (m[0] === "\r" && m.index === this.buf.length - 1)) return;
        const line = this.buf.slice(0, m.index);
        this.buf = this.buf.slice(m.index + m[0].length);
        this.line(line);
      }
    }

    line(line) {
      if (line === "") {
        if (this.data.length) {
          this.onEvent({ type: this.type || "message", data: this.data.join("\n"), lastEventId: this.lastEventId });
        }
        this.reset();
        return;
      }
      if (line[0] === ":") return;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      let value = i < 0 ? "" : line.slice(i + 1);
      if (value[0] === " ") value = value.slice(1);
      if (field === "event") this.type = value;
      else if (field === "data") this.data.push(value);
      else if (field === "id" && !value.includes("\0")) this.lastEventId = value;
    }
  }

  // StreamSource is the part of EventSource that PL.Follower uses
  // (readyState, onopen, onerror, addEventListener, close), over fetch()
  // and a ReadableStream reader, with headers: opts.headers (an object, or
  // a function returning one, read at each connection). Like EventSource
  // it reconnects after a dropped stream (readyState 0, onerror), sending
  // Last-Event-ID, and gives up (readyState 2, onerror) on an answer that
  // is not a 200 event stream (a 401, a restarted server's 404).
  class StreamSource {
    constructor(url, opts) {
      const o = opts || {};
      this.url = url;
      this.headers = o.headers || {};
      this.fetch = o.fetch || ((u, init) => root.fetch(u, init));
      this.retry = o.retry !== undefined ? o.retry : 1000;
      this.setTimer = o.setTimeout || ((f, ms) => setTimeout(f, ms));
      this.clearTimer = o.clearTimeout || ((t) => clearTimeout(t));
      this.readyState = 0;
      this.listeners = {};
      this.onopen = null;
      this.onerror = null;
      this.lastEventId = "";
      this.ctrl = null;
      this.timer = null;
      // Connect once the caller has set its handlers, as EventSource does.
      this.started = Promise.resolve().then(() => this.connect());
    }

    addEventListener(type, f) {
      (this.listeners[type] = this.listeners[type] || []).push(f);
    }

    close() {
      this.readyState = 2;
      if (this.timer !== null) this.clearTimer(this.timer);
      this.timer = null;
      if (this.ctrl) this.ctrl.abort();
    }

    async connect() {
      if (this.readyState === 2) return;
      const ctrl = typeof AbortController !== "undefined" ? new AbortController() : null;
      this.ctrl = ctrl;
      const extra = typeof this.headers === "function" ? this.headers() : this.headers;
      const headers = Object.assign({ Accept: "text/event-stream" }, extra);
      if (this.lastEventId) headers["Last-Event-ID"] = this.lastEventId;
      let resp;
      try {
        resp = await this.fetch(this.url, { headers, cache: "no-store", signal: ctrl ? ctrl.signal : undefined });
      } catch (e) {
        this.lost();
        return;
      }
      if (this.readyState === 2) return;
      const ctype = (resp.headers && resp.headers.get("Content-Type")) || "";
      if (resp.status !== 200 || !ctype.startsWith("text/event-stream") || !resp.body) {
        this.readyState = 2;
        if (this.onerror) this.onerror({ status: resp.status });
        return;
      }
      this.readyState = 1;
      if (this.onopen) this.onopen();
      const parser = new SSEParser((ev) => this.dispatch(ev));
      parser.lastEventId = this.lastEventId;
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done || this.readyState === 2) break;
          parser.push(dec.decode(value, { stream: true }));
        }
      } catch (e) {
        // A dropped connection, or close() aborting the read.
      }
      this.lost();
    }

    dispatch(ev) {
      this.lastEventId = ev.lastEventId;
      if (this.readyState === 2) return;
      for (const f of this.listeners[ev.type] || []) f({ type: ev.type, data: ev.data, lastEventId: ev.lastEventId });
    }

    // lost reconnects after the stream ended or failed, unless closed.
    lost() {
      if (this.readyState === 2) return;
      this.readyState = 0;
      if (this.onerror) this.onerror({});
      if (this.readyState === 2) return;
      this.timer = this.setTimer(() => { this.timer = null; this.connect(); }, this.retry);
    }
  }

  // RowTable keeps a table body's rows in step with a list of items, one
  // row per key: a row is built (make) only for a new key or an item
  // whose signature changed, and the rows in place are left alone, so an
  // event that changes one trial of hundreds touches one row (a rebuilt
  // table also lost its scroll position, hover and text selection).
  // update returns how many rows it built.
  class RowTable {
    constructor(tbody, keyOf, sigOf, make) {
      this.tbody = tbody;
      this.keyOf = keyOf;
      this.sigOf = sigOf;
      this.make = make;
      this.rows = new Map(); // key → { sig, tr }
    }

    update(items) {
      let built = 0;
      const seen = new Set();
      let ref = this.tbody.firstChild;
      for (const it of items) {
        const k = this.keyOf(it);
        if (seen.has(k)) continue;
        seen.add(k);
        const sig = this.sigOf(it);
        let r = this.rows.get(k);
        if (!r || r.sig !== sig) {
          const tr = this.make(it);
          built++;
          if (r && r.tr.parentNode === this.tbody) {
            this.tbody.replaceChild(tr, r.tr);
            if (ref === r.tr) ref = tr;
          }
          r = { sig, tr };
          this.rows.set(k, r);
        }
        if (r.tr === ref) ref = ref.nextSibling;
        else this.tbody.insertBefore(r.tr, ref);
      }
      for (const [k, r] of this.rows) {
        if (!seen.has(k)) {
          if (r.tr.parentNode === this.tbody) this.tbody.removeChild(r.tr);
          this.rows.delete(k);
        }
      }
      return built;
    }
  }

  const api = { SSEParser, StreamSource, RowTable };
  if (typeof module !== "undefined" && module.exports) module.exports = api;
  else root.PLLive = api;
})(typeof window !== "undefined" ? window : globalThis);
