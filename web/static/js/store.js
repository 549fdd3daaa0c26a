// The fleet: every node's summary fields, loaded page by page through the
// API's limit/marker and kept live by cheap polling:
//   - every 2 s, the nodes most recently updated (sort_key=updated_at desc,
//     a few rows when nothing changed) and most recently created;
//   - a full resync now and then, which also notices deleted nodes.
import { api, listAll } from './api.js';

export const FIELDS = ['uuid', 'name', 'provision_state', 'target_provision_state', 'power_state',
  'maintenance', 'driver', 'conductor', 'conductor_group', 'last_error', 'reservation',
  'resource_class', 'updated_at', 'created_at'].join(',');

const POLL_MS = 2000;

class Fleet extends EventTarget {
  constructor() {
    super();
    this.nodes = new Map();
    this.loaded = false;
    this.error = null;
    this.lastSync = null;
    this.updatedMark = '';
    this.createdMark = '';
    this.version = 0;
    this.timer = null;
    this.lastFull = 0;
    // boot: uuid -> the node's newest boot event (GET /v1/boot_timeline/latest,
    // castiron's), fetched since the newest one seen, so an idle fleet costs
    // one small request a poll.
    this.boot = new Map();
    this.bootMark = '';
    this.bootOff = false;
  }

  changed() {
    this.version++;
    this.dispatchEvent(new Event('change'));
  }

  status(err) {
    this.error = err;
    if (!err) this.lastSync = Date.now();
    this.dispatchEvent(new Event('status'));
  }

  marks(n) {
    if (n.updated_at && n.updated_at > this.updatedMark) this.updatedMark = n.updated_at;
    if (n.created_at && n.created_at > this.createdMark) this.createdMark = n.created_at;
  }

  // load fetches the whole fleet; the first page is shown at once.
  async load() {
    performance.mark('castiron:load');
    const seen = new Set();
    const fresh = !this.loaded;
    // The first page is small so the first rows show at once.
    await listAll(`/v1/nodes?fields=${FIELDS}`, 'nodes', (items) => {
      for (const n of items) {
        seen.add(n.uuid);
        this.nodes.set(n.uuid, n);
        this.marks(n);
      }
      if (fresh) {
        performance.mark('castiron:page');
        this.changed();
      }
    }, 1000, fresh ? 100 : 1000);
    for (const id of [...this.nodes.keys()]) if (!seen.has(id)) this.nodes.delete(id);
    this.loaded = true;
    this.lastFull = Date.now();
    this.changed();
  }

  // recent merges the rows changed since mark (by key: updated_at or
  // created_at). A one-row probe of uuid and key answers "nothing changed"
  // in a few hundred bytes; only then are the changed rows fetched. It
  // returns null when too much changed to follow incrementally.
  async recent(key, mark) {
    const probe = await api('GET', `/v1/nodes?fields=uuid,${key}&sort_key=${key}&sort_dir=desc&limit=1`);
    const top = probe.nodes[0];
    if (!top || !top[key] || top[key] <= mark) return false;
    let marker = '';
    let changed = false;
    for (let page = 0; page < 5; page++) {
      const limit = page === 0 ? 50 : 1000;
      const r = await api('GET', `/v1/nodes?fields=${FIELDS}&sort_key=${key}&sort_dir=desc&limit=${limit}${marker ? '&marker=' + marker : ''}`);
      let crossed = false;
      for (const n of r.nodes) {
        if (!n[key] || n[key] < mark) { crossed = true; break; }
        const old = this.nodes.get(n.uuid);
        if (!old || JSON.stringify(old) !== JSON.stringify(n)) {
          this.nodes.set(n.uuid, n);
          changed = true;
        }
        this.marks(n);
      }
      if (crossed || r.nodes.length < limit) return changed;
      marker = r.nodes[r.nodes.length - 1].uuid;
    }
    return null;
  }

  async poll() {
    if (document.hidden) return;
    // Deleted nodes only show in a full resync: every 30 s, every 5 min
    // with 10,000 nodes.
    const resyncEvery = Math.max(30000, this.nodes.size * 30);
    if (Date.now() - this.lastFull > resyncEvery) {
      await this.load();
      return;
    }
    const u = await this.recent('updated_at', this.updatedMark);
    const c = await this.recent('created_at', this.createdMark);
    if (u === null || c === null) {
      await this.load();
      return;
    }
    if (u || c) this.changed();
  }

  // loadBoot merges the nodes' newest boot events; a castiron without the
  // endpoint (404) is asked no more.
  async loadBoot() {
    if (this.bootOff) return false;
    const since = this.bootMark || new Date(Date.now() - 3600e3).toISOString();
    let r;
    try {
      r = await api('GET', `/v1/boot_timeline/latest?since=${encodeURIComponent(since)}`);
    } catch (e) {
      if (e.status === 404 || e.status === 403) { this.bootOff = true; return false; }
      throw e;
    }
    let changed = false;
    for (const e of r.nodes || []) {
      const old = this.boot.get(e.node_uuid);
      if (!old || old.at !== e.at || old.event !== e.event) { this.boot.set(e.node_uuid, e); changed = true; }
      if (e.at > this.bootMark) this.bootMark = e.at;
    }
    return changed;
  }

  // upsert/remove apply what the UI itself just did, ahead of the next poll.
  upsert(n) {
    const old = this.nodes.get(n.uuid) || {};
    this.nodes.set(n.uuid, Object.assign(old, n));
    this.changed();
  }

  remove(uuid) {
    if (this.nodes.delete(uuid)) this.changed();
  }

  start() {
    if (this.started) return;
    this.started = true;
    this.schedule(0);
  }

  schedule(ms) {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), ms);
  }

  async tick() {
    if (this.busy) { this.again = true; return; }
    this.busy = true;
    try {
      if (!this.loaded) await this.load(); else await this.poll();
      if (await this.loadBoot()) this.changed();
      this.status(null);
    } catch (e) {
      this.status(e);
    } finally {
      this.busy = false;
    }
    const soon = this.again;
    this.again = false;
    this.schedule(soon ? 0 : POLL_MS);
  }

  // refreshSoon polls at once (after an action) rather than in 2 s.
  refreshSoon() {
    if (!this.started) return;
    if (this.busy) this.again = true; else this.schedule(0);
  }
}

export const fleet = new Fleet();
