// agentrewind timeline: a read-only view over the server's JSON endpoints. Every recorded string is
// put in the page as text (textContent), never as markup: agent output is untrusted.
'use strict';

(function () {
  const ROW = 26;          // px, the height of a timeline row (matches --row in app.css)
  const PAGE = 200;        // rows fetched at once
  const OVERSCAN = 12;     // rows rendered beyond the visible ones
  // Redaction tokens (redact.TokenPrefix and 32 hex, or 12 in older recordings) are shown as such,
  // marked; the vault is never asked.
  const REDACTED = /arw:redacted:[0-9a-f]{12}(?:[0-9a-f]{20})?/g;

  const main = document.getElementById('main');
  const crumbs = document.getElementById('crumbs');
  const status = document.getElementById('status');

  // el builds an element; children are nodes or strings (strings become text nodes, never markup).
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      // Styles through the CSSOM: the policy (style-src 'self') refuses style attributes.
      else if (k === 'style') Object.assign(e.style, v);
      else if (k === 'on') for (const [ev, fn] of Object.entries(v)) e.addEventListener(ev, fn);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.appendChild(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return e;
  }

  // text renders a recorded string with its redaction tokens marked.
  function text(s) {
    const frag = document.createDocumentFragment();
    s = s == null ? '' : String(s);
    let last = 0;
    for (const m of s.matchAll(REDACTED)) {
      if (m.index > last) frag.appendChild(document.createTextNode(s.slice(last, m.index)));
      frag.appendChild(el('span', { class: 'redacted', title: 'a redacted secret: the UI never opens the vault' }, m[0]));
      last = m.index + m[0].length;
    }
    if (last < s.length) frag.appendChild(document.createTextNode(s.slice(last)));
    return frag;
  }

  const pre = (s) => el('pre', {}, text(s));
  const enc = encodeURIComponent;

  async function getJSON(url) {
    const res = await fetch(url, { headers: { Accept: 'application/json' } });
    const body = await res.json().catch(() => ({ error: res.statusText }));
    if (!res.ok) throw new Error(body.error || res.statusText);
    return body;
  }

  function fail(err) {
    main.replaceChildren(el('p', { class: 'error', id: 'error' }, String(err.message || err)));
  }

  function verdictBadge(v, reason) {
    if (!v) return el('span', { class: 'badge' }, '—');
    return el('span', { class: 'badge v-' + v, title: reason || '' }, v);
  }

  const usd = (micro) => micro == null ? '' : '$' + (micro / 1e6).toFixed(micro < 10000 ? 6 : 4);
  // cost shows a priced cost, or "unknown" with why (a model the price table lacks): a missing price
  // is never shown as $0.
  const cost = (micro, unknown) => unknown ? el('span', { class: 'unknown', title: unknown }, 'unknown') : usd(micro);
  const tokens = (r) => (r.inputTokens || r.outputTokens) ? (r.inputTokens || 0) + '→' + (r.outputTokens || 0) : '';
  const laneColor = (lane) => { let h = 0; for (const c of String(lane)) h = (h * 31 + c.charCodeAt(0)) % 360; return 'hsl(' + h + ',45%,45%)'; };

  // ---- routing ----
  // #/                              the session list
  // #/s/<id>[/step/<n>[/diff/<a>]]  a session's timeline, a step's context, a diff between two steps
  // #/s/<id>/fork|plan|checkpoints  the fork beside its parent, the resume plan, the checkpoints
  let view = null; // the current session view, kept while only the selected step changes

  function route() {
    const parts = location.hash.replace(/^#\/?/, '').split('/').filter((p) => p !== '');
    if (parts[0] !== 's' || parts.length < 2) { view = null; return showList().catch(fail); }
    // A link edited by hand may hold an escape that does not decode: say so, never fail silently.
    let id;
    try { id = decodeURIComponent(parts[1]); } catch (e) {
      view = null;
      return fail(new Error('cannot read the session name in the link ' + location.hash + ': ' + e.message));
    }
    const tab = parts[2] || 'timeline';
    if (tab === 'step') {
      const step = Number(parts[3]);
      const diffFrom = parts[4] === 'diff' ? Number(parts[5]) : null;
      return showSession(id, 'timeline', { step, diffFrom }).catch(fail);
    }
    return showSession(id, tab, {}).catch(fail);
  }
  window.addEventListener('hashchange', route);
  window.addEventListener('DOMContentLoaded', route);

  // ---- the session list ----
  async function showList() {
    crumbs.replaceChildren();
    status.textContent = 'loading sessions…';
    const list = await getJSON('/api/sessions');
    status.textContent = list.length + ' session(s)';
    const rows = list.map((s) => el('tr', { 'data-session': s.id },
      el('td', {}, el('a', { href: '#/s/' + enc(s.id), class: 'session-link' }, s.id)),
      el('td', {}, s.parent ? el('a', { href: '#/s/' + enc(s.parent) }, s.parent) : ''),
      el('td', {}, s.forkedAtStep != null ? String(s.forkedAtStep) : ''),
      el('td', {}, String(s.events || '')),
      el('td', {}, s.createdAt ? new Date(s.createdAt).toISOString().replace('T', ' ').slice(0, 19) : ''),
      el('td', { class: 'verdict' }, verdictBadge(s.verdict, s.verdictReason), s.verdictReason ? ' ' + s.verdictReason : ''),
      el('td', {}, s.object || '', s.phase ? ' · ' + s.phase : '', s.forkRun ? el('div', {}, s.forkRun) : null),
      el('td', { class: 'error' }, s.problem || '')));
    main.replaceChildren(el('h1', {}, 'Sessions'),
      el('table', { id: 'sessions' },
        el('thead', {}, el('tr', {}, ['Session', 'Parent', 'Forked at', 'Events', 'Created', 'Verdict', 'Cluster', 'Problem'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows)));
  }

  // ---- a session ----
  async function showSession(id, tab, opts) {
    if (!view || view.id !== id || view.tab !== tab) {
      status.textContent = 'loading ' + id + '…';
      const sum = await getJSON('/api/sessions/' + enc(id));
      view = { id, tab, sum };
      renderFrame(view);
      // The verdict fills in when the engine has judged the run; the timeline does not wait for it.
      const v = view;
      getJSON('/api/sessions/' + enc(id) + '/plan')
        .then((p) => v.verdictBox.replaceChildren(verdictBadge(p.verdict, p.reason), ' ' + (p.reason || '')))
        .catch((e) => v.verdictBox.replaceChildren(el('span', { class: 'error' }, 'no verdict: ' + e.message)));
      status.textContent = '';
      if (tab === 'timeline') await renderTimeline(view);
      else if (tab === 'fork') await renderFork(view);
      else if (tab === 'plan') await renderPlan(view);
      else if (tab === 'checkpoints') await renderCheckpoints(view);
      else throw new Error('no such view: ' + tab);
    }
    if (tab === 'timeline') {
      if (Number.isInteger(opts.step)) await selectStep(view, opts.step, opts.diffFrom);
      else view.detail.replaceChildren(el('p', {}, 'Click a step to see the context the model was sent there.'));
    }
  }

  function renderFrame(v) {
    const s = v.sum, m = s.meta;
    crumbs.replaceChildren(el('a', { href: '#/' }, 'sessions'), el('span', {}, '›'), el('span', { id: 'crumb-session' }, s.id));
    const base = '#/s/' + enc(s.id);
    const tabs = [['timeline', 'Timeline'], ['plan', 'Resume plan'], ['checkpoints', 'Checkpoints']];
    if (m.parent) tabs.splice(1, 0, ['fork', 'Fork vs parent']);
    const usage = s.usage || {};
    v.body = el('div', { id: 'tab-body' });
    main.replaceChildren(
      el('h1', {}, 'Session ', el('span', { id: 'session-id' }, s.id)),
      el('div', { class: 'summary', id: 'summary' },
        v.verdictBox = el('span', { id: 'summary-verdict' }, 'judging…'),
        el('span', {}, el('b', {}, String(s.events)), ' events'),
        el('span', {}, el('b', {}, String(s.modelCalls)), ' model calls'),
        el('span', {}, el('b', {}, String(s.toolCalls)), ' tool calls'),
        el('span', {}, el('b', {}, String(usage.inputTokens || 0) + '→' + String(usage.outputTokens || 0)), ' tokens'),
        el('span', { id: 'summary-cost' }, el('b', {}, cost(s.cost.microUSD, s.cost.unknown)), ' cost'),
        s.served ? el('span', { id: 'summary-live' }, 'live: ', el('b', {}, String(usage.inputTokens - s.served.inputTokens) + '→' + String(usage.outputTokens - s.served.outputTokens)),
          ' tokens, ', el('b', {}, cost(s.liveCost.microUSD, s.liveCost.unknown)), ' (the rest served from the parent)') : null,
        el('span', {}, el('b', {}, String(s.latencyMs)), ' ms latency'),
        el('span', {}, 'lanes ', el('b', {}, s.lanes.join(', '))),
        s.errors ? el('span', { class: 'error' }, String(s.errors) + ' error(s)') : null,
        s.complete ? null : el('span', { class: 'error' }, 'incomplete: no session_end'),
        m.parent ? el('span', {}, 'fork of ', el('a', { href: '#/s/' + enc(m.parent) }, m.parent), ' at step ', el('b', {}, String(m.forkedAtStep))) : null,
        s.forks.length ? el('span', {}, 'forks: ', s.forks.map((f) => el('a', { href: '#/s/' + enc(f), class: 'fork-link' }, f + ' '))) : null),
      el('nav', { class: 'tabs' }, tabs.map(([t, label]) => el('a', { href: t === 'timeline' ? base : base + '/' + t, class: t === v.tab ? 'on' : '', id: 'tab-' + t }, label))),
      v.body);
  }

  // ---- the timeline: a virtualised list over server-side pages ----
  async function renderTimeline(v) {
    v.pages = new Map();
    v.pending = new Map();
    v.total = v.sum.events;
    v.selected = null;
    const head = el('div', { class: 'thead' }, ['Step', 'Lane', 'Kind', 'Call site', 'What', 'Latency', 'Tokens', 'Cost', ''].map((h) => el('span', {}, h)));
    v.viewport = el('div', { class: 'viewport', id: 'timeline-rows', style: { height: (v.total * ROW) + 'px' } });
    v.list = el('div', { class: 'pane', id: 'timeline' }, head, v.viewport);
    v.detail = el('div', { class: 'pane detail', id: 'detail' });
    v.body.replaceChildren(el('div', { class: 'split' }, v.list, v.detail));
    let queued = false;
    v.list.addEventListener('scroll', () => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => { queued = false; drawRows(v); });
    });
    // A fork's timeline marks where it first parted from its parent (the engine's comparison).
    if (v.sum.meta.parent) {
      const f = await getJSON('/api/sessions/' + enc(v.id) + '/fork?limit=1').catch(() => null);
      if (f && f.divergence) v.divergedAt = f.divergence.step;
      if (f && f.forkPoint) v.forkPointAt = f.forkPoint.step;
    }
    await loadPage(v, 0);
    drawRows(v);
  }

  function loadPage(v, p) {
    if (v.pages.has(p)) return Promise.resolve();
    if (!v.pending.has(p)) {
      v.pending.set(p, getJSON('/api/sessions/' + enc(v.id) + '/events?offset=' + (p * PAGE) + '&limit=' + PAGE)
        .then((page) => { v.pages.set(p, page.rows); v.pending.delete(p); })
        .catch((e) => { v.pending.delete(p); status.textContent = e.message; }));
    }
    return v.pending.get(p);
  }

  function drawRows(v) {
    const top = v.list.scrollTop;
    const first = Math.max(0, Math.floor(top / ROW) - OVERSCAN);
    const last = Math.min(v.total, Math.ceil((top + v.list.clientHeight) / ROW) + OVERSCAN);
    const nodes = [];
    const missing = new Set();
    for (let i = first; i < last; i++) {
      const page = v.pages.get(Math.floor(i / PAGE));
      if (!page) { missing.add(Math.floor(i / PAGE)); continue; }
      const r = page[i % PAGE];
      if (r) nodes.push(rowNode(v, r, i));
    }
    v.viewport.replaceChildren(...nodes);
    for (const p of missing) loadPage(v, p).then(() => { if (view === v) drawRows(v); });
  }

  function rowNode(v, r, i) {
    const cls = ['row'];
    if (r.step === v.selected) cls.push('sel');
    if (r.error) cls.push('err'); else if (r.forged || r.provenance === 'live' || r.provenance === 'stub') cls.push('drift');
    const marks = [];
    if (r.error) marks.push(el('span', { class: 'mark err', title: r.error }, '!'));
    if (r.truncated) marks.push(el('span', { class: 'mark err truncated', title: 'the upstream cut this stream off before its last event; a replay ends it the same way' }, '✂'));
    if (r.forged) marks.push(el('span', { class: 'mark drift', title: r.forged }, '≠'));
    if (r.step === v.divergedAt) { cls.push('drift'); marks.push(el('span', { class: 'mark drift diverged', title: 'drift: the fork asked something else than its parent before its fork point' }, '≠')); }
    if (r.step === v.forkPointAt) { cls.push('forkpoint'); marks.push(el('span', { class: 'mark forkpoint', title: 'the fork point: the fork went live here with its change' }, '⑂')); }
    if (r.provenance) marks.push(el('span', { class: 'mark drift', title: 'provenance: ' + r.provenance }, r.provenance[0].toUpperCase()));
    return el('div', { class: cls.join(' '), style: { top: (i * ROW) + 'px' }, 'data-step': r.step, 'data-kind': r.kind,
      on: { click: () => { location.hash = '#/s/' + enc(v.id) + '/step/' + r.step; } } },
    el('span', { class: 'mono' }, String(r.step)),
    el('span', {}, el('span', { class: 'lane', style: { background: laneColor(r.lane) }, title: 'lane ' + r.lane }, r.lane)),
    el('span', { class: 'k-' + r.kind }, r.kind),
    el('span', { class: 'mono', title: r.callSite }, r.callSite),
    el('span', { title: r.what || '' }, text(r.what || '')),
    el('span', { class: 'mono' }, r.latencyMs ? r.latencyMs + ' ms' : ''),
    el('span', { class: 'mono' }, tokens(r)),
    el('span', { class: 'mono' }, cost(r.costMicroUSD, r.costUnknown)),
    el('span', {}, marks));
  }

  async function selectStep(v, step, diffFrom) {
    const url = '/api/sessions/' + enc(v.id) + '/steps/' + step;
    const sv = await getJSON(url).catch((e) => ({ failed: e }));
    if (sv.failed) { v.detail.replaceChildren(el('p', { class: 'error', id: 'error' }, sv.failed.message)); return; }
    v.selected = step;
    // Bring the row into view when it is off screen (a link, or a step typed in).
    const y = sv.index * ROW;
    if (y < v.list.scrollTop || y > v.list.scrollTop + v.list.clientHeight - 2 * ROW) v.list.scrollTop = Math.max(0, y - 4 * ROW);
    drawRows(v);
    const parts = [el('h2', {}, 'Step ' + sv.step + ' · ', el('span', { class: 'k-' + sv.kind }, sv.kind))];
    parts.push(el('dl', { class: 'kv' },
      kv('lane', sv.lane), kv('seq', String(sv.seq)), kv('call site', sv.callSite), kv('author', sv.author),
      sv.provenance ? kv('provenance', sv.provenance) : null,
      sv.latencyMs ? kv('latency', sv.latencyMs + ' ms') : null,
      (sv.inputTokens || sv.outputTokens) ? kv('tokens', tokens(sv)) : null,
      sv.costUnknown ? kv('cost', 'unknown: ' + sv.costUnknown) : sv.costMicroUSD != null ? kv('cost', usd(sv.costMicroUSD)) : null,
      sv.fingerprint ? kv('fingerprint', sv.fingerprint) : null,
      sv.forged ? kv('drift', sv.forged) : null));
    if (sv.errorDetail) parts.push(el('h3', { class: 'error' }, 'Error'), pre(sv.errorDetail.name + ': ' + sv.errorDetail.message));
    if (sv.kind === 'model_call') {
      parts.push(el('h3', {}, 'Model ', el('span', { class: 'mono' }, sv.model || '')));
      parts.push(el('h3', {}, 'System prompt'), el('div', { id: 'ctx-system' }, pre(sv.system || '(none)')));
      parts.push(el('h3', {}, 'Messages (' + (sv.messages || []).length + ')'), el('div', { id: 'ctx-messages' }, (sv.messages || []).map(messageNode)));
      if (sv.response) parts.push(el('h3', {}, 'Response' + (sv.stopReason ? ' (' + sv.stopReason + ')' : '')), el('div', { id: 'ctx-response' }, pre(sv.response)));
      parts.push(diffForm(v, step, diffFrom));
    } else if (sv.kind === 'tool_call') {
      parts.push(el('h3', {}, 'Tool ', el('span', { class: 'mono' }, sv.what || '')));
      parts.push(el('h3', {}, 'Arguments'), el('div', { id: 'ctx-args' }, pre(sv.args)));
      parts.push(el('h3', {}, 'Result'), el('div', { id: 'ctx-result' }, pre(sv.result)));
    } else if (sv.kind === 'entropy') parts.push(el('h3', {}, 'Value'), pre(sv.value));
    else if (sv.kind === 'note') parts.push(el('h3', {}, 'Note (agent-authored)'), el('div', { id: 'ctx-note' }, pre(sv.text)));
    else if (sv.kind === 'ledger') parts.push(el('h3', {}, 'Ledger record (' + (sv.author || '') + ')'), el('div', { id: 'ctx-ledger' }, pre(sv.ledger)));
    v.detail.replaceChildren(...parts);
    if (Number.isInteger(diffFrom)) await showDiff(v, diffFrom, step);
  }

  const kv = (k, val) => [el('dt', {}, k), el('dd', { class: 'mono' }, text(val || ''))];

  function messageNode(m) {
    return el('div', { class: 'msg' }, el('div', { class: 'role' }, m.role),
      m.parts.map((p) => el('div', { class: 'msg part-' + p.type },
        p.type === 'text' ? null : el('div', { class: 'role' }, p.type === 'tool_use' ? 'tool call ' + (p.name || '') : p.type.replace('_', ' ')),
        pre(p.text))));
  }

  function diffForm(v, step, diffFrom) {
    const input = el('input', { type: 'number', min: '0', id: 'diff-from', value: Number.isInteger(diffFrom) ? String(diffFrom) : '' });
    const form = el('form', { class: 'inline', id: 'diff-form', on: { submit: (e) => {
      e.preventDefault();
      if (input.value !== '') location.hash = '#/s/' + enc(v.id) + '/step/' + step + '/diff/' + Number(input.value);
    } } }, 'Diff the context from model call at step', input, 'to this one', el('button', { type: 'submit', id: 'diff-go' }, 'Diff'));
    return el('div', {}, el('h3', {}, 'Context diff'), form, el('div', { id: 'diff' }));
  }

  async function showDiff(v, from, to) {
    const box = document.getElementById('diff');
    const d = await getJSON('/api/sessions/' + enc(v.id) + '/diff?from=' + from + '&to=' + to).catch((e) => ({ failed: e }));
    if (d.failed) { box.replaceChildren(el('p', { class: 'error' }, d.failed.message)); return; }
    box.replaceChildren(el('div', {},
      el('p', {}, 'From step ' + d.from + ' to step ' + d.to + ': ' + d.removed.length + ' message(s) removed, ' + d.added.length + ' added, tokens ',
        el('b', { id: 'diff-tokens' }, (d.tokenDelta >= 0 ? '+' : '') + d.tokenDelta), d.tokenDeltaIsEstimate ? ' (estimated)' : ''),
      d.systemChanged ? el('div', { class: 'removed' }, el('h3', {}, 'System prompt before'), pre(d.systemBefore)) : null,
      d.systemChanged ? el('div', { class: 'added' }, el('h3', {}, 'System prompt after'), pre(d.system)) : null,
      d.removed.map((m) => el('div', { class: 'removed diff-removed' }, messageNode(m))),
      d.added.map((m) => el('div', { class: 'added diff-added' }, messageNode(m)))));
  }

  // ---- the fork beside its parent ----
  // The fork point is the fork's change taking effect, not an error: it is shown with the request diff
  // in the accent colour. Red is kept for drift, a part before the fork point, where the fork was
  // served from its parent's recording and should have asked the same.
  const SIDE = [['kind', 'Kind'], ['site', 'Call site'], ['what', 'What'], ['tokens', 'Tokens'], ['cost', 'Cost'], ['src', 'Source']];
  async function renderFork(v) {
    const f = await getJSON('/api/sessions/' + enc(v.id) + '/fork?limit=2000');
    const dv = f.divergence, fp = f.forkPoint;
    const notes = [];
    if (dv) {
      notes.push(el('div', { class: 'banner', id: 'divergence' },
        el('b', {}, 'Drift at step ', el('span', { id: 'divergence-step' }, String(dv.step))), ', before the fork point (' + dv.code + ', ' + dv.kind + ' from ',
        el('span', { class: 'mono' }, dv.callSite), '): the fork was served from its parent there and asked something else.',
        pre(dv.message)));
    }
    if (fp) {
      notes.push(el('div', { class: 'banner forkpoint', id: 'fork-point' },
        el('b', {}, 'Fork point at step ', el('span', { id: 'fork-point-step' }, String(fp.step))), ': the fork went live here',
        fp.changes.length ? [' with its change to ', el('b', { id: 'fork-point-changes' }, fp.changes.join(', '))] : ' (' + fp.code + ')',
        fp.diff.length ? el('div', { id: 'fork-point-diff' }, el('div', { class: 'role' }, 'Request diff, parent → fork'), pre(fp.diff.join('\n'))) : pre(fp.message)));
    }
    if (!dv && !fp) notes.push(el('div', { class: 'banner ok', id: 'fork-same' }, 'The fork made the same calls as its parent.'));
    const cell = (r) => r
      ? [el('td', { class: 'c-kind side-start k-' + r.kind, title: r.kind }, r.kind), el('td', { class: 'c-site mono', title: r.callSite }, r.callSite),
        el('td', { class: 'c-what', title: r.what || '' }, text(r.what || '')), el('td', { class: 'c-tokens mono' }, tokens(r)),
        el('td', { class: 'c-cost mono', title: r.costUnknown || '' }, cost(r.costMicroUSD, r.costUnknown)), el('td', { class: 'c-src' }, r.provenance || '')]
      : [el('td', { class: 'side-start', colspan: String(SIDE.length) }, '—')];
    const parted = fp ? fp.step : dv ? dv.step : Infinity;
    const rows = f.rows.map((r) => el('tr', { class: r.diverged ? 'diverged' : r.forkPoint ? 'fork-point' : (r.step < parted ? 'same' : ''), 'data-step': r.step },
      el('td', { class: 'mono' }, String(r.step)), cell(r.parent), cell(r.child)));
    const cols = el('colgroup', {}, el('col', { class: 'c-step' }), [0, 1].flatMap(() => SIDE.map(([c]) => el('col', { class: 'c-' + c }))));
    v.body.replaceChildren(
      el('p', {}, 'Fork ', el('b', {}, f.child), ' of ', el('a', { href: '#/s/' + enc(f.parent) }, f.parent), ' from step ', el('b', {}, String(f.forkedAtStep)),
        ' (' + f.total + ' steps from ' + (f.from < f.forkedAtStep ? 'step ' + f.from + ', where it drifted' : 'the fork point') + (f.total > f.rows.length ? ', the first ' + f.rows.length + ' shown' : '') + ')'),
      ...notes,
      el('table', { class: 'fork', id: 'fork' }, cols,
        el('thead', {},
          el('tr', {}, el('th', {}, ''), el('th', { class: 'side-start', colspan: String(SIDE.length), title: f.parent }, 'Parent ' + f.parent),
            el('th', { class: 'side-start', colspan: String(SIDE.length), title: f.child }, 'Fork ' + f.child)),
          el('tr', {}, el('th', {}, 'Step'), [0, 1].flatMap(() => SIDE.map(([c, label], i) => el('th', { class: i === 0 ? 'side-start' : '' }, label))))),
        el('tbody', {}, rows)));
    const hit = v.body.querySelector('tr.diverged, tr.fork-point');
    if (hit) hit.scrollIntoView({ block: 'center' });
  }

  // ---- the resume plan ----
  async function renderPlan(v) {
    const p = await getJSON('/api/sessions/' + enc(v.id) + '/plan');
    const rw = p.rewind || {};
    v.body.replaceChildren(el('div', { class: 'pane detail', id: 'plan' },
      el('h2', {}, 'Resume verdict ', el('span', { id: 'plan-verdict' }, verdictBadge(p.verdict, p.reason))),
      el('dl', { class: 'kv' },
        kv('reason', p.reason), kv('message', p.message), kv('judged by', p.source),
        p.resumeSHA ? kv('re-entry', p.resumeSHA) : null,
        kv('residual', (p.residual || []).join(', ') || '(none)'),
        kv('verified', (p.verified || []).join(', ') || '(none)'),
        p.reachability ? kv('reachability', p.reachability + ' (' + (p.reachabilityReason || '') + ')') : null,
        p.convergence ? kv('convergence', p.convergence) : null,
        p.drift ? kv('plan drift', p.drift) : null,
        p.checkpoint ? kv('minted checkpoint', 'turn ' + p.checkpoint.turnIndex + ' ' + (p.checkpoint.transcriptDigest || '')) : null),
      el('h2', {}, 'Rewind plan ', el('span', { class: 'badge', id: 'rewind-decision' }, rw.decision || '—')),
      el('dl', { class: 'kv' },
        kv('reason', rw.reason), kv('message', rw.message),
        rw.rewindToTurn != null ? kv('rewind to turn', String(rw.rewindToTurn)) : null,
        kv('dropped turns', String(rw.droppedTurns || 0))),
      (rw.noGoodNote || []).length ? el('div', {}, el('h3', {}, 'No-good note'), pre(rw.noGoodNote.join('\n'))) : null));
  }

  // ---- checkpoints ----
  async function renderCheckpoints(v) {
    const list = await getJSON('/api/sessions/' + enc(v.id) + '/checkpoints');
    const rows = list.map((c) => el('tr', {},
      el('td', { class: 'mono', title: c.id }, c.id.slice(0, 12)), el('td', {}, c.source), el('td', {}, String(c.turn)), el('td', {}, String(c.step)),
      el('td', {}, c.reason || ''), el('td', {}, c.author || ''), el('td', {}, c.anchorsRewind ? 'yes' : 'no'),
      el('td', {}, String(c.files)), el('td', {}, String(c.bytes)), el('td', {}, String(c.incrementalBytes)),
      el('td', {}, c.createdAt ? c.createdAt.replace('T', ' ').slice(0, 19) : ''), el('td', { class: 'error' }, c.problem || '')));
    v.body.replaceChildren(list.length === 0
      ? el('p', { id: 'checkpoints' }, 'No checkpoint of this session in the source.')
      : el('table', { id: 'checkpoints' },
        el('thead', {}, el('tr', {}, ['ID', 'Source', 'Turn', 'Step', 'Reason', 'Author', 'Anchors rewind', 'Files', 'Bytes', 'New bytes', 'Created', 'Problem'].map((h) => el('th', {}, h)))),
        el('tbody', {}, rows)));
  }
}());
