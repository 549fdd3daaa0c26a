// The fleet view: counts per state, filters, a virtualised node table (only
// the rows on screen are in the DOM, so 10,000 nodes scroll smoothly) and
// bulk actions on a selection.
import { fleet } from './store.js';
import { h, clear, ago, machine, stateKind, stateBadge, powerBadge, toast, openDialog } from './ui.js';
import { catalog, provisionVerbs, otherVerbs, isValid, perform, policyKind } from './actions.js';
import { may } from './api.js';
import { STEP_ORDER, stepLabel } from './boottimeline.js';

const selected = new Set();
const OVERSCAN = 8;
const collator = new Intl.Collator('en', { numeric: true, sensitivity: 'base' });

const columns = [
  { key: 'name', label: 'Name', sort: (n) => (n.name || n.uuid).toLowerCase() },
  { key: 'provision_state', label: 'Provision state', sort: (n) => n.provision_state || '' },
  { key: 'power_state', label: 'Power', sort: (n) => n.power_state || '' },
  { key: 'maintenance', label: 'Maint.', sort: (n) => (n.maintenance ? 0 : 1) },
  { key: 'driver', label: 'Driver', sort: (n) => n.driver || '' },
  { key: 'conductor', label: 'Conductor', sort: (n) => n.conductor || '' },
  // Where the node's latest boot is: by step in the boot's order, nodes
  // without one last.
  { key: 'boot', label: 'Boot step', sort: (n) => { const e = fleet.boot.get(n.uuid); return e ? `${String(STEP_ORDER.indexOf(e.event) + 10).padStart(3, '0')} ${e.at}` : 'zzzz'; } },
  { key: 'last_error', label: 'Last error', sort: (n) => (n.last_error ? 0 : 1) },
];

export function fleetView(main, params) {
  const filter = {
    q: params.get('q') || '',
    state: params.get('state') || '',
    maint: params.get('maint') || '',
    conductor: params.get('conductor') || '',
    // By name unless asked (creation order means nothing to an operator).
    sort: params.get('sort') || 'name',
    desc: params.get('desc') === '1',
  };
  let rows = [];
  let rowH = 40;
  let painted = { start: -1, end: -1, version: -1 };
  let listVersion = 0;

  const counts = h('div', { class: 'counts', role: 'group', 'aria-label': 'Nodes per provision state' });
  const search = h('input', {
    type: 'search', id: 'fleet-q', placeholder: 'Search name, UUID, driver, error…', value: filter.q,
    'aria-label': 'Search nodes', oninput: () => { filter.q = search.value; update(); },
  });
  const stateSel = h('select', { id: 'fleet-state', 'aria-label': 'Filter by provision state', onchange: () => { filter.state = stateSel.value; update(); } });
  const maintSel = h('select', { 'aria-label': 'Filter by maintenance', onchange: () => { filter.maint = maintSel.value; update(); } },
    h('option', { value: '' }, 'Any maintenance'), h('option', { value: 'yes' }, 'In maintenance'), h('option', { value: 'no' }, 'Not in maintenance'));
  maintSel.value = filter.maint;
  const condChip = h('span', { class: 'chip-filter' });
  const shown = h('span', { class: 'shown', 'aria-live': 'polite' });

  const bulkSel = h('select', { id: 'bulk-action', 'aria-label': 'Action for the selected nodes' });
  const bulkCount = h('span', { class: 'bulk-count' });
  const bulk = h('div', { class: 'bulk write', hidden: true, role: 'region', 'aria-label': 'Bulk actions' },
    bulkCount, bulkSel,
    h('button', { class: 'primary', id: 'bulk-apply', onclick: () => applyBulk() }, 'Apply'),
    h('button', { onclick: () => { selected.clear(); update(); } }, 'Clear selection'));

  const allBox = h('input', { type: 'checkbox', 'aria-label': 'Select all shown nodes', onchange: () => {
    if (allBox.checked) rows.forEach((n) => selected.add(n.uuid)); else rows.forEach((n) => selected.delete(n.uuid));
    update(true);
  } });
  const head = h('div', { class: 'row head', role: 'row', 'aria-rowindex': 1 },
    h('span', { class: 'c-sel', role: 'columnheader' }, allBox),
    columns.map((c) => h('span', { class: 'c-' + c.key, role: 'columnheader', 'aria-sort': ariaSort(c.key) },
      h('button', { class: 'sort', onclick: () => {
        if (filter.sort === c.key) filter.desc = !filter.desc; else { filter.sort = c.key; filter.desc = false; }
        head.querySelectorAll('[role=columnheader]').forEach((el, i) => { if (i > 0) el.setAttribute('aria-sort', ariaSort(columns[i - 1].key)); });
        update();
      } }, c.label))));
  const inner = h('div', { class: 'vinner' });
  const scroller = h('div', { class: 'vscroll', role: 'rowgroup', tabindex: '-1' }, inner);
  const empty = h('div', { class: 'empty', hidden: true });
  const table = h('div', { class: 'fleet-table', role: 'table', 'aria-label': 'Nodes', 'aria-rowcount': 1 },
    h('div', { role: 'rowgroup', class: 'thead' }, head), scroller);

  const view = h('section', { class: 'fleet', 'aria-labelledby': 'fleet-h' },
    h('div', { class: 'fleet-head' }, h('h1', { id: 'fleet-h' }, 'Nodes'), shown),
    counts,
    h('div', { class: 'toolbar' }, search, stateSel, maintSel, condChip,
      may('create') ? h('a', { class: 'button write', href: '#/import' }, 'Import instackenv.json') : null),
    bulk, table, empty);
  clear(main).append(view);

  function ariaSort(key) {
    return filter.sort === key ? (filter.desc ? 'descending' : 'ascending') : 'none';
  }

  function matches(n) {
    if (filter.state) {
      if (filter.state.startsWith('kind:')) { if (stateKind(n.provision_state) !== filter.state.slice(5)) return false; }
      else if (n.provision_state !== filter.state) return false;
    }
    if (filter.maint === 'yes' && !n.maintenance) return false;
    if (filter.maint === 'no' && n.maintenance) return false;
    if (filter.conductor && n.conductor !== filter.conductor) return false;
    if (filter.q) {
      const q = filter.q.toLowerCase();
      const hay = `${n.name || ''} ${n.uuid} ${n.driver || ''} ${n.provision_state} ${n.conductor || ''} ${n.last_error || ''} ${n.resource_class || ''}`.toLowerCase();
      if (!hay.includes(q)) return false;
    }
    return true;
  }

  function renderCounts(all) {
    const per = new Map();
    for (const n of all) per.set(n.provision_state, (per.get(n.provision_state) || 0) + 1);
    const kinds = { failed: 0, trans: 1, stable: 2, unknown: 3 };
    const states = [...per.keys()].sort((a, b) => kinds[stateKind(a)] - kinds[stateKind(b)] || per.get(b) - per.get(a) || a.localeCompare(b));
    const chip = (value, label, count, kind) => h('button', {
      class: `count st-${kind}`, 'aria-pressed': String(filter.state === value),
      onclick: () => { filter.state = filter.state === value ? '' : value; stateSel.value = filter.state; update(); },
    }, h('span', { class: 'n' }, count.toLocaleString()), h('span', { class: 'l' }, label));
    clear(counts).append(chip('', 'all nodes', all.length, 'all'), ...states.map((s) => chip(s, s, per.get(s), stateKind(s))));
    // The state <select> lists every state of the machine, plus the kinds.
    const cur = filter.state;
    clear(stateSel).append(h('option', { value: '' }, 'Any state'),
      h('option', { value: 'kind:failed' }, 'Any failed state'),
      h('option', { value: 'kind:trans' }, 'Any state in progress'),
      h('optgroup', { label: 'Provision state' },
        Object.keys(machine.states).sort().map((s) => h('option', { value: s }, `${s}${per.has(s) ? ` (${per.get(s)})` : ''}`))));
    stateSel.value = cur;
  }

  // offered: policy lets the caller do the action on some node it sees.
  const offered = (v) => may(policyKind(v), {});

  function renderBulk() {
    if (selected.size === 0) { bulk.hidden = true; return; }
    bulk.hidden = false;
    bulkCount.textContent = `${selected.size.toLocaleString()} selected`;
    if (!bulkSel.options.length) {
      bulkSel.append(h('option', { value: '' }, 'Choose an action…'),
        h('optgroup', { label: 'Provision' }, provisionVerbs().filter(offered).map((v) => h('option', { value: v }, catalog[v].label))),
        h('optgroup', { label: 'Node' }, otherVerbs.filter(offered).map((v) => h('option', { value: v }, catalog[v].label))));
    }
  }

  async function applyBulk() {
    const action = bulkSel.value;
    if (!action) { toast('Choose an action first.', 'error'); bulkSel.focus(); return; }
    const nodes = [...selected].map((id) => fleet.nodes.get(id)).filter(Boolean);
    const ok = nodes.filter((n) => isValid(action, n));
    const skipped = nodes.length - ok.length;
    if (!ok.length) { toast(`${catalog[action].label.replace('…', '')} is not valid in the state of any selected node.`, 'error'); return; }
    if (skipped) toast(`${skipped} selected node(s) skipped: ${catalog[action].label.replace('…', '')} is not valid in their state.`);
    const res = await perform(action, ok);
    if (!res) return;
    const failed = res.filter((r) => r.error);
    if (action === 'delete') res.filter((r) => !r.error).forEach((r) => { fleet.remove(r.node.uuid); selected.delete(r.node.uuid); });
    fleet.refreshSoon();
    if (!failed.length) { toast(`${catalog[action].label.replace('…', '')}: ${res.length} node(s) accepted.`, 'ok'); return; }
    await openDialog(`${failed.length} of ${res.length} failed`, (finish) => h('div', null,
      h('ul', { class: 'errors' }, failed.slice(0, 50).map((r) => h('li', null, h('strong', null, r.node.name || r.node.uuid), ': ', r.error.message))),
      h('div', { class: 'buttons' }, h('button', { class: 'primary', onclick: () => finish(true) }, 'Close'))));
  }

  function rowFor(n, i) {
    const box = h('input', { type: 'checkbox', 'aria-label': `Select ${n.name || n.uuid}`, checked: selected.has(n.uuid), onchange: () => {
      if (box.checked) selected.add(n.uuid); else selected.delete(n.uuid);
      renderBulk();
      syncAllBox();
    } });
    const el = h('div', { class: 'row' + (selected.has(n.uuid) ? ' sel' : ''), role: 'row', 'aria-rowindex': i + 2, dataset: { uuid: n.uuid, i } },
      h('span', { class: 'c-sel', role: 'cell' }, box),
      h('span', { class: 'c-name', role: 'cell' }, h('a', { href: `#/node/${n.uuid}`, class: 'rowlink' }, n.name || n.uuid), n.name ? h('small', { class: 'uuid' }, n.uuid.slice(0, 8)) : null),
      h('span', { class: 'c-provision_state', role: 'cell' }, stateBadge(n.provision_state, n.target_provision_state), n.reservation ? h('span', { class: 'busy', title: `locked by ${n.reservation}` }, 'busy') : null),
      h('span', { class: 'c-power_state', role: 'cell' }, powerBadge(n.power_state)),
      h('span', { class: 'c-maintenance', role: 'cell' }, n.maintenance ? h('span', { class: 'maint' }, 'maintenance') : h('span', { class: 'muted', 'aria-label': 'not in maintenance' }, '—')),
      h('span', { class: 'c-driver', role: 'cell' }, n.driver),
      h('span', { class: 'c-conductor', role: 'cell' }, n.conductor || '—'),
      bootCell(fleet.boot.get(n.uuid)),
      h('span', { class: 'c-last_error', role: 'cell', title: n.last_error || '' }, n.last_error || ''));
    el.style.transform = `translateY(${i * rowH}px)`;
    return el;
  }

  function bootCell(e) {
    if (!e) return h('span', { class: 'c-boot muted', role: 'cell' }, '—');
    const bad = /refused|incomplete|ignored|exhausted|nak/.test(e.event + ' ' + e.detail);
    return h('span', { class: 'c-boot', role: 'cell', title: `${e.event} ${e.detail} at ${e.at}`, dataset: { event: e.event } },
      h('span', { class: bad ? 'bad' : '' }, stepLabel(e)), h('span', { class: 'when' }, ago(e.at)));
  }

  function syncAllBox() {
    let n = 0;
    for (const r of rows) if (selected.has(r.uuid)) n++;
    allBox.checked = rows.length > 0 && n === rows.length;
    allBox.indeterminate = n > 0 && n < rows.length;
  }

  function paint(force) {
    const top = scroller.scrollTop;
    const height = scroller.clientHeight || 600;
    const start = Math.max(0, Math.floor(top / rowH) - OVERSCAN);
    const end = Math.min(rows.length, Math.ceil((top + height) / rowH) + OVERSCAN);
    if (!force && start === painted.start && end === painted.end && painted.version === listVersion) return;
    const focused = document.activeElement && inner.contains(document.activeElement) ? document.activeElement.closest('.row')?.dataset.uuid : null;
    const focusCls = document.activeElement?.className;
    painted = { start, end, version: listVersion };
    const frag = document.createDocumentFragment();
    for (let i = start; i < end; i++) frag.append(rowFor(rows[i], i));
    clear(inner).append(frag);
    if (focused) {
      const el = inner.querySelector(`.row[data-uuid="${focused}"] ${focusCls === 'rowlink' ? '.rowlink' : 'input'}`);
      if (el) el.focus({ preventScroll: true });
    }
    if (fleet.loaded || rows.length) markFirstRender();
  }

  function update(keepList) {
    const all = [...fleet.nodes.values()];
    renderCounts(all);
    rows = all.filter(matches);
    if (filter.sort) {
      const col = columns.find((c) => c.key === filter.sort) || columns[0];
      const key = col.sort;
      // Names sort as people read them: node2 before node10.
      rows = rows.map((n) => [key(n), n]).sort((a, b) => (typeof a[0] === 'string' && typeof b[0] === 'string'
        ? collator.compare(a[0], b[0]) : a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map((x) => x[1]);
      if (filter.desc) rows.reverse();
    }
    listVersion++;
    inner.style.height = `${rows.length * rowH}px`;
    table.setAttribute('aria-rowcount', rows.length + 1);
    shown.textContent = fleet.loaded
      ? (rows.length === all.length ? `${all.length.toLocaleString()} nodes` : `${rows.length.toLocaleString()} of ${all.length.toLocaleString()} nodes shown`)
      : `loading… ${all.length.toLocaleString()} so far`;
    condChip.textContent = '';
    if (filter.conductor) {
      condChip.append(`conductor: ${filter.conductor} `, h('button', { class: 'link', 'aria-label': 'Remove conductor filter', onclick: () => { filter.conductor = ''; update(); } }, '×'));
    }
    empty.hidden = rows.length > 0 || !fleet.loaded;
    clear(empty);
    if (!empty.hidden) {
      empty.append(all.length
        ? h('p', null, 'No node matches the filters.')
        : h('div', null, h('p', null, 'No nodes yet.'), h('p', null, 'Enroll nodes with ', h('code', null, 'openstack baremetal node create'), ' or ', h('a', { href: '#/import' }, 'import an instackenv.json'), '.')));
    }
    renderBulk();
    syncAllBox();
    saveHash();
    paint(true);
    if (!keepList) { /* nothing else */ }
  }

  function saveHash() {
    const q = new URLSearchParams();
    for (const k of ['q', 'state', 'maint', 'conductor']) if (filter[k]) q.set(k, filter[k]);
    if (filter.sort !== 'name') q.set('sort', filter.sort);
    if (filter.desc) q.set('desc', '1');
    const s = q.toString();
    const want = '#/' + (s ? '?' + s : '');
    if (location.hash !== want && !(location.hash === '' && want === '#/')) history.replaceState(null, '', want);
  }

  function measure() {
    const v = parseFloat(getComputedStyle(scroller).getPropertyValue('--row-h'));
    if (v && v !== rowH) { rowH = v; update(); }
  }

  // Keyboard: arrows, Page Up/Down, Home and End move between rows; the
  // focused row's link opens the node with Enter, Space toggles selection.
  function focusRow(i) {
    i = Math.max(0, Math.min(rows.length - 1, i));
    const top = i * rowH;
    if (top < scroller.scrollTop) scroller.scrollTop = top;
    else if (top + rowH > scroller.scrollTop + scroller.clientHeight) scroller.scrollTop = top + rowH - scroller.clientHeight;
    paint();
    const el = inner.querySelector(`.row[data-i="${i}"] .rowlink`);
    if (el) el.focus({ preventScroll: true });
  }
  scroller.addEventListener('keydown', (e) => {
    const row = e.target.closest && e.target.closest('.row');
    if (!row) return;
    const i = Number(row.dataset.i);
    const page = Math.max(1, Math.floor(scroller.clientHeight / rowH) - 1);
    const moves = { ArrowDown: i + 1, ArrowUp: i - 1, PageDown: i + page, PageUp: i - page, Home: 0, End: rows.length - 1 };
    if (e.key in moves) { e.preventDefault(); focusRow(moves[e.key]); return; }
    if (e.key === ' ' && e.target.classList.contains('rowlink')) {
      e.preventDefault();
      const box = row.querySelector('input');
      box.checked = !box.checked;
      box.dispatchEvent(new Event('change'));
    }
  });
  scroller.addEventListener('scroll', () => requestAnimationFrame(() => paint()), { passive: true });
  const onResize = () => { measure(); paint(); };
  window.addEventListener('resize', onResize);
  const onKey = (e) => {
    if (e.key === '/' && !['INPUT', 'TEXTAREA', 'SELECT'].includes(document.activeElement.tagName)) { e.preventDefault(); search.focus(); }
  };
  document.addEventListener('keydown', onKey);
  let pending = false;
  const onChange = () => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; update(true); });
  };
  fleet.addEventListener('change', onChange);

  measure();
  update();
  fleet.start();
  return () => {
    fleet.removeEventListener('change', onChange);
    window.removeEventListener('resize', onResize);
    document.removeEventListener('keydown', onKey);
  };
}

function markFirstRender() {
  const m = (window.__castiron = window.__castiron || {});
  if (!m.firstRender) {
    m.firstRender = performance.now();
    performance.mark('castiron:first-render');
  }
  if (fleet.loaded && !m.fullyLoaded) m.fullyLoaded = performance.now();
}
