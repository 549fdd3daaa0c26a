// Node detail: state, current step with progress, actions valid in the
// node's state, properties, driver_info, ports, inspection inventory and
// the history of state changes; tabs for the boot timeline and the serial
// console (console.js). Refreshed every 2 s while open.
import { api, APIError } from './api.js';
import { fleet } from './store.js';
import { h, clear, append, stateBadge, powerBadge, fmtBytes, fmtTime, ago, toast, stateKind } from './ui.js';
import { catalog, validFor, perform } from './actions.js';
import { splitBoots, powerEvents, drawBoots } from './boottimeline.js';
import { consoleTab } from './console.js';

export function nodeView(main, uuid, params) {
  let node = null;
  let stopped = false;
  let timer = null;
  let lastUpdate;
  let lastJSON = '';
  let inventoryState = null;
  let busy = false;

  const title = h('h1', { id: 'node-h' }, 'Node');
  const sub = h('p', { class: 'sub' });
  const badges = h('div', { class: 'badges' });
  const actions = h('div', { class: 'actions write', role: 'toolbar', 'aria-label': 'Actions' });
  const progress = h('div', { class: 'progress-box', hidden: true, role: 'status', 'aria-live': 'polite' });
  const lastError = h('div', { class: 'alert', role: 'alert', hidden: true });
  const overview = h('dl', { class: 'kv' });
  const props = h('dl', { class: 'kv' });
  const dinfo = h('dl', { class: 'kv' });
  const iinfo = h('dl', { class: 'kv' });
  const ports = h('div');
  const inventory = h('div', { class: 'inventory' }, h('p', { class: 'muted' }, 'Loading inventory…'));
  const history = h('ol', { class: 'timeline' });
  const bootPanel = h('div', { class: 'boot-panel', id: 'panel-boot', role: 'tabpanel', 'aria-labelledby': 'tab-boot', hidden: true },
    h('p', { class: 'muted' }, 'Loading the boot timeline…'));
  const consolePanel = h('div', { class: 'console-panel', id: 'panel-console', role: 'tabpanel', 'aria-labelledby': 'tab-console', hidden: true });
  const con = consoleTab(consolePanel, uuid);
  const tabs = ['details', 'boot', 'console'];
  let tab = tabs.includes(params && params.get('tab')) ? params.get('tab') : 'details';
  let bootJSON = '';

  const card = (id, label, ...body) => h('section', { class: 'card', 'aria-labelledby': id }, h('h2', { id }, label), ...body);
  const view = h('article', { class: 'node', 'aria-labelledby': 'node-h' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/' }, '← Nodes')),
    h('header', { class: 'node-head' }, h('div', null, title, sub), badges),
    actions, progress, lastError,
    h('div', { class: 'tabs', role: 'tablist', 'aria-label': 'Node views' },
      h('button', { role: 'tab', id: 'tab-details', 'aria-controls': 'panel-details', onclick: () => show('details') }, 'Details'),
      h('button', { role: 'tab', id: 'tab-boot', 'aria-controls': 'panel-boot', onclick: () => show('boot') }, 'Boot timeline'),
      h('button', { role: 'tab', id: 'tab-console', 'aria-controls': 'panel-console', onclick: () => show('console') }, 'Console')),
    bootPanel, consolePanel,
    h('div', { class: 'cards', id: 'panel-details', role: 'tabpanel', 'aria-labelledby': 'tab-details' },
      card('c-overview', 'Overview', overview),
      card('c-inventory', 'Hardware inventory', inventory),
      card('c-history', 'History', history),
      card('c-ports', 'Ports', ports),
      card('c-props', 'Properties', props),
      card('c-dinfo', 'Driver info', dinfo),
      card('c-iinfo', 'Instance info', iinfo)));
  clear(main).append(view);

  // show switches tabs; the tab is kept in the hash (#/node/<uuid>?tab=boot).
  function show(which) {
    if (tab === 'console' && which !== 'console') con.stop();
    tab = which;
    for (const b of view.querySelectorAll('[role=tab]')) {
      const on = b.id === 'tab-' + which;
      b.setAttribute('aria-selected', String(on));
      b.tabIndex = on ? 0 : -1;
    }
    view.querySelector('#panel-details').hidden = which !== 'details';
    bootPanel.hidden = which !== 'boot';
    consolePanel.hidden = which !== 'console';
    const want = `#/node/${uuid}${which !== 'details' ? '?tab=' + which : ''}`;
    if (location.hash !== want) window.history.replaceState(null, '', want);
    if (which === 'boot') loadBoot();
    if (which === 'console' && node) con.update(node);
  }

  // kv lists obj's entries (or only its set keys among keys) as a <dl>.
  function kv(dl, obj, keys) {
    clear(dl);
    const entries = keys
      ? keys.map((k) => [k, obj[k]]).filter(([, v]) => v !== null && v !== undefined && v !== '' && !(Array.isArray(v) && !v.length))
      : Object.entries(obj || {}).sort(([a], [b]) => a.localeCompare(b));
    if (!entries.length) { dl.append(h('p', { class: 'muted' }, 'none')); return; }
    for (const [k, v] of entries) {
      let val = v;
      if (v === null || v === undefined || v === '') val = h('span', { class: 'muted' }, '—');
      else if (typeof v === 'object') val = h('code', { class: 'json' }, JSON.stringify(v));
      else if (typeof v === 'boolean') val = v ? 'yes' : 'no';
      dl.append(h('div', null, h('dt', null, k), h('dd', null, val)));
    }
  }

  function currentStep(n) {
    for (const k of ['clean_step', 'deploy_step', 'service_step']) {
      const s = n[k];
      if (s && typeof s === 'object' && Object.keys(s).length) return [k, s];
    }
    return null;
  }

  // percentOf finds a progress value in driver_internal_info: a number under
  // progress/percent (0-100, or 0-1), possibly nested one level.
  function percentOf(dii) {
    if (!dii || typeof dii !== 'object') return null;
    for (const k of ['progress', 'percent', 'progress_percent', 'deploy_progress', 'clean_progress']) {
      let v = dii[k];
      if (v && typeof v === 'object') v = v.percent ?? v.progress;
      if (typeof v === 'string' && v.trim() !== '') v = Number(v.replace('%', ''));
      if (typeof v === 'number' && isFinite(v)) return v <= 1 && !Number.isInteger(v) ? v * 100 : Math.max(0, Math.min(100, v));
    }
    return null;
  }

  function renderProgress(n) {
    clear(progress);
    const step = currentStep(n);
    const pct = percentOf(n.driver_internal_info);
    const trans = stateKind(n.provision_state) === 'trans';
    if (!step && pct === null && !trans) { progress.hidden = true; return; }
    progress.hidden = false;
    const label = step ? `${step[0].replace('_', ' ')}: ${step[1].interface || '?'}.${step[1].step || '?'}` : `${n.provision_state}…`;
    const bar = h('progress', { max: 100, 'aria-label': 'Progress of ' + label });
    if (pct !== null) bar.value = pct;
    progress.append(h('div', { class: 'progress-label' }, h('strong', null, label),
      pct !== null ? h('span', null, ` ${Math.round(pct)} %`) : h('span', { class: 'muted' }, n.target_provision_state ? ` → ${n.target_provision_state}` : '')), bar);
  }

  function renderActions(n) {
    const valid = validFor(n);
    clear(actions);
    for (const a of valid) {
      const c = catalog[a];
      actions.append(h('button', {
        class: c.danger ? 'danger' : (a === valid[0] ? 'primary' : ''), 'data-action': a, title: c.help || '',
        disabled: busy, onclick: () => run(a),
      }, c.label));
    }
  }

  async function run(action) {
    const res = await perform(action, [node]);
    if (!res) return;
    const err = res[0].error;
    if (err) {
      toast(`${catalog[action].label.replace('…', '')} failed: ${err.message}`, 'error');
      return;
    }
    if (action === 'delete') {
      fleet.remove(node.uuid);
      toast(`Node ${node.name || node.uuid} deleted.`, 'ok');
      location.hash = '#/';
      return;
    }
    toast(`${catalog[action].label.replace('…', '')}: accepted.`, 'ok');
    fleet.refreshSoon();
    refresh();
  }

  function render(n) {
    node = n;
    title.textContent = n.name || n.uuid;
    clear(sub).append(h('code', null, n.uuid));
    append(clear(badges), [stateBadge(n.provision_state, n.target_provision_state), powerBadge(n.power_state),
      n.maintenance ? h('span', { class: 'maint', title: n.maintenance_reason || '' }, 'maintenance' + (n.maintenance_reason ? `: ${n.maintenance_reason}` : '')) : null,
      n.reservation ? h('span', { class: 'busy' }, `locked by ${n.reservation}`) : null,
      // Made by discovery (--pxe-discovery): what the rules did is in the history.
      n.driver_internal_info && n.driver_internal_info.auto_discovered
        ? h('span', { class: 'discovered', title: 'Enrolled by discovery: it network-booted unknown; see the history for what the inspection rules did' }, 'discovered') : null]);
    lastError.hidden = !n.last_error;
    lastError.textContent = n.last_error ? 'Last error: ' + n.last_error : '';
    renderProgress(n);
    renderActions(n);
    kv(overview, n, ['driver', 'conductor', 'conductor_group', 'resource_class', 'provision_updated_at', 'power_state', 'target_power_state',
      'boot_mode', 'secure_boot', 'instance_uuid', 'owner', 'lessee', 'description', 'traits', 'created_at', 'updated_at', 'inspection_finished_at']);
    const ov = overview.querySelectorAll('dd');
    for (const dd of ov) { if (/^\d{4}-\d\d-\d\dT/.test(dd.textContent)) { const t = dd.textContent; dd.textContent = `${fmtTime(t)} (${ago(t)})`; dd.title = t; } }
    const traits = n.traits && n.traits.length ? n.traits.join(', ') : null;
    overview.querySelectorAll('dt').forEach((dt) => { if (dt.textContent === 'traits') dt.nextSibling.textContent = traits || '—'; });
    kv(props, n.properties);
    kv(dinfo, n.driver_info);
    kv(iinfo, n.instance_info);
    fleet.upsert(pick(n));
  }

  function pick(n) {
    const o = {};
    for (const k of ['uuid', 'name', 'provision_state', 'target_provision_state', 'power_state', 'maintenance', 'driver', 'conductor', 'conductor_group', 'last_error', 'reservation', 'resource_class', 'updated_at', 'created_at']) o[k] = n[k];
    return o;
  }

  async function loadPorts() {
    try {
      const r = await api('GET', `/v1/nodes/${uuid}/ports/detail`);
      clear(ports);
      if (!r.ports.length) { ports.append(h('p', { class: 'muted' }, 'No ports.')); return; }
      ports.append(h('table', { class: 'simple' },
        h('thead', null, h('tr', null, ['MAC address', 'PXE', 'Physical network', 'Switch port'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, r.ports.map((p) => h('tr', null,
          h('td', null, h('code', null, p.address)), h('td', null, p.pxe_enabled ? 'yes' : 'no'),
          h('td', null, p.physical_network || '—'),
          h('td', null, p.local_link_connection && Object.keys(p.local_link_connection).length
            ? Object.entries(p.local_link_connection).map(([k, v]) => `${k}=${v}`).join(' ') : '—'))))));
    } catch (e) {
      clear(ports).append(h('p', { class: 'form-error' }, e.message));
    }
  }

  async function loadInventory() {
    try {
      const r = await api('GET', `/v1/nodes/${uuid}/inventory`);
      clear(inventory).append(drawInventory(r.inventory || {}));
    } catch (e) {
      clear(inventory).append(e instanceof APIError && e.status === 404
        ? h('p', { class: 'muted' }, 'No inventory yet: run “Inspect” on the manageable node to collect it.')
        : h('p', { class: 'form-error' }, e.message));
    }
  }

  async function loadHistory() {
    try {
      const r = await api('GET', `/v1/nodes/${uuid}/history?detail=True&sort_dir=desc&limit=50`);
      clear(history);
      if (!r.history.length) { history.append(h('li', { class: 'muted' }, 'No events yet.')); return; }
      for (const e of r.history) {
        history.append(h('li', { class: `ev sev-${(e.severity || 'info').toLowerCase()}` },
          h('time', { datetime: e.created_at, title: e.created_at }, fmtTime(e.created_at)),
          h('span', { class: 'ev-type' }, [e.event_type, e.severity].filter(Boolean).join(' · ')),
          h('p', null, e.event),
          h('small', { class: 'muted' }, [e.user && `by ${e.user}`, e.conductor && `on ${e.conductor}`].filter(Boolean).join(' '))));
      }
    } catch (e) {
      clear(history).append(h('li', { class: 'form-error' }, e.message));
    }
  }

  // loadBoot draws the boot timeline with the power changes of the history;
  // redrawn only when either changed.
  async function loadBoot() {
    try {
      const [tl, hist] = await Promise.all([
        api('GET', `/v1/nodes/${uuid}/boot_timeline`),
        api('GET', `/v1/nodes/${uuid}/history?detail=True&sort_dir=desc&limit=200`).catch(() => ({ history: [] })),
      ]);
      if (stopped) return;
      const evs = (tl.events || []).concat(powerEvents(hist.history));
      const js = JSON.stringify(evs);
      if (js === bootJSON) return;
      bootJSON = js;
      const open = [...bootPanel.querySelectorAll('details[open]')].map((d) => d.closest('[data-boot]')?.dataset.boot);
      clear(bootPanel).append(drawBoots(splitBoots(evs)));
      for (const n of open) bootPanel.querySelector(`[data-boot="${n}"] details`)?.setAttribute('open', '');
    } catch (e) {
      clear(bootPanel).append(h('p', { class: 'form-error' }, e instanceof APIError && e.status === 404
        ? 'This castiron does not record boot timelines.' : e.message));
    }
  }

  async function refresh() {
    clearTimeout(timer);
    if (stopped) return;
    try {
      const n = await api('GET', `/v1/nodes/${uuid}`);
      if (stopped) return;
      const js = JSON.stringify(n);
      if (js !== lastJSON) {
        lastJSON = js;
        const focusedAction = document.activeElement && actions.contains(document.activeElement) ? document.activeElement.dataset.action : null;
        render(n);
        if (focusedAction) actions.querySelector(`[data-action="${focusedAction}"]`)?.focus();
      }
      if (lastUpdate === undefined || n.updated_at !== lastUpdate) {
        const first = lastUpdate === undefined;
        lastUpdate = n.updated_at;
        loadHistory();
        if (first) loadPorts();
        if (first || inventoryState !== n.provision_state) { inventoryState = n.provision_state; loadInventory(); }
      }
      // Boot events do not touch the node's updated_at: polled while shown.
      if (tab === 'boot' && lastUpdate !== undefined) loadBoot();
      if (tab === 'console') con.update(n);
    } catch (e) {
      if (e instanceof APIError && e.status === 404) {
        clear(view).append(h('h1', null, 'Node not found'), h('p', null, e.message), h('p', null, h('a', { href: '#/' }, 'Back to the nodes')));
        fleet.remove(uuid);
        stopped = true;
        con.stop();
        return;
      }
      toast(e.message, 'error');
    }
    timer = setTimeout(refresh, document.hidden ? 10000 : 2000);
  }

  show(tab);
  refresh();
  return () => { stopped = true; clearTimeout(timer); con.stop(); };
}

// drawInventory renders an ironic-python-agent inventory: system, CPU,
// memory, disks and NICs.
export function drawInventory(inv) {
  const out = h('div', { class: 'inv' });
  const sys = inv.system_vendor || {};
  const cpu = inv.cpu || {};
  const mem = inv.memory || {};
  const line = (label, ...v) => h('div', null, h('dt', null, label), h('dd', null, ...v));
  out.append(h('dl', { class: 'kv' },
    line('System', [sys.manufacturer, sys.product_name].filter(Boolean).join(' ') || '—', sys.serial_number ? h('small', { class: 'muted' }, ` s/n ${sys.serial_number}`) : null),
    line('CPU', cpu.count ? `${cpu.count} × ` : '', cpu.model_name || '—', cpu.architecture ? ` (${cpu.architecture})` : '', cpu.frequency ? `, ${cpu.frequency} MHz` : ''),
    line('Memory', mem.physical_mb ? fmtBytes(mem.physical_mb * 1024 * 1024) : fmtBytes(mem.total)),
    line('Boot mode', (inv.boot && inv.boot.current_boot_mode) || '—'),
    line('BMC', inv.bmc_address || '—')));
  const disks = inv.disks || [];
  out.append(h('h3', null, `Disks (${disks.length})`));
  out.append(disks.length ? h('table', { class: 'simple' },
    h('thead', null, h('tr', null, ['Device', 'Size', 'Type', 'Model', 'Serial'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, disks.map((d) => h('tr', null,
      h('td', null, h('code', null, d.name || '?')),
      h('td', { class: 'num', title: d.size != null ? `${d.size} bytes` : '' }, fmtBytes(d.size)),
      h('td', null, d.rotational === true ? 'HDD' : d.rotational === false ? 'SSD' : '—'),
      h('td', null, [d.vendor, d.model].filter(Boolean).join(' ') || '—'),
      h('td', null, d.serial || '—'))))) : h('p', { class: 'muted' }, 'none'));
  const nics = inv.interfaces || [];
  out.append(h('h3', null, `Network interfaces (${nics.length})`));
  out.append(nics.length ? h('table', { class: 'simple' },
    h('thead', null, h('tr', null, ['Name', 'MAC', 'IPv4', 'Link', 'Speed'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', null, nics.map((n) => h('tr', null,
      h('td', null, n.name || '?'),
      h('td', null, h('code', null, n.mac_address || '—')),
      h('td', null, n.ipv4_address || '—'),
      h('td', null, n.has_carrier === true ? 'up' : n.has_carrier === false ? 'down' : '—'),
      h('td', null, n.speed_mbps ? `${n.speed_mbps} Mb/s` : '—'))))) : h('p', { class: 'muted' }, 'none'));
  return out;
}
