// app.js: the dashboard: follows GET /v1/events and refreshes the job list (If-None-Match: an
// idle page costs 304s) on each event, polling as the fallback; draws the stage and throughput
// charts, lists the devices and submits jobs; asks for a bearer token when the API answers 401
// and keeps it in the tab's sessionStorage. Single-threaded (the page).
'use strict';

const OPS = ['sum', 'prod', 'min', 'max', 'mean', 'argmin', 'argmax'];
const DTYPES = ['int32', 'int64', 'float32', 'float64'];
const STAGES = [['queue', '#9aa5b1'], ['h2d', '#e0a030'], ['kernel', '#2a6fdb'], ['d2h', '#8e44ad']];
const POLL_MS = 1000;        // without the event stream
const POLL_LIVE_MS = 15000;  // with it: a safety net only
const RETRY_MS = 2000;       // a dropped stream is opened again after this
const WINDOW_S = 300, BIN_S = 10;
const BENCH_N = 1 << 20, BENCH_REPEATS = 5;
const TOKEN_KEY = 'gpured.token';

const state = { etag: null, jobs: [], devices: null, algorithms: [], needToken: false, live: false, refreshing: false };
const $ = (id) => document.getElementById(id);

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined) e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function option(select, value, label) {
  const o = el('option', label || value);
  o.value = value;
  select.appendChild(o);
}

function ms(v) { return typeof v === 'number' ? (v < 10 ? v.toFixed(3) : v.toFixed(1)) : ''; }

function bytesText(n) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i ? n.toFixed(1) : String(n)) + ' ' + units[i];
}

// A result value as text: numbers as JSON has them, non-finite floats are strings already.
function resultText(res) {
  if (!res) return '';
  if (res.rows) return res.rows.length + ' variants (' + res.rows.filter((r) => r.matched).length + ' matched)';
  if ('value' in res) return String(res.value) + ('index' in res ? ' @' + res.index : '');
  // kept as a dataset (over 4096 values, or a product): its id and shape, the values only if inline
  if (res.dataset && !res.values) return 'dataset ' + res.dataset + ' (' + res.shape.join('×') + ')';
  const vals = res.values || [];
  const head = vals.slice(0, 4).map(String).join(', ');
  return '[' + head + (vals.length > 4 ? ', … ' + vals.length + ' values' : '') + ']';
}

// --- the token ---

// Every data call goes through here: the tab's token, if it holds one, goes in the Authorization
// header (never in a URL, never logged); a 401 asks for a token.
async function api(path, opts = {}) {
  const token = sessionStorage.getItem(TOKEN_KEY);
  const headers = Object.assign({}, opts.headers, token ? { Authorization: 'Bearer ' + token } : {});
  const r = await fetch(path, Object.assign({ cache: 'no-store' }, opts, { headers }));
  if (r.status === 401) askToken(token);
  return r;
}

// Show the token form. A 401 to a token other than the one held now (sent before a newer one was
// entered) changes nothing; a refused token is dropped.
function askToken(sent) {
  if (sent !== sessionStorage.getItem(TOKEN_KEY)) return;
  if (sent) sessionStorage.removeItem(TOKEN_KEY);
  state.needToken = true;
  state.etag = null;
  $('token-msg').textContent = sent ? 'That token was refused: enter another.' : 'This server needs a token.';
  $('token-card').hidden = false;
  $('token-forget').hidden = true;
  $('jobs-meta').textContent = '(needs a token)';
}

// The token form: keep the token for this tab, then load what the 401s held back.
function useToken(ev) {
  ev.preventDefault();
  const box = $('token');
  const token = box.value.trim();
  box.value = '';
  if (!token) return;
  sessionStorage.setItem(TOKEN_KEY, token);
  state.needToken = false;
  state.etag = null;
  $('token-card').hidden = true;
  $('token-forget').hidden = false;
  if (!state.devices) loadDevices();
  pollJobs();
}

// Forget the tab's token and what it showed; the next call's 401 brings the form back.
function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $('token-forget').hidden = true;
  state.etag = null;
  state.jobs = [];
  renderAll();
  for (const id of ['submit-result', 'bench-result']) $(id).textContent = '';
  pollJobs();
}

async function getJSON(path) {
  const r = await api(path);
  if (!r.ok) throw new Error(path + ': HTTP ' + r.status);
  return r.json();
}

// --- jobs table and charts ---

function renderJobs() {
  const body = $('jobs').tBodies[0];
  const rows = state.jobs.map((j) => {
    const t = j.timings_ms || {};
    const tr = el('tr');
    tr.dataset.id = j.id;
    tr.dataset.status = j.status;
    tr.appendChild(el('td', j.id, 'id'));
    const st = el('td');
    st.appendChild(el('span', j.status, 'status status-' + j.status));
    tr.appendChild(st);
    for (const v of [j.op, j.dtype, (j.shape || []).join('×'), j.axis === null ? '—' : String(j.axis), j.device, j.algorithm])
      tr.appendChild(el('td', v));
    for (const k of ['queue', 'h2d', 'kernel', 'd2h', 'total'])
      tr.appendChild(el('td', ms(t[k]), 'num ' + k));
    tr.appendChild(el('td', typeof j.gbps === 'number' ? j.gbps.toFixed(2) : '', 'num'));
    const res = el('td', j.status === 'failed' && j.error ? j.error.detail : resultText(j.result), 'result');
    res.title = res.textContent;
    tr.appendChild(res);
    return tr;
  });
  body.replaceChildren(...rows);
  $('jobs-meta').textContent = state.jobs.length ? '(newest ' + state.jobs.length + ')' : '(none yet)';
}

let stageChart, throughputChart, benchChart;

// Benchmarks have their own chart: their stages are every variant's repeats, not one reduction.
const isReduction = (j) => j.kind !== 'benchmark';

function makeCharts() {
  const common = { responsive: true, maintainAspectRatio: false, animation: false };
  stageChart = new Chart($('stage-chart'), {
    type: 'bar',
    data: { labels: [], datasets: STAGES.map(([name, color]) => ({ label: name, data: [], backgroundColor: color })) },
    options: Object.assign({}, common, {
      scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: 'ms' } } },
    }),
  });
  throughputChart = new Chart($('throughput-chart'), {
    type: 'line',
    data: {
      labels: [],
      datasets: [
        { label: 'jobs/s', data: [], borderColor: '#2a6fdb', backgroundColor: '#2a6fdb', yAxisID: 'y', pointRadius: 0 },
        { label: 'MB/s in', data: [], borderColor: '#1f8a4c', backgroundColor: '#1f8a4c', yAxisID: 'y1', pointRadius: 0 },
      ],
    },
    options: Object.assign({}, common, {
      scales: {
        x: { ticks: { maxRotation: 0, autoSkipPadding: 12 }, title: { display: true, text: 'seconds ago' } },
        y: { beginAtZero: true, position: 'left', title: { display: true, text: 'jobs/s' } },
        y1: { beginAtZero: true, position: 'right', grid: { drawOnChartArea: false }, title: { display: true, text: 'MB/s' } },
      },
    }),
  });
  benchChart = new Chart($('bench-chart'), {
    type: 'bar',
    data: { labels: [], datasets: [{ label: 'GB/s (median)', data: [], backgroundColor: [] }] },
    options: Object.assign({}, common, {
      indexAxis: 'y',
      scales: { x: { beginAtZero: true, title: { display: true, text: 'GB/s' } } },
    }),
  });
}

// Stage breakdown of the last 20 jobs that ran, oldest on the left.
function renderStageChart() {
  const ran = state.jobs.filter((j) => isReduction(j) && j.timings_ms && (j.status === 'succeeded' || j.status === 'failed'))
    .slice(0, 20).reverse();
  stageChart.data.labels = ran.map((j) => j.op + ' …' + j.id.slice(-5));
  STAGES.forEach(([name], i) => { stageChart.data.datasets[i].data = ran.map((j) => j.timings_ms[name]); });
  stageChart.update();
}

// Jobs finished and input bytes processed per second, in 10 s bins over the last 5 minutes.
function renderThroughput() {
  const now = Date.now() / 1000, nbins = WINDOW_S / BIN_S;
  const jobs = new Array(nbins).fill(0), bytes = new Array(nbins).fill(0);
  for (const j of state.jobs) {
    if (j.status !== 'succeeded' || !j.finished_at || !isReduction(j)) continue;
    const age = now - Date.parse(j.finished_at) / 1000;
    const bin = nbins - 1 - Math.floor(Math.max(age, 0) / BIN_S);
    if (bin < 0) continue;
    jobs[bin] += 1 / BIN_S;
    bytes[bin] += j.bytes / BIN_S / 1e6;
  }
  throughputChart.data.labels = jobs.map((_, i) => String((nbins - 1 - i) * BIN_S));
  throughputChart.data.datasets[0].data = jobs;
  throughputChart.data.datasets[1].data = bytes;
  throughputChart.update();
}

// The newest succeeded benchmark: each variant's GB/s (GFLOP/s for products), red where its
// answer did not match, and last, in grey, the device's measured memory ceiling when it has one.
function renderBench() {
  const b = state.jobs.find((j) => !isReduction(j) && j.status === 'succeeded');
  const rows = b ? b.result.rows.slice() : [];
  const flops = b && b.op === 'matmul';
  const ceiling = b && !flops && b.result.ceiling_gbps;
  if (ceiling) rows.push({ algorithm: 'device ceiling', gbps: ceiling, ceiling: true });
  const unit = flops ? 'GFLOP/s' : 'GB/s';
  benchChart.data.labels = rows.map((r) => r.algorithm);
  benchChart.data.datasets[0].label = unit + ' (median)';
  benchChart.options.scales.x.title.text = unit;
  benchChart.data.datasets[0].data = rows.map((r) => (flops ? r.gflops : r.gbps));
  benchChart.data.datasets[0].backgroundColor = rows.map((r) => (r.ceiling ? '#999999' : r.matched ? '#2a6fdb' : '#c0392b'));
  benchChart.update();
  $('bench-meta').textContent = b ? '(' + [b.id, b.device, b.op, b.dtype, 'n=' + b.shape[0]].join(' · ') + ')' : '(none yet)';
}

function renderAll() {
  renderJobs();
  renderStageChart();
  renderThroughput();
  renderBench();
}

async function pollJobs() {
  if (state.needToken) return;
  try {
    const headers = state.etag ? { 'If-None-Match': state.etag } : {};
    const r = await api('/v1/jobs?limit=100', { headers });
    if (r.status === 401) return;
    if (r.status === 200) {
      const body = await r.json();
      state.etag = r.headers.get('ETag');
      state.jobs = body.jobs;
      renderAll();
    } else if (r.status !== 304) {
      throw new Error('HTTP ' + r.status);
    }
  } catch (err) {
    $('jobs-meta').textContent = '(cannot list jobs: ' + err.message + ')';
  }
}

function pollLoop() {
  pollJobs().finally(() => setTimeout(pollLoop, state.live ? POLL_LIVE_MS : POLL_MS));
}

// --- live updates ---

// An event says the list changed: one refresh for a burst of them.
function eventRefresh() {
  if (state.refreshing) return;
  state.refreshing = true;
  setTimeout(() => {
    state.refreshing = false;
    document.body.dataset.eventRefreshes = String(Number(document.body.dataset.eventRefreshes || 0) + 1);
    pollJobs();
  }, 100);
}

function setLive(live) {
  state.live = live;
  $('live').textContent = live ? '● live' : '○ polling';
  $('live').dataset.live = String(live);
}

// GET /v1/events read through fetch (an EventSource cannot send the token). Each event refreshes
// the job list; while the stream is up, polling slows to a safety net. A dropped stream (gpured
// restarting) is opened again, and polling carries on meanwhile.
async function watchEvents() {
  for (;;) {
    try {
      if (!state.needToken) {
        const r = await api('/v1/events?kind=job&heartbeat=15', { headers: { Accept: 'text/event-stream' } });
        if (r.status === 200 && r.body) {
          setLive(true);
          const reader = r.body.getReader();
          const text = new TextDecoder();
          let buf = "";
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            buf += text.decode(value, { stream: true });
            let end;
            while ((end = buf.indexOf('\n\n')) >= 0) {
              const block = buf.slice(0, end);
              buf = buf.slice(end + 2);
              if (/^data: /m.test(block)) eventRefresh();
            }
          }
        }
      }
    } catch (err) {
      // the stream dropped: polling goes on, and the stream is tried again below
    }
    setLive(false);
    await new Promise((done) => setTimeout(done, RETRY_MS));
  }
}

// --- devices, readiness ---

function renderDevices() {
  const box = $('devices');
  const cards = [];
  const d = state.devices;
  for (const g of d.gpus) {
    const c = el('div', undefined, 'device');
    c.appendChild(el('b', g.id + ' · ' + g.name));
    c.appendChild(el('span', bytesText(g.memory_bytes) + ' memory'));
    c.appendChild(el('span', g.sms + ' SMs · ' + g.streams + ' streams'));
    cards.push(c);
  }
  const cpu = el('div', undefined, 'device');
  cpu.appendChild(el('b', d.cpu.id + ' · ' + d.cpu.name));
  cpu.appendChild(el('span', d.cpu.threads + ' threads'));
  cpu.appendChild(el('span', bytesText(d.cpu.memory_bytes) + ' memory'));
  cards.push(cpu);
  if (!d.gpus.length) cards.push(el('p', 'No GPU in use: jobs run on the CPU.', 'muted'));
  box.replaceChildren(...cards);

  const dev = $('device');
  if (d.gpus.length) option(dev, 'gpu', 'gpu (least busy)');
  for (const g of d.gpus) option(dev, g.id);
  option(dev, 'cpu');
}

async function checkReady() {
  const badge = $('ready');
  try {
    const r = await api('/readyz');
    const body = await r.json();
    badge.textContent = r.ok ? 'ready · ' + body.queued + ' queued' : 'not ready: ' + body.detail;
    badge.className = 'badge ' + (r.ok ? 'ready' : 'down');
  } catch (err) {
    badge.textContent = 'unreachable';
    badge.className = 'badge down';
  }
}

// --- the submit form ---

// The backend a device choice lands on, to list its variants ("auto"/"gpu": the first GPU if any).
function backendOf(device) {
  if (device === 'cpu' || device.startsWith('gpu:')) return device;
  return state.devices && state.devices.gpus.length ? state.devices.gpus[0].id : 'cpu';
}

function refreshAlgorithms() {
  const sel = $('algorithm'), keep = sel.value;
  const dev = backendOf($('device').value), op = $('op').value, dtype = $('dtype').value;
  const axis = $('axis').value === '' ? null : Number($('axis').value);
  sel.replaceChildren();
  option(sel, 'auto');
  for (const a of state.algorithms)
    if (a.device === dev && a.name !== 'auto' && a.ops.includes(op) && a.dtypes.includes(dtype) && a.axes.includes(axis))
      option(sel, a.name);
  sel.value = [...sel.options].some((o) => o.value === keep) ? keep : 'auto';
  $('ties').disabled = !op.startsWith('arg');
}

// POST spec to path, waiting up to waitS seconds for the job; the answer (or problem) goes in out.
async function post(path, spec, waitS, btn, out) {
  btn.disabled = true;
  out.className = '';
  out.textContent = 'running…';
  try {
    const r = await api(path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', Prefer: 'wait=' + waitS },
      body: JSON.stringify(spec),
    });
    const body = await r.json();
    out.dataset.status = r.ok ? body.status : 'rejected';
    if (r.ok) {
      out.dataset.jobId = body.id;
      out.textContent = body.id + ' ' + body.status +
        (body.result ? ': ' + resultText(body.result) : body.error ? ': ' + body.error.detail : '') +
        (body.timings_ms ? ' (' + ms(body.timings_ms.total) + ' ms)' : '');
      if (body.status === 'failed') out.className = 'failed';
    } else {
      out.textContent = r.status + ' ' + body.title + ': ' + body.detail;
      out.className = 'failed';
    }
  } catch (err) {
    out.dataset.status = 'error';
    out.textContent = 'request failed: ' + err.message;
    out.className = 'failed';
  } finally {
    btn.disabled = false;
  }
  pollJobs();
}

function submitJob(ev) {
  ev.preventDefault();
  const out = $('submit-result');
  let data;
  try {
    data = JSON.parse($('data').value);
  } catch (err) {
    out.textContent = 'data is not JSON: ' + err.message;
    out.className = 'failed';
    return;
  }
  const spec = { op: $('op').value, dtype: $('dtype').value, data, device: $('device').value, algorithm: $('algorithm').value };
  if ($('axis').value !== '') spec.axis = Number($('axis').value);
  if (spec.op.startsWith('arg')) spec.ties = $('ties').value;
  post('/v1/jobs', spec, 10, $('submit'), out);
}

function runBenchmark() {
  const spec = { op: $('op').value, dtype: $('dtype').value, n: BENCH_N, repeats: BENCH_REPEATS, device: $('device').value };
  post('/v1/benchmarks', spec, 60, $('bench-run'), $('bench-result'));
}

async function loadDevices() {
  try {
    const [devices, algos] = await Promise.all([getJSON('/v1/devices'), getJSON('/v1/algorithms')]);
    state.devices = devices;
    state.algorithms = algos.algorithms;
    renderDevices();
  } catch (err) {
    $('devices').textContent = 'cannot read devices: ' + err.message;
  }
  refreshAlgorithms();
}

async function start() {
  for (const op of OPS) option($('op'), op);
  for (const dt of DTYPES) option($('dtype'), dt);
  $('dtype').value = 'float64';
  makeCharts();
  $('token-form').addEventListener('submit', useToken);
  $('token-forget').addEventListener('click', forgetToken);
  $('token-forget').hidden = !sessionStorage.getItem(TOKEN_KEY);
  for (const id of ['op', 'dtype', 'axis', 'device']) $(id).addEventListener('change', refreshAlgorithms);
  await loadDevices();
  $('submit-form').addEventListener('submit', submitJob);
  $('bench-run').addEventListener('click', runBenchmark);
  checkReady();
  setInterval(checkReady, 15000);
  setInterval(renderThroughput, BIN_S * 1000); // the window slides even when nothing changes
  setLive(false);
  pollLoop();
  watchEvents();
}

document.addEventListener('DOMContentLoaded', start);
