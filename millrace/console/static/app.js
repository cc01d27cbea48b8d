// millrace console — browser side.
// Plain ES2020, no dependencies. Every string that reaches innerHTML goes
// through esc(); all requests are same-origin, root-relative URLs.
'use strict';

(() => {
  const DETAIL_REFRESH_MS = 2000;
  const SECURITY_REFRESH_MS = 5000;

  // ------------------------------------------------------------------ utils

  const ESC_MAP = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

  /** HTML-escape any value (null/undefined become ''). */
  function esc(value) {
    return String(value ?? '').replace(/[&<>"']/g, (c) => ESC_MAP[c]);
  }

  function isNum(n) {
    return typeof n === 'number' && Number.isFinite(n);
  }

  function fmtInt(n) {
    return isNum(n) ? String(Math.round(n)) : '—';
  }

  function fmtNum(n) {
    if (!isNum(n)) return '—';
    if (Number.isInteger(n)) return String(n);
    return Math.abs(n) >= 100 ? n.toFixed(0) : n.toFixed(1);
  }

  function fmtRate(r) {
    return isNum(r) ? `${r.toFixed(1)}/s` : '—';
  }

  /** Bytes in binary units (1 KiB = 1024 B); unknown: a dash. */
  function fmtBytes(n) {
    if (!isNum(n)) return '—';
    const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let v = n;
    let i = 0;
    while (v >= 1024 && i < units.length - 1) {
      v /= 1024;
      i += 1;
    }
    return i === 0 ? `${v} B` : `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
  }

  const pad2 = (n) => String(n).padStart(2, '0');

  /** Local wall-clock time, HH:MM:SS. */
  function fmtClock(ms) {
    if (!isNum(ms)) return '—';
    const d = new Date(ms);
    return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
  }

  function fmtIso(ms) {
    if (!isNum(ms) || ms < 0) return String(ms ?? '—');
    try {
      return new Date(ms).toISOString();
    } catch {
      return String(ms);
    }
  }

  function idList(ids) {
    return Array.isArray(ids) && ids.length ? ids.map(esc).join(', ') : '<span class="muted">—</span>';
  }

  function topicHref(name) {
    return `#/topics/${encodeURIComponent(name)}`;
  }

  function groupHref(id) {
    return `#/groups/${encodeURIComponent(id)}`;
  }

  function groupLinks(ids) {
    if (!Array.isArray(ids) || !ids.length) return '<span class="muted">—</span>';
    return ids.map((g) => `<a class="mono" href="${esc(groupHref(g))}">${esc(g)}</a>`).join(', ');
  }

  function byName(a, b) {
    return String(a).localeCompare(String(b));
  }

  /** Parse a non-negative integer from an input value; '' -> null, junk -> NaN. */
  function parseIntField(raw) {
    const s = String(raw ?? '').trim();
    if (s === '') return null;
    return /^\d+$/.test(s) ? Number(s) : NaN;
  }

  /** "k=v" lines -> [[k, v], ...]; blank lines ignored. */
  function parsePairs(text) {
    return String(text ?? '')
      .split('\n')
      .map((line) => line.replace(/\r$/, ''))
      .filter((line) => line.trim() !== '')
      .map((line) => {
        const i = line.indexOf('=');
        return i < 0 ? [line.trim(), ''] : [line.slice(0, i).trim(), line.slice(i + 1)];
      });
  }

  function statusClass(status) {
    const s = String(status ?? '').toUpperCase();
    if (s.startsWith('OK')) return 'status-ok';
    if (s.startsWith('WARN')) return 'status-warn';
    if (/^(ERR|STOP|STALL)/.test(s)) return 'status-err';
    return 'status-unknown';
  }

  function statusBadge(status) {
    return `<span class="status ${statusClass(status)}">${esc(status ?? '—')}</span>`;
  }

  // ---------------------------------------------------------------- bytes

  const utf8 = new TextDecoder('utf-8', { fatal: false });

  function b64ToBytes(b64) {
    const bin = atob(b64);
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }

  function bytesToHex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join(' ');
  }

  /**
   * Decode a base64 payload for display: {text, pre, bad}. `pre` marks
   * pretty-printed JSON; `bad` marks undecodable base64.
   */
  function decodePayload(b64, format) {
    if (format === 'base64') return { text: b64 };
    let bytes;
    try {
      bytes = b64ToBytes(b64);
    } catch {
      return { text: `invalid base64: ${b64}`, bad: true };
    }
    if (format === 'hex') return { text: bytesToHex(bytes) };
    const text = utf8.decode(bytes);
    if (format === 'json') {
      try {
        return { text: JSON.stringify(JSON.parse(text), null, 2), pre: true };
      } catch {
        // not JSON: fall back to the plain string
      }
    }
    return { text };
  }

  function renderPayload(b64, format) {
    if (b64 === null || b64 === undefined) return '<span class="null">null</span>';
    const d = decodePayload(b64, format);
    if (d.pre) return `<pre class="json">${esc(d.text)}</pre>`;
    return `<span class="text${d.bad ? ' bad' : ''}">${esc(d.text)}</span>`;
  }

  function renderHeaders(headers, format) {
    if (!Array.isArray(headers) || !headers.length) return '<span class="muted">—</span>';
    const valueFormat = format === 'json' ? 'string' : format;
    return headers
      .map(([k, v]) => {
        const shown = v === null || v === undefined
          ? '<span class="null">null</span>'
          : esc(decodePayload(v, valueFormat).text);
        return `<span class="hdr">${esc(k)}=${shown}</span>`;
      })
      .join('');
  }

  // ------------------------------------------------------------------- api

  class ApiError extends Error {
    constructor(status, message, denied) {
      super(message);
      this.status = status;
      this.denied = Boolean(denied);
    }
  }

  function goLogin() {
    if (location.pathname !== '/login') location.assign('/login');
  }

  async function api(path, { method = 'GET', body } = {}) {
    const init = { method, credentials: 'same-origin', headers: { Accept: 'application/json' } };
    if (body !== undefined) {
      init.headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    let res;
    try {
      res = await fetch(path, init);
    } catch (e) {
      throw new ApiError(0, `network error: ${e && e.message ? e.message : e}`, false);
    }
    let data = null;
    try {
      const text = await res.text();
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (res.status === 401) {
      goLogin();
      throw new ApiError(401, 'login required', false);
    }
    if (!res.ok) {
      const msg = data && typeof data.error === 'string' ? data.error : `HTTP ${res.status}`;
      throw new ApiError(res.status, msg, data && data.denied);
    }
    if (data === null || typeof data !== 'object') {
      throw new ApiError(res.status, 'unexpected response from server', false);
    }
    return data;
  }

  /** Inline error block for a card/form: denied, read-only, or generic. */
  function errorHtml(err) {
    const msg = err && err.message ? err.message : String(err);
    if (err instanceof ApiError && err.denied) {
      return `<p class="denied" data-testid="denied">denied: ${esc(msg)}</p>`;
    }
    if (err instanceof ApiError && err.status === 403) {
      return `<p class="form-error" data-testid="form-error">writes are disabled (read-only): ${esc(msg)}</p>`;
    }
    return `<p class="form-error" data-testid="form-error">${esc(msg)}</p>`;
  }

  function okHtml(text, testid) {
    const attr = testid ? ` data-testid="${esc(testid)}"` : '';
    return `<p class="ok"${attr}>${esc(text)}</p>`;
  }

  /**
   * Run an async form action with the submit button disabled; report
   * errors into msgEl. The action returns HTML for msgEl on success.
   */
  // a form's submit runs ``action`` through runAction, its message in [data-ref="msg"]
  function onSubmit(form, action) {
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      runAction(form, form.querySelector('[data-ref="msg"]'), action);
    });
  }

  async function runAction(form, msgEl, action) {
    const buttons = form.querySelectorAll('button');
    buttons.forEach((b) => { b.disabled = true; });
    msgEl.innerHTML = '';
    try {
      msgEl.innerHTML = (await action()) || '';
    } catch (err) {
      if (!(err instanceof ApiError)) console.error(err);
      msgEl.innerHTML = errorHtml(err);
    } finally {
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  /** Client-side validation failure, shown like a server error. */
  function invalid(message) {
    return new ApiError(0, message, false);
  }

  /** Throttled re-fetch of a detail endpoint while a view is shown. */
  function makePoller(load, onData, onError, intervalMs = DETAIL_REFRESH_MS) {
    let last = 0;
    let inflight = false;
    let alive = true;
    return {
      tick(force = false) {
        if (!alive || inflight) return;
        if (!force && Date.now() - last < intervalMs) return;
        last = Date.now();
        inflight = true;
        load()
          .then((d) => { if (alive) onData(d); }, (e) => { if (alive) onError(e); })
          .finally(() => { inflight = false; });
      },
      stop() { alive = false; },
    };
  }

  // ----------------------------------------------------------------- chart

  /**
   * Inline SVG line chart. points: [{t: ms, v: number}].
   * Returns an SVG string; all text is escaped.
   */
  function lineChart({ title, points, testid, width = 960, height = 240 }) {
    const pad = { l: 58, r: 16, t: 30, b: 28 };
    const w = width - pad.l - pad.r;
    const h = height - pad.t - pad.b;
    const pts = (Array.isArray(points) ? points : []).filter((p) => isNum(p.t) && isNum(p.v));
    const head = `<svg class="chart" data-testid="${esc(testid)}" viewBox="0 0 ${width} ${height}" `
      + `role="img" aria-label="${esc(title)}" xmlns="http://www.w3.org/2000/svg">`
      + `<title>${esc(title)}</title>`
      + `<text class="chart-title" x="${pad.l}" y="18">${esc(title)}</text>`;
    const axes = `<line class="axis" x1="${pad.l}" y1="${pad.t}" x2="${pad.l}" y2="${pad.t + h}"/>`
      + `<line class="axis" x1="${pad.l}" y1="${pad.t + h}" x2="${pad.l + w}" y2="${pad.t + h}"/>`;
    if (!pts.length) {
      return `${head}${axes}<text class="no-data" x="${pad.l + w / 2}" y="${pad.t + h / 2}" `
        + 'text-anchor="middle">no data</text></svg>';
    }
    const vs = pts.map((p) => p.v);
    const ts = pts.map((p) => p.t);
    const yMin = Math.min(0, ...vs);
    let yMax = Math.max(...vs);
    if (yMax <= yMin) yMax = yMin + 1;
    const tMin = Math.min(...ts);
    let tMax = Math.max(...ts);
    if (tMax <= tMin) tMax = tMin + 1;
    const x = (t) => pad.l + ((t - tMin) / (tMax - tMin)) * w;
    const y = (v) => pad.t + h - ((v - yMin) / (yMax - yMin)) * h;
    const coords = pts.map((p) => `${x(p.t).toFixed(1)},${y(p.v).toFixed(1)}`);
    const base = (pad.t + h).toFixed(1);
    const area = `M${x(pts[0].t).toFixed(1)},${base} L${coords.join(' L')} L${x(pts[pts.length - 1].t).toFixed(1)},${base} Z`;
    const single = pts.length === 1
      ? `<circle cx="${coords[0].split(',')[0]}" cy="${coords[0].split(',')[1]}" r="3" class="dot"/>`
      : '';
    return `${head}`
      + `<line class="grid" x1="${pad.l}" y1="${pad.t}" x2="${pad.l + w}" y2="${pad.t}"/>`
      + `<line class="grid" x1="${pad.l}" y1="${pad.t + h / 2}" x2="${pad.l + w}" y2="${pad.t + h / 2}"/>`
      + axes
      + `<path class="area" d="${area}"/>`
      + `<polyline class="line" points="${coords.join(' ')}"/>${single}`
      + `<text class="axis-label" data-axis="y-max" x="${pad.l - 6}" y="${pad.t + 4}" text-anchor="end">${esc(fmtNum(yMax))}</text>`
      + `<text class="axis-label" data-axis="y-min" x="${pad.l - 6}" y="${pad.t + h}" text-anchor="end">${esc(fmtNum(yMin))}</text>`
      + `<text class="axis-label" data-axis="x-min" x="${pad.l}" y="${height - 8}">${esc(fmtClock(tMin))}</text>`
      + `<text class="axis-label" data-axis="x-max" x="${pad.l + w}" y="${height - 8}" text-anchor="end">${esc(fmtClock(tMax))}</text>`
      + '</svg>';
  }

  // ------------------------------------------------------------ view kit

  /** Find a [data-ref] element inside a view root. */
  function refOf(root) {
    return (name) => root.querySelector(`[data-ref="${name}"]`);
  }

  /**
   * Keep a write-only section in sync with read_only: built once when
   * writes are allowed, removed when they are not.
   */
  function syncWrite(slot, snap, build) {
    if (!slot || !snap) return;
    if (snap.read_only) {
      if (slot.dataset.built) {
        slot.innerHTML = '';
        delete slot.dataset.built;
      }
      return;
    }
    if (!slot.dataset.built) {
      slot.dataset.built = '1';
      build(slot);
    }
  }

  function rowsOrEmpty(rows, cols, text) {
    return rows.length ? rows.join('') : `<tr><td class="empty" colspan="${cols}">${esc(text)}</td></tr>`;
  }

  function topicNames(snap) {
    const topics = (snap && snap.topics) || [];
    const pub = topics.filter((t) => !t.internal).map((t) => t.name).sort(byName);
    const internal = topics.filter((t) => t.internal).map((t) => t.name).sort(byName);
    return pub.concat(internal);
  }

  /** Refresh a topic <select> without losing the user's selection. */
  function syncTopicSelect(select, names, wanted) {
    const current = select.value || wanted || '';
    const list = current && !names.includes(current) ? [current, ...names] : names;
    const key = list.join('\u0000');
    if (select.dataset.key === key) return;
    select.dataset.key = key;
    select.innerHTML = list.length
      ? list.map((n) => `<option value="${esc(n)}">${esc(n)}</option>`).join('')
      : '<option value="">(no topics)</option>';
    if (current) select.value = current;
  }

  // ------------------------------------------------------------- overview

  function OverviewView() {
    let ref;
    return {
      mount(root) {
        ref = refOf(root);
        root.innerHTML = `
          <section class="view" data-testid="view-overview">
            <h1>Overview</h1>
            <div class="stats">
              <div class="card"><div class="stat-label">Cluster id</div>
                <div class="stat-value mono" data-testid="cluster-id" data-ref="cluster-id">—</div></div>
              <div class="card"><div class="stat-label">Controller</div>
                <div class="stat-value mono" data-testid="controller-id" data-ref="controller">—</div></div>
              <div class="card"><div class="stat-label">Brokers up</div>
                <div class="stat-value" data-ref="brokers-up">—</div></div>
              <div class="card"><div class="stat-label">Topics</div>
                <div class="stat-value" data-ref="topic-count">—</div></div>
              <div class="card"><div class="stat-label">Consumer groups</div>
                <div class="stat-value" data-ref="group-count">—</div></div>
            </div>
            <div class="card" data-ref="chart"></div>
            <div class="card" data-ref="chart-out"></div>
            <div class="grid-2">
              <div class="card"><h2>Brokers</h2>
                <div class="table-wrap"><table data-testid="brokers">
                  <thead><tr><th class="num">ID</th><th>Host</th><th>Rack</th><th>Controller</th>
                    <th class="num">Leaders</th><th class="num">Replicas</th><th>Status</th></tr></thead>
                  <tbody data-ref="brokers"></tbody>
                </table></div>
              </div>
              <div class="card"><h2>Alerts</h2>
                <ul class="alerts" data-testid="alerts" data-ref="alerts"></ul>
              </div>
            </div>
          </section>`;
      },
      update(snap) {
        const cluster = snap.cluster || {};
        const brokers = [...(cluster.brokers || [])].sort((a, b) => a.id - b.id);
        ref('cluster-id').textContent = cluster.id ?? '—';
        ref('controller').textContent = cluster.controller ?? '—';
        ref('brokers-up').textContent = `${brokers.filter((b) => b.up).length} / ${brokers.length}`;
        ref('topic-count').textContent = String((snap.topics || []).filter((t) => !t.internal).length);
        ref('group-count').textContent = String((snap.groups || []).length);
        ref('brokers').innerHTML = rowsOrEmpty(brokers.map(brokerRow), 7, 'No brokers known');
        ref('alerts').innerHTML = alertItems(snap.alerts || []);
        ref('chart').innerHTML = lineChart({
          title: 'Throughput in (records/s)',
          testid: 'throughput-chart',
          points: (snap.throughput || []).map((p) => ({ t: p.t, v: p.in })),
        });
        ref('chart-out').innerHTML = lineChart({
          title: "Throughput out (records/s consumed, from the groups' commits)",
          testid: 'throughput-out-chart',
          points: (snap.throughput || []).map((p) => ({ t: p.t, v: p.out })),
        });
      },
    };
  }

  function brokerRow(b) {
    return `<tr data-testid="broker-row" data-broker-id="${esc(b.id)}">
      <td class="num mono">${esc(b.id)}</td>
      <td class="mono">${esc(b.host)}:${esc(b.port)}</td>
      <td>${b.rack ? esc(b.rack) : '<span class="muted">—</span>'}</td>
      <td>${b.controller ? '<span class="badge badge-ctrl" data-testid="controller-marker">controller</span>' : ''}</td>
      <td class="num">${fmtInt(b.leaders)}</td>
      <td class="num">${fmtInt(b.replicas)}</td>
      <td class="${b.up ? 'up' : 'down'}">${b.up ? 'up' : 'down'}</td>
    </tr>`;
  }

  function alertItems(alerts) {
    if (!alerts.length) return '<li class="empty">No alerts</li>';
    return alerts.map((a) => {
      const sev = a.severity === 'critical' ? 'critical' : 'warning';
      return `<li class="${sev}" data-testid="alert" data-alert-name="${esc(a.name)}">
        <span class="sev">${esc(a.severity)}</span><span class="alert-name">${esc(a.name)}</span>${esc(a.message)}
      </li>`;
    }).join('');
  }

  // --------------------------------------------------------------- topics

  function TopicsView() {
    let ref;
    let last = null;
    const render = () => {
      if (!last) return;
      const showInternal = ref('show-internal').checked;
      const topics = (last.topics || []).filter((t) => showInternal || !t.internal);
      topics.sort((a, b) => byName(a.name, b.name));
      ref('rows').innerHTML = rowsOrEmpty(topics.map(topicRow), 8, 'No topics');
    };
    return {
      mount(root) {
        ref = refOf(root);
        root.innerHTML = `
          <section class="view" data-testid="view-topics">
            <h1>Topics</h1>
            <div class="card">
              <div class="toolbar">
                <label class="check"><input type="checkbox" name="show_internal" data-testid="show-internal"
                  data-ref="show-internal"> show internal</label>
              </div>
              <div class="table-wrap tall"><table data-testid="topics">
                <thead><tr><th>Name</th><th class="num">Partitions</th><th class="num">RF</th>
                  <th class="num">Under-replicated</th><th class="num">Size</th><th class="num">Messages</th>
                  <th class="num">Rate</th><th>Consumer groups</th></tr></thead>
                <tbody data-ref="rows"></tbody>
              </table></div>
            </div>
            <div data-ref="write"></div>
          </section>`;
        ref('show-internal').addEventListener('change', render);
      },
      update(snap) {
        last = snap;
        render();
        syncWrite(ref('write'), snap, (slot) => buildCreateTopic(slot, snap));
      },
    };
  }

  function topicRow(t) {
    const ur = t.under_replicated || 0;
    return `<tr data-testid="topic-row" data-topic="${esc(t.name)}">
      <td><a class="mono" href="${esc(topicHref(t.name))}">${esc(t.name)}</a>
        ${t.internal ? '<span class="badge">internal</span>' : ''}
        ${t.offline ? `<span class="badge bad">${esc(t.offline)} offline</span>` : ''}</td>
      <td class="num">${fmtInt(t.partitions)}</td>
      <td class="num">${fmtInt(t.rf)}</td>
      <td class="num${ur > 0 ? ' bad' : ''}">${fmtInt(ur)}</td>
      <td class="num" data-testid="topic-size" data-bytes="${esc(t.size ?? '')}">${fmtBytes(t.size)}</td>
      <td class="num">${fmtInt(t.messages)}</td>
      <td class="num">${fmtRate(t.rate)}</td>
      <td>${groupLinks(t.groups)}</td>
    </tr>`;
  }

  function buildCreateTopic(slot, snap) {
    const brokerCount = ((snap.cluster || {}).brokers || []).length;
    const rf = brokerCount >= 3 ? 3 : 1;
    slot.innerHTML = `
      <form class="card form-grid" data-testid="create-topic" novalidate>
        <h2>Create topic</h2>
        <label>Name <input name="name" autocomplete="off" spellcheck="false" placeholder="orders"></label>
        <label>Partitions <input name="partitions" type="number" min="1" value="3"></label>
        <label>Replication factor <input name="replication_factor" type="number" min="1" value="${rf}"></label>
        <label class="wide">Configs (key=value per line, optional)
          <textarea name="configs" rows="2" placeholder="retention.ms=86400000"></textarea></label>
        <button type="submit">Create topic</button>
        <div class="form-msg" data-ref="msg"></div>
      </form>`;
    const form = slot.querySelector('form');
    onSubmit(form, async () => {
      const name = form.elements.name.value.trim();
      const partitions = parseIntField(form.elements.partitions.value);
      const replication = parseIntField(form.elements.replication_factor.value);
      if (!name) throw invalid('topic name is required');
      if (!(partitions >= 1)) throw invalid('partitions must be a positive integer');
      if (!(replication >= 1)) throw invalid('replication factor must be a positive integer');
      const configs = Object.fromEntries(parsePairs(form.elements.configs.value));
      await api('/api/topics', {
        method: 'POST',
        body: { name, partitions, replication_factor: replication, configs },
      });
      form.elements.name.value = '';
      return okHtml(`created topic ${name}`, 'form-ok');
    });
  }

  // --------------------------------------------------------- topic detail

  function TopicView(name) {
    let ref;
    let detail = null;
    let snap = null;
    const poller = makePoller(
      () => api(`/api/topics/${encodeURIComponent(name)}`),
      (d) => { detail = d; ref('status').innerHTML = ''; renderDetail(); },
      (e) => { ref('status').innerHTML = errorHtml(e); },
    );

    function renderDetail() {
      if (!detail) return;
      const parts = [...(detail.partitions || [])].sort((a, b) => a.partition - b.partition);
      ref('internal').hidden = !detail.internal;
      ref('partitions').innerHTML = rowsOrEmpty(parts.map(partitionRow), 9, 'No partitions');
      const timeline = [...(detail.timeline || [])].sort((a, b) => b.t - a.t);
      ref('timeline').innerHTML = timeline.length
        ? timeline.map(timelineEntry).join('')
        : '<li class="empty">No leader or ISR changes recorded</li>';
      const configs = [...(detail.configs || [])].sort((a, b) => byName(a.name, b.name));
      ref('configs').innerHTML = rowsOrEmpty(configs.map(configRow), 3, 'No configs');
      renderGroups(detail.groups);
      const count = ref('write').querySelector('[name="count"]');
      if (count) count.placeholder = `more than ${parts.length}`;
    }

    function renderGroups(groups) {
      const list = Array.isArray(groups) ? groups : [];
      ref('groups').innerHTML = list.length
        ? list.map((g) => `<li><a class="mono" href="${esc(groupHref(g))}">${esc(g)}</a></li>`).join('')
        : '<li class="empty">No consumer groups</li>';
    }

    function renderSummary() {
      const t = ((snap && snap.topics) || []).find((x) => x.name === name);
      ref('summary').innerHTML = t
        ? `${fmtInt(t.partitions)} partitions · RF ${fmtInt(t.rf)} · ${fmtBytes(t.size)} · ${fmtInt(t.messages)} messages · ${fmtRate(t.rate)}`
          + (t.under_replicated ? ` · <span class="bad">${fmtInt(t.under_replicated)} under-replicated</span>` : '')
        : '';
      if (!detail && t) renderGroups(t.groups);
    }

    return {
      mount(root) {
        ref = refOf(root);
        root.innerHTML = `
          <section class="view" data-testid="view-topic" data-topic="${esc(name)}">
            <div class="crumbs"><a href="#/topics">Topics</a> /</div>
            <h1><span class="mono">${esc(name)}</span>
              <span class="badge" data-ref="internal" hidden>internal</span></h1>
            <div class="actions">
              <span class="muted" data-ref="summary"></span>
              <a data-testid="browse-messages" href="${esc(`#/messages?topic=${encodeURIComponent(name)}`)}">browse messages</a>
            </div>
            <div data-ref="status"></div>
            <div class="card"><h2>Partitions</h2>
              <div class="table-wrap"><table data-testid="partitions">
                <thead><tr><th class="num">Partition</th><th class="num">Leader</th><th>Replicas</th><th>ISR</th>
                  <th class="num">Start</th><th class="num">HW</th><th class="num">LSO</th><th class="num">End</th>
                  <th class="num">Size</th></tr></thead>
                <tbody data-ref="partitions"><tr><td class="empty" colspan="9">loading…</td></tr></tbody>
              </table></div>
            </div>
            <div class="grid-2">
              <div class="card"><h2>ISR / leader timeline</h2>
                <ul class="timeline scroll-list" data-testid="timeline" data-ref="timeline"></ul></div>
              <div class="card"><h2>Consuming groups</h2>
                <ul class="plain-list" data-testid="topic-groups" data-ref="groups"></ul></div>
            </div>
            <div class="card"><h2>Configs</h2>
              <div class="table-wrap"><table data-testid="configs">
                <thead><tr><th>Name</th><th>Value</th><th>Source</th></tr></thead>
                <tbody data-ref="configs"></tbody>
              </table></div>
            </div>
            <div data-ref="write"></div>
          </section>`;
        poller.tick(true);
      },
      update(s) {
        snap = s;
        renderSummary();
        syncWrite(ref('write'), s, (slot) => buildTopicWrite(slot, name, () => poller.tick(true)));
        poller.tick();
      },
      unmount() { poller.stop(); },
    };
  }

  function partitionRow(p) {
    const isr = Array.isArray(p.isr) ? p.isr : [];
    const replicas = Array.isArray(p.replicas) ? p.replicas : [];
    const missing = replicas.filter((r) => !isr.includes(r));
    const isrCell = isr.map((r) => `<span>${esc(r)}</span>`)
      .concat(missing.map((r) => `<span class="out-of-isr" title="replica ${esc(r)} is not in the ISR">${esc(r)}</span>`))
      .join(', ');
    const leader = p.leader === null || p.leader === undefined
      ? '<span class="bad">none</span>'
      : esc(p.leader);
    return `<tr data-testid="partition-row" data-partition="${esc(p.partition)}">
      <td class="num mono">${esc(p.partition)}</td>
      <td class="num mono">${leader}</td>
      <td class="mono">${idList(replicas)}</td>
      <td class="mono">${isrCell || '<span class="bad">empty</span>'}</td>
      <td class="num mono">${fmtInt(p.start)}</td>
      <td class="num mono">${fmtInt(p.hw)}</td>
      <td class="num mono">${fmtInt(p.lso)}</td>
      <td class="num mono">${fmtInt(p.end)}</td>
      <td class="num mono" data-testid="partition-size" data-bytes="${esc(p.size ?? '')}">${fmtBytes(p.size)}</td>
    </tr>`;
  }

  function timelineEntry(e) {
    const leader = e.leader === null || e.leader === undefined ? 'none' : e.leader;
    // who recorded it: the console's own observation, or a broker's record of its change
    const source = e.source ? `<span class="tl-source" data-testid="timeline-source">${esc(e.source)}</span>` : '';
    return `<li data-testid="timeline-entry" data-kind="${esc(e.kind)}" data-partition="${esc(e.partition)}" data-source="${esc(e.source || '')}">
      <span class="tl-time">${esc(fmtClock(e.t))}</span>
      <span><span class="mono">p${esc(e.partition)}</span>
        <span class="tl-kind ${esc(e.kind)}">${esc(e.kind)}</span>
        <span class="mono">leader ${esc(leader)} · ISR [${esc((e.isr || []).join(', '))}]</span>
        ${source}</span>
      <span class="tl-detail">${esc(e.detail)}</span>
    </li>`;
  }

  function configRow(c) {
    let value;
    if (c.sensitive) value = '••••';
    else if (c.value === null || c.value === undefined) value = null;
    else value = c.value;
    return `<tr data-config="${esc(c.name)}">
      <td class="mono">${esc(c.name)}</td>
      <td class="mono">${value === null ? '<span class="null">null</span>' : esc(value)}</td>
      <td class="muted">${esc(c.source)}</td>
    </tr>`;
  }

  function buildTopicWrite(slot, name, refresh) {
    slot.innerHTML = `
      <div class="grid-2">
        <form class="card form-grid" data-testid="add-partitions" novalidate>
          <h2>Add partitions</h2>
          <label>New total partition count
            <input name="count" type="number" min="1"></label>
          <button type="submit">Add partitions</button>
          <div class="form-msg" data-ref="msg"></div>
        </form>
        <form class="card form-grid" data-testid="edit-configs" novalidate>
          <h2>Edit configs</h2>
          <label class="wide">Set (name=value per line)
            <textarea name="set" rows="3" spellcheck="false" placeholder="retention.ms=86400000"></textarea></label>
          <label class="wide">Reset to the default (names, comma-separated)
            <input name="delete" spellcheck="false" placeholder="cleanup.policy"></label>
          <button type="submit">Apply</button>
          <div class="form-msg" data-ref="msg"></div>
        </form>
        <div class="card form-grid" data-ref="delete-card">
          <h2>Delete topic</h2>
          <button type="button" class="danger" data-testid="delete-topic">Delete topic</button>
          <div class="form-msg" data-ref="msg"></div>
        </div>
      </div>`;
    const form = slot.querySelector('form');
    onSubmit(form, async () => {
      const count = parseIntField(form.elements.count.value);
      if (!(count >= 1)) throw invalid('count must be a positive integer');
      await api(`/api/topics/${encodeURIComponent(name)}/partitions`, { method: 'POST', body: { count } });
      refresh();
      return okHtml(`topic now has ${count} partitions`, 'form-ok');
    });
    const configs = slot.querySelector('[data-testid="edit-configs"]');
    onSubmit(configs, async () => {
      const set = Object.fromEntries(parsePairs(configs.elements.set.value));
      const reset = configs.elements.delete.value.split(',').map((n) => n.trim()).filter(Boolean);
      if (!Object.keys(set).length && !reset.length) throw invalid('nothing to change');
      await api(`/api/topics/${encodeURIComponent(name)}/configs`, {
        method: 'POST', body: { set, delete: reset },
      });
      refresh();
      return okHtml(`configs changed: ${[...Object.keys(set), ...reset].join(', ')}`, 'configs-ok');
    });
    const card = slot.querySelector('[data-ref="delete-card"]');
    card.querySelector('button').addEventListener('click', () => {
      if (!window.confirm(`Delete topic "${name}"? This cannot be undone.`)) return;
      runAction(card, card.querySelector('[data-ref="msg"]'), async () => {
        await api(`/api/topics/${encodeURIComponent(name)}`, { method: 'DELETE' });
        location.hash = '#/topics';
        return okHtml(`deleted topic ${name}`);
      });
    });
  }

  // ------------------------------------------------------------- messages

  function MessagesView(query) {
    let ref;
    let root;
    let lastResult = null;
    let seq = 0;
    let alive = true;
    const wantedTopic = query.get('topic') || '';

    function renderRecords() {
      if (!lastResult) return;
      const format = root.querySelector('[name="format"]').value;
      const rows = (lastResult.records || []).map((r) => recordRow(r, format));
      ref('records').innerHTML = rowsOrEmpty(rows, 6, 'No records');
    }

    function browseParams(form) {
      const el = form.elements;
      const params = new URLSearchParams();
      const topic = el.topic.value || wantedTopic;
      if (!topic) throw invalid('choose a topic');
      params.set('topic', topic);
      const partition = parseIntField(el.partition.value);
      if (Number.isNaN(partition)) throw invalid('partition must be a non-negative integer (blank = all)');
      if (partition !== null) params.set('partition', String(partition));
      const from = el.from.value;
      params.set('from', from);
      if (from === 'offset') {
        const offset = parseIntField(el.offset.value);
        if (offset === null || Number.isNaN(offset)) throw invalid('offset must be a non-negative integer');
        params.set('offset', String(offset));
      } else if (from === 'timestamp') {
        const ms = el.timestamp.value ? new Date(el.timestamp.value).getTime() : NaN;
        if (!isNum(ms)) throw invalid('choose a valid timestamp');
        params.set('timestamp', String(ms));
      }
      const limit = parseIntField(el.limit.value);
      if (!(limit >= 1)) throw invalid('limit must be a positive integer');
      params.set('limit', String(limit));
      const q = el.q.value;
      if (q.trim() !== '') params.set('q', q);
      return params;
    }

    async function browse() {
      const form = ref('browse');
      const msg = ref('browse-msg');
      const progress = ref('progress');
      msg.innerHTML = '';
      let params;
      try {
        params = browseParams(form);
      } catch (err) {
        msg.innerHTML = errorHtml(err);
        return;
      }
      const mine = ++seq;
      const hashQuery = new URLSearchParams({ topic: params.get('topic') });
      if (params.has('partition')) hashQuery.set('partition', params.get('partition'));
      history.replaceState(null, '', `#/messages?${hashQuery}`);
      progress.hidden = false;
      progress.textContent = 'scanning…';
      form.querySelector('button[type="submit"]').disabled = true;
      try {
        const res = await api(`/api/messages?${params}`);
        if (!alive || mine !== seq) return;
        lastResult = res;
        const shown = (res.records || []).length;
        progress.textContent = `${shown} shown, ${fmtInt(res.scanned)} scanned`;
        ref('done').textContent = res.done ? 'end of scan' : 'more records may be available';
        renderRecords();
      } catch (err) {
        if (!alive || mine !== seq) return;
        progress.textContent = 'scan failed';
        ref('done').textContent = '';
        msg.innerHTML = errorHtml(err);
      } finally {
        if (alive && mine === seq) form.querySelector('button[type="submit"]').disabled = false;
      }
    }

    return {
      mount(el) {
        root = el;
        ref = refOf(el);
        const partition = query.get('partition') || '';
        el.innerHTML = `
          <section class="view" data-testid="view-messages">
            <h1>Messages</h1>
            <form class="card form-grid" data-testid="browse" data-ref="browse" novalidate>
              <label>Topic <select name="topic"></select></label>
              <label>Partition <input name="partition" type="number" min="0" placeholder="all" value="${esc(partition)}"></label>
              <label>From <select name="from">
                <option value="oldest">oldest</option><option value="newest">newest</option>
                <option value="offset">offset</option><option value="timestamp">timestamp</option></select></label>
              <label>Offset <input name="offset" type="number" min="0" placeholder="offset"></label>
              <label>Timestamp <input name="timestamp" type="datetime-local" step="1"></label>
              <label>Limit <input name="limit" type="number" min="1" value="50"></label>
              <label class="wide">Filter <input name="q" placeholder="text in key, value or headers"></label>
              <label>Show as <select name="format">
                <option value="string">string</option><option value="json">json</option>
                <option value="hex">hex</option><option value="base64">base64</option></select></label>
              <button type="submit">Browse</button>
              <div class="form-msg" data-ref="browse-msg"></div>
            </form>
            <div class="card">
              <div class="toolbar">
                <span class="progress" data-testid="progress" data-ref="progress" hidden></span>
                <span class="muted" data-ref="done"></span>
              </div>
              <div class="table-wrap tall"><table data-testid="records">
                <thead><tr><th class="num">Partition</th><th class="num">Offset</th><th>Timestamp</th>
                  <th>Key</th><th>Value</th><th>Headers</th></tr></thead>
                <tbody data-ref="records"></tbody>
              </table></div>
            </div>
            <div data-ref="write"></div>
          </section>`;
        syncTopicSelect(el.querySelector('[name="topic"]'), [], wantedTopic);
        ref('browse').addEventListener('submit', (ev) => { ev.preventDefault(); browse(); });
        el.querySelector('[name="format"]').addEventListener('change', renderRecords);
        if (wantedTopic) browse();
      },
      update(snap) {
        const names = topicNames(snap);
        syncTopicSelect(root.querySelector('[data-testid="browse"] [name="topic"]'), names, wantedTopic);
        syncWrite(ref('write'), snap, (slot) => buildProduce(slot));
        const produceTopic = root.querySelector('[data-testid="produce"] [name="topic"]');
        if (produceTopic) syncTopicSelect(produceTopic, names, wantedTopic);
      },
      unmount() { alive = false; },
    };
  }

  function recordRow(r, format) {
    return `<tr data-testid="record-row" data-partition="${esc(r.partition)}" data-offset="${esc(r.offset)}">
      <td class="num mono">${esc(r.partition)}</td>
      <td class="num mono">${esc(r.offset)}</td>
      <td class="mono">${esc(fmtIso(r.timestamp))}</td>
      <td class="cell-value">${renderPayload(r.key, format)}</td>
      <td class="cell-value">${renderPayload(r.value, format)}</td>
      <td>${renderHeaders(r.headers, format)}</td>
    </tr>`;
  }

  /** A record form's topic, partition (blank: the producer chooses), key and value. */
  function recordFields(el) {
    const topic = el.topic.value;
    if (!topic) throw invalid('choose a topic');
    const partition = parseIntField(el.partition.value);
    if (Number.isNaN(partition)) throw invalid('partition must be a non-negative integer (blank = auto)');
    const key = el.key.value === '' ? null : el.key.value;
    return { topic, partition, key, value: el.value.value };
  }

  function buildProduce(slot) {
    slot.innerHTML = `
      <form class="card form-grid" data-testid="produce" novalidate>
        <h2>Produce a message</h2>
        <label>Topic <select name="topic"></select></label>
        <label>Partition <input name="partition" type="number" min="0" placeholder="auto"></label>
        <label class="wide">Key <input name="key" placeholder="(none)" spellcheck="false"></label>
        <label class="wide">Value <textarea name="value" rows="4" spellcheck="false"></textarea></label>
        <label class="wide">Headers (key=value per line)
          <textarea name="headers" rows="4" spellcheck="false"></textarea></label>
        <button type="submit">Produce</button>
        <div class="form-msg" data-ref="msg"></div>
      </form>`;
    const form = slot.querySelector('form');
    onSubmit(form, async () => {
      const body = { ...recordFields(form.elements), headers: parsePairs(form.elements.headers.value) };
      const res = await api('/api/produce', { method: 'POST', body });
      return okHtml(`produced to partition ${res.partition} at offset ${res.offset}`, 'produce-result');
    });
  }

  // --------------------------------------------------------------- groups

  function GroupsView() {
    let ref;
    return {
      mount(root) {
        ref = refOf(root);
        root.innerHTML = `
          <section class="view" data-testid="view-groups">
            <h1>Consumer groups</h1>
            <div class="card">
              <div class="table-wrap tall"><table data-testid="groups">
                <thead><tr><th>Group</th><th>State</th><th>Protocol type</th><th class="num">Members</th>
                  <th class="num">Total lag</th><th>Status</th></tr></thead>
                <tbody data-ref="rows"></tbody>
              </table></div>
            </div>
          </section>`;
      },
      update(snap) {
        const groups = [...(snap.groups || [])].sort((a, b) => byName(a.id, b.id));
        ref('rows').innerHTML = rowsOrEmpty(groups.map(groupRow), 6, 'No consumer groups');
      },
    };
  }

  function groupRow(g) {
    return `<tr data-testid="group-row" data-group="${esc(g.id)}">
      <td><a class="mono" href="${esc(groupHref(g.id))}">${esc(g.id)}</a></td>
      <td>${esc(g.state)}</td>
      <td>${esc(g.protocol_type) || '<span class="muted">—</span>'}</td>
      <td class="num">${fmtInt(g.members)}</td>
      <td class="num mono">${fmtInt(g.lag)}</td>
      <td>${statusBadge(g.status)}</td>
    </tr>`;
  }

  // --------------------------------------------------------- group detail

  function GroupView(id) {
    let ref;
    let detail = null;
    const poller = makePoller(
      () => api(`/api/groups/${encodeURIComponent(id)}`),
      (d) => { detail = d; ref('status').innerHTML = ''; renderDetail(); },
      (e) => { ref('status').innerHTML = errorHtml(e); },
    );

    function setSummary(g) {
      ref('state').textContent = g.state ?? '—';
      ref('protocol').textContent = [g.protocol_type, g.protocol].filter(Boolean).join(' / ') || '—';
      ref('coordinator').textContent = g.coordinator ?? '—';
      ref('group-status').innerHTML = statusBadge(g.status);
    }

    function renderDetail() {
      setSummary(detail);
      const members = detail.members || [];
      ref('members').innerHTML = rowsOrEmpty(members.map(memberRow), 4, 'No active members');
      const parts = [...(detail.partitions || [])]
        .sort((a, b) => byName(a.topic, b.topic) || a.partition - b.partition);
      ref('partitions').innerHTML = rowsOrEmpty(parts.map(groupPartitionRow), 6, 'No committed offsets');
      ref('chart').innerHTML = lineChart({
        title: 'Total lag (records)',
        testid: 'lag-chart',
        points: (detail.lag_history || []).map((p) => ({ t: p.t, v: p.lag })),
      });
      const rebalances = [...(detail.rebalances || [])].sort((a, b) => b.t - a.t);
      ref('rebalances').innerHTML = rebalances.length
        ? rebalances.map(rebalanceItem).join('')
        : '<li class="empty">No rebalances recorded</li>';
    }

    return {
      mount(root) {
        ref = refOf(root);
        root.innerHTML = `
          <section class="view" data-testid="view-group" data-group="${esc(id)}">
            <div class="crumbs"><a href="#/groups">Consumer groups</a> /</div>
            <h1><span class="mono">${esc(id)}</span></h1>
            <div class="stats">
              <div class="card"><div class="stat-label">State</div><div class="stat-value" data-ref="state">—</div></div>
              <div class="card"><div class="stat-label">Protocol</div><div class="stat-value" data-ref="protocol">—</div></div>
              <div class="card"><div class="stat-label">Coordinator</div>
                <div class="stat-value mono" data-ref="coordinator">—</div></div>
              <div class="card"><div class="stat-label">Status</div><div class="stat-value" data-ref="group-status">—</div></div>
            </div>
            <div data-ref="status"></div>
            <div class="card" data-ref="chart">${lineChart({ title: 'Total lag (records)', testid: 'lag-chart', points: [] })}</div>
            <div class="grid-2">
              <div class="card"><h2>Members</h2>
                <div class="table-wrap"><table data-testid="members">
                  <thead><tr><th>Member id</th><th>Client id</th><th>Host</th><th>Assignment</th></tr></thead>
                  <tbody data-ref="members"></tbody>
                </table></div></div>
              <div class="card"><h2>Rebalance history</h2>
                <ul class="rebalances scroll-list" data-testid="rebalances" data-ref="rebalances"></ul></div>
            </div>
            <div class="card"><h2>Partitions</h2>
              <div class="table-wrap"><table data-testid="group-partitions">
                <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Committed</th>
                  <th class="num">End</th><th class="num">Lag</th><th>Member</th></tr></thead>
                <tbody data-ref="partitions"><tr><td class="empty" colspan="6">loading…</td></tr></tbody>
              </table></div></div>
            <div data-ref="write"></div>
          </section>`;
        poller.tick(true);
      },
      update(snap) {
        if (!detail) {
          const g = (snap.groups || []).find((x) => x.id === id);
          if (g) setSummary(g);
        }
        syncWrite(ref('write'), snap, (slot) => buildReset(slot, id, () => poller.tick(true)));
        poller.tick();
      },
      unmount() { poller.stop(); },
    };
  }

  function memberRow(m) {
    const assignment = Array.isArray(m.assignment) && m.assignment.length
      ? m.assignment.map(esc).join(', ')
      : '<span class="muted">—</span>';
    return `<tr data-testid="member-row" data-member="${esc(m.member_id)}">
      <td class="mono">${esc(m.member_id)}</td>
      <td class="mono">${esc(m.client_id)}</td>
      <td class="mono">${esc(m.host)}</td>
      <td class="mono">${assignment}</td>
    </tr>`;
  }

  function groupPartitionRow(p) {
    return `<tr data-testid="group-partition-row" data-topic="${esc(p.topic)}" data-partition="${esc(p.partition)}">
      <td><a class="mono" href="${esc(topicHref(p.topic))}">${esc(p.topic)}</a></td>
      <td class="num mono">${esc(p.partition)}</td>
      <td class="num mono">${fmtInt(p.offset)}</td>
      <td class="num mono">${fmtInt(p.end)}</td>
      <td class="num mono${p.lag > 0 ? ' bad' : ''}">${fmtInt(p.lag)}</td>
      <td class="mono">${p.member ? esc(p.member) : '<span class="muted">—</span>'}</td>
    </tr>`;
  }

  function rebalanceItem(r) {
    const gen = r.generation === null || r.generation === undefined ? '—' : r.generation;
    return `<li data-testid="rebalance">
      <span class="tl-time">${esc(fmtClock(r.t))}</span>
      <span>generation <span class="mono">${esc(gen)}</span> · <strong>${esc(r.state)}</strong>
        · ${esc(fmtInt(r.members))} member(s)</span>
      <span class="tl-detail">${esc(r.reason)}</span>
    </li>`;
  }

  function parseResetValue(to, raw) {
    const s = String(raw ?? '').trim();
    if (to === 'offset') {
      if (!/^-?\d+$/.test(s)) throw invalid('value must be an integer offset');
      return Number(s);
    }
    if (to === 'timestamp') {
      if (/^\d+$/.test(s)) return Number(s);
      const ms = Date.parse(s);
      if (!isNum(ms)) throw invalid('value must be a timestamp in ms or a date');
      return ms;
    }
    return null;
  }

  function buildReset(slot, id, refresh) {
    slot.innerHTML = `
      <form class="card form-grid" data-testid="reset-offsets" novalidate>
        <h2>Reset offsets <span class="muted">(the group must have no active members)</span></h2>
        <label>Reset to <select name="to">
          <option value="earliest">earliest</option><option value="latest">latest</option>
          <option value="timestamp">timestamp</option><option value="offset">offset</option></select></label>
        <label>Value <input name="value" placeholder="offset, or timestamp (ms / ISO date)" spellcheck="false"></label>
        <label>Topic <input name="topic" placeholder="all topics" spellcheck="false"></label>
        <button type="submit">Reset offsets</button>
        <div class="form-msg" data-ref="msg"></div>
      </form>`;
    const form = slot.querySelector('form');
    onSubmit(form, async () => {
      const el = form.elements;
      const to = el.to.value;
      const value = parseResetValue(to, el.value.value);
      const topic = el.topic.value.trim() || null;
      const res = await api(`/api/groups/${encodeURIComponent(id)}/reset`, {
        method: 'POST',
        body: { topic, to, value },
      });
      refresh();
      const n = Array.isArray(res.offsets) ? res.offsets.length : 0;
      return okHtml(`reset ${n} partition(s)`, 'reset-result');
    });
  }

  // ------------------------------------------------------------- security

  /** A part of /api/security that could not be read ({error, denied}), shown in its card. */
  function partErrorHtml(e) {
    const msg = e && typeof e.error === 'string' ? e.error : 'could not be read';
    return errorHtml(new ApiError(0, msg, e && e.denied));
  }

  /** Compare objects field by field (strings, locale order). */
  function byFields(fields) {
    return (a, b) => {
      for (const f of fields) {
        const c = byName(a[f] ?? '', b[f] ?? '');
        if (c) return c;
      }
      return 0;
    };
  }

  const ACL_BY_RESOURCE = byFields(['resource_type', 'resource_name', 'pattern_type', 'principal', 'host',
    'operation', 'permission']);
  const ACL_BY_PRINCIPAL = byFields(['principal', 'resource_type', 'resource_name', 'pattern_type', 'host',
    'operation', 'permission']);

  function patternBadge(pattern) {
    return pattern && pattern !== 'LITERAL' ? ` <span class="badge">${esc(pattern)}</span>` : '';
  }

  /** ACL rows, filtered, sorted and grouped under a sub-header per resource pattern or principal. */
  function aclRows(acls, groupBy, filter) {
    const needle = String(filter ?? '').trim().toLowerCase();
    const shown = needle
      ? acls.filter((a) => String(a.principal ?? '').toLowerCase().includes(needle)
        || String(a.resource_name ?? '').toLowerCase().includes(needle))
      : acls;
    if (!shown.length) return rowsOrEmpty([], 6, acls.length ? 'No ACLs match the filter' : 'No ACLs');
    const byPrincipal = groupBy === 'principal';
    const groups = new Map();
    [...shown].sort(byPrincipal ? ACL_BY_PRINCIPAL : ACL_BY_RESOURCE).forEach((a) => {
      const key = byPrincipal
        ? String(a.principal ?? '')
        : [a.resource_type, a.pattern_type, a.resource_name].map((x) => String(x ?? '')).join('\u0000');
      if (!groups.has(key)) groups.set(key, []);
      groups.get(key).push(a);
    });
    const out = [];
    for (const list of groups.values()) {
      const a = list[0];
      const count = `<span class="muted"> · ${list.length} binding${list.length === 1 ? '' : 's'}</span>`;
      out.push(byPrincipal
        ? `<tr class="subhead" data-testid="acl-group" data-group="${esc(a.principal)}">
            <td colspan="6"><span class="mono">${esc(a.principal)}</span>${count}</td></tr>`
        : `<tr class="subhead" data-testid="acl-group" data-group="${esc(`${a.resource_type}:${a.resource_name}`)}"
            data-pattern="${esc(a.pattern_type)}"><td colspan="6">${esc(a.resource_type)}
            <span class="mono">${esc(a.resource_name)}</span>${patternBadge(a.pattern_type)}${count}</td></tr>`);
      list.forEach((b) => out.push(aclRow(b)));
    }
    return out.join('');
  }

  function aclRow(a) {
    const deny = String(a.permission ?? '').toUpperCase() === 'DENY';
    return `<tr data-testid="acl-row" data-principal="${esc(a.principal)}"
        data-resource="${esc(`${a.resource_type}:${a.resource_name}`)}" data-pattern="${esc(a.pattern_type)}">
      <td>${esc(a.resource_type)}</td>
      <td><span class="mono">${esc(a.resource_name)}</span>${patternBadge(a.pattern_type)}</td>
      <td class="mono">${esc(a.principal)}</td>
      <td class="mono">${esc(a.host)}</td>
      <td>${esc(a.operation)}</td>
      <td class="${deny ? 'deny' : 'allow'}">${esc(a.permission)}</td>
    </tr>`;
  }

  function userMechanisms(u) {
    const mechs = Array.isArray(u && u.mechanisms) ? u.mechanisms : [];
    return [...new Set(mechs.map((m) => m && m.mechanism).filter(Boolean))];
  }

  function userRow(u, writable) {
    const mechs = Array.isArray(u.mechanisms) ? u.mechanisms : [];
    const cell = mechs.length
      ? mechs.map((m) => `<span class="mech" data-mechanism="${esc(m.mechanism)}"><span class="mono">${esc(m.mechanism)}</span>
          <span class="muted">${esc(fmtInt(m.iterations))} iterations</span></span>`).join('')
      : '<span class="muted">—</span>';
    const action = writable
      ? '<td class="row-actions"><button type="button" class="danger small" data-testid="delete-user">Delete</button></td>'
      : '';
    return `<tr data-testid="user-row" data-user="${esc(u.name)}">
      <td class="mono">${esc(u.name)}</td>
      <td>${cell}</td>${action}
    </tr>`;
  }

  const QUOTA_KEYS = ['producer_byte_rate', 'consumer_byte_rate', 'request_percentage',
    'controller_mutation_rate', 'connection_creation_rate'];
  const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];

  function fmtByteRate(n) {
    let v = n;
    let i = 0;
    while (Math.abs(v) >= 1024 && i < BYTE_UNITS.length - 1) {
      v /= 1024;
      i++;
    }
    return i === 0 ? `${fmtNum(v)} B/s` : `${v.toFixed(1)} ${BYTE_UNITS[i]}/s`;
  }

  function fmtQuota(key, v) {
    if (!isNum(v)) return String(v ?? '—');
    if (/_byte_rate$/.test(key)) return fmtByteRate(v);
    if (key === 'request_percentage') return `${fmtNum(v)}%`;
    if (/_rate$/.test(key)) return `${fmtNum(v)}/s`;
    return fmtNum(v);
  }

  const ENTITY_ORDER = ['user', 'client-id', 'ip'];

  function entityRank(type) {
    const i = ENTITY_ORDER.indexOf(type);
    return i < 0 ? ENTITY_ORDER.length : i;
  }

  /** [[type, name-or-null], ...] -> "user=alice, client-id=<default>" (plain text; null = default entity). */
  function quotaEntity(entity) {
    if (!Array.isArray(entity) || !entity.length) return '—';
    return [...entity]
      .sort((a, b) => entityRank(a[0]) - entityRank(b[0]) || byName(a[0], b[0]))
      .map(([type, name]) => `${type}=${name === null || name === undefined ? '<default>' : name}`)
      .join(', ');
  }

  /** Value keys present in any quota: the known ones first, then the rest sorted. */
  function quotaKeys(quotas) {
    const seen = new Set();
    quotas.forEach((q) => Object.keys((q && q.values) || {}).forEach((k) => seen.add(k)));
    return QUOTA_KEYS.filter((k) => seen.has(k)).concat([...seen].filter((k) => !QUOTA_KEYS.includes(k)).sort(byName));
  }

  function quotaRow(q, keys) {
    const values = q.values || {};
    const entity = quotaEntity(q.entity);
    const cells = keys.map((k) => (k in values
      ? `<td class="num mono" data-key="${esc(k)}" title="${esc(values[k])}">${esc(fmtQuota(k, values[k]))}</td>`
      : '<td class="num"><span class="muted">—</span></td>'));
    return `<tr data-testid="quota-row" data-entity="${esc(entity)}">
      <td class="mono nowrap">${esc(entity)}</td>${cells.join('')}
    </tr>`;
  }

  function SecurityView() {
    let ref;
    let data = null;
    let readOnly = true; // until the first snapshot says writes are allowed
    const poller = makePoller(
      () => api('/api/security'),
      (d) => { data = d; ref('status').innerHTML = ''; renderAll(); },
      (e) => { ref('status').innerHTML = errorHtml(e); },
      SECURITY_REFRESH_MS,
    );

    /** Show a part's list, or the error that kept it from being read. */
    function renderPart(part, list, err, render) {
      const ok = Array.isArray(list);
      ref(`${part}-body`).hidden = !ok;
      ref(`${part}-error`).innerHTML = ok ? '' : (err ? partErrorHtml(err) : '<p class="muted">not available</p>');
      if (ok) render(list);
    }

    function renderAcls() {
      if (!data) return;
      renderPart('acls', data.acls, data.acls_error, (acls) => {
        ref('acls').innerHTML = aclRows(acls, ref('acl-group').value, ref('acl-filter').value);
      });
    }

    function renderUsers() {
      if (!data) return;
      const writable = !readOnly;
      ref('users-head').innerHTML = `<tr><th>Name</th><th>Mechanisms</th>${writable ? '<th></th>' : ''}</tr>`;
      renderPart('users', data.users, data.users_error, (users) => {
        const sorted = [...users].sort((a, b) => byName(a.name, b.name));
        ref('users').innerHTML = rowsOrEmpty(sorted.map((u) => userRow(u, writable)), writable ? 3 : 2, 'No SCRAM users');
      });
    }

    function renderQuotas() {
      if (!data) return;
      renderPart('quotas', data.quotas, data.quotas_error, (quotas) => {
        const keys = quotaKeys(quotas);
        ref('quotas-head').innerHTML = `<tr><th>Entity</th>${keys.length
          ? keys.map((k) => `<th class="num mono">${esc(k)}</th>`).join('')
          : '<th>Values</th>'}</tr>`;
        const sorted = [...quotas].sort((a, b) => byName(quotaEntity(a.entity), quotaEntity(b.entity)));
        ref('quotas').innerHTML = rowsOrEmpty(sorted.map((q) => quotaRow(q, keys)), 1 + Math.max(keys.length, 1), 'No quotas');
      });
    }

    function renderAll() {
      renderAcls();
      renderUsers();
      renderQuotas();
    }

    function deleteUser(btn) {
      const row = btn.closest('[data-testid="user-row"]');
      if (!row || readOnly) return;
      const name = row.dataset.user;
      const mechs = userMechanisms(((data && data.users) || []).find((u) => u.name === name));
      const msg = ref('users-msg');
      if (!mechs.length) {
        msg.innerHTML = errorHtml(invalid(`user ${name} has no SCRAM credentials to delete`));
        return;
      }
      if (!window.confirm(`Delete SCRAM user "${name}" (${mechs.join(', ')})?`)) return;
      runAction(row, msg, async () => {
        for (const mechanism of mechs) {
          await api(`/api/users/${encodeURIComponent(name)}?mechanism=${encodeURIComponent(mechanism)}`, {
            method: 'DELETE',
          });
        }
        poller.tick(true);
        return okHtml(`user ${name} deleted`, 'form-ok');
      });
    }

    return {
      mount(root) {
        ref = refOf(root);
        root.innerHTML = `
          <section class="view" data-testid="view-security">
            <h1>Security</h1>
            <div data-ref="status"></div>
            <div class="card"><h2>ACLs</h2>
              <div data-ref="acls-error"></div>
              <div data-ref="acls-body">
                <div class="toolbar">
                  <label>Group by <select name="acl-group" data-ref="acl-group">
                    <option value="resource">resource</option><option value="principal">principal</option></select></label>
                  <label>Filter <input name="acl-filter" data-ref="acl-filter" placeholder="principal or resource name"
                    autocomplete="off" spellcheck="false"></label>
                </div>
                <div class="table-wrap tall"><table data-testid="acls">
                  <thead><tr><th>Resource type</th><th>Resource</th><th>Principal</th><th>Host</th>
                    <th>Operation</th><th>Permission</th></tr></thead>
                  <tbody data-ref="acls"><tr><td class="empty" colspan="6">loading…</td></tr></tbody>
                </table></div>
              </div>
            </div>
            <div class="card"><h2>SCRAM users</h2>
              <div data-ref="users-error"></div>
              <div data-ref="users-body">
                <div class="table-wrap"><table data-testid="users">
                  <thead data-ref="users-head"><tr><th>Name</th><th>Mechanisms</th></tr></thead>
                  <tbody data-ref="users"><tr><td class="empty" colspan="2">loading…</td></tr></tbody>
                </table></div>
              </div>
              <div class="form-msg" data-ref="users-msg"></div>
            </div>
            <div data-ref="write"></div>
            <div class="card"><h2>Client quotas</h2>
              <div data-ref="quotas-error"></div>
              <div data-ref="quotas-body">
                <div class="table-wrap"><table data-testid="quotas">
                  <thead data-ref="quotas-head"><tr><th>Entity</th><th>Values</th></tr></thead>
                  <tbody data-ref="quotas"><tr><td class="empty" colspan="2">loading…</td></tr></tbody>
                </table></div>
              </div>
            </div>
          </section>`;
        ref('acl-group').addEventListener('change', renderAcls);
        ref('acl-filter').addEventListener('input', renderAcls);
        ref('users').addEventListener('click', (ev) => {
          const btn = ev.target.closest('[data-testid="delete-user"]');
          if (btn) deleteUser(btn);
        });
        poller.tick(true);
      },
      update(snap) {
        const ro = Boolean(snap.read_only);
        if (ro !== readOnly) {
          readOnly = ro;
          renderUsers();
        }
        syncWrite(ref('write'), snap, (slot) => buildCreateUser(slot, () => poller.tick(true)));
        poller.tick();
      },
      unmount() { poller.stop(); },
    };
  }

  function buildCreateUser(slot, refresh) {
    slot.innerHTML = `
      <form class="card form-grid" data-testid="create-user" method="post" novalidate>
        <h2>Create SCRAM user</h2>
        <label>Name <input name="name" autocomplete="off" spellcheck="false" placeholder="alice"></label>
        <label>Password <input name="password" type="password" autocomplete="new-password"></label>
        <label>Mechanism <select name="mechanism">
          <option value="SCRAM-SHA-256" selected>SCRAM-SHA-256</option>
          <option value="SCRAM-SHA-512">SCRAM-SHA-512</option></select></label>
        <label>Iterations <input name="iterations" type="number" min="1" value="4096"></label>
        <button type="submit">Create user</button>
        <div class="form-msg" data-ref="msg"></div>
      </form>`;
    const form = slot.querySelector('form');
    onSubmit(form, async () => {
      const el = form.elements;
      try {
        const name = el.name.value.trim();
        const mechanism = el.mechanism.value;
        const iterations = parseIntField(el.iterations.value);
        if (!name) throw invalid('user name is required');
        if (!el.password.value) throw invalid('password is required');
        if (!(iterations >= 1)) throw invalid('iterations must be a positive integer');
        await api('/api/users', {
          method: 'POST',
          body: { name, password: el.password.value, mechanism, iterations },
        });
        el.name.value = '';
        refresh();
        return okHtml(`user ${name} created`, 'form-ok');
      } finally {
        el.password.value = '';
      }
    });
  }


  // -------------------------------------------------------------- journey

  const STAGE_LABELS = {
    'producer.interceptors': 'interceptors (onSend)',
    'producer.serialize': 'serializer',
    'producer.partition': 'partitioner',
    'accumulator.append': 'RecordAccumulator append',
    'batch.ready': 'batch ready',
    'sender.drain': 'Sender drain',
    'request.sent': 'ProduceRequest in flight',
    'broker.receive': 'broker receives',
    'broker.append': 'leader appends',
    'replica.fetch': 'follower fetch carries it',
    'follower.append': 'follower appends',
    'replica.caught-up': 'follower has it (next fetch)',
    'hw.advance': 'high watermark passes it',
    'broker.response': 'produce response',
    'response.received': 'response received',
    'producer.callback': 'callback',
    'consumer.fetch': 'consumer fetch returns it',
    'consumer.poll': 'poll returns it',
    'group.commit': 'commit covers it (coordinator)',
    'consumer.commit': 'commit',
    'record.timestamp': 'record timestamp',
  };

  function laneLabel(lane) {
    if (lane === 'producer') return 'producer · application thread';
    if (lane === 'sender') return 'producer · Sender thread';
    return lane;
  }

  function laneRank(lane) {
    if (lane === 'producer') return [0, 0];
    if (lane === 'sender') return [1, 0];
    const b = /^broker (\d+)$/.exec(lane);
    if (b) return [2, Number(b[1])];
    if (lane === 'log') return [2, -1];
    return [3, 0];
  }

  function journeyLanes(stages) {
    const lanes = [...new Set(stages.map((s) => s.lane || '?'))];
    return lanes.sort((a, b) => {
      const ra = laneRank(a);
      const rb = laneRank(b);
      return ra[0] - rb[0] || ra[1] - rb[1] || byName(a, b);
    });
  }

  function fmtElapsed(us) {
    if (!isNum(us)) return '—';
    if (Math.abs(us) < 1000) return `${Math.round(us)} µs`;
    return `${(us / 1000).toFixed(us < 100000 ? 2 : 0)} ms`;
  }

  function stageAttrs(s) {
    const skip = new Set(['stage', 't_us', 'duration_us', 'lane', 'detail', 'broker']);
    return Object.entries(s).filter(([k, v]) => !skip.has(k) && v !== null && v !== undefined
      && typeof v !== 'object').map(([k, v]) => `${esc(k)}=${esc(v)}`).join(' ');
  }

  /** The swim lanes: one row per place, the stages in time order left to right. */
  function swimlanes(stages) {
    const lanes = journeyLanes(stages);
    const laneH = 38;
    const left = 210;
    // fit a card's width when the stages allow (a long journey scrolls sideways)
    const step = Math.max(26, Math.min(46, (1080 - left - 40) / Math.max(stages.length, 1)));
    const width = Math.max(760, left + 30 + step * stages.length);
    const height = 34 + laneH * lanes.length;
    const t0 = stages.length ? stages[0].t_us : 0;
    const y = (lane) => 34 + laneH * lanes.indexOf(lane) + laneH / 2;
    let out = `<svg class="swimlanes" data-testid="swimlanes" viewBox="0 0 ${width} ${height}" `
      + `width="${width}" height="${height}" role="img" aria-label="journey of the record" `
      + 'xmlns="http://www.w3.org/2000/svg">';
    lanes.forEach((lane, i) => {
      const top = 34 + laneH * i;
      out += `<rect class="lane${i % 2 ? ' lane-odd' : ''}" x="0" y="${top}" width="${width}" height="${laneH}"/>`
        + `<text class="lane-label" x="8" y="${top + laneH / 2 + 4}">${esc(laneLabel(lane))}</text>`;
    });
    let prev = null;
    stages.forEach((s, i) => {
      const x = left + 20 + step * i;
      const yy = y(s.lane || '?');
      if (prev) out += `<line class="hop" x1="${prev[0]}" y1="${prev[1]}" x2="${x}" y2="${yy}"/>`;
      prev = [x, yy];
      const title = `${STAGE_LABELS[s.stage] || s.stage} · +${fmtElapsed(s.t_us - t0)}`
        + `${s.detail ? ` · ${s.detail}` : ''}`;
      out += `<g class="stage-dot" data-stage="${esc(s.stage)}"><title>${esc(title)}</title>`
        + `<circle cx="${x}" cy="${yy}" r="6"/>`
        + `<text class="stage-num" x="${x}" y="${yy - 10}" text-anchor="middle">${i + 1}</text></g>`;
    });
    out += `<text class="chart-title" x="8" y="20">${stages.length} stages over `
      + `${esc(fmtElapsed(stages.length ? stages[stages.length - 1].t_us - t0 : 0))}</text>`;
    return `${out}</svg>`;
  }

  function stageTable(stages) {
    const t0 = stages.length ? stages[0].t_us : 0;
    const rows = stages.map((s, i) => `<tr data-testid="stage-row" data-stage="${esc(s.stage)}"
        data-lane="${esc(s.lane || '')}" data-t="${esc(s.t_us)}" data-broker="${esc(s.broker ?? '')}"
        data-offset="${esc(s.offset ?? '')}" data-partition="${esc(s.partition ?? '')}">
      <td class="num mono">${i + 1}</td>
      <td class="num mono">+${esc(fmtElapsed(s.t_us - t0))}</td>
      <td>${esc(laneLabel(s.lane || '?'))}</td>
      <td><b>${esc(STAGE_LABELS[s.stage] || s.stage)}</b> <span class="muted mono">${esc(s.stage)}</span></td>
      <td>${esc(s.detail || '')} <span class="muted mono">${stageAttrs(s)}</span></td>
      <td class="num mono">${s.duration_us ? esc(fmtElapsed(s.duration_us)) : ''}</td>
    </tr>`);
    return `<table class="data"><thead><tr><th>#</th><th>at</th><th>where</th><th>stage</th>
      <th>detail</th><th>took</th></tr></thead><tbody>${rowsOrEmpty(rows, 6, 'No stages yet')}</tbody></table>`;
  }

  function journeyHtml(j) {
    const r = j.record || {};
    const where = isNum(r.offset) ? `${r.topic}-${r.partition} @ offset ${r.offset}` : (r.topic || '');
    const notes = (j.notes || []).map((n) => `<li>${esc(n)}</li>`).join('');
    const facts = (j.facts || []).map((n) => `<li data-testid="fact">${esc(n)}</li>`).join('');
    const denied = (j.denied || []).map((n) => `<p class="denied" data-testid="denied">denied: ${esc(n)}</p>`).join('');
    const stages = j.stages || [];
    return `<div class="card" data-testid="journey" data-state="${esc(j.state || 'done')}"
        data-trace="${esc(j.trace_id || r.trace_id || '')}">
      <h2>Journey of ${esc(where)}</h2>
      <p class="muted">trace <span class="mono">${esc(j.trace_id || r.trace_id || '—')}</span>
        ${j.acks ? ` · acks=${esc(j.acks)}` : ''}${j.state ? ` · <span data-testid="journey-state">${esc(j.state)}</span>` : ''}</p>
      ${denied}
      <div class="swim-wrap">${swimlanes(stages)}</div>
      ${stageTable(stages)}
      ${facts ? `<h3>What the cluster can still tell</h3><ul>${facts}</ul>` : ''}
      ${notes ? `<h3>Notes</h3><ul data-testid="journey-notes">${notes}</ul>` : ''}
    </div>`;
  }

  function JourneyView(traceId) {
    let ref;
    let current = traceId || null;
    let alive = true;

    function show(j) {
      if (alive && j) ref('result').innerHTML = journeyHtml(j);
    }

    function buildTrace(slot) {
      slot.innerHTML = `
        <form class="card form-grid" data-testid="trace-form" novalidate>
          <h2>Trace a record</h2>
          <p class="wide muted">The console sends one record with a <span class="mono">traceparent</span>
            header; the producer, every broker and the console's own consumer record each stage it passes.</p>
          <label>Topic <select name="topic"></select></label>
          <label>Partition <input name="partition" type="number" min="0" placeholder="auto"></label>
          <label>acks <select name="acks"><option value="all" selected>all</option>
            <option value="1">1</option><option value="0">0</option></select></label>
          <label class="wide">Key <input name="key" placeholder="(none)" spellcheck="false"></label>
          <label class="wide">Value <textarea name="value" rows="2" spellcheck="false">hello</textarea></label>
          <button type="submit">Trace a record</button>
          <div class="form-msg" data-ref="msg"></div>
        </form>`;
      const form = slot.querySelector('form');
      onSubmit(form, async () => {
        const fields = recordFields(form.elements);
        const { topic } = fields;
        const res = await api('/api/journey', {
          method: 'POST', body: { ...fields, acks: form.elements.acks.value },
        });
        current = res.trace_id;
        history.replaceState(null, '', `#/journey/${encodeURIComponent(current)}`);
        show(app.journeys.get(current) || { trace_id: current, state: 'sending', stages: [], record: { topic } });
        return okHtml(`tracing ${current}`, 'trace-started');
      });
    }

    return {
      mount(r) {
        r.innerHTML = `<section class="view" data-testid="view-journey">
          <h1>The journey of a record</h1>
          <div data-ref="write"></div>
          <form class="card form-grid" data-testid="lookup-form" novalidate>
            <h2>Trace a record already in the log</h2>
            <label>Topic <select name="topic"></select></label>
            <label>Partition <input name="partition" type="number" min="0" value="0"></label>
            <label>Offset <input name="offset" type="number" min="0" value="0"></label>
            <button type="submit">Trace offset</button>
            <div class="form-msg" data-ref="lookup-msg"></div>
          </form>
          <div data-ref="result"></div>
        </section>`;
        ref = (name) => r.querySelector(`[data-ref="${name}"]`);
        const lookup = r.querySelector('[data-testid="lookup-form"]');
        lookup.addEventListener('submit', (ev) => {
          ev.preventDefault();
          runAction(lookup, ref('lookup-msg'), async () => {
            const el = lookup.elements;
            const partition = parseIntField(el.partition.value);
            const offset = parseIntField(el.offset.value);
            if (!el.topic.value) throw invalid('choose a topic');
            if (partition === null || Number.isNaN(partition)) throw invalid('partition must be a non-negative integer');
            if (offset === null || Number.isNaN(offset)) throw invalid('offset must be a non-negative integer');
            const params = new URLSearchParams({ topic: el.topic.value, partition, offset });
            const found = await api(`/api/journey?${params}`);
            current = null;
            show({ ...found, state: found.record.trace_id ? 'traced' : 'untraced' });
            return '';
          });
        });
        if (current) {
          show(app.journeys.get(current));
          api(`/api/journey/${encodeURIComponent(current)}`).then(show, (e) => {
            if (alive) ref('result').innerHTML = `<div class="card">${errorHtml(e)}</div>`;
          });
        }
      },
      update(snap) {
        const names = topicNames(snap);
        syncWrite(ref('write'), snap, buildTrace);
        document.querySelectorAll('[data-testid="view-journey"] select[name="topic"]')
          .forEach((sel) => syncTopicSelect(sel, names, ''));
      },
      journey(j) {
        if (j.trace_id === current) show(j);
      },
      unmount() { alive = false; },
    };
  }

  // ---------------------------------------------------------- not found

  function NotFoundView(path) {
    return {
      mount(root) {
        root.innerHTML = `<section class="view card" data-testid="view-not-found">
          <h1>Not found</h1><p>No page at <span class="mono">${esc(path)}</span>.
          <a href="#/overview">Go to overview</a></p></section>`;
      },
      update() {},
    };
  }

  // --------------------------------------------------------------- router

  function safeDecode(s) {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  }

  function parseHash() {
    const raw = location.hash.replace(/^#/, '') || '/overview';
    const q = raw.indexOf('?');
    const path = q < 0 ? raw : raw.slice(0, q);
    const query = new URLSearchParams(q < 0 ? '' : raw.slice(q + 1));
    return { path: path.replace(/\/+$/, '') || '/overview', query };
  }

  const ROUTES = [
    [/^\/overview$/, 'overview', () => OverviewView()],
    [/^\/topics$/, 'topics', () => TopicsView()],
    [/^\/topics\/(.+)$/, 'topics', (m) => TopicView(safeDecode(m[1]))],
    [/^\/messages$/, 'messages', (m, q) => MessagesView(q)],
    [/^\/groups$/, 'groups', () => GroupsView()],
    [/^\/groups\/(.+)$/, 'groups', (m) => GroupView(safeDecode(m[1]))],
    [/^\/security$/, 'security', () => SecurityView()],
    [/^\/journey$/, 'journey', () => JourneyView(null)],
    [/^\/journey\/([0-9a-f]{32})$/, 'journey', (m) => JourneyView(m[1])],
  ];

  const app = { snapshot: null, view: null, es: null, retryMs: 1000, journeys: new Map() };

  function route() {
    const { path, query } = parseHash();
    let view = null;
    let nav = '';
    for (const [re, section, make] of ROUTES) {
      const m = path.match(re);
      if (m) {
        view = make(m, query);
        nav = section;
        break;
      }
    }
    if (!view) view = NotFoundView(path);
    document.querySelectorAll('[data-nav]').forEach((a) => {
      a.classList.toggle('active', a.dataset.nav === nav);
    });
    if (app.view && app.view.unmount) app.view.unmount();
    app.view = view;
    const root = document.getElementById('view');
    try {
      view.mount(root);
      if (app.snapshot) view.update(app.snapshot);
    } catch (err) {
      console.error(err);
      root.innerHTML = `<div class="card">${errorHtml(err)}</div>`;
    }
    window.scrollTo(0, 0);
  }

  // ---------------------------------------------------------- live state

  function setLive(up) {
    const el = document.querySelector('[data-testid="live"]');
    el.dataset.state = up ? 'up' : 'down';
    el.textContent = up ? 'live' : 'reconnecting';
  }

  function applyChrome(snap) {
    document.querySelector('[data-testid="read-only"]').hidden = !snap.read_only;
    const banner = document.querySelector('[data-testid="error-banner"]');
    banner.hidden = !snap.error;
    banner.textContent = snap.error ? `Cannot reach the cluster: ${snap.error}` : '';
  }

  function onState(ev) {
    let snap;
    try {
      snap = JSON.parse(ev.data);
    } catch (err) {
      console.error('bad state event', err);
      return;
    }
    if (!snap || typeof snap !== 'object') return;
    app.snapshot = snap;
    app.retryMs = 1000;
    setLive(true);
    applyChrome(snap);
    try {
      if (app.view) app.view.update(snap);
    } catch (err) {
      console.error('render failed', err);
    }
  }

  function onJourney(ev) {
    let j;
    try {
      j = JSON.parse(ev.data);
    } catch (err) {
      console.error('bad journey event', err);
      return;
    }
    if (!j || typeof j.trace_id !== 'string') return;
    app.journeys.set(j.trace_id, j);
    try {
      if (app.view && app.view.journey) app.view.journey(j);
    } catch (err) {
      console.error('render failed', err);
    }
  }

  /**
   * EventSource retries by itself after network errors, but gives up on a
   * non-200 response (e.g. 401). Then probe the status and reconnect ourselves.
   */
  async function onStreamClosed() {
    const ctrl = new AbortController();
    try {
      const res = await fetch('/api/stream', { signal: ctrl.signal, credentials: 'same-origin' });
      ctrl.abort();
      if (res.status === 401) {
        goLogin();
        return;
      }
    } catch {
      // server unreachable; retry below
    }
    const delay = app.retryMs;
    app.retryMs = Math.min(app.retryMs * 2, 30000);
    setTimeout(connect, delay);
  }

  function connect() {
    if (app.es) app.es.close();
    const es = new EventSource('/api/stream');
    app.es = es;
    es.addEventListener('open', () => setLive(true));
    es.addEventListener('state', onState);
    es.addEventListener('journey', onJourney);
    es.addEventListener('error', () => {
      setLive(false);
      if (es.readyState === EventSource.CLOSED && app.es === es) onStreamClosed();
    });
  }

  function start() {
    setLive(false);
    window.addEventListener('hashchange', route);
    route();
    connect();
  }

  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
})();
