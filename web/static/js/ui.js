// Small DOM helpers shared by the views. Text always goes in as text nodes,
// never as HTML, so node names and error messages cannot inject markup.

export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'value') el.value = v;
      else if (k === 'checked') el.checked = !!v;
      else if (k === 'dataset') Object.assign(el.dataset, v);
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

// append adds children to el, skipping null/false (Element.append would
// write "null").
export function append(el, children) {
  for (const c of children) {
    if (c === undefined || c === null || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

export function clear(el) {
  while (el.firstChild) el.firstChild.remove();
  return el;
}

// The state machine (from /ui/api/states, generated from engine.Machine).
export const machine = { states: {}, actions: {}, transitions: [] };

export async function loadMachine() {
  const res = await fetch('/ui/api/states', { credentials: 'same-origin' });
  if (!res.ok) throw new Error('cannot load the state table: ' + res.status);
  Object.assign(machine, await res.json());
}

// stateKind classifies a provision state for colour: stable, transitional
// or failed ("error" is stable in the machine but is a failure to a human).
export function stateKind(state) {
  const info = machine.states[state];
  if (!info) return 'unknown';
  if (info.failure || state === 'error') return 'failed';
  if (info.stable) return 'stable';
  return 'trans';
}

export function stateBadge(state, target) {
  const kind = stateKind(state);
  return h('span', { class: `badge st-${kind}`, title: kind === 'trans' ? 'in progress' : kind },
    h('span', { class: 'dot', 'aria-hidden': 'true' }),
    state || 'none',
    target ? h('span', { class: 'target' }, ' → ' + target) : null);
}

export function powerBadge(p) {
  const cls = p === 'power on' ? 'pw-on' : p === 'power off' ? 'pw-off' : 'pw-unknown';
  return h('span', { class: `power ${cls}` }, p || 'unknown');
}

export function fmtBytes(n) {
  if (n === null || n === undefined || n === '') return '—';
  n = Number(n);
  if (!isFinite(n)) return '—';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${n >= 100 || i === 0 ? Math.round(n) : n.toFixed(1)} ${units[i]}`;
}

export function fmtTime(s) {
  if (!s) return '—';
  const d = new Date(s);
  if (isNaN(d)) return s;
  return d.toLocaleString();
}

export function ago(s) {
  if (!s) return '';
  const sec = Math.round((Date.now() - new Date(s).getTime()) / 1000);
  if (sec < 5) return 'just now';
  if (sec < 90) return `${sec} s ago`;
  if (sec < 5400) return `${Math.round(sec / 60)} min ago`;
  if (sec < 129600) return `${Math.round(sec / 3600)} h ago`;
  return `${Math.round(sec / 86400)} d ago`;
}

export function toast(msg, kind = 'info') {
  const box = document.getElementById('toasts');
  const t = h('div', { class: `toast toast-${kind}`, role: kind === 'error' ? 'alert' : 'status' },
    h('span', null, msg),
    h('button', { class: 'close', 'aria-label': 'Dismiss', onclick: () => t.remove() }, '×'));
  box.append(t);
  setTimeout(() => t.remove(), kind === 'error' ? 12000 : 4000);
}

// openDialog shows a modal built by build(close) and resolves with what the
// dialog's form returns (or null when cancelled). Escape cancels; focus goes
// back where it was.
export function openDialog(title, build) {
  const dlg = document.getElementById('dialog');
  const before = document.activeElement;
  return new Promise((resolve) => {
    let done = false;
    const finish = (v) => {
      if (done) return;
      done = true;
      dlg.close();
      clear(dlg);
      if (before && before.focus) before.focus();
      resolve(v);
    };
    clear(dlg);
    dlg.setAttribute('aria-labelledby', 'dlg-title');
    dlg.append(h('h2', { id: 'dlg-title' }, title), build(finish));
    dlg.onclose = () => finish(null);
    dlg.showModal();
    const first = dlg.querySelector('input:not([type=hidden]),textarea,select,button.primary');
    if (first) first.focus();
  });
}

// confirmDialog asks a yes/no question; danger colours the button red.
export function confirmDialog(title, message, okLabel, danger) {
  return openDialog(title, (finish) => h('form', {
    method: 'dialog', onsubmit: (e) => { e.preventDefault(); finish(true); },
  },
  h('p', null, message),
  h('div', { class: 'buttons' },
    h('button', { type: 'button', onclick: () => finish(null) }, 'Cancel'),
    h('button', { type: 'submit', class: danger ? 'primary danger' : 'primary' }, okLabel))));
}

// formDialog shows labelled fields and resolves with their values.
export function formDialog(title, intro, fields, okLabel, danger) {
  return openDialog(title, (finish) => {
    const inputs = {};
    const err = h('p', { class: 'form-error', role: 'alert' });
    const form = h('form', {
      method: 'dialog', onsubmit: (e) => {
        e.preventDefault();
        const out = {};
        for (const f of fields) {
          out[f.name] = inputs[f.name].value.trim();
          if (f.required && !out[f.name]) { err.textContent = `${f.label} is required.`; inputs[f.name].focus(); return; }
          if (f.validate) {
            const m = f.validate(out[f.name]);
            if (m) { err.textContent = m; inputs[f.name].focus(); return; }
          }
        }
        finish(out);
      },
    }, intro ? h('p', null, intro) : null);
    for (const f of fields) {
      const id = 'f-' + f.name;
      const input = f.multiline
        ? h('textarea', { id, name: f.name, rows: 6, spellcheck: 'false' })
        : h('input', { id, name: f.name, type: f.type || 'text', autocomplete: 'off', placeholder: f.placeholder || '' });
      input.value = f.value || '';
      if (f.required) input.required = true;
      inputs[f.name] = input;
      append(form, [h('label', { for: id }, f.label), input, f.help ? h('small', { class: 'help' }, f.help) : null]);
    }
    form.append(err, h('div', { class: 'buttons' },
      h('button', { type: 'button', onclick: () => finish(null) }, 'Cancel'),
      h('button', { type: 'submit', class: danger ? 'primary danger' : 'primary' }, okLabel)));
    return form;
  });
}
