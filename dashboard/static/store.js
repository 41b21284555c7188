// The page's model of the catalog: every instance it knows (removed ones
// linger until swept) in table order (name, then id), the ones the filter
// matches in the same order, and their counts per name and state. A change
// costs a binary search and a splice, never a sort or a pass over the
// fleet, so 1,000 events a second over 10,000 instances stay cheap; only a
// new filter or a new snapshot goes over everything (once).

// parseFilter reads the filter box: free words, and name:, type:, cap: (or
// capability:) narrowing to one field. Words, name: and type: match part
// of a field, ignoring case; cap: names one whole capability, as the
// catalog spells it (capabilities are case-sensitive tokens, and a click on
// one in the capabilities panel must show the instances counted there:
// cap:store is not storage nor object_store). Every term applies: an
// instance must match all the words and all the name:, type: and cap:
// terms, however many of one kind there are (cap:storage cap:query is the
// instances with both). A term with nothing after its colon (cap:) is
// ignored.
export function parseFilter(q) {
  const f = { q, text: [], name: [], type: [], cap: [] };
  for (const tok of q.trim().split(/\s+/).filter(Boolean)) {
    const m = /^(name|type|cap|capability):(.*)$/i.exec(tok);
    if (!m) { f.text.push(tok.toLowerCase()); continue; }
    if (!m[2]) continue;
    const field = m[1].toLowerCase();
    if (field === "cap" || field === "capability") f.cap.push(m[2]);
    else f[field].push(m[2].toLowerCase());
  }
  f.any = !!(f.text.length || f.name.length || f.type.length || f.cap.length);
  return f;
}

export function matches(f, i) {
  if (!f.any) return true;
  for (const n of f.name) if (!i.name.includes(n)) return false;
  if (f.type.length) {
    const type = (i.type || "").toLowerCase();
    for (const t of f.type) if (!type.includes(t)) return false;
  }
  for (const c of f.cap) if (!i.capabilities.includes(c)) return false;
  for (const t of f.text) {
    if (!(i.name.includes(t) || i.id.toLowerCase().includes(t) || (i.type || "").toLowerCase().includes(t) ||
      (i.address || "").toLowerCase().includes(t) || i.capabilities.some((c) => c.toLowerCase().includes(t)))) return false;
  }
  return true;
}

// lowerBound is the first index of arr whose entry is not before (name, id).
function lowerBound(arr, name, id) {
  let lo = 0, hi = arr.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    const m = arr[mid].inst;
    if (m.name < name || (m.name === name && m.id < id)) lo = mid + 1; else hi = mid;
  }
  return lo;
}

const byNameId = (a, b) => a.inst.name < b.inst.name ? -1 : a.inst.name > b.inst.name ? 1 : a.inst.id < b.inst.id ? -1 : a.inst.id > b.inst.id ? 1 : 0;

export class Store {
  constructor(filter) {
    this.byId = new Map(); // id → entry {inst, state: active|stale|removed, reason, gone, shown}
    this.all = [];         // every entry, by name then id
    this.view = this.all;  // the entries the filter matches (the same array without a filter)
    this.groups = new Map(); // name → {active, stale, removed} over view
    this.totals = { active: 0, stale: 0, removed: 0 }; // over every entry, whatever the filter
    this.setFilter(filter);
  }

  get size() { return this.byId.size; }
  get(id) { return this.byId.get(id); }
  values() { return this.byId.values(); }

  // setFilter goes over every entry once (no sort: all is in order).
  setFilter(f) {
    this.filter = f;
    this.rebuild();
  }

  // replace makes entries (an iterable of [id, entry]) the whole state, as
  // after a snapshot.
  replace(entries) {
    this.byId = new Map(entries);
    this.all = [...this.byId.values()].sort(byNameId);
    this.totals = { active: 0, stale: 0, removed: 0 };
    for (const e of this.all) this.totals[e.state]++;
    this.rebuild();
  }

  rebuild() {
    this.view = this.filter.any ? [] : this.all;
    this.groups = new Map();
    for (const e of this.all) {
      e.shown = matches(this.filter, e.inst);
      if (!e.shown) continue;
      if (this.view !== this.all) this.view.push(e);
      this.count(e, 1);
    }
  }

  count(e, d) {
    const name = e.inst.name;
    const g = this.groups.get(name) || { active: 0, stale: 0, removed: 0 };
    g[e.state] += d;
    if (g.active || g.stale || g.removed) this.groups.set(name, g); else this.groups.delete(name);
  }

  // put sets the entry of id to fields ({inst, state, reason, gone}) and
  // returns what the table must know: the entry's name, its index in view
  // (where it is, or was when it left it; -1 when it was never shown) and
  // whether view's membership changed (rows after it shift); after a change
  // of name, renamed is the old name, and index the earlier of the old and
  // the new place.
  put(id, fields) {
    let e = this.byId.get(id);
    if (e && e.inst.name !== fields.inst.name) {
      // A new name moves the entry: it leaves its place (and its group)
      // and joins another. The table must know both: the earlier of the
      // two places, whether either changed the view, and the old group.
      const left = this.drop(id);
      const joined = this.put(id, fields);
      const at = [left.index, joined.index].filter((i) => i >= 0);
      return { name: joined.name, index: at.length ? Math.min(...at) : -1, moved: left.moved || joined.moved, renamed: left.name };
    }
    if (!e) {
      e = Object.assign({ shown: false }, fields);
      this.totals[e.state]++;
      this.byId.set(id, e);
      this.all.splice(lowerBound(this.all, e.inst.name, id), 0, e);
      e.shown = matches(this.filter, e.inst);
      if (!e.shown) return { name: e.inst.name, index: -1, moved: false };
      if (this.view !== this.all) this.view.splice(lowerBound(this.view, e.inst.name, id), 0, e);
      this.count(e, 1);
      return { name: e.inst.name, index: this.indexOf(e), moved: true };
    }
    const was = e.shown;
    if (was) this.count(e, -1);
    this.totals[e.state]--;
    Object.assign(e, fields);
    this.totals[e.state]++;
    e.shown = matches(this.filter, e.inst);
    if (e.shown) this.count(e, 1);
    if (!was && !e.shown) return { name: e.inst.name, index: -1, moved: false };
    const index = this.indexOf(e);
    if (was && !e.shown) this.view.splice(index, 1); // never all: without a filter everything is shown
    else if (!was && e.shown) this.view.splice(index, 0, e);
    return { name: e.inst.name, index, moved: was !== e.shown };
  }

  // drop forgets id; the answer is put's.
  drop(id) {
    const e = this.byId.get(id);
    if (!e) return { name: "", index: -1, moved: false };
    this.byId.delete(id);
    this.totals[e.state]--;
    const index = this.shownIndex(e);
    this.all.splice(lowerBound(this.all, e.inst.name, id), 1);
    if (!e.shown) return { name: e.inst.name, index: -1, moved: false };
    if (this.view !== this.all) this.view.splice(index, 1);
    this.count(e, -1);
    return { name: e.inst.name, index, moved: true };
  }

  // indexOf is where e is, or would be, in view.
  indexOf(e) { return lowerBound(this.view, e.inst.name, e.inst.id); }
  shownIndex(e) { return e.shown ? this.indexOf(e) : -1; }
}

// parseDuration reads a TTL as the API writes it (Go's time.Duration:
// "10s", "1m30s", "1.5s", "666ms", "250µs"), in milliseconds; NaN when it
// is not one.
export function parseDuration(s) {
  const units = { h: 3600000, m: 60000, s: 1000, ms: 1, us: 0.001, "µs": 0.001, "μs": 0.001, ns: 0.000001 };
  const re = /(\d+(?:\.\d*)?|\.\d+)(ms|us|µs|μs|ns|h|m|s)/gy;
  const str = String(s ?? "");
  if (str === "0s" || str === "0") return 0;
  let total = 0, m, end = 0;
  while ((m = re.exec(str))) { total += parseFloat(m[1]) * units[m[2]]; end = re.lastIndex; }
  return end > 0 && end === str.length ? total : NaN;
}

// label names an instance for people: its name, with its id when the id
// does not already say it (an id made by the CLI or the library is a UUID:
// its first 8 characters, the whole id being in the detail view).
export function label(i) {
  const id = i.id || "", name = i.name || "";
  if (!name || id === name || id.startsWith(name)) return id || name;
  return name + " · " + (id.length > 12 ? id.slice(0, 8) + "…" : id);
}
