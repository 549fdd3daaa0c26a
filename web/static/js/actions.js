// The operator verbs the UI offers. Which provision verbs a node gets comes
// from the engine's state table (machine.actions, served by /ui/api/states);
// nothing here repeats the table.
import * as api from './api.js';
import { machine, formDialog, confirmDialog } from './ui.js';

const stepsHelp = 'A JSON list of steps, e.g. [{"interface": "deploy", "step": "erase_devices_metadata"}]';

function parseSteps(v) {
  try {
    const s = JSON.parse(v);
    if (!Array.isArray(s) || s.length === 0) return 'Steps must be a non-empty JSON list.';
    for (const st of s) if (!st || typeof st !== 'object' || !st.interface || !st.step) return 'Each step needs "interface" and "step".';
  } catch (e) { return 'Invalid JSON: ' + e.message; }
  return '';
}

// catalog describes every action: label, whether it is destructive (asks for
// confirmation), the fields it needs, and how to run it on one node.
export const catalog = {
  manage: { label: 'Manage', help: 'Verify BMC access; the node becomes manageable.', run: (n) => api.provision(n.uuid, { target: 'manage' }) },
  inspect: { label: 'Inspect', help: 'Boot the node to collect its hardware inventory.', run: (n) => api.provision(n.uuid, { target: 'inspect' }) },
  provide: { label: 'Provide', help: 'Clean the node and make it available for deployment.', run: (n) => api.provision(n.uuid, { target: 'provide' }) },
  clean: {
    label: 'Clean…', danger: true, help: 'Run manual cleaning steps (may erase disks).',
    fields: [{ name: 'steps', label: 'Clean steps', multiline: true, required: true, help: stepsHelp, value: '[{"interface": "deploy", "step": "erase_devices_metadata"}]', validate: parseSteps }],
    run: (n, p) => api.provision(n.uuid, { target: 'clean', clean_steps: JSON.parse(p.steps) }),
  },
  deploy: {
    label: 'Deploy…', help: 'Write an image to the node and boot it.',
    fields: [
      { name: 'image', label: 'Image URL', type: 'url', required: true, placeholder: 'http://images.example/os.qcow2', validate: (v) => /^(https?|file):\/\//.test(v) ? '' : 'The image URL must start with http://, https:// or file://' },
      { name: 'checksum', label: 'Image checksum', placeholder: 'md5/sha256/sha512 hex digest, or a URL to one', help: 'Optional for file:// images.' },
    ],
    run: async (n, p) => {
      const ops = [{ op: 'add', path: '/instance_info/image_source', value: p.image }];
      if (p.checksum) ops.push({ op: 'add', path: '/instance_info/image_checksum', value: p.checksum });
      await api.patchNode(n.uuid, ops);
      return api.provision(n.uuid, { target: 'deploy' });
    },
  },
  rebuild: { label: 'Rebuild', danger: true, help: 'Redeploy the current image; the disk is overwritten.', run: (n) => api.provision(n.uuid, { target: 'rebuild' }) },
  undeploy: { label: 'Undeploy', danger: true, help: 'Tear down the instance and clean the node.', run: (n) => api.provision(n.uuid, { target: 'undeploy' }) },
  abort: { label: 'Abort', danger: true, help: 'Stop the running operation; the node goes to a failed state.', run: (n) => api.provision(n.uuid, { target: 'abort' }) },
  unhold: { label: 'Unhold', help: 'Continue the held steps.', run: (n) => api.provision(n.uuid, { target: 'unhold' }) },
  adopt: { label: 'Adopt', help: 'Take over a node that already runs an instance.', run: (n) => api.provision(n.uuid, { target: 'adopt' }) },
  rescue: {
    label: 'Rescue…', help: 'Boot the rescue ramdisk.',
    fields: [{ name: 'password', label: 'Rescue password', type: 'password', required: true }],
    run: (n, p) => api.provision(n.uuid, { target: 'rescue', rescue_password: p.password }),
  },
  unrescue: { label: 'Unrescue', run: (n) => api.provision(n.uuid, { target: 'unrescue' }) },
  service: {
    label: 'Service…', danger: true, help: 'Run service steps on the active node.',
    fields: [{ name: 'steps', label: 'Service steps', multiline: true, required: true, help: stepsHelp, validate: parseSteps }],
    run: (n, p) => api.provision(n.uuid, { target: 'service', service_steps: JSON.parse(p.steps) }),
  },
  'power on': { label: 'Power on', run: (n) => api.power(n.uuid, 'power on') },
  'power off': { label: 'Power off', danger: true, help: 'Hard power off.', run: (n) => api.power(n.uuid, 'power off') },
  reboot: { label: 'Reboot', danger: true, help: 'Hard reset.', run: (n) => api.power(n.uuid, 'rebooting') },
  'maintenance on': {
    label: 'Maintenance on…', help: 'Stop the conductor acting on the node.',
    fields: [{ name: 'reason', label: 'Reason', placeholder: 'optional' }],
    run: (n, p) => api.maintenanceOn(n.uuid, p.reason),
  },
  'maintenance off': { label: 'Maintenance off', run: (n) => api.maintenanceOff(n.uuid) },
  delete: { label: 'Delete', danger: true, help: 'Remove the node and its ports from castiron.', run: (n) => api.deleteNode(n.uuid) },
};

export const provisionVerbs = () => {
  const seen = new Set();
  for (const acts of Object.values(machine.actions)) for (const a of acts) seen.add(a);
  return Object.keys(catalog).filter((k) => seen.has(k));
};

export const otherVerbs = ['power on', 'power off', 'reboot', 'maintenance on', 'maintenance off', 'delete'];

// policyKind is the kind of change an action is, as /ui/api/me's "can"
// names it (the rule Ironic checks).
export function policyKind(action) {
  if (['power on', 'power off', 'reboot'].includes(action)) return 'power';
  if (['maintenance on', 'maintenance off', 'delete'].includes(action)) return action;
  return 'provision';
}

// validFor lists the actions valid for node n in the order they are shown:
// those the state allows and policy lets the caller do (a button that
// would be refused is not offered).
export function validFor(n) {
  const out = [...(machine.actions[n.provision_state] || [])].filter((a) => catalog[a]);
  if (n.power_state !== 'power on') out.push('power on');
  if (n.power_state !== 'power off') out.push('power off');
  if (n.power_state === 'power on') out.push('reboot');
  out.push(n.maintenance ? 'maintenance off' : 'maintenance on');
  const st = machine.states[n.provision_state];
  if ((st && st.deletable) || n.maintenance) out.push('delete');
  return out.filter((a) => api.may(policyKind(a), n));
}

export const isValid = (action, n) => validFor(n).includes(action);

// perform asks for the action's parameters (and confirmation when it is
// destructive), then runs it on every node with bounded concurrency. It
// resolves to null when cancelled, else to [{node, error}] per node.
export async function perform(action, nodes) {
  const a = catalog[action];
  const what = nodes.length === 1 ? (nodes[0].name || nodes[0].uuid) : `${nodes.length} nodes`;
  let params = {};
  if (a.fields) {
    params = await formDialog(`${a.label.replace('…', '')}: ${what}`, a.help, a.fields, a.label.replace('…', ''), a.danger);
    if (!params) return null;
  } else if (a.danger) {
    const ok = await confirmDialog(`${a.label} ${what}?`, a.help || '', a.label, true);
    if (!ok) return null;
  }
  const results = [];
  let next = 0;
  const worker = async () => {
    while (next < nodes.length) {
      const n = nodes[next++];
      try {
        await a.run(n, params);
        results.push({ node: n, error: null });
      } catch (e) {
        results.push({ node: n, error: e });
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(8, nodes.length) }, worker));
  return results;
}
