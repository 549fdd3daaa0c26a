// castiron's operator UI: a hash-routed single page over the /v1 API.
//   #/              the fleet (filters live in the query: #/?state=active&q=rack1)
//   #/node/<uuid>   one node
//   #/conductors    the conductors
//   #/import        instackenv.json import
import { loadMachine, h, clear, ago } from './ui.js';
import { fleet } from './store.js';
import { fleetView } from './fleet.js';
import { nodeView } from './node.js';
import { conductorsView } from './conductors.js';
import { importView } from './import.js';
import { auth, setToken, withToken, keystoneRefused, me, may } from './api.js';

const main = document.getElementById('main');
let teardown = null;

function route() {
  if (teardown) { teardown(); teardown = null; }
  const hash = location.hash.replace(/^#/, '') || '/';
  const [path, query] = hash.split('?');
  const params = new URLSearchParams(query || '');
  let nav = 'fleet';
  let m;
  if ((m = path.match(/^\/node\/([^/]+)$/))) {
    teardown = nodeView(main, decodeURIComponent(m[1]), params);
    document.title = 'Node · castiron';
  } else if (path === '/conductors') {
    nav = 'conductors';
    teardown = conductorsView(main);
    document.title = 'Conductors · castiron';
  } else if (path === '/import') {
    nav = 'import';
    teardown = importView(main) || null;
    document.title = 'Import · castiron';
  } else {
    teardown = fleetView(main, params);
    document.title = 'Nodes · castiron';
  }
  for (const a of document.querySelectorAll('[data-nav]')) {
    if (a.dataset.nav === nav) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
}

// The live indicator says when the fleet was last synchronised.
const live = document.getElementById('live');
function showLive() {
  clear(live);
  if (fleet.error) live.append(h('span', { class: 'live-bad' }, '● offline: ' + fleet.error.message));
  else if (fleet.lastSync) live.append(h('span', { class: 'live-ok' }, '● live'), ` · synced ${ago(new Date(fleet.lastSync).toISOString())}`);
}
fleet.addEventListener('status', showLive);
setInterval(showLive, 5000);

let lastHash = location.hash;
let loggedIn = false; // under Keystone, nothing routes before a token works
window.addEventListener('hashchange', () => {
  if (!loggedIn) return;
  // The fleet view rewrites its own query with replaceState; only a change
  // of page re-routes (and moves focus to the new page, for screen readers).
  const page = (s) => (s.replace(/^#/, '') || '/').split('?')[0];
  const changed = page(lastHash) !== page(location.hash) || page(location.hash) === '/';
  lastHash = location.hash;
  if (changed) {
    for (const t of document.querySelectorAll('#toasts .toast:not(.toast-error)')) t.remove();
    route();
    main.focus({ preventScroll: true });
  }
});

// loadMe learns who the page serves. A caller the policy refuses every
// change (a reader) is offered none: elements of class "write" are hidden
// (style.css); the others only the actions policy lets them do (may).
// Under Keystone without a valid token it answers false: log in first.
async function loadMe() {
  let res;
  try {
    res = await fetch('/ui/api/me', { headers: withToken({ Accept: 'application/json' }) });
  } catch (e) { return true; /* the API calls report it */ }
  if (keystoneRefused(res)) return false;
  if (!res.ok) return true;
  Object.assign(me, await res.json());
  document.body.classList.toggle('readonly', me.read_only === true);
  const importNav = document.querySelector('[data-nav=import]');
  if (importNav) importNav.hidden = !may('create');
  const who = document.getElementById('who');
  if (who && me.auth !== 'noauth') {
    clear(who).append(me.user + (me.project ? ` (${me.project})` : me.scope === 'system' ? ' (system)' : ''));
    if (auth.token) {
      who.append(' ', h('button', { type: 'button', class: 'linklike', id: 'logout', onclick: () => { setToken(''); location.reload(); } }, 'Log out'));
    }
  }
  return true;
}

// loginView asks for a Keystone token: the page cannot exchange a password
// with Keystone itself (castiron is not Keystone's client for browsers), so
// the operator pastes one from `openstack token issue`.
function loginView(refused) {
  const input = h('input', { id: 'token', type: 'password', autocomplete: 'off', required: true, 'aria-describedby': 'token-help' });
  const form = h('form', {
    class: 'login card', 'aria-labelledby': 'login-h',
    onsubmit: (e) => { e.preventDefault(); setToken(input.value.trim()); location.reload(); },
  },
  h('h1', { id: 'login-h' }, 'Log in'),
  refused ? h('p', { class: 'form-error', role: 'alert' }, 'That token was refused (expired, revoked or mistyped).') : null,
  h('p', { id: 'token-help' }, 'castiron takes Keystone tokens. Paste one, e.g. from ',
    h('code', null, 'openstack token issue -f value -c id'), '.'),
  h('label', { for: 'token' }, 'Keystone token'), input,
  h('button', { type: 'submit', class: 'button primary' }, 'Log in'));
  clear(main).append(form);
  document.title = 'Log in · castiron';
  input.focus();
}

try {
  performance.mark('castiron:modules');
  if (!(await loadMe())) {
    const refused = !!auth.token;
    setToken('');
    loginView(refused);
    throw null; // nothing else to load until logged in
  }
  loggedIn = true;
  await loadMachine();
  performance.mark('castiron:machine');
  route();
  performance.mark('castiron:routed');
} catch (e) {
  if (e !== null) clear(main).append(h('h1', null, 'castiron'), h('p', { class: 'form-error', role: 'alert' }, e.message));
}
