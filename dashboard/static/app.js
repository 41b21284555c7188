// Switchboard dashboard: one SSE stream (GET /v1/watch?all=true, read with
// fetch so a token can be sent and Last-Event-ID resumed), /v1/info and
// /v1/leases polled every 2 s, /v1/instances polled slowly for heartbeat
// times (heartbeats are never events). Events only change the store
// (store.js); the DOM is updated at most once per animation frame, and only
// where it shows something that changed: the instance table (one page at a
// time) when an event touches its rows or groups, the capabilities and the
// activity feed at most a few times a second. An open detail view follows
// its instance: it is re-rendered in the frame after its entry changes.
import { Store, parseFilter, parseDuration, label } from "./store.js";

(() => {
  const PAGE = 100;          // instances per page
  const LINGER = 6000;       // ms a removed instance stays visible
  const FEED_MAX = 60;       // activity entries kept
  const SIDE_EVERY = 250;    // ms between renders of the capabilities and the feed
  const IDLE = 45000;        // ms without a byte (keep-alives come every 15 s) before reconnecting
  const POLL_TIMEOUT = 10000; // ms a poll (/v1/info, /v1/leases, /v1/now) may take before it is abandoned

  const $ = (id) => document.getElementById(id);
  let token = sessionStorage.getItem("sb-token") || "";
  let tokenError = "";       // why the token last given cannot be sent (tokenProblem), shown in the token form
  let lastId = "";           // the id of the last event with one
  let conn = "connecting";
  let catalogDown = "";      // the error of the last "error" event, until "synced"
  let infoDown = "";         // the error /v1/info reports while the server cannot read the catalog
  let lastSynced = 0;        // Date.now() of the last synced
  let pending = null;        // Map while a snapshot is being received
  let clockSkew = 0;         // catalog clock − local clock, ms
  let clockKnown = false;    // clockSkew was measured (a 401 or a server down at load leaves it 0)
  let page = 0;
  let rowsDirty = false;     // the shown page of the table must be rebuilt
  let countsDirty = false;   // #shown and the pager
  let capsDirty = false, feedDirty = false;
  let pageGroups = new Map(); // name → its group header row on the shown page
  let pageRows = new Map();   // id → its row on the shown page
  const patchRows = new Set(), patchGroups = new Set(); // to re-render in place
  let feed = [];
  let info = null, leases = [];
  const store = new Store(parseFilter(new URLSearchParams(location.search).get("q") || ""));
  let detailId = "";
  let detailOf = null;         // what the open detail view shows: {e, inst, state, reason, label}; reset whenever detailId changes
  let received = 0, fresh = 0; // live events and fresh snapshots received (shown in #rate)
  let receivedTick = 0;       // received at the last tick

  const esc = (s) => String(s ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  const now = () => Date.now() + clockSkew;
  const ms = (t) => { const v = Date.parse(t); return isNaN(v) ? 0 : v; };
  function age(msAgo) {
    if (msAgo < 0) msAgo = 0;
    const s = msAgo / 1000;
    if (s < 60) return s.toFixed(s < 10 ? 1 : 0) + " s";
    if (s < 3600) return Math.floor(s / 60) + " m " + Math.floor(s % 60) + " s";
    if (s < 86400) return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " m";
    return Math.floor(s / 86400) + " d";
  }
  function hhmmss(t) { return new Date(t).toTimeString().slice(0, 8); }
  function api(path, opts = {}) {
    const headers = Object.assign({}, opts.headers || {});
    if (token) headers.Authorization = "Bearer " + token;
    return fetch(path, Object.assign({}, opts, { headers, cache: "no-store" }));
  }
  // poll is api for the periodic reads: bounded in time, so a server that
  // accepts a request and never answers cannot hold a poll (and, through
  // its busy flag, every later one) forever.
  const poll = (path, timeout = POLL_TIMEOUT) => api(path, { signal: AbortSignal.timeout(timeout) });

  // ---- filter ----
  function setFilter(q, fromInput) {
    store.setFilter(parseFilter(q));
    page = 0;
    rowsDirty = countsDirty = capsDirty = true;
    const u = new URL(location.href);
    if (q) u.searchParams.set("q", q); else u.searchParams.delete("q");
    history.replaceState(null, "", u);
    if (!fromInput) $("filter").value = q;
    schedule();
  }

  // ---- state changes ----
  function apply(kind, data) {
    const i = data.instance;
    switch (kind) {
      case "added":
      case "updated": {
        const prev = store.get(i.id);
        const state = i.stale ? "stale" : "active";
        if (kind === "updated" && prev && prev.state !== state) log(state === "stale" ? "stale" : "active", label(i), state === "stale" ? "missed its heartbeats" : "active again");
        else if (kind === "updated" && prev && (prev.inst.status || "passing") !== (i.status || "passing")) log("updated", label(i), "now " + (i.status || "passing"));
        else log(kind, label(i), kind === "added" ? (i.type || "") + " " + (i.address || "") : "");
        changed(i.id, store.put(i.id, { inst: i, state, reason: "", gone: 0 }));
        break;
      }
      case "removed": {
        const e = store.get(i.id);
        changed(i.id, store.put(i.id, { inst: e ? e.inst : i, state: "removed", reason: data.reason || "removed", gone: Date.now() }));
        log("removed", label(e ? e.inst : i), data.reason || "");
        break;
      }
    }
  }
  // changed marks what a store change touches on the table: the whole
  // page when an entry joined or left the filtered set before the page's
  // end (the rows shift); otherwise only its row when it is on the page, and
  // the header of its group when that is on the page (the counts).
  function changed(id, c) {
    capsDirty = true;
    if (c.index >= 0) {
      const end = (page + 1) * PAGE;
      if (c.moved) {
        countsDirty = true;
        if (c.index < end) rowsDirty = true;
      } else if (c.index >= page * PAGE && c.index < end) patchRows.add(id);
      if (pageGroups.has(c.name)) patchGroups.add(c.name);
      if (c.renamed && pageGroups.has(c.renamed)) patchGroups.add(c.renamed);
    }
    schedule();
  }
  function log(what, who, note) {
    feed.unshift({ t: Date.now(), what, who, note });
    if (feed.length > FEED_MAX) feed.length = FEED_MAX;
    feedDirty = true;
    schedule();
  }
  function sweep() {
    const t = Date.now();
    const gone = [];
    for (const [id, e] of store.byId) if (e.state === "removed" && t - e.gone > LINGER) gone.push(id);
    for (const id of gone) changed(id, store.drop(id));
  }

  // ---- SSE over fetch ----
  let attempt = 0, abort = null, idleTimer = 0;
  // setConn shows the connection state. The catalog is down when the
  // stream said so (an "error" event, until "synced") or when /v1/info
  // says so (a server older than the one that follows a snapshot taken
  // during an outage with an "error" event).
  function setConn(s, text) {
    conn = s;
    countsDirty = true; // the empty table's text follows the connection
    schedule();
    const el = $("conn");
    const down = catalogDown || infoDown;
    if (s === "live" && down) { el.dataset.state = "catalog-down"; el.textContent = "live · catalog down"; }
    else { el.dataset.state = s; el.textContent = text; }
    document.body.classList.toggle("stale-data", s !== "live" || !!down);
    const b = $("banner");
    let msg = "";
    if (s === "reconnecting") msg = "Disconnected from the server — reconnecting. Showing the last known state" + (lastSynced ? " (as of " + hhmmss(lastSynced) + ")" : "") + "; it may be out of date.";
    else if (down) msg = "The server cannot read the catalog (" + down + ") — showing the last known state; it may be out of date.";
    b.hidden = !msg;
    b.textContent = msg;
    b.title = msg;
  }
  async function connect() {
    abort = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (lastId) headers["Last-Event-ID"] = lastId;
    let resp;
    try {
      resp = await api("/v1/watch?all=true", { headers, signal: abort.signal });
    } catch (err) { return retry(); }
    if (resp.status === 401 || resp.status === 403) { askToken(resp.status); return; }
    if (!resp.ok || !resp.body) return retry();
    attempt = 0;
    tokenError = ""; // the stream is open: a token dropped at load was not needed
    const reader = resp.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "", ev = { id: null, event: "message", data: [] };
    const bump = () => { clearTimeout(idleTimer); idleTimer = setTimeout(() => abort.abort(), IDLE); };
    bump();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        window.__chunks = (window.__chunks || 0) + 1;
        bump();
        buf += value;
        let nl;
        while ((nl = buf.search(/\r\n|\r|\n/)) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + (buf[nl] === "\r" && buf[nl + 1] === "\n" ? 2 : 1));
          if (line === "") {
            if (ev.data.length) dispatch(ev.id, ev.event, ev.data.join("\n"));
            ev = { id: null, event: "message", data: [] };
            continue;
          }
          if (line[0] === ":") continue;
          const c = line.indexOf(":");
          const field = c < 0 ? line : line.slice(0, c);
          let v = c < 0 ? "" : line.slice(c + 1);
          if (v[0] === " ") v = v.slice(1);
          if (field === "data") ev.data.push(v);
          else if (field === "event") ev.event = v;
          else if (field === "id") ev.id = v;
        }
      }
    } catch (err) { /* dropped or aborted */ }
    clearTimeout(idleTimer);
    retry();
  }
  function retry() {
    attempt++;
    pending = null;
    setConn("reconnecting", "reconnecting… (" + attempt + ")");
    if (attempt === 1) log("conn", "stream", "disconnected");
    setTimeout(connect, Math.min(1000 * attempt, 5000));
  }
  function dispatch(id, event, data) {
    if (id) lastId = id;
    let d;
    try { d = JSON.parse(data); } catch (err) { return; }
    switch (event) {
      case "snapshot":
        pending = new Map();
        if (d.fresh) fresh++;
        if (d.fresh) log("conn", "stream", "fresh snapshot (" + d.instances + ")");
        break;
      case "added":
        if (pending) { const i = d.instance; pending.set(i.id, { inst: i, state: i.stale ? "stale" : "active", reason: "", gone: 0 }); break; }
        received++;
        apply(event, d);
        break;
      case "updated":
      case "removed":
        received++;
        apply(event, d);
        break;
      case "synced":
        if (pending) {
          // Replace what we had: what is gone now went while we did not look.
          for (const [iid, e] of store.byId) if (!pending.has(iid) && e.state !== "removed") {
            pending.set(iid, { inst: e.inst, state: "removed", reason: "gone", gone: Date.now() });
            log("removed", label(e.inst), "gone while disconnected");
          }
          store.replace(pending);
          pending = null;
          rowsDirty = countsDirty = capsDirty = true;
        }
        catalogDown = "";
        lastSynced = Date.now();
        if (conn !== "live") log("conn", "stream", "live");
        setConn("live", "live");
        schedule();
        if (!clockKnown) refreshClock(); // not read at load (no token yet, or no server): now, not in a minute
        refreshInfo();
        refreshSeen();
        break;
      case "error":
        catalogDown = d.error || "catalog unreachable";
        log("error", "catalog", catalogDown);
        setConn(conn, conn === "live" ? "live" : $("conn").textContent);
        $("conn").dataset.state = "catalog-down";
        break;
    }
  }
  function askToken(status) {
    setConn("auth", tokenError ? "token cannot be sent" : status === 401 ? "token needed" : "wrong token");
    $("tokenerror").hidden = !tokenError;
    $("tokenerror").textContent = tokenError;
    $("tokenform").hidden = false;
    $("token").focus();
  }
  // tokenProblem says why tok cannot be the API token the page sends, or ""
  // when it can be. The token travels in the Authorization header: fetch
  // refuses characters beyond Latin-1 (and NUL, CR, LF) before sending
  // anything, the server answers 400 to other control characters, and a
  // Latin-1 letter would go as one byte, not as the UTF-8 the server's
  // token is compared in, so it could never match. The page says so at
  // once and does not try: such a token used to keep the stream
  // reconnecting for ever.
  function tokenProblem(tok) {
    const bad = [];
    for (const ch of tok) {
      const c = ch.codePointAt(0);
      if (c === 9 || (c >= 0x20 && c < 0x7f)) continue;
      const u = "U+" + c.toString(16).toUpperCase().padStart(4, "0");
      const d = c < 0x20 || (c >= 0x7f && c < 0xa0) ? u + " (a control character)" : "\u201c" + ch + "\u201d (" + u + ")";
      if (!bad.includes(d)) bad.push(d);
    }
    if (!bad.length) return "";
    return "The token contains characters that cannot be sent: " + bad.slice(0, 5).join(", ") + (bad.length > 5 ? " and " + (bad.length - 5) + " more" : "") +
      ". A token travels in an HTTP header, which carries only ASCII letters, digits, punctuation and spaces.";
  }

  // ---- polling: info, leases, heartbeat times ----
  // One refresh of the header and leases at a time: it runs every 2 s and
  // after every sync, and a server slower than that (or one that stopped
  // answering) must not collect a growing queue of requests in the page.
  let infoBusy = false;
  async function refreshInfo() {
    if (infoBusy) return;
    infoBusy = true;
    try {
      try {
        const r = await poll("/v1/info");
        if (r.status === 401 || r.status === 403) return;
        info = r.ok ? await r.json() : { healthy: false, error: "HTTP " + r.status };
      } catch (err) { info = null; }
      const down = info && !info.healthy ? (info.error || "catalog unreachable") : "";
      if (down !== infoDown) {
        if (down && !catalogDown) log("error", "catalog", down);
        infoDown = down;
        if (conn === "live") setConn("live", "live");
      }
      try {
        const r = await poll("/v1/leases");
        if (r.ok) leases = await r.json();
      } catch (err) { /* keep the last known */ }
      renderHeader(); renderLeases();
    } finally { infoBusy = false; }
  }
  let clockBusy = false;
  async function refreshClock() {
    if (clockBusy) return;
    clockBusy = true;
    try {
      const t0 = Date.now();
      const r = await poll("/v1/now");
      const t1 = Date.now();
      if (r.ok) { const d = await r.json(); clockSkew = ms(d.now) - (t0 + t1) / 2; clockKnown = true; }
    } catch (err) { /* keep the last skew */ }
    clockBusy = false;
  }
  let seenTimer = 0, seenBusy = false;
  async function refreshSeen() {
    if (seenBusy) return;
    seenBusy = true;
    // Heartbeats are not events (a snapshot's last_seen is that of the last
    // change): read the rows' last_seen now and then, at a pace that keeps
    // the cost flat as the fleet grows (2 s for a few, 50 s for 10,000).
    clearTimeout(seenTimer);
    const next = Math.min(60000, Math.max(2000, store.size * 5));
    if (conn === "live") {
      try {
        const r = await poll("/v1/instances?all=true", 6 * POLL_TIMEOUT); // the whole fleet: give it longer
        if (r.ok) {
          for (const i of await r.json()) {
            const e = store.get(i.id);
            if (e && e.state !== "removed" && ms(i.last_seen) > ms(e.inst.last_seen)) e.inst = Object.assign({}, e.inst, { last_seen: i.last_seen });
          }
          rowsDirty = true; schedule();
        }
      } catch (err) { /* next time */ }
    }
    seenBusy = false;
    seenTimer = setTimeout(refreshSeen, next);
  }

  // ---- rendering (once per animation frame, only what changed) ----
  let frame = 0, sideAt = 0, sideTimer = 0;
  function schedule() { if (!frame) frame = requestAnimationFrame(render); }
  function render(t) {
    frame = 0;
    if (window.__norender) return;
    const R = window.__r = window.__r || { frames: 0, rows: 0, counts: 0, side: 0, patch: 0 };
    R.frames++; if (rowsDirty) R.rows++; else if (patchRows.size || patchGroups.size) R.patch++; if (countsDirty) R.counts++;
    const pages = Math.max(1, Math.ceil(store.view.length / PAGE));
    if (page >= pages) { page = pages - 1; rowsDirty = countsDirty = true; }
    if (rowsDirty) { rowsDirty = false; renderRows(); } else if (patchRows.size || patchGroups.size) patch();
    if (countsDirty) { countsDirty = false; renderCounts(pages); }
    renderTotals();
    if (detailId && detailStale()) renderDetail();
    if ((capsDirty || feedDirty) && !sideTimer) {
      // The side panels change with nearly every event; at a high rate
      // nobody reads them faster than this, and they cost a pass over the
      // shown instances (capabilities) and a list rebuilt (feed).
      const wait = SIDE_EVERY - (t - sideAt);
      if (wait > 0) sideTimer = setTimeout(() => { sideTimer = 0; schedule(); }, wait);
      else {
        sideAt = t; R.side++;
        if (capsDirty) { capsDirty = false; renderCaps(); }
        if (feedDirty) { feedDirty = false; renderFeed(); }
      }
    }
    const r = $("rate");
    if (r.dataset.events !== String(received)) { r.dataset.events = received; r.dataset.fresh = fresh; }
  }
  const setText = (el, s) => { if (el.textContent !== s) el.textContent = s; };
  function renderRows() {
    const slice = store.view.slice(page * PAGE, page * PAGE + PAGE);
    const t = now();
    let h = "", cur = null;
    for (const e of slice) {
      if (e.inst.name !== cur) { cur = e.inst.name; h += groupHTML(cur); }
      h += rowHTML(e, t);
    }
    const rows = $("rows");
    rows.innerHTML = h;
    pageGroups = new Map();
    pageRows = new Map();
    for (const tr of rows.children) {
      if (tr.dataset.group !== undefined) pageGroups.set(tr.dataset.group, tr);
      else pageRows.set(tr.dataset.id, tr);
    }
    patchRows.clear();
    patchGroups.clear();
  }
  // patch re-renders single rows and group headers of the shown page: an
  // event on one instance repaints one row, not the table.
  function patch() {
    const t = now(), tmp = document.createElement("tbody");
    for (const id of patchRows) {
      const tr = pageRows.get(id), e = store.get(id);
      if (!tr || !e) continue;
      tmp.innerHTML = rowHTML(e, t);
      const nu = tmp.firstElementChild;
      tr.replaceWith(nu);
      pageRows.set(id, nu);
    }
    for (const name of patchGroups) {
      const tr = pageGroups.get(name);
      if (tr) setText(tr.querySelector(".gcount"), groupCount(name));
    }
    patchRows.clear();
    patchGroups.clear();
  }
  function groupCount(name) {
    const g = store.groups.get(name) || { active: 0, stale: 0, removed: 0 };
    return g.active + " active" + (g.stale ? " · " + g.stale + " stale" : "") + (g.removed ? " · " + g.removed + " leaving" : "");
  }
  function groupHTML(name) {
    return '<tr class="grp" data-group="' + esc(name) + '"><td colspan="9">' + esc(name) + '<span class="gcount">' + groupCount(name) + "</span></td></tr>";
  }
  // expiry is when e's row expires unless its owner heartbeats, as the
  // page knows it at t (last_seen + ttl): {at, text, soon}. soon is an
  // active row within the last third of its TTL (about one missed
  // heartbeat) or past it, whose owner has not been seen renewing it:
  // it is about to turn stale.
  function expiry(e, t) {
    const i = e.inst, ttl = parseDuration(i.ttl), at = ms(i.last_seen) + ttl;
    if (e.state === "removed" || !(ttl > 0) || !ms(i.last_seen)) return { at: 0, text: "–", soon: false };
    if (e.state === "stale") return { at, text: "expired", soon: false };
    const left = at - t;
    return { at, text: left > 0 ? "in " + age(left) : "any moment", soon: left < ttl / 3 };
  }
  function rowHTML(e, t) {
    const i = e.inst;
    // An active instance out of rotation (drained, or its check failing
    // or warning) shows its traffic status instead.
    const traffic = e.state === "active" && i.status && i.status !== "passing" ? i.status : "";
    const stateLabel = e.state === "removed" ? (e.reason || "removed") : traffic || e.state;
    const meta = Object.entries(i.metadata || {}).map(([k, v]) => k + "=" + v).join(" ");
    const x = expiry(e, t);
    return '<tr class="inst" data-id="' + esc(i.id) + '" data-state="' + e.state + '" data-reason="' + esc(e.reason) + '" data-expiring="' + x.soon + '">' +
      '<td><span class="state ' + e.state + (traffic ? " " + traffic : "") + '">' + esc(stateLabel) + "</span></td>" +
      '<td title="' + esc(i.name + " (id " + i.id + ")") + '"><button type="button" class="link" data-open="' + esc(i.id) + '" aria-label="Details of ' + esc(i.id) + '">' + esc(label(i)) + "</button></td>" +
      "<td>" + esc(i.type) + '</td><td class="mono" title="' + esc(i.address) + '">' + esc(i.address) + "</td>" +
      '<td title="' + esc(i.capabilities.join(", ")) + '">' + i.capabilities.map((c) => '<span class="chip">' + esc(c) + "</span>").join("") + "</td>" +
      '<td class="meta" title="' + esc(meta) + '">' + esc(meta) + "</td>" +
      '<td class="mono">' + esc(i.version) + "</td>" +
      '<td class="seen num" data-seen="' + ms(i.last_seen) + '">' + age(t - ms(i.last_seen)) + "</td>" +
      '<td class="exp num" title="TTL ' + esc(i.ttl) + '" data-exp="' + x.at + '" data-ttl="' + (parseDuration(i.ttl) || 0) + '">' + esc(x.text) + "</td></tr>";
  }
  // renderTotals writes the header's counts from the store, so they count
  // what the table shows (the catalog's rows as the stream told them), not
  // a poll of another moment; "–" until the first snapshot arrived.
  function renderTotals() {
    setText($("n-active"), lastSynced ? String(store.totals.active) : "–");
    setText($("n-stale"), lastSynced ? String(store.totals.stale) : "–");
  }
  function renderCounts(pages) {
    const n = store.view.length, all = store.size;
    $("empty").hidden = n > page * PAGE;
    // Until the first snapshot has arrived the page knows nothing: an empty
    // table then says so, not that the catalog is empty.
    const known = lastSynced > 0;
    $("empty").dataset.known = known;
    setText($("empty"), !known ? (conn === "auth" ? "Waiting for the API token…" : "Connecting to the server… (no instances received yet)")
      : all ? "No instance matches the filter." : "No instances registered.");
    setText($("page"), (page + 1) + " / " + pages);
    $("prev").disabled = page === 0;
    $("next").disabled = page >= pages - 1;
    setText($("shown"), n === all ? all + (all === 1 ? " instance" : " instances") : n + " of " + all + " shown");
  }
  let capsHTML = "";
  function renderCaps() {
    const caps = new Map();
    for (const e of store.view) {
      if (e.state === "removed") continue;
      for (const c of e.inst.capabilities) {
        const v = caps.get(c) || { active: [], stale: 0 };
        if (e.state === "active") v.active.push(label(e.inst)); else v.stale++;
        caps.set(c, v);
      }
    }
    let h = "";
    for (const c of [...caps.keys()].sort()) {
      const v = caps.get(c);
      const who = v.active.slice(0, 6).join(", ") + (v.active.length > 6 ? " +" + (v.active.length - 6) : "");
      h += '<li data-cap="' + esc(c) + '"><button type="button" class="link capbtn" data-cap-filter="' + esc(c) + '" aria-label="Filter by capability ' + esc(c) + '">' + esc(c) + '</button><span class="cnt num">' + v.active.length + " active" + (v.stale ? " · " + v.stale + " stale" : "") + '</span><span class="who">' + (esc(who) || "no active instance") + "</span></li>";
    }
    h = h || '<li class="muted">No capabilities.</li>';
    if (h !== capsHTML) { capsHTML = h; $("caps").innerHTML = h; }
  }
  function renderFeed() {
    $("feed").innerHTML = feed.map((f) => '<li class="' + esc(f.what) + (f.what === "conn" && f.note === "live" ? " up" : "") + '"><span class="num muted">' + hhmmss(f.t) + '</span><span class="what">' + esc(f.what === "conn" ? "connection" : f.what) + '</span><span class="who" title="' + esc(f.who + " " + f.note) + '">' + esc(f.who + (f.note ? " — " + f.note : "")) + "</span></li>").join("");
  }
  function renderHeader() {
    if (!info) { $("health").dataset.health = "unknown"; $("health").textContent = "unreachable"; return; }
    $("backend").textContent = info.backend || "–";
    $("dsn").textContent = info.dsn || "–";
    $("dsn").title = info.dsn || "";
    $("health").dataset.health = info.healthy ? "ok" : "down";
    $("health").textContent = info.healthy ? "healthy" : "unhealthy";
    $("health").title = info.error || "";
    const sp = info.self_preservation;
    $("selfpres").textContent = !sp ? "n/a" : sp.active ? "ON · holding " + sp.held_expirations : "off";
    $("selfpres").title = sp ? "entered " + sp.events + " times" : "this backend does not report it";
  }
  function renderLeases() {
    const t = now();
    $("leases").innerHTML = leases.length ? leases.map((l) => '<tr data-lease="' + esc(l.name) + '"><td title="' + esc(l.name) + '">' + esc(l.name) + '</td><td class="mono" title="' + esc(l.holder) + '">' + esc(l.holder) + '</td><td class="num">' + esc(l.token) + '</td><td class="num" data-expires="' + ms(l.expires_at) + '">' + expires(ms(l.expires_at) - t) + "</td></tr>").join("") : '<tr><td colspan="4" class="muted">No leases.</td></tr>';
  }
  function expires(d) { return d <= 0 ? "expired" : "in " + age(d); }
  function tick() {
    sweep();
    $("rate").textContent = (received - receivedTick) + " events/s";
    receivedTick = received;
    const t = now();
    for (const td of document.querySelectorAll("#rows [data-seen], #d-fields [data-seen]")) td.textContent = age(t - Number(td.dataset.seen));
    for (const td of document.querySelectorAll("#rows tr.inst[data-state=active] [data-exp]")) {
      const at = Number(td.dataset.exp), ttl = Number(td.dataset.ttl), left = at - t;
      if (!at) continue;
      setText(td, left > 0 ? "in " + age(left) : "any moment");
      const soon = String(left < ttl / 3);
      if (td.parentElement.dataset.expiring !== soon) td.parentElement.dataset.expiring = soon;
    }
    for (const td of $("leases").querySelectorAll("[data-expires]")) td.textContent = expires(Number(td.dataset.expires) - t);
  }

  // ---- detail ----
  // The detail view shows its instance as the page knows it now: every
  // change to the entry (an event, a heartbeat time read, a fresh snapshot,
  // the entry swept after it left) makes it stale, and the next frame
  // renders it again. A removed instance keeps its last known fields under
  // a note saying it went.
  function detailStale() {
    const e = store.get(detailId);
    const d = detailOf;
    return !d || d.e !== e || (e && (d.inst !== e.inst || d.state !== e.state || d.reason !== e.reason));
  }
  let detailHTML = "", componentsHTML = "";
  function renderDetail() {
    const e = store.get(detailId);
    const prev = detailOf, known = prev && prev.inst;
    const label = !e ? (prev && prev.label) || "removed" : e.state === "removed" ? "removed (" + e.reason + ")" : e.state;
    detailOf = { e, inst: e ? e.inst : known, state: e && e.state, reason: e && e.reason, label };
    const gone = !e ? "This instance is no longer in the catalog" + (known ? "; showing what was last known of it." : ".")
      : e.state === "removed" ? "This instance was removed (" + (e.reason === "gone" ? "gone while the page was disconnected" : e.reason || "removed") + ") at " + hhmmss(e.gone) + "; showing what was last known of it."
      : "";
    $("d-note").hidden = !gone;
    setText($("d-note"), gone);
    $("detail").classList.toggle("gone", !!gone);
    $("d-title").textContent = detailId;
    const i = e ? e.inst : known;
    if (!i) { detailHTML = componentsHTML = ""; $("d-fields").innerHTML = ""; $("d-components").innerHTML = ""; return; }
    const seen = ms(i.last_seen);
    const f = [["state", label], ["name", i.name], ["type", i.type], ["address", i.address],
      ["id", i.id], ["capabilities", i.capabilities.join(", ") || "–"], ["version", i.version || "–"], ["ttl", i.ttl], ["registered_at", i.registered_at], ["last_seen", i.last_seen],
      ["heartbeat age", age(now() - seen)],
      ["traffic", (i.status || "passing") + " · weight " + (i.weight || 100) + (i.zone ? " · zone " + i.zone : "")],
      ["check", i.check ? i.check.target + " every " + (i.check.interval || "?") + (i.health ? " — " + i.health.status + (i.health.since ? " since " + i.health.since : "") + (i.health.output ? ": " + i.health.output : "") : "") : "–"],
      ["metadata", Object.keys(i.metadata || {}).length ? Object.entries(i.metadata).map(([k, v]) => k + "=" + v).join("  ") : "–"]];
    const h = f.map(([k, v]) => "<dt>" + esc(k) + '</dt><dd data-field="' + esc(k) + '"' + (k === "heartbeat age" ? ' data-seen="' + seen + '"' : "") + ">" + esc(v) + "</dd>").join("");
    // The components are written only when they change, so their scroll
    // stays while only last_seen moves.
    if (h !== detailHTML) { detailHTML = h; $("d-fields").innerHTML = h; }
    const c = i.components === undefined ? '<span class="muted">none</span>' : pretty(i.components);
    if (c !== componentsHTML) { componentsHTML = c; $("d-components").innerHTML = c; }
  }
  // pretty highlights a JSON value as JSON.stringify(v, null, 2) prints
  // it, each token in its own span and every piece of text escaped exactly
  // once. It walks the value with a stack of its own, not by recursion, and
  // indents at most MAX_INDENT levels: a document nested thousands deep
  // (which JSON.parse reads) would overflow JSON.stringify's stack, and its
  // indentation alone would grow as the square of its depth.
  const MAX_INDENT = 32;
  function pretty(v) {
    if (v === undefined) return "";
    const out = [], stack = [];
    const span = (cls, text) => '<span class="' + cls + '">' + esc(text) + "</span>";
    const pad = (d) => "\n" + "  ".repeat(Math.min(d, MAX_INDENT));
    const put = (x, d) => {
      if (x !== null && typeof x === "object") {
        const keys = Array.isArray(x) ? null : Object.keys(x);
        const n = keys ? keys.length : x.length;
        if (!n) { out.push(keys ? "{}" : "[]"); return; }
        out.push(keys ? "{" : "[");
        stack.push({ x, keys, n, i: 0, d: d + 1 });
      } else if (typeof x === "string") out.push(span("s", JSON.stringify(x)));
      else if (typeof x === "number" && Number.isFinite(x)) out.push(span("n", String(x)));
      else if (typeof x === "boolean") out.push(span("b", String(x)));
      else out.push(span("b", "null"));
    };
    put(v, 0);
    while (stack.length) {
      const f = stack[stack.length - 1];
      if (f.i === f.n) { stack.pop(); out.push(pad(f.d - 1) + (f.keys ? "}" : "]")); continue; }
      out.push((f.i ? "," : "") + pad(f.d));
      let item;
      if (f.keys) { const k = f.keys[f.i]; item = f.x[k]; out.push(span("k", JSON.stringify(k)) + ": "); }
      else item = f.x[f.i];
      f.i++;
      put(item, f.d);
    }
    return out.join("");
  }
  function openDetail(id) { detailId = id; detailOf = null; renderDetail(); $("detail").showModal(); }

  // ---- wiring ----
  function theme(next) {
    const root = document.documentElement;
    if (next) { root.dataset.theme = next; localStorage.setItem("sb-theme", next); }
    else if (localStorage.getItem("sb-theme")) root.dataset.theme = localStorage.getItem("sb-theme");
  }
  // The keys page directly, not through the buttons: a button's disabled
  // state is the last frame's, so "]" right after a change of filter (one
  // page before, many now) was lost on a button not yet enabled. A page
  // past the end is clamped by render.
  function prevPage() { if (page > 0) { page--; rowsDirty = countsDirty = true; schedule(); } }
  function nextPage() { page++; rowsDirty = countsDirty = true; schedule(); }
  function toggleTheme() {
    const cur = document.documentElement.dataset.theme || (matchMedia("(prefers-color-scheme: dark)").matches ? "dark" : "light");
    theme(cur === "dark" ? "light" : "dark");
  }
  function init() {
    theme();
    // A token kept from an earlier page that could not be sent is dropped:
    // the server's 401 then shows the form, saying why.
    tokenError = tokenProblem(token);
    if (tokenError) { token = ""; sessionStorage.removeItem("sb-token"); }
    $("filter").value = store.filter.q;
    $("filter").addEventListener("input", (ev) => setFilter(ev.target.value, true));
    $("filter").addEventListener("keydown", (ev) => { if (ev.key === "Escape") { setFilter("", false); ev.target.blur(); } });
    $("theme").addEventListener("click", toggleTheme);
    $("prev").addEventListener("click", prevPage);
    $("next").addEventListener("click", nextPage);
    $("rows").addEventListener("click", (ev) => { const b = ev.target.closest("[data-open]"); if (b) openDetail(b.dataset.open); });
    $("caps").addEventListener("click", (ev) => { const b = ev.target.closest("[data-cap-filter]"); if (b) setFilter("cap:" + b.dataset.capFilter, false); });
    $("detail").addEventListener("close", () => { detailId = ""; detailOf = null; });
    $("tokenform").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const given = $("token").value.trim();
      tokenError = tokenProblem(given);
      if (tokenError) { askToken(0); $("token").select(); return; }
      token = given;
      sessionStorage.setItem("sb-token", token);
      $("tokenform").hidden = true;
      $("tokenerror").hidden = true;
      setConn("connecting", "connecting…");
      refreshClock().then(() => { refreshInfo(); connect(); });
    });
    document.addEventListener("keydown", (ev) => {
      const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName) || $("detail").open;
      if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "/") { ev.preventDefault(); $("filter").focus(); $("filter").select(); }
      else if (ev.key === "t") toggleTheme();
      else if (ev.key === "]") nextPage();
      else if (ev.key === "[") prevPage();
    });
    setConn("connecting", "connecting…");
    rowsDirty = countsDirty = capsDirty = true;
    schedule();
    refreshClock().then(() => { refreshInfo(); connect(); });
    setInterval(refreshInfo, 2000);
    setInterval(refreshClock, 60000);
    setInterval(tick, 1000);
  }
  init();
})();
