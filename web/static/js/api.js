// The /v1 REST client the UI uses: every call sends the microversion header
// and turns Ironic's error body into an Error carrying Ironic's message.

export const API_VERSION = 'latest';

export class APIError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// errorMessage digs the human message out of Ironic's (double-encoded)
// error body, or the {code,title,description} form of 404/405/406.
export function errorMessage(text) {
  try {
    const j = JSON.parse(text);
    if (j.error_message !== undefined) {
      const em = j.error_message;
      if (typeof em === 'string') {
        try {
          const inner = JSON.parse(em);
          return inner.faultstring || inner.description || em;
        } catch { return em; }
      }
      if (em && typeof em === 'object') return em.faultstring || em.description || em.title || JSON.stringify(em);
    }
    if (j.description) return j.description;
    if (j.title) return j.title;
  } catch { /* not JSON */ }
  return text;
}

// bytesReceived counts response bytes, for the live indicator and tests.
export const stats = { requests: 0, bytes: 0 };

// Under --auth-strategy keystone the page holds the caller's Keystone token
// (pasted at login; kept for this browser tab only, in sessionStorage) and
// sends it as X-Auth-Token on every call. Under http_basic the browser
// sends its Basic credentials itself; there is no token.
const TOKEN_KEY = 'castiron-token';
export const auth = { token: sessionStorage.getItem(TOKEN_KEY) || '' };

export function setToken(t) {
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
  auth.token = t || '';
}

export function withToken(headers) {
  if (auth.token) headers['X-Auth-Token'] = auth.token;
  return headers;
}

// keystoneRefused: a 401 asking for a Keystone token (no token, or one
// that expired or was revoked).
export const keystoneRefused = (res) => res.status === 401 && (res.headers.get('WWW-Authenticate') || '').startsWith('Keystone');

// me is who the page serves (/ui/api/me): the strategy, user, scope and
// project, and which node actions policy lets it do (can; absent: all).
export const me = { auth: 'noauth', can: null, project: '' };

// relation is how the caller's project relates to node n: "owner",
// "lessee" or "other" (a system caller's view of any node); null when the
// view does not carry owner and lessee (a fleet row).
function relation(n) {
  if (me.scope === 'system' || !me.project) return 'other';
  if (n.owner === undefined && n.lessee === undefined) return null;
  if (n.owner === me.project) return 'owner';
  if (n.lessee === me.project) return 'lessee';
  return 'other';
}

// may reports whether policy lets the caller do kind ("provision", "power",
// "maintenance on", "maintenance off", "delete", "create") on node n.
export function may(kind, n) {
  if (!me.can) return true;
  const ok = me.can[kind] || [];
  const rel = n ? relation(n) : 'other';
  return rel === null ? ok.length > 0 : ok.includes(rel);
}

export async function api(method, path, body) {
  const headers = withToken({ 'X-OpenStack-Ironic-API-Version': API_VERSION, 'Accept': 'application/json' });
  const opts = { method, headers, credentials: 'same-origin', cache: 'no-store' };
  if (body !== undefined) {
    headers['Content-Type'] = 'application/json';
    opts.body = JSON.stringify(body);
  }
  let res;
  try {
    res = await fetch(path, opts);
  } catch (e) {
    throw new APIError(0, 'castiron is unreachable: ' + e.message);
  }
  if (auth.token && keystoneRefused(res)) {
    // The token expired or was revoked: back to the login form.
    setToken('');
    location.reload();
  }
  const text = await res.text();
  stats.requests++;
  stats.bytes += text.length;
  if (!res.ok) throw new APIError(res.status, errorMessage(text) || `${res.status} ${res.statusText}`);
  if (!text) return null;
  return JSON.parse(text);
}

// listAll walks a collection page by page (limit/marker), calling onPage with
// each page's items; it returns every item. The first page may be smaller.
export async function listAll(path, key, onPage, limit = 1000, firstLimit = limit) {
  const all = [];
  let marker = '';
  const sep = path.includes('?') ? '&' : '?';
  for (let first = true; ; first = false) {
    const want = first ? firstLimit : limit;
    const url = `${path}${sep}limit=${want}${marker ? '&marker=' + encodeURIComponent(marker) : ''}`;
    const page = await api('GET', url);
    const items = page[key] || [];
    all.push(...items);
    if (onPage) onPage(items, all);
    if (items.length < want || !page.next) return all;
    marker = items[items.length - 1].uuid;
  }
}

export const provision = (uuid, body) => api('PUT', `/v1/nodes/${uuid}/states/provision`, body);
export const power = (uuid, target) => api('PUT', `/v1/nodes/${uuid}/states/power`, { target });
export const maintenanceOn = (uuid, reason) => api('PUT', `/v1/nodes/${uuid}/maintenance`, reason ? { reason } : {});
export const maintenanceOff = (uuid) => api('DELETE', `/v1/nodes/${uuid}/maintenance`);
export const deleteNode = (uuid) => api('DELETE', `/v1/nodes/${uuid}`);
export const patchNode = (uuid, ops) => api('PATCH', `/v1/nodes/${uuid}`, ops);
