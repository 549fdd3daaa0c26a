// The boot timeline: what a node did on the provisioning network
// (GET /v1/nodes/{id}/boot_timeline) with the power changes of its history,
// cut into boots and drawn as one horizontal bar per boot: a segment per
// phase (DHCP, TFTP, iPXE script, kernel, initramfs, agent lookup,
// heartbeats, inventory, power), hatched gaps where the machine was silent
// (firmware, kernel start), retries counted, the slowest segment named.
import { h, fmtBytes, fmtTime } from './ui.js';

// phaseOf maps a recorded event (pxe/boot's kinds) to its phase.
const PHASES = {
  power_on: 'Power on', power_off: 'Power off',
  dhcp_discover: 'DHCP', dhcp_offer: 'DHCP', dhcp_request: 'DHCP', dhcp_ack: 'DHCP', dhcp_nak: 'DHCP',
  dhcp_ignored: 'DHCP', dhcp_pool_exhausted: 'DHCP',
  tftp_served: 'TFTP', tftp_refused: 'TFTP',
  http_loader: 'HTTP loader', http_ipxe_script: 'iPXE script', http_kernel: 'Kernel', http_initramfs: 'Initramfs',
  http_vmedia_iso: 'Virtual media ISO',
  agent_lookup: 'Agent lookup', agent_heartbeat: 'Heartbeats', agent_inventory: 'Inventory',
};
// Where a step lies in a boot, for the fleet list's sort.
export const STEP_ORDER = ['power_on', 'dhcp_discover', 'dhcp_offer', 'dhcp_request', 'dhcp_ack', 'dhcp_nak', 'dhcp_ignored',
  'dhcp_pool_exhausted', 'tftp_served', 'tftp_refused', 'http_loader', 'http_ipxe_script', 'http_kernel', 'http_initramfs',
  'http_vmedia_iso', 'agent_lookup', 'agent_inventory', 'agent_heartbeat', 'power_off'];
const AGENT = new Set(['agent_lookup', 'agent_heartbeat', 'agent_inventory']);
// A machine silent this long has stopped booting: what follows is another boot.
const NEW_BOOT_GAP_MS = 10 * 60 * 1000;

export function phaseName(kind) { return PHASES[kind] || kind; }

// stepLabel is a short "where is it now" for the fleet list.
export function stepLabel(ev) {
  const f = parseDetail(ev.detail || '');
  let s = ev.event.replace(/^(dhcp|tftp|http|agent)_/, '$1 ').replace('_', ' ');
  if (ev.event === 'tftp_served' && f.file) s = `tftp ${f.file}`;
  const step = /\(step (\S+) (\w+)\)/.exec(ev.detail || '');
  if (ev.event === 'agent_heartbeat' && step) s = `agent: ${step[1]} ${step[2]}`;
  if (/refused|incomplete/.test(ev.detail || '')) s += ' (failed)';
  return s;
}

// parseDetail reads the key=value words castiron records in an event's
// detail ("file=undionly.kpxe bytes=70412 duration=83ms took=0.000412s").
export function parseDetail(detail) {
  const out = {};
  for (const m of detail.matchAll(/(\w+)=("[^"]*"|\S+)/g)) out[m[1]] = m[2].replace(/^"|"$/g, '');
  return out;
}

// ms parses a Go duration ("83ms", "1.2s", "950µs", "1m2s") to milliseconds.
export function ms(d) {
  if (!d) return null;
  let total = 0;
  let ok = false;
  for (const m of d.matchAll(/([\d.]+)(ns|us|µs|ms|s|m|h)/g)) {
    ok = true;
    total += Number(m[1]) * { ns: 1e-6, us: 1e-3, 'µs': 1e-3, ms: 1, s: 1000, m: 60000, h: 3600000 }[m[2]];
  }
  return ok ? total : null;
}

export function fmtDur(msv) {
  if (msv === null || msv === undefined) return '—';
  if (msv === 0) return '0 s';
  if (msv < 1) return `${Math.round(msv * 1000)} µs`;
  if (msv < 1000) return `${Math.round(msv)} ms`;
  if (msv < 60000) return `${(msv / 1000).toFixed(msv < 10000 ? 2 : 1)} s`;
  return `${Math.floor(msv / 60000)} min ${Math.round((msv % 60000) / 1000)} s`;
}

// powerEvents picks the power changes out of the node's history.
export function powerEvents(history) {
  const out = [];
  for (const e of history || []) {
    if (e.event_type !== 'power' && e.event_type !== 'monitoring') continue;
    const m = /power (?:state is now |change requested: )?(?:power )?(on|off)\b/i.exec(e.event || '');
    if (!m || /requested/.test(e.event)) continue;
    out.push({ at: e.created_at, event: m[1].toLowerCase() === 'on' ? 'power_on' : 'power_off', detail: e.event, mac: '' });
  }
  return out;
}

// boots sorts the events and cuts them into boots: a boot starts at a power
// on, at a DHCP discover after the agent spoke or the machine powered off,
// or after a long silence.
export function splitBoots(events) {
  const evs = events.map((e) => ({ ...e, t: Date.parse(e.at) })).filter((e) => isFinite(e.t)).sort((a, b) => a.t - b.t);
  const boots = [];
  let cur = null;
  for (const e of evs) {
    const last = cur && cur.events[cur.events.length - 1];
    const fresh = !cur || e.event === 'power_on' || e.t - last.t > NEW_BOOT_GAP_MS ||
      (e.event === 'dhcp_discover' && (cur.agent || last.event === 'power_off')) ||
      (last.event === 'power_off' && e.event !== 'power_off');
    if (fresh) { cur = { events: [], agent: false }; boots.push(cur); }
    cur.events.push(e);
    if (AGENT.has(e.event)) cur.agent = true;
  }
  return boots.map(analyse);
}

// span is the time an event covers: transfers record their end and carry
// their duration; other events are instants.
function span(e) {
  const f = parseDetail(e.detail || '');
  const d = ms(f.duration);
  return { start: d ? e.t - d : e.t, end: e.t, f };
}

// analyse groups a boot's events into phases (consecutive events of one
// phase) and the gaps between them, and names the slowest.
function analyse(boot) {
  const phases = [];
  for (const e of boot.events) {
    const name = phaseName(e.event);
    const s = span(e);
    let p = phases[phases.length - 1];
    if (!p || p.name !== name) {
      p = { name, kind: e.event, start: s.start, end: s.end, events: [], bytes: 0, retries: 0, failed: 0 };
      phases.push(p);
    }
    p.start = Math.min(p.start, s.start);
    p.end = Math.max(p.end, s.end);
    p.events.push({ ...e, ...s });
    if (s.f.bytes) p.bytes += Number(s.f.bytes) || 0;
    if (/refused|incomplete|nak|ignored|exhausted/.test(e.event + ' ' + (e.detail || ''))) p.failed++;
  }
  for (const p of phases) {
    // A retry: the same request again (a second discover, the same file
    // fetched again) within the phase.
    const seen = new Map();
    for (const e of p.events) {
      const key = e.event === 'dhcp_discover' || e.event === 'dhcp_request' ? e.event
        : e.f.file ? `${e.event} ${e.f.file}` : (e.event.startsWith('http_') ? e.event : null);
      if (!key) continue;
      seen.set(key, (seen.get(key) || 0) + 1);
    }
    for (const n of seen.values()) p.retries += n - 1;
    p.dur = p.end - p.start;
  }
  const start = phases.length ? phases[0].start : 0;
  const end = phases.length ? Math.max(...phases.map((p) => p.end)) : 0;
  const total = Math.max(end - start, 1);
  // Gaps: silences between phases worth showing (over 1 s and 2 % of the boot).
  const segs = [];
  phases.forEach((p, i) => {
    if (i > 0) {
      const prevEnd = Math.max(...phases.slice(0, i).map((q) => q.end));
      const gap = p.start - prevEnd;
      if (gap > 1000 && gap > total * 0.02) segs.push({ gap: true, name: gapName(phases[i - 1], p), start: prevEnd, end: p.start, dur: gap });
    }
    segs.push(p);
  });
  let slowest = null;
  for (const s of segs) if (!slowest || s.dur > slowest.dur) slowest = s;
  return { start, end, total, phases, segs, slowest, events: boot.events };
}

// gapName says what a machine does while the network hears nothing.
function gapName(before, after) {
  if (before.kind === 'power_on' && after.name === 'DHCP') return 'firmware start (until DHCP)';
  if ((before.name === 'TFTP' || before.name === 'HTTP loader') && after.name === 'DHCP') return 'iPXE start (until DHCP)';
  if ((before.name === 'Initramfs' || before.name === 'Kernel') && after.name !== 'Initramfs') return `kernel + agent start (until ${after.name.toLowerCase()})`;
  if (after.kind === 'power_off') return 'agent at work (until power off)';
  return `wait before ${after.name.toLowerCase()}`;
}

const CLS = { 'Power on': 'pw', 'Power off': 'pw', DHCP: 'dhcp', TFTP: 'tftp', 'HTTP loader': 'http', 'iPXE script': 'http',
  Kernel: 'http', Initramfs: 'http', 'Virtual media ISO': 'http', 'Agent lookup': 'agent', Heartbeats: 'agent', Inventory: 'agent' };

// drawBoots renders every boot, newest first.
export function drawBoots(boots) {
  if (!boots.length) {
    return h('p', { class: 'muted' }, 'No network boot recorded for this node (castiron records DHCP, TFTP, HTTP and agent calls when it serves the provisioning network).');
  }
  const out = h('div', { class: 'boots' });
  boots.slice().reverse().forEach((b, i) => out.append(drawBoot(b, boots.length - i)));
  return out;
}

function drawBoot(b, n) {
  const pct = (t) => ((t - b.start) / b.total) * 100;
  const track = h('div', { class: 'bt-track', role: 'img', 'aria-label': `Boot ${n}: ${b.phases.map((p) => p.name).join(', ')}` });
  for (const s of b.segs) {
    const left = pct(s.start);
    const width = Math.max(((s.end - s.start) / b.total) * 100, 0);
    const seg = h('div', {
      class: s.gap ? `bt-seg bt-gap${s === b.slowest ? ' bt-slowest' : ''}` : `bt-seg bt-${CLS[s.name] || 'other'}${s.failed ? ' bt-failed' : ''}${s === b.slowest ? ' bt-slowest' : ''}`,
      title: `${s.name}: ${fmtDur(s.dur)}`,
    });
    seg.style.left = `${left}%`;
    seg.style.width = `max(${width}%, 3px)`;
    track.append(seg);
  }
  // A tick per event, so retries and heartbeats show as repeated marks.
  for (const e of b.events) {
    const tick = h('span', { class: `bt-tick${/refused|incomplete|nak/.test(e.event + (e.detail || '')) ? ' bad' : ''}`, title: `${e.event} ${e.detail || ''}` });
    tick.style.left = `${pct(e.t)}%`;
    track.append(tick);
  }
  const axis = h('div', { class: 'bt-axis', 'aria-hidden': 'true' },
    h('span', null, '0'), h('span', null, fmtDur(b.total / 2)), h('span', null, fmtDur(b.total)));
  const slow = b.slowest;
  const head = h('h3', { class: 'bt-title' }, `Boot ${n}`,
    h('small', { class: 'muted' }, ` · ${fmtTime(new Date(b.start).toISOString())} · ${fmtDur(b.end - b.start)} · ${b.events.length} events`));
  const slowest = slow ? h('p', { class: 'bt-slowest-note' }, 'Slowest: ', h('strong', { class: 'bt-slowest-name' }, slow.name), ` (${fmtDur(slow.dur)}, ${Math.round((slow.dur / b.total) * 100)} % of the boot)`) : null;
  const at = (s) => h('span', { class: 'bt-pat muted' }, `+${fmtDur(s.start - b.start)}`);
  const legend = h('ol', { class: 'bt-phases' });
  for (const s of b.segs) {
    if (s.gap) {
      legend.append(h('li', { class: `bt-phase bt-phase-gap${s === slow ? ' slowest' : ''}`, dataset: { gap: s.name } },
        h('span', { class: 'bt-sw bt-gap' }), h('span', { class: 'bt-pname' }, s.name), at(s), h('span', { class: 'bt-pdur' }, fmtDur(s.dur))));
      continue;
    }
    const notes = [];
    if (s.events.length > 1) notes.push(`${s.events.length} events`);
    if (s.bytes) notes.push(fmtBytes(s.bytes));
    if (s.bytes && s.dur > 0) notes.push(`${fmtBytes(s.bytes / (s.dur / 1000))}/s`);
    if (s.retries) notes.push(`retried ×${s.retries}`);
    if (s.failed) notes.push(`${s.failed} failed`);
    legend.append(h('li', { class: `bt-phase${s === slow ? ' slowest' : ''}${s.retries ? ' retried' : ''}`, dataset: { phase: s.name } },
      h('span', { class: `bt-sw bt-${CLS[s.name] || 'other'}` }),
      h('span', { class: 'bt-pname' }, s.name), at(s),
      // An instant (a DHCP answer, a lookup) has no duration of its own.
      h('span', { class: 'bt-pdur' }, s.dur > 0 ? fmtDur(s.dur) : h('span', { class: 'muted' }, 'instant')),
      h('span', { class: 'bt-pnote muted' }, notes.join(' · '))));
  }
  const rows = b.events.map((e) => {
    const s = span(e);
    return h('tr', { class: /refused|incomplete|nak/.test(e.event + (e.detail || '')) ? 'bad' : '' },
      h('td', { class: 'num' }, `+${fmtDur(e.t - b.start)}`),
      h('td', null, e.event),
      h('td', null, s.f.file || ''),
      h('td', { class: 'num' }, s.f.bytes ? fmtBytes(Number(s.f.bytes)) : ''),
      h('td', { class: 'num' }, s.f.duration ? fmtDur(ms(s.f.duration)) : ''),
      h('td', null, h('code', null, e.detail || '')));
  });
  const table = h('details', { class: 'bt-events' }, h('summary', null, `All ${b.events.length} events`),
    h('table', { class: 'simple' },
      h('thead', null, h('tr', null, ['At', 'Event', 'File', 'Size', 'Duration', 'Detail'].map((c) => h('th', { scope: 'col' }, c)))),
      h('tbody', null, rows)));
  return h('section', { class: 'card bt-boot', dataset: { boot: n } }, head, track, axis, slowest, legend, table);
}
