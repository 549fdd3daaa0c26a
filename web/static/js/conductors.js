// The conductor view: each conductor, whether it is alive, its last
// heartbeat, its drivers and the nodes it serves.
import { api } from './api.js';
import { fleet } from './store.js';
import { h, clear, fmtTime, ago, stateBadge } from './ui.js';

export function conductorsView(main) {
  const list = h('div', { class: 'cond-list' }, h('p', { class: 'muted' }, 'Loading conductors…'));
  clear(main).append(h('section', { 'aria-labelledby': 'cond-h' }, h('h1', { id: 'cond-h' }, 'Conductors'), list));
  let conductors = null;
  let timer = null;
  let stopped = false;

  function render() {
    if (!conductors) return;
    clear(list);
    if (!conductors.length) { list.append(h('p', null, 'No conductor has registered.')); return; }
    const byCond = new Map();
    for (const n of fleet.nodes.values()) {
      const k = n.conductor || '';
      if (!byCond.has(k)) byCond.set(k, []);
      byCond.get(k).push(n);
    }
    for (const c of conductors) {
      const nodes = byCond.get(c.hostname) || [];
      const per = new Map();
      for (const n of nodes) per.set(n.provision_state, (per.get(n.provision_state) || 0) + 1);
      list.append(h('section', { class: 'card cond', 'aria-label': `Conductor ${c.hostname}` },
        h('h2', null, c.hostname, ' ', h('span', { class: `badge ${c.alive ? 'st-stable' : 'st-failed'}` }, h('span', { class: 'dot', 'aria-hidden': 'true' }), c.alive ? 'alive' : 'down')),
        h('dl', { class: 'kv' },
          h('div', null, h('dt', null, 'Last heartbeat'), h('dd', { title: c.updated_at || '' }, c.updated_at ? `${fmtTime(c.updated_at)} (${ago(c.updated_at)})` : '—')),
          h('div', null, h('dt', null, 'Conductor group'), h('dd', null, c.conductor_group || '(default)')),
          h('div', null, h('dt', null, 'Drivers'), h('dd', null, (c.drivers || []).join(', ') || '—')),
          h('div', null, h('dt', null, 'Registered'), h('dd', null, fmtTime(c.created_at))),
          h('div', null, h('dt', null, 'Nodes'), h('dd', null, fleet.loaded ? String(nodes.length) : '…',
            nodes.length ? h('span', null, ' — ', h('a', { href: '#/?conductor=' + encodeURIComponent(c.hostname) }, 'show in the node list')) : null))),
        per.size ? h('div', { class: 'states' }, [...per].sort((a, b) => b[1] - a[1]).map(([s, k]) => h('span', { class: 'stcount' }, stateBadge(s), ` ${k}`))) : null,
        nodes.length ? h('ul', { class: 'cond-nodes' }, nodes.slice(0, 12).map((n) => h('li', null, h('a', { href: `#/node/${n.uuid}` }, n.name || n.uuid)))) : null,
        nodes.length > 12 ? h('p', { class: 'muted' }, `and ${nodes.length - 12} more`) : null));
    }
  }

  async function load() {
    if (stopped) return;
    try {
      const r = await api('GET', '/v1/conductors?detail=True&limit=1000');
      conductors = r.conductors;
      render();
    } catch (e) {
      clear(list).append(h('p', { class: 'form-error', role: 'alert' }, e.message));
    }
    timer = setTimeout(load, 5000);
  }
  const onChange = () => render();
  fleet.addEventListener('change', onChange);
  fleet.start();
  load();
  return () => { stopped = true; clearTimeout(timer); fleet.removeEventListener('change', onChange); };
}
