// app.js: the dashboard: follows GET /v1/events and refreshes the job list (If-None-Match: an
// idle page costs 304s) and the dataset list on each event, polling as the fallback; filters the
// job table (kept in the URL hash), shows a job's detail and downloads its result as .npy; lists
// and deletes datasets; charts stages, throughput and, from /metrics, each device's queue and
// jobs/s and each stage's latency p50/p99 over time; lists the devices and submits jobs
// (reductions and products, on values typed in or on datasets); uploads .npy files as datasets,
// showing the bytes sent; asks for a bearer token when the API answers 401 and keeps it in the
// tab's sessionStorage.
// Single-threaded (the page).
'use strict';

const OPS = ['sum', 'prod', 'min', 'max', 'mean', 'argmin', 'argmax', 'nansum', 'nanmin', 'nanmax', 'count_nonzero',
             'var', 'std', 'nanmean', 'nanprod', 'nanvar', 'nanstd', 'nanargmin', 'nanargmax', 'ptp', 'any', 'all',
             'matmul'];
const DTYPES = ['int32', 'int64', 'float32', 'float64'];
const STAGES = [['queue', '#9aa5b1'], ['h2d', '#e0a030'], ['kernel', '#2a6fdb'], ['d2h', '#8e44ad']];
const POLL_MS = 1000;        // without the event stream
const POLL_LIVE_MS = 15000;  // with it: a safety net only
const RETRY_MS = 2000;       // a dropped stream is opened again after this
const WINDOW_S = 300, BIN_S = 10;
const BENCH_N = 1 << 20, BENCH_REPEATS = 5;
const TOKEN_KEY = 'gpured.token';
const JOBS_LIMIT = 100, DATASETS_LIMIT = 100;
const FILTERS = ['status', 'op', 'device'];
const METRICS_MS = 3000;     // /metrics is read this often for the per-device charts
// The stages the latency chart draws (h2d and d2h: only GPUs have them; the job table shows them).
const LATENCY_STAGES = [['queue', '#9aa5b1'], ['kernel', '#2a6fdb'], ['total', '#1d232b']];
const COLORS = ['#2a6fdb', '#e0a030', '#1f8a4c', '#8e44ad', '#c0392b', '#16a085', '#7f8c8d', '#d35400'];

const state = {
  etag: null, jobs: [], listed: 0, devices: null, algorithms: [], needToken: false, live: false,
  pending: null,        // what events asked to refresh, flushed once per burst
  detailId: null,       // the job shown in the detail panel
  datasets: [], datasetsText: null, datasetsMore: false, confirmDelete: null, // the dataset whose delete awaits a yes
  samples: [],          // readings of /metrics: [{t: seconds, devs: {device: {queued, total, ...}},
                        //   stages: {stage: {le: jobs}}}]
};
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

function shapeText(shape) { return shape && shape.length ? shape.join('×') : 'scalar'; }

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
  const head = vals.slice(0, 4).map((v) => Array.isArray(v) ? JSON.stringify(v) : String(v)).join(', '); // a product's rows
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
  $('datasets-meta').textContent = '(needs a token)';
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
  loadDatasets();
  readMetrics();
}

// Forget the tab's token and what it showed; the next call's 401 brings the form back.
function forgetToken() {
  sessionStorage.removeItem(TOKEN_KEY);
  $('token-forget').hidden = true;
  state.etag = null;
  state.jobs = [];
  state.datasets = [];
  state.datasetsText = null;
  state.samples = [];
  closeDetail();
  renderAll();
  renderDatasets();
  renderLoad();
  renderLatency();
  for (const id of ['submit-result', 'bench-result', 'datasets-msg']) $(id).textContent = '';
  pollJobs();
}

async function getJSON(path) {
  const r = await api(path);
  if (!r.ok) throw new Error(path + ': ' + await problemText(r));
  return r.json();
}

// An error answer in words: the problem's detail when it is problem+json, else the status.
async function problemText(r) {
  try {
    const p = await r.json();
    return r.status + ' ' + (p.title ? p.title + ': ' : '') + (p.detail || '');
  } catch (err) {
    return 'HTTP ' + r.status;
  }
}

// --- job filters, kept in the URL hash (#status=failed&op=sum&device=gpu:0) so a reload keeps them ---

// status and op go to the server (GET /v1/jobs?status=&op=); the API has no device filter, so the
// device is matched here, among the newest JOBS_LIMIT jobs the server lists.
function filters() {
  const f = {};
  for (const k of FILTERS) f[k] = $('filter-' + k).value;
  return f;
}

function jobsPath() {
  const f = filters(), q = new URLSearchParams({ limit: String(JOBS_LIMIT) });
  if (f.status) q.set('status', f.status);
  if (f.op) q.set('op', f.op);
  return '/v1/jobs?' + q;
}

// The hash into the selects. A value the select does not list (a link from a server with other
// GPUs) is added, so that it still filters rather than silently showing everything.
function readFilters() {
  const h = new URLSearchParams(location.hash.slice(1));
  for (const k of FILTERS) {
    const sel = $('filter-' + k), v = h.get(k) || '';
    if (![...sel.options].some((o) => o.value === v)) option(sel, v);
    sel.value = v;
  }
}

// A select changed: the hash follows (replaceState: no history entry per click), then the list.
function filtersChanged() {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(filters())) if (v) q.set(k, v);
  history.replaceState(null, '', q.toString() ? '#' + q : location.pathname + location.search);
  refilter();
}

// The list's ETag is its page's digest: a new filter's page is another, so it is not sent.
function refilter() {
  state.etag = null;
  pollJobs();
}

// --- jobs table and charts ---

function renderJobs() {
  const body = $('jobs').tBodies[0];
  const rows = state.jobs.map((j) => {
    const t = j.timings_ms || {};
    const tr = el('tr', undefined, j.id === state.detailId ? 'selected' : '');
    tr.dataset.id = j.id;
    tr.dataset.status = j.status;
    tr.tabIndex = 0; // a row opens the job's detail: by click, or Enter from the keyboard
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
  const f = filters(), on = Object.values(f).some(Boolean);
  const what = [f.status, f.op].filter(Boolean).join(' ');
  $('jobs-meta').textContent = !state.jobs.length ? (on ? '(no job matches the filters)' : '(none yet)')
    : f.device ? '(' + state.jobs.length + ' on ' + f.device + ' of the newest ' + state.listed + (what ? ' ' + what : '') + ')'
    : '(newest ' + state.jobs.length + (what ? ' ' + what : '') + ')';
  for (const n of document.querySelectorAll('.filtered-note')) n.hidden = !on;
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
    const path = jobsPath(), device = filters().device;
    const headers = state.etag ? { 'If-None-Match': state.etag } : {};
    const r = await api(path, { headers });
    if (r.status === 401) return;
    if (path !== jobsPath() || device !== filters().device) return; // the filters changed meanwhile
    if (r.status === 200) {
      const body = await r.json();
      state.etag = r.headers.get('ETag');
      state.listed = body.jobs.length;
      state.jobs = device ? body.jobs.filter((j) => j.device === device) : body.jobs;
      renderAll();
    } else if (r.status !== 304) {
      throw new Error(await problemText(r));
    }
  } catch (err) {
    $('jobs-meta').textContent = '(cannot list jobs: ' + err.message + ')';
  }
}

function pollLoop() {
  pollJobs().finally(() => setTimeout(pollLoop, state.live ? POLL_LIVE_MS : POLL_MS));
}

// --- the job detail panel ---

function openDetail(id) {
  state.detailId = id;
  for (const tr of $('jobs').tBodies[0].rows) tr.classList.toggle('selected', tr.dataset.id === id);
  $('detail-title').textContent = id;
  $('detail-status').replaceChildren();
  $('detail-json').textContent = 'loading…';
  $('detail-msg').textContent = '';
  $('detail-timings').replaceChildren();
  $('detail-legend').replaceChildren();
  $('detail').hidden = false;
  loadDetail(id);
}

function closeDetail() {
  state.detailId = null;
  $('detail').hidden = true;
  for (const tr of $('jobs').tBodies[0].rows) tr.classList.remove('selected');
}

// The job from GET /v1/jobs/{id}, not from the list: the list may be filtered, or older.
async function loadDetail(id) {
  try {
    const job = await getJSON('/v1/jobs/' + encodeURIComponent(id));
    if (id === state.detailId) renderDetail(job);
  } catch (err) {
    if (id === state.detailId) $('detail-json').textContent = 'cannot read the job: ' + err.message;
  }
}

function renderDetail(job) {
  const badge = el('span', job.status, 'status status-' + job.status);
  $('detail-status').replaceChildren(badge);
  $('detail-json').textContent = prettyJSON(job);
  renderTimings(job.timings_ms);
  // a benchmark's table is JSON only; a job has values once it succeeded
  const values = job.status === 'succeeded' && job.kind !== 'benchmark';
  $('detail-download').disabled = !values;
  $('detail-download').title = values ? '' : job.kind === 'benchmark' ? 'a benchmark has no .npy result' : 'no result yet';
  $('detail-download-indices').hidden = !(values && job.op.includes('arg'));
  $('detail').dataset.status = job.status;
}

// Indented JSON, with arrays of numbers (shapes, a row of values) on one line each. A string
// holds no raw newline, so "[" then a newline is always the JSON's own bracket.
function prettyJSON(v) {
  return JSON.stringify(v, null, 2)
    .replace(/\[\n\s+([^\[\]{}"]*?)\n\s*\]/g, (m, inner) => '[' + inner.split(/,\n\s*/).join(', ') + ']');
}

// One segment per stage, as its share of the job's total; what the stages leave of the total is
// drawn as "other". Copies and kernel can overlap (a streamed matmul), so the bar's scale is the
// larger of the total and the stages' sum.
function renderTimings(t) {
  if (!t || typeof t.total !== 'number') {
    $('detail-timings').replaceChildren();
    $('detail-legend').replaceChildren(el('span', 'no timings: the job has not run', 'muted'));
    return;
  }
  const parts = STAGES.map(([name, color]) => [name, color, t[name] || 0]);
  const sum = parts.reduce((a, p) => a + p[2], 0);
  if (t.total > sum) parts.push(['other', '#d5d9de', t.total - sum]);
  const scale = Math.max(t.total || 0, sum) || 1;
  const segs = [], legend = [];
  for (const [name, color, v] of parts) {
    const seg = el('span', undefined, 'seg');
    seg.dataset.stage = name;
    seg.style.width = (100 * v / scale) + '%';
    seg.style.background = color;
    seg.title = name + ' ' + ms(v) + ' ms';
    segs.push(seg);
    const item = el('span', name + ' ' + ms(v) + ' ms');
    item.style.setProperty('--swatch', color);
    legend.push(item);
  }
  legend.push(el('b', 'total ' + ms(t.total) + ' ms'));
  $('detail-timings').replaceChildren(...segs);
  $('detail-legend').replaceChildren(...legend);
}

// A plain <a href> cannot carry the Authorization header, so the .npy is fetched through api()
// into a Blob and saved from an object URL.
async function downloadResult(part) {
  const id = state.detailId, out = $('detail-msg');
  out.className = '';
  out.textContent = 'downloading…';
  try {
    const r = await api('/v1/jobs/' + encodeURIComponent(id) + '/result' + (part ? '?part=' + part : ''),
      { headers: { Accept: 'application/x-npy' } });
    if (!r.ok) throw new Error(await problemText(r));
    const blob = await r.blob();
    const url = URL.createObjectURL(blob);
    const a = el('a');
    a.href = url;
    a.download = id + (part ? '-' + part : '') + '.npy';
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000); // revoked at once, the download may not start
    out.textContent = 'saved ' + a.download + ' (' + bytesText(blob.size) + ')';
  } catch (err) {
    out.textContent = 'cannot download: ' + err.message;
    out.className = 'failed';
  }
}

// --- datasets ---

async function loadDatasets() {
  if (state.needToken) return;
  try {
    const body = await getJSON('/v1/datasets?limit=' + DATASETS_LIMIT);
    // read every few seconds: an unchanged list keeps its rows (and the button under a click)
    const text = JSON.stringify(body);
    if (text === state.datasetsText) return;
    state.datasetsText = text;
    state.datasets = body.datasets;
    state.datasetsMore = body.next_cursor !== null;
    renderDatasets();
  } catch (err) {
    state.datasetsText = null; // the next answer is shown, even one like the last
    if (!state.needToken) $('datasets-meta').textContent = '(cannot list datasets: ' + err.message + ')';
  }
}

// Where a dataset is cached: the GPUs whose cache lists it (GET /v1/devices), every replica's on
// a shared store (each replica's entry names it).
function cachedOn(id) {
  const d = state.devices;
  if (!d) return [];
  const hosts = d.replicas || [d];
  const where = [];
  for (const h of hosts)
    for (const g of h.gpus || [])
      if (g.cache && (g.cache.datasets || []).includes(id)) where.push((d.replicas ? h.replica + ' ' : '') + g.id);
  return where;
}

// The delete button asks first, in the row itself (state.confirmDelete), so that a refresh of the
// list keeps the question open.
function renderDatasets() {
  const rows = state.datasets.map((d) => {
    const tr = el('tr');
    tr.dataset.id = d.id;
    tr.appendChild(el('td', d.id, 'id'));
    tr.appendChild(el('td', d.dtype));
    tr.appendChild(el('td', shapeText(d.shape), 'shape'));
    const size = el('td', bytesText(d.bytes), 'num size');
    size.title = d.bytes + ' bytes';
    tr.appendChild(size);
    tr.appendChild(el('td', d.created_at.slice(0, 19).replace('T', ' ')));
    tr.appendChild(el('td', d.last_used_at ? d.last_used_at.slice(0, 19).replace('T', ' ') : 'never', 'used'));
    tr.appendChild(el('td', cachedOn(d.id).join(', ') || '—', 'cached'));
    const act = el('td', undefined, 'actions');
    if (state.confirmDelete === d.id) {
      act.appendChild(el('span', 'delete it? ', 'muted'));
      act.appendChild(actionButton('confirm', 'Delete', 'danger'));
      act.appendChild(actionButton('cancel', 'Keep'));
    } else {
      act.appendChild(actionButton('delete', 'Delete…'));
    }
    tr.appendChild(act);
    return tr;
  });
  $('datasets').tBodies[0].replaceChildren(...rows);
  for (const id of ['source', 'source-b']) fillSources($(id));
  $('datasets-meta').textContent = !state.datasets.length ? '(none)'
    : state.datasetsMore ? '(newest ' + state.datasets.length + ')' : '(' + state.datasets.length + ')';
}

// A job's input choices: the values typed in, or a listed dataset (the choice kept while listed).
function fillSources(sel) {
  const keep = sel.value;
  sel.replaceChildren();
  option(sel, '', 'the values below');
  for (const d of state.datasets) option(sel, d.id, d.id + ' ' + d.dtype + ' ' + shapeText(d.shape));
  sel.value = [...sel.options].some((o) => o.value === keep) ? keep : '';
}

// POST /v1/datasets with the chosen .npy file, through XMLHttpRequest: fetch() cannot tell how
// much of a body has gone, and a large upload shows its bytes sent as they go.
function uploadDataset(ev) {
  ev.preventDefault();
  const file = $('upload-file').files[0], out = $('upload-msg'), bar = $('upload-progress');
  out.className = '';
  delete out.dataset.status;
  if (!file) {
    out.textContent = 'choose a .npy file first';
    out.className = 'failed';
    return;
  }
  const xhr = new XMLHttpRequest();
  xhr.open('POST', '/v1/datasets');
  xhr.setRequestHeader('Content-Type', 'application/x-npy');
  const token = sessionStorage.getItem(TOKEN_KEY);
  if (token) xhr.setRequestHeader('Authorization', 'Bearer ' + token);
  bar.hidden = false;
  bar.max = file.size || 1;
  bar.value = 0;
  $('upload').disabled = true;
  xhr.upload.onprogress = (e) => {
    bar.value = e.loaded;
    out.textContent = 'sent ' + bytesText(e.loaded) + ' of ' + bytesText(file.size);
  };
  xhr.onload = () => {
    $('upload').disabled = false;
    let body = {};
    try { body = JSON.parse(xhr.responseText); } catch (err) { /* said below */ }
    if (xhr.status === 201) {
      bar.value = bar.max;
      out.textContent = 'uploaded ' + file.name + ' as ' + body.id + ' (' + body.dtype + ', ' + shapeText(body.shape) +
        ', ' + bytesText(body.bytes) + ')';
      out.dataset.status = 'created';
      out.dataset.id = body.id;
      $('upload-file').value = '';
      loadDatasets();
    } else {
      bar.hidden = true; // what was sent is not stored
      if (xhr.status === 401) askToken(token);
      out.textContent = 'cannot upload ' + file.name + ': ' + xhr.status + ' ' + (body.title ? body.title + ': ' : '') +
        (body.detail || xhr.statusText);
      out.className = 'failed';
      out.dataset.status = 'refused';
    }
  };
  xhr.onerror = () => {
    $('upload').disabled = false;
    bar.hidden = true;
    out.textContent = 'cannot upload ' + file.name + ': the connection failed';
    out.className = 'failed';
    out.dataset.status = 'error';
  };
  xhr.send(file);
}

function actionButton(action, label, cls) {
  const b = el('button', label, 'small' + (cls ? ' ' + cls : ''));
  b.type = 'button';
  b.dataset.action = action;
  return b;
}

function datasetAction(ev) {
  const b = ev.target.closest('button[data-action]');
  if (!b) return;
  const id = b.closest('tr').dataset.id;
  if (b.dataset.action === 'confirm') {
    deleteDataset(id);
  } else {
    state.confirmDelete = b.dataset.action === 'delete' ? id : null;
    renderDatasets();
  }
}

// DELETE /v1/datasets/{id}: 204, or a problem (409 while a queued or running job uses it) shown.
async function deleteDataset(id) {
  state.confirmDelete = null;
  const out = $('datasets-msg');
  out.className = '';
  out.textContent = 'deleting ' + id + '…';
  try {
    const r = await api('/v1/datasets/' + encodeURIComponent(id), { method: 'DELETE' });
    if (!r.ok) throw new Error(await problemText(r));
    out.textContent = 'deleted ' + id;
    out.dataset.status = 'deleted';
  } catch (err) {
    out.textContent = 'cannot delete ' + id + ': ' + err.message;
    out.className = 'failed';
    out.dataset.status = 'refused';
  }
  loadDatasets();
}

// --- per-device load, from /metrics ---

// The samples wanted, by metric name; gpured_jobs_total is summed over op and status.
const METRICS = {
  gpured_jobs_queued: 'queued', gpured_jobs_running: 'running', gpured_jobs_total: 'total',
  gpured_device_memory_used_bytes: 'memUsed', gpured_cache_bytes: 'cache',
};

// The Prometheus text format, as far as these samples go: devs {device: {queued, running, total,
// ...}} and stages {stage: {le: jobs}}, gpured_job_stage_seconds's cumulative bucket counts summed
// over devices (each device has the same bounds, so the sums stay cumulative).
function parseMetrics(text) {
  const devs = {}, stages = {};
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)\{([^}]*)\} (\S+)/.exec(line);
    const h = m && m[1] === 'gpured_job_stage_seconds_bucket' && /stage="([^"]*)",le="([^"]*)"/.exec(m[2]);
    if (h) {
      const b = stages[h[1]] || (stages[h[1]] = {});
      b[h[2]] = (b[h[2]] || 0) + Number(m[3]);
      continue;
    }
    const key = m && METRICS[m[1]];
    const dev = key && /device="([^"]*)"/.exec(m[2]);
    if (!dev) continue;
    const d = devs[dev[1]] || (devs[dev[1]] = {});
    d[key] = (d[key] || 0) + Number(m[3]);
  }
  return { devs, stages };
}

async function readMetrics() {
  if (state.needToken) return;
  try {
    const r = await api('/metrics');
    if (!r.ok) throw new Error(await problemText(r));
    const t = Date.now() / 1000;
    state.samples.push(Object.assign({ t }, parseMetrics(await r.text())));
    while (state.samples.length > 2 && state.samples[1].t < t - WINDOW_S) state.samples.shift();
    renderLoad();
    renderLatency();
  } catch (err) {
    if (!state.needToken) $('load-meta').textContent = '(cannot read /metrics: ' + err.message + ')';
  }
}

// Every few seconds: /metrics for the load charts; the devices for their caches and the datasets
// for their last use (both change as jobs run, with no event; a CPU has no cache).
function tick() {
  readMetrics();
  if (state.devices && state.devices.gpus.length) refreshDevices();
  loadDatasets();
}

let loadChart, gpuChart, latencyChart;

function lineChart(canvas, yTitle, y1Title) {
  const scales = {
    x: { type: 'linear', min: -WINDOW_S, max: 0, title: { display: true, text: 'seconds ago' },
      ticks: { callback: (v) => String(-v), stepSize: 60 } },
    y: { beginAtZero: true, position: 'left', title: { display: true, text: yTitle } },
  };
  if (y1Title) scales.y1 = { beginAtZero: true, position: 'right', grid: { drawOnChartArea: false }, title: { display: true, text: y1Title } };
  return new Chart(canvas, {
    type: 'line',
    data: { datasets: [] },
    options: { responsive: true, maintainAspectRatio: false, animation: false, scales, elements: { point: { radius: 1.5 } } },
  });
}

// A series per device and quantity; colour by device, dashed for the second quantity.
function series(label, color, dashed, points, yAxisID) {
  return { label, data: points, borderColor: color, backgroundColor: color, borderDash: dashed ? [5, 4] : [], yAxisID };
}

// Queue depth (left axis) and jobs/s (right: the rise of gpured_jobs_total between two readings
// over their interval) per device; GPU memory used and cache bytes per GPU, in GiB.
function renderLoad() {
  const now = Date.now() / 1000, ss = state.samples;
  const devices = [...new Set(ss.flatMap((s) => Object.keys(s.devs)))];
  const x = (s) => s.t - now; // seconds ago, negative: the x axis runs from -300 to 0
  const load = [], gpu = [];
  devices.forEach((dev, i) => {
    const color = COLORS[i % COLORS.length];
    const at = ss.filter((s) => s.devs[dev]);
    load.push(series(dev + ' queued', color, false, at.map((s) => ({ x: x(s), y: s.devs[dev].queued || 0 })), 'y'));
    const rates = [];
    for (let k = 1; k < at.length; k++) {
      const dt = at[k].t - at[k - 1].t, dn = (at[k].devs[dev].total || 0) - (at[k - 1].devs[dev].total || 0);
      if (dt > 0) rates.push({ x: x(at[k]), y: Math.max(dn, 0) / dt }); // a restart resets the counter
    }
    load.push(series(dev + ' jobs/s', color, true, rates, 'y1'));
    if (at.some((s) => s.devs[dev].memUsed !== undefined)) {
      const gib = (v) => (v || 0) / 2 ** 30;
      gpu.push(series(dev + ' memory used', color, false, at.map((s) => ({ x: x(s), y: gib(s.devs[dev].memUsed) })), 'y'));
      gpu.push(series(dev + ' cache', color, true, at.map((s) => ({ x: x(s), y: gib(s.devs[dev].cache) })), 'y'));
    }
  });
  loadChart.data.datasets = load;
  loadChart.update();
  gpuChart.data.datasets = gpu;
  gpuChart.update();
  const last = ss.length ? ss[ss.length - 1].devs : {};
  $('load-meta').textContent = devices.length
    ? '(now: ' + devices.map((d) => d + ' ' + (last[d] ? (last[d].queued || 0) + ' queued, ' + (last[d].running || 0) + ' running' : 'gone')).join(' · ') + ')'
    : '';
  // a CPU-only server: say so rather than draw an empty chart
  const noGpu = !gpu.length && !!state.devices && !state.devices.gpus.length;
  $('gpu-none').hidden = !noGpu;
  $('gpu-chart-box').hidden = noGpu;
}

// --- stage latency percentiles, from /metrics ---

// The jobs one stage's histogram gained between two readings ({le: cumulative jobs} each), as
// [[upper bound in s, cumulative jobs]] by bound: Prometheus's increase(). A server restarted in
// between counts from 0 again, so then the later reading's counts are the increase.
function increase(prev = {}, cur = {}) {
  const reset = (cur['+Inf'] || 0) < (prev['+Inf'] || 0);
  return Object.keys(cur).map((le) => [le === '+Inf' ? Infinity : Number(le), cur[le] - (reset ? 0 : prev[le] || 0)])
    .sort((a, b) => a[0] - b[0]);
}

// The q-quantile of those jobs, as Prometheus's histogram_quantile computes it: find the bucket
// the rank q·n falls in and, taking its jobs as spread evenly over it, interpolate linearly
// between its bounds (the first bucket starts at 0). A rank in the +Inf bucket gives the highest
// finite bound: nothing more is known. null when no job ended: no job is not a latency of 0.
function quantile(q, buckets) {
  const n = buckets.length ? buckets[buckets.length - 1][1] : 0;
  if (!(n > 0)) return null;
  const rank = q * n;
  let i = 0;
  while (buckets[i][1] < rank) i++; // stops at the last bucket at the latest: it holds all n
  if (buckets[i][0] === Infinity) return i ? buckets[i - 1][0] : null;
  const [lo, below] = i ? buckets[i - 1] : [0, 0];
  return lo + (buckets[i][0] - lo) * (rank - below) / (buckets[i][1] - below);
}

// p50 (solid) and p99 (dashed) of each stage, in ms: a point per pair of consecutive readings, at
// the later one, from the jobs that ended between them; a gap where none did. Summed over
// devices, i.e. histogram_quantile(q, sum by (le, stage) (increase(...))): one line per stage and
// quantile stays readable on a wall (per device would multiply them), and the histogram has no
// op label, so ops are summed anyway.
function renderLatency() {
  const now = Date.now() / 1000, ss = state.samples, out = [];
  for (const [stage, color] of LATENCY_STAGES) {
    for (const [name, q, dashed] of [['p50', 0.5, false], ['p99', 0.99, true]]) {
      const points = [];
      for (let k = 1; k < ss.length; k++) {
        const s = quantile(q, increase(ss[k - 1].stages[stage], ss[k].stages[stage]));
        points.push({ x: ss[k].t - now, y: s === null ? null : s * 1e3 });
      }
      out.push(series(stage + ' ' + name, color, dashed, points, 'y'));
    }
  }
  latencyChart.data.datasets = out;
  latencyChart.update();
}

// --- live updates ---

// An event says what changed: a job (the job list; the detail too when it is that job's), a
// dataset (the dataset list), or a gap (everything). One refresh of each for a burst of them.
function onEvent(kind, data) {
  let id = null;
  try { id = JSON.parse(data).id; } catch (err) { /* a gap's data has no id */ }
  const p = state.pending || (state.pending = { jobs: false, detail: false, datasets: false });
  p.jobs = p.jobs || kind === 'job' || kind === 'gap';
  p.detail = p.detail || kind === 'gap' || (kind === 'job' && id === state.detailId);
  p.datasets = p.datasets || kind === 'dataset' || kind === 'gap';
  if (p.timer) return;
  p.timer = setTimeout(() => {
    state.pending = null;
    if (p.jobs) {
      document.body.dataset.eventRefreshes = String(Number(document.body.dataset.eventRefreshes || 0) + 1);
      pollJobs();
    }
    if (p.detail && state.detailId) loadDetail(state.detailId);
    if (p.datasets) loadDatasets();
  }, 100);
}

function setLive(live) {
  state.live = live;
  $('live').textContent = live ? '● live' : '○ polling';
  $('live').dataset.live = String(live);
}

// GET /v1/events read through fetch (an EventSource cannot send the token). Each event refreshes
// what it is about; while the stream is up, polling slows to a safety net. A dropped stream (gpured
// restarting) is opened again, and polling carries on meanwhile.
async function watchEvents() {
  for (;;) {
    try {
      if (!state.needToken) {
        const r = await api('/v1/events?heartbeat=15', { headers: { Accept: 'text/event-stream' } });
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
              const kind = /^event: (.*)$/m.exec(block), data = /^data: (.*)$/m.exec(block);
              if (data) onEvent(kind ? kind[1] : 'message', data[1]);
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
    if (g.cache) c.appendChild(el('span', 'cache ' + bytesText(g.cache.bytes) + ' of ' + bytesText(g.cache.cap_bytes) +
      ' · ' + g.cache.entries + ' datasets'));
    cards.push(c);
  }
  const cpu = el('div', undefined, 'device');
  cpu.appendChild(el('b', d.cpu.id + ' · ' + d.cpu.name));
  cpu.appendChild(el('span', d.cpu.threads + ' threads'));
  cpu.appendChild(el('span', bytesText(d.cpu.memory_bytes) + ' memory'));
  cards.push(cpu);
  if (!d.gpus.length) cards.push(el('p', 'No GPU in use: jobs run on the CPU.', 'muted'));
  box.replaceChildren(...cards);
}

// The device choices of the submit form and of the job filter; each keeps its value (the filter's
// even when this server does not list it: it came from the hash).
function fillDeviceChoices() {
  const d = state.devices, ids = d.gpus.map((g) => g.id).concat([d.cpu.id]);
  const dev = $('device'), keep = dev.value;
  dev.replaceChildren();
  option(dev, 'auto');
  if (d.gpus.length) option(dev, 'gpu', 'gpu (least busy)');
  for (const id of ids) option(dev, id);
  dev.value = [...dev.options].some((o) => o.value === keep) ? keep : 'auto';
  const f = $('filter-device'), want = f.value;
  f.replaceChildren();
  option(f, '', 'any');
  for (const id of ids.includes(want) || !want ? ids : ids.concat([want])) option(f, id);
  f.value = want;
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

// The axis box as the job's "axis": null (empty), an integer, or a list ("0,2"); throws if it is
// not integers separated by commas.
function axisOf() {
  const text = $('axis').value.trim();
  if (text === '') return null;
  const axes = text.split(',').map((t) => t.trim());
  if (!axes.every((t) => /^-?[0-9]+$/.test(t))) throw new Error('axis: an integer, or integers separated by commas (0,2)');
  return axes.length === 1 ? Number(axes[0]) : axes.map(Number);
}

function refreshAlgorithms() {
  const sel = $('algorithm'), keep = sel.value;
  const dev = backendOf($('device').value), op = $('op').value, dtype = $('dtype').value;
  let axis;
  try {
    axis = axisOf();
  } catch (err) {
    axis = undefined; // shown when the job is run
  }
  // the variants' axes are their passes' (whole, 0, 1): other axes leave the choice to the service
  const known = axis === null || axis === 0 || axis === 1;
  sel.replaceChildren();
  option(sel, 'auto');
  for (const a of state.algorithms)
    if (a.device === dev && a.name !== 'auto' && a.ops.includes(op) && a.dtypes.includes(dtype) &&
        (op === 'matmul' || !known || a.axes.includes(axis)))
      option(sel, a.name);
  sel.value = [...sel.options].some((o) => o.value === keep) ? keep : 'auto';
  $('ties').disabled = !op.includes('arg');
  $('submit-form').classList.toggle('matmul', op === 'matmul');
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

// An input as the API names it: {dataset} when one is chosen in sourceId, else {data} parsed from
// boxId (a JSON error names the field).
function inputOf(sourceId, boxId, name) {
  if ($(sourceId).value) return { dataset: $(sourceId).value };
  try {
    return { data: JSON.parse($(boxId).value) };
  } catch (err) {
    throw new Error(name + ' is not JSON: ' + err.message);
  }
}

function submitJob(ev) {
  ev.preventDefault();
  const out = $('submit-result'), op = $('op').value;
  const spec = { op, device: $('device').value, algorithm: $('algorithm').value };
  try {
    if (op === 'matmul') {
      spec.a = inputOf('source', 'data', 'a');
      spec.b = inputOf('source-b', 'data-b', 'b');
    } else {
      Object.assign(spec, inputOf('source', 'data', 'data'));
      const axis = axisOf();
      if (axis !== null) spec.axis = axis;
      if (op.includes('arg')) spec.ties = $('ties').value;
    }
  } catch (err) {
    out.textContent = err.message;
    out.className = 'failed';
    delete out.dataset.status;
    return;
  }
  // a dataset has its dtype: the form's goes with values typed in only
  if (spec.data || (spec.a && spec.a.data) || (spec.b && spec.b.data)) spec.dtype = $('dtype').value;
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
    fillDeviceChoices();
    renderDatasets();
  } catch (err) {
    $('devices').textContent = 'cannot read devices: ' + err.message;
  }
  refreshAlgorithms();
}

// The devices again, for their caches (which GPU holds which dataset) as jobs run.
async function refreshDevices() {
  try {
    state.devices = await getJSON('/v1/devices');
    renderDevices();
    renderDatasets();
  } catch (err) {
    // the next reading of /metrics tries again
  }
}

async function start() {
  for (const op of OPS) option($('op'), op);
  for (const op of OPS) option($('filter-op'), op);
  for (const dt of DTYPES) option($('dtype'), dt);
  $('dtype').value = 'float64';
  makeCharts();
  loadChart = lineChart($('load-chart'), 'jobs queued', 'jobs/s');
  gpuChart = lineChart($('gpu-chart'), 'GiB');
  latencyChart = lineChart($('latency-chart'), 'ms');
  // a log axis: the stages span microseconds (a kernel) to minutes (a long queue), and on a linear
  // one a slow queue's p99 would flatten every other line to the floor
  latencyChart.options.scales.y.type = 'logarithmic';
  $('token-form').addEventListener('submit', useToken);
  $('token-forget').addEventListener('click', forgetToken);
  $('token-forget').hidden = !sessionStorage.getItem(TOKEN_KEY);
  for (const id of ['op', 'dtype', 'axis', 'device']) $(id).addEventListener('change', refreshAlgorithms);
  await loadDevices();
  readFilters();
  for (const k of FILTERS) $('filter-' + k).addEventListener('change', filtersChanged);
  window.addEventListener('hashchange', () => { readFilters(); refilter(); }); // a hash edited by hand
  $('jobs').tBodies[0].addEventListener('click', (ev) => {
    const tr = ev.target.closest('tr[data-id]');
    if (tr) openDetail(tr.dataset.id);
  });
  $('jobs').tBodies[0].addEventListener('keydown', (ev) => {
    if (ev.key === 'Enter' && ev.target.dataset.id) openDetail(ev.target.dataset.id);
  });
  $('detail-close').addEventListener('click', closeDetail);
  document.addEventListener('keydown', (ev) => { if (ev.key === 'Escape' && state.detailId) closeDetail(); });
  $('detail-download').addEventListener('click', () => downloadResult(''));
  $('detail-download-indices').addEventListener('click', () => downloadResult('indices'));
  $('datasets').tBodies[0].addEventListener('click', datasetAction);
  $('submit-form').addEventListener('submit', submitJob);
  $('upload-form').addEventListener('submit', uploadDataset);
  $('bench-run').addEventListener('click', runBenchmark);
  checkReady();
  setInterval(checkReady, 15000);
  setInterval(renderThroughput, BIN_S * 1000); // the window slides even when nothing changes
  setLive(false);
  pollLoop();
  watchEvents();
  tick();
  setInterval(tick, METRICS_MS);
}

document.addEventListener('DOMContentLoaded', start);
