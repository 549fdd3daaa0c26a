// Import an instackenv.json (TripleO's node list): validate it in the
// browser (schema, MAC syntax, duplicate MACs and names, in the file and
// against what castiron already has), then create the nodes and their ports
// through the API.
import { api, listAll } from './api.js';
import { fleet } from './store.js';
import { h, clear, append, toast } from './ui.js';

const MAC = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i;
const NAME = /^[A-Za-z0-9._~-]+$/;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const PM_TYPES = {
  ipmi: 'ipmi', pxe_ipmitool: 'ipmi', ipmitool: 'ipmi', 'pxe-ipmitool': 'ipmi',
  fake: 'fake-hardware', 'fake-hardware': 'fake-hardware', fake_pxe: 'fake-hardware',
  'manual-management': 'manual-management',
  redfish: 'redfish',
};
// pm_type values TripleO maps to Redfish: redfish and its *_redfish forms.
const REDFISH = /^(redfish|.*_redfish)$/;
const KNOWN = new Set(['name', 'pm_type', 'pm_addr', 'pm_user', 'pm_password', 'pm_port', 'mac', 'ports', 'cpu', 'memory',
  'disk', 'arch', 'capabilities', 'driver', 'driver_info', 'properties', 'resource_class', 'uuid', 'description', 'extra',
  'root_device', 'kernel_id', 'ramdisk_id', 'pm_system_id', 'pm_vm_name', 'redfish_verify_ca']);

// redfishAddress puts pm_port into a Redfish address (Redfish has no port key);
// an address already naming another port is an error.
export function redfishAddress(addr, port) {
  // A bare IPv6 address gets brackets, as Ironic's escape_ipv6.
  if (!addr.includes('[') && !addr.includes('/') && (addr.match(/:/g) || []).length >= 2) addr = `[${addr}]`;
  const hasScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(addr);
  let u;
  try { u = new URL(hasScheme ? addr : `https://${addr}`); } catch { return { error: `pm_addr "${addr}" is not a Redfish address` }; }
  if (port === undefined) return { address: addr };
  const p = Number(port);
  if (!Number.isInteger(p) || p < 1 || p > 65535) return { error: 'pm_port must be a port number' };
  // URL drops a scheme's default port: compare with it too.
  const given = u.port || (addr.match(/:(\d+)(\/|$)/) || [])[1] || '';
  if (given) return String(p) === given ? { address: addr } : { error: `pm_port ${p} contradicts the port in pm_addr "${addr}"` };
  const host = u.hostname.includes(':') && !u.hostname.startsWith('[') ? `[${u.hostname}]` : u.hostname;
  const rest = addr.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/^[^/]*/, '');
  return { address: `${hasScheme ? `${u.protocol}//` : ''}${host}:${p}${rest}` };
}

// validateInstackenv checks doc and builds the API bodies. existing holds
// the names and MACs castiron already knows and the drivers it serves.
export function validateInstackenv(doc, existing) {
  const out = { errors: [], nodes: [] };
  if (!doc || typeof doc !== 'object' || Array.isArray(doc) || !Array.isArray(doc.nodes)) {
    out.errors.push('The file must be a JSON object with a "nodes" list.');
    return out;
  }
  if (!doc.nodes.length) out.errors.push('"nodes" is empty.');
  const names = new Map();
  const macs = new Map();
  doc.nodes.forEach((raw, i) => {
    const n = { index: i, errors: [], warnings: [], name: null, body: null, macs: [] };
    out.nodes.push(n);
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) { n.errors.push('is not an object'); return; }
    for (const k of Object.keys(raw)) if (!KNOWN.has(k)) n.warnings.push(`unknown key "${k}" ignored`);
    const body = { driver_info: {}, properties: {} };
    // Name.
    if (raw.name !== undefined) {
      if (typeof raw.name !== 'string' || !NAME.test(raw.name)) n.errors.push(`name ${JSON.stringify(raw.name)} is not a valid node name (letters, digits, . _ ~ -)`);
      else {
        n.name = body.name = raw.name;
        const key = raw.name.toLowerCase();
        if (names.has(key)) n.errors.push(`duplicate name "${raw.name}" (also node #${names.get(key) + 1})`);
        else names.set(key, i);
        if (existing.names.has(key)) n.errors.push(`a node named "${raw.name}" already exists`);
      }
    }
    if (raw.uuid !== undefined) {
      if (typeof raw.uuid !== 'string' || !UUID.test(raw.uuid)) n.errors.push('uuid is not a UUID');
      else body.uuid = raw.uuid;
    }
    // Driver.
    let driver = raw.driver;
    if (driver === undefined && raw.pm_type !== undefined) {
      const t = String(raw.pm_type).toLowerCase();
      driver = PM_TYPES[t] || (REDFISH.test(t) ? 'redfish' : String(raw.pm_type));
    }
    if (!driver) n.errors.push('pm_type (or driver) is required');
    else if (existing.drivers.size && !existing.drivers.has(driver)) n.errors.push(`driver "${driver}" is not enabled here (have: ${[...existing.drivers].join(', ')})`);
    else body.driver = driver;
    if (raw.driver_info !== undefined) {
      if (typeof raw.driver_info !== 'object' || Array.isArray(raw.driver_info)) n.errors.push('driver_info must be an object');
      else Object.assign(body.driver_info, raw.driver_info);
    }
    if (driver === 'ipmi') {
      if (raw.pm_addr !== undefined) body.driver_info.ipmi_address = String(raw.pm_addr);
      if (raw.pm_user !== undefined) body.driver_info.ipmi_username = String(raw.pm_user);
      if (raw.pm_password !== undefined) body.driver_info.ipmi_password = String(raw.pm_password);
      if (raw.pm_port !== undefined) {
        const p = Number(raw.pm_port);
        if (!Number.isInteger(p) || p < 1 || p > 65535) n.errors.push('pm_port must be a port number');
        else body.driver_info.ipmi_port = p;
      }
      if (!body.driver_info.ipmi_address) n.errors.push('pm_addr is required for IPMI');
    }
    if (driver === 'redfish') {
      if (raw.pm_addr !== undefined) {
        const a = redfishAddress(String(raw.pm_addr), raw.pm_port);
        if (a.error) n.errors.push(a.error);
        else body.driver_info.redfish_address = a.address;
      }
      if (raw.pm_user !== undefined) body.driver_info.redfish_username = String(raw.pm_user);
      if (raw.pm_password !== undefined) body.driver_info.redfish_password = String(raw.pm_password);
      if (raw.pm_system_id !== undefined) body.driver_info.redfish_system_id = String(raw.pm_system_id);
      if (raw.redfish_verify_ca !== undefined) body.driver_info.redfish_verify_ca = raw.redfish_verify_ca;
      if (!body.driver_info.redfish_address && raw.pm_addr === undefined) n.errors.push('pm_addr is required for Redfish');
    }
    // Properties.
    if (raw.properties !== undefined) {
      if (typeof raw.properties !== 'object' || Array.isArray(raw.properties)) n.errors.push('properties must be an object');
      else Object.assign(body.properties, raw.properties);
    }
    for (const [k, prop] of [['cpu', 'cpus'], ['memory', 'memory_mb'], ['disk', 'local_gb']]) {
      if (raw[k] === undefined) continue;
      const v = Number(raw[k]);
      if (!Number.isInteger(v) || v <= 0) n.errors.push(`${k} must be a positive integer (got ${JSON.stringify(raw[k])})`);
      else body.properties[prop] = v;
    }
    if (raw.arch !== undefined) body.properties.cpu_arch = String(raw.arch);
    if (raw.capabilities !== undefined) body.properties.capabilities = String(raw.capabilities);
    if (raw.root_device !== undefined) body.properties.root_device = raw.root_device;
    if (raw.resource_class !== undefined) body.resource_class = String(raw.resource_class);
    if (raw.description !== undefined) body.description = String(raw.description);
    if (raw.extra !== undefined) body.extra = raw.extra;
    // MACs: "mac" (a list of strings) and/or "ports" (a list of {address}).
    const portList = [];
    if (raw.mac !== undefined) {
      if (!Array.isArray(raw.mac)) n.errors.push('mac must be a list of MAC addresses');
      else raw.mac.forEach((m) => portList.push({ address: m }));
    }
    if (raw.ports !== undefined) {
      if (!Array.isArray(raw.ports)) n.errors.push('ports must be a list');
      else raw.ports.forEach((p) => portList.push(p && typeof p === 'object' ? { ...p } : { address: p }));
    }
    n.ports = [];
    for (const p of portList) {
      if (typeof p.address !== 'string' || !MAC.test(p.address)) { n.errors.push(`${JSON.stringify(p.address)} is not a MAC address`); continue; }
      const mac = p.address.toLowerCase();
      p.address = mac;
      if (macs.has(mac)) n.errors.push(`duplicate MAC ${mac} (also node #${macs.get(mac) + 1})`);
      else macs.set(mac, i);
      if (existing.macs.has(mac)) n.errors.push(`MAC ${mac} already belongs to a port of node ${existing.macs.get(mac)}`);
      n.ports.push(p);
      n.macs.push(mac);
    }
    if (!n.ports.length && !n.errors.length) {
      n.warnings.push(driver === 'redfish'
        ? 'no MAC address: inspect the node (out of band) to create its ports'
        : 'no MAC address: the node cannot PXE boot until a port is added');
    }
    if (!Object.keys(body.driver_info).length) delete body.driver_info;
    if (!Object.keys(body.properties).length) delete body.properties;
    n.body = body;
  });
  return out;
}

async function existingState() {
  const [ports, drivers] = await Promise.all([
    listAll('/v1/ports?fields=uuid,address,node_uuid', 'ports'),
    api('GET', '/v1/drivers'),
  ]);
  const names = new Set();
  const byUUID = new Map();
  for (const n of fleet.nodes.values()) { if (n.name) names.add(n.name.toLowerCase()); byUUID.set(n.uuid, n); }
  const macs = new Map();
  for (const p of ports) {
    const n = byUUID.get(p.node_uuid);
    macs.set(p.address.toLowerCase(), n && n.name ? n.name : p.node_uuid);
  }
  return { names, macs, drivers: new Set(drivers.drivers.map((d) => d.name)) };
}

export function importView(main) {
  const result = h('div', { class: 'import-result', 'aria-live': 'polite' });
  const file = h('input', { type: 'file', id: 'import-file', accept: '.json,application/json', onchange: () => file.files[0] && readFile(file.files[0]) });
  const text = h('textarea', { id: 'import-text', rows: 8, spellcheck: 'false', placeholder: '{"nodes": [{"name": "node-0", "pm_type": "ipmi", "pm_addr": "10.0.0.5", "pm_user": "admin", "pm_password": "…", "mac": ["52:54:00:12:34:56"]}]}' });
  const drop = h('div', { class: 'drop' },
    h('label', { for: 'import-file' }, 'Choose an instackenv.json file'), file,
    h('p', { class: 'muted' }, 'or drop it here, or paste its content below.'));
  drop.addEventListener('dragover', (e) => { e.preventDefault(); drop.classList.add('over'); });
  drop.addEventListener('dragleave', () => drop.classList.remove('over'));
  drop.addEventListener('drop', (e) => { e.preventDefault(); drop.classList.remove('over'); if (e.dataTransfer.files[0]) readFile(e.dataTransfer.files[0]); });
  const manage = h('input', { type: 'checkbox', id: 'import-manage' });
  clear(main).append(h('section', { class: 'import', 'aria-labelledby': 'imp-h' },
    h('nav', { class: 'crumbs', 'aria-label': 'Breadcrumb' }, h('a', { href: '#/' }, '← Nodes')),
    h('h1', { id: 'imp-h' }, 'Import instackenv.json'),
    h('p', null, 'Nodes are created in the enroll state with their ports; nothing is created until the whole file is valid.'),
    drop,
    h('label', { for: 'import-text' }, 'JSON'), text,
    h('div', { class: 'buttons left' },
      h('button', { class: 'primary', id: 'import-check', onclick: () => check(text.value) }, 'Check'),
      h('label', { class: 'inline' }, manage, ' Manage the nodes after creating them (verifies BMC credentials)')),
    result));

  let checked = null;

  function readFile(f) {
    const r = new FileReader();
    r.onload = () => { text.value = r.result; check(r.result); };
    r.onerror = () => toast('Cannot read the file: ' + r.error, 'error');
    r.readAsText(f);
  }

  async function check(src) {
    clear(result);
    checked = null;
    let doc;
    try { doc = JSON.parse(src); } catch (e) {
      result.append(h('p', { class: 'form-error', role: 'alert' }, 'Not valid JSON: ' + e.message));
      return;
    }
    let existing;
    try {
      if (!fleet.loaded) await fleet.load();
      existing = await existingState();
    } catch (e) {
      result.append(h('p', { class: 'form-error', role: 'alert' }, e.message));
      return;
    }
    const v = validateInstackenv(doc, existing);
    const bad = v.nodes.filter((n) => n.errors.length);
    const ok = !v.errors.length && !bad.length;
    append(result, [
      h('p', { class: ok ? 'ok' : 'form-error', role: ok ? 'status' : 'alert', id: 'import-summary' },
        ok ? `${v.nodes.length} node(s) ready to create.` : `${v.errors.length + bad.length} problem(s) found; fix the file and check again.`),
      v.errors.length ? h('ul', { class: 'errors' }, v.errors.map((e) => h('li', null, e))) : null,
      v.nodes.length ? h('table', { class: 'simple' },
        h('thead', null, h('tr', null, ['#', 'Name', 'Driver', 'BMC', 'MACs', 'Problems'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', null, v.nodes.map((n) => h('tr', { class: n.errors.length ? 'bad' : '' },
          h('td', null, String(n.index + 1)), h('td', null, n.name || '—'), h('td', null, n.body?.driver || '—'),
          h('td', null, n.body?.driver_info?.ipmi_address || n.body?.driver_info?.redfish_address || '—'), h('td', null, n.macs.join(' ') || '—'),
          h('td', null, n.errors.length ? h('ul', { class: 'errors' }, n.errors.map((e) => h('li', null, e))) : null,
            n.warnings.length ? h('ul', { class: 'warnings' }, n.warnings.map((e) => h('li', null, e))) : null))))) : null]);
    if (ok) {
      checked = v;
      result.append(h('button', { class: 'primary', id: 'import-create', onclick: () => create() }, `Create ${v.nodes.length} node(s)`));
    }
  }

  async function create() {
    const v = checked;
    if (!v) return;
    checked = null;
    result.querySelector('#import-create')?.remove();
    const bar = h('progress', { max: v.nodes.length, value: 0, 'aria-label': 'Import progress' });
    const log = h('ul', { class: 'import-log' });
    result.append(bar, log);
    let done = 0;
    let failed = 0;
    for (const n of v.nodes) {
      const label = n.name || `node #${n.index + 1}`;
      try {
        const created = await api('POST', '/v1/nodes', n.body);
        for (const p of n.ports) await api('POST', '/v1/ports', { ...p, node_uuid: created.uuid });
        if (manage.checked) await api('PUT', `/v1/nodes/${created.uuid}/states/provision`, { target: 'manage' });
        log.append(h('li', { class: 'ok' }, `${label}: created (${created.uuid})`));
        fleet.upsert({ uuid: created.uuid, name: created.name, provision_state: created.provision_state, power_state: created.power_state, maintenance: created.maintenance, driver: created.driver, conductor: created.conductor, last_error: created.last_error, reservation: created.reservation });
      } catch (e) {
        failed++;
        log.append(h('li', { class: 'form-error' }, `${label}: ${e.message}`));
      }
      bar.value = ++done;
    }
    fleet.refreshSoon();
    result.append(h('p', { role: 'status', id: 'import-done' }, `Done: ${done - failed} created, ${failed} failed. `, h('a', { href: '#/' }, 'Show the nodes')));
  }
}
