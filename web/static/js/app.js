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
window.addEventListener('hashchange', () => {
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

// A caller the policy refuses every change (a reader) is offered none:
// elements of class "write" are hidden (style.css).
async function loadMe() {
  try {
    const res = await fetch('/ui/api/me', { headers: { Accept: 'application/json' } });
    if (res.ok) document.body.classList.toggle('readonly', (await res.json()).read_only === true);
  } catch (e) { /* the API calls report it */ }
}

try {
  performance.mark('castiron:modules');
  await loadMe();
  await loadMachine();
  performance.mark('castiron:machine');
  route();
  performance.mark('castiron:routed');
} catch (e) {
  clear(main).append(h('h1', null, 'castiron'), h('p', { class: 'form-error', role: 'alert' }, e.message));
}
