// The node page's Console tab: the node's serial console in a terminal
// (xterm.js, built into castiron by `make web-vendor`, never from a CDN)
// over the WebSocket GET /v1/nodes/{id}/states/console/stream. The
// server's first message says whether this caller may type; then come the
// scrollback and the live output as binary messages. Keystrokes go back
// as binary messages of at most FRAME bytes; a read-only viewer sends
// nothing.
import { api, APIError, auth } from './api.js';
import { h, clear, toast } from './ui.js';

// A paste is cut at PASTE_MAX bytes: a serial line at 115200 baud takes
// about 6 s for 64 KiB, so more is a mistake, not typing.
const PASTE_MAX = 64 * 1024;
// Bytes per message; the server refuses messages over 4 KiB.
const FRAME = 1024;
// Input still waiting to leave the browser beyond this is dropped rather
// than queued without bound.
const BUFFERED_MAX = 256 * 1024;

let featuresP = null;
function features() {
  featuresP ??= fetch('/ui/api/features', { credentials: 'same-origin', cache: 'no-store' })
    .then((r) => (r.ok ? r.json() : { terminal: false })).catch(() => ({ terminal: false }));
  return featuresP;
}

let xtermP = null;
function loadXterm() {
  if (!xtermP) {
    if (!document.querySelector('link[data-xterm]')) {
      document.head.append(h('link', { rel: 'stylesheet', href: '/ui/vendor/xterm.css', 'data-xterm': '' }));
    }
    xtermP = Promise.all([import('/ui/vendor/xterm.mjs'), import('/ui/vendor/addon-fit.mjs')])
      .then(([x, f]) => ({ Terminal: x.Terminal, FitAddon: f.FitAddon }));
  }
  return xtermP;
}

// consoleTab draws into panel; update(node) is called with the node at each
// refresh while the tab is shown (the console follows console_enabled),
// stop() when the tab is left or the page closes.
export function consoleTab(panel, uuid) {
  let ws = null;
  let term = null;
  let fit = null;
  let resize = null;
  let node = null;
  let want = false; // the tab is shown
  let ended = null; // why the last session ended, until Reconnect
  let starting = false;
  const status = h('p', { class: 'console-status', role: 'status', 'aria-live': 'polite' });
  const screen = h('div', { class: 'console-screen', 'aria-label': 'Serial console' });
  const bar = h('div', { class: 'console-bar' }, status);

  function setState(state, text, ...extra) {
    panel.dataset.state = state;
    clear(status).append(text, ...extra);
  }

  function show(kind, ...msg) {
    teardown();
    panel.dataset.state = kind;
    clear(panel).append(h('div', { class: 'console-msg' }, ...msg));
  }

  async function update(n) {
    node = n;
    want = true;
    if (ws || starting) {
      return;
    }
    if (!(await features()).terminal) {
      show('unbuilt', h('p', null, h('strong', null, 'The console terminal is not built into this castiron.')),
        h('p', null, 'Its web assets (xterm.js, fetched with npm at build time) are missing: build castiron with ',
          h('code', null, 'make build'), ' (it runs ', h('code', null, 'make web-vendor'), '). ',
          'The console stays reachable with ', h('code', null, 'openstack baremetal node console show'), '.'));
      return;
    }
    if (!n.console_enabled) {
      ended = null;
      show('disabled', h('p', null, 'The serial console of this node is disabled.'),
        h('p', { class: 'write' }, h('button', { type: 'button', class: 'primary', onclick: enable }, 'Enable console')));
      return;
    }
    if (ended) return; // shown with its Reconnect button
    start();
  }

  async function enable(ev) {
    ev.target.disabled = true;
    try {
      await api('PUT', `/v1/nodes/${uuid}/states/console`, { enabled: true });
      toast('Console: enabling…', 'ok');
    } catch (e) {
      toast(`Enable console failed: ${e.message}`, 'error');
      ev.target.disabled = false;
    }
  }

  async function start() {
    starting = true;
    let X;
    try {
      X = await loadXterm();
    } catch (e) {
      starting = false;
      show('error', h('p', { class: 'form-error' }, 'The console terminal could not be loaded: ' + e.message));
      return;
    }
    starting = false;
    if (!want) return;
    teardown();
    clear(panel).append(bar, screen);
    term = new X.Terminal({ cursorBlink: true, scrollback: 5000, disableStdin: true, fontSize: 14,
      fontFamily: 'ui-monospace, "DejaVu Sans Mono", Menlo, Consolas, monospace', convertEol: false });
    fit = new X.FitAddon();
    term.loadAddon(fit);
    term.open(screen);
    term.onData(send);
    fit.fit();
    resize = new ResizeObserver(() => { try { fit.fit(); } catch { /* hidden */ } });
    resize.observe(screen);
    connect();
  }

  function connect() {
    const proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    // A browser's WebSocket cannot send X-Auth-Token: under Keystone the
    // token goes as a second subprotocol, which castiron reads and never
    // echoes (it selects "castiron.console").
    const protocols = ['castiron.console'];
    if (auth.token) protocols.push('x-auth-token.' + auth.token);
    const sock = new WebSocket(`${proto}//${location.host}/v1/nodes/${uuid}/states/console/stream`, protocols);
    sock.binaryType = 'arraybuffer';
    ws = sock;
    let hello = null;
    setState('connecting', 'Connecting to the console…');
    sock.onmessage = (ev) => {
      if (typeof ev.data === 'string') {
        hello = JSON.parse(ev.data);
        panel.dataset.write = String(hello.write);
        term.options.disableStdin = !hello.write;
        if (hello.write) {
          setState('connected', 'Connected: what you type goes to the machine\u2019s serial console.');
          term.focus();
        } else {
          setState('connected', h('strong', null, 'Read-only: '), 'you may watch this console but not type into it ',
            '(typing needs the right to change the node).');
        }
        return;
      }
      term.write(new Uint8Array(ev.data));
    };
    sock.onclose = async (ev) => {
      if (ws !== sock) return;
      ws = null;
      let why = ev.reason || (ev.code === 1006 ? '' : `code ${ev.code}`);
      if (!hello) {
        // The handshake was refused: the plain GET says why (404, 400…).
        try {
          await api('GET', `/v1/nodes/${uuid}/states/console/stream`);
        } catch (e) {
          if (!(e instanceof APIError && /WebSocket upgrade/.test(e.message))) why = e.message;
        }
      }
      ended = why || 'the connection was lost';
      if (!want) return;
      setState('closed', `Console closed: ${ended}. `,
        h('button', { type: 'button', onclick: reconnect }, 'Reconnect'));
    };
  }

  function reconnect() {
    ended = null;
    if (node && !node.console_enabled) { update(node); return; }
    if (term) connect(); else start();
  }

  let lastNotice = 0;
  function notice(msg) {
    const now = Date.now();
    if (now - lastNotice > 3000) toast(msg, 'error');
    lastNotice = now;
  }

  // Keystrokes and pastes: cut to PASTE_MAX, sent in FRAME-byte messages.
  function send(data) {
    if (!ws || ws.readyState !== WebSocket.OPEN || panel.dataset.write !== 'true') return;
    let bytes = new TextEncoder().encode(data);
    if (bytes.length > PASTE_MAX) {
      bytes = bytes.subarray(0, PASTE_MAX);
      notice(`Paste cut to ${PASTE_MAX / 1024} KiB: a serial console is slow, paste less at a time.`);
    }
    if (ws.bufferedAmount + bytes.length > BUFFERED_MAX) {
      notice('The console is not keeping up: input dropped.');
      return;
    }
    for (let i = 0; i < bytes.length; i += FRAME) ws.send(bytes.subarray(i, i + FRAME));
  }

  function closeSocket() {
    if (ws) {
      const s = ws;
      ws = null;
      s.close(1000, 'viewer left');
    }
  }

  function teardown() {
    closeSocket();
    resize?.disconnect();
    resize = null;
    term?.dispose();
    term = null;
  }

  function stop() {
    want = false;
    ended = null;
    teardown();
    clear(panel);
    delete panel.dataset.state;
    delete panel.dataset.write;
  }

  return { update, stop };
}
