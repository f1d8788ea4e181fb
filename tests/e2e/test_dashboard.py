# test_dashboard.py: the dashboard in real headless Chromium (Debian's chromium, chromium-driver,
# python3-selenium): loads with no console errors and nothing fetched from elsewhere, a job
# submitted from the form succeeds with the reference value, the charts draw (a benchmark from its
# button too), the page follows the event stream (a job made elsewhere is refreshed in by its
# events) and an idle page sends no 200s; a job's detail shows its document and stage timings and
# its .npy download holds the server's bytes; the datasets panel lists an upload with its shape and
# size, and its delete asks first (keep keeps it, delete deletes it, a dataset in use shows the
# 409); the per-device chart shows the queue a blocked worker builds and as many jobs/s as the
# server counted; the stage latency chart's p50 and p99 lie within the buckets the server counted
# jobs in, with a gap where no job ended; the job filters narrow the table to the API's answer and
# survive a reload; a product from the form, a .npy uploaded from the page with its bytes sent
# shown, and jobs on datasets picked as the form's inputs; it fits 1280x800 and a phone;
# screenshots go to <build>/artifacts/. Then
# against a server with --tokens-file: the 401s bring up the token form, a wrong token is refused,
# the right one loads the tenant's jobs (sent as a header, never in a URL, kept in sessionStorage)
# and "Forget token" drops it.
import json
import math
import os
import shutil
import struct
import tempfile
import time

import e2e_lib as L
import ops_lib as O
from e2e_lib import CHECK

O.cpu_label_only("test_dashboard")
O.with_debian_python("selenium")

CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
TOKEN_KEY = "gpured.token"
TOKEN_UI = ("return [!document.getElementById('token-card').hidden, !document.getElementById('token-forget').hidden,"
            " sessionStorage.getItem('%s')]" % TOKEN_KEY)


def browser(downloads):
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError as e:
        raise L.Skip("python3-selenium is not installed (%s); ./gpured.sh test installs it" % e)
    for path in (CHROMIUM, DRIVER):
        if not os.access(path, os.X_OK):
            raise L.Skip("%s is missing; ./gpured.sh test installs chromium and chromium-driver" % path)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1280,800", "--hide-scrollbars"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # the .npy the detail panel saves lands here, unasked
    opts.add_experimental_option("prefs", {"download.default_directory": downloads, "download.prompt_for_download": False})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)
    driver.execute_cdp_cmd("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": downloads})
    return driver


def wait_for(driver, js, what, timeout=20):
    """Poll a JS expression until it returns something truthy; returns it (None on time-out)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = driver.execute_script(js)
        if v:
            return v
        time.sleep(0.1)
    CHECK.ok(False, "timed out after %ds waiting for %s" % (timeout, what))
    return None


def console_errors(driver, what, allow=()):
    """Errors in the console, less those whose message holds one of allow."""
    logs = driver.get_log("browser")
    bad = [e for e in logs if (e.get("level") in ("SEVERE", "ERROR") or "Uncaught" in e.get("message", ""))
           and not any(a in e.get("message", "") for a in allow)]
    CHECK.ok(not bad, "%s: console errors: %s" % (what, [e.get("message") for e in bad][:5]))
    return logs


def submit(driver, op, dtype, data, axis="", source="", b=None, source_b=""):
    """Fill the form as a person would and press Run: a reduction's data (or the dataset chosen as
    its input, source), or a product's a and b (typed in, or datasets). Returns the result line's
    status, job id and text."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element(By.ID, "op")).select_by_value(op)
    Select(driver.find_element(By.ID, "dtype")).select_by_value(dtype)
    if op != "matmul":
        driver.find_element(By.ID, "axis").clear()
        driver.find_element(By.ID, "axis").send_keys(axis)
    Select(driver.find_element(By.ID, "device")).select_by_value("cpu")
    for sel, box, values in (("source", "data", data), ("source-b", "data-b", b)):
        if sel == "source" or op == "matmul":
            Select(driver.find_element(By.ID, sel)).select_by_value(source if sel == "source" else source_b)
            if values is not None:
                driver.find_element(By.ID, box).clear()
                driver.find_element(By.ID, box).send_keys(json.dumps(values))
    driver.execute_script("document.getElementById('submit-result').removeAttribute('data-status')")
    driver.find_element(By.ID, "submit").click()
    st = wait_for(driver, "return document.getElementById('submit-result').dataset.status", "the form's answer")
    out = driver.find_element(By.ID, "submit-result")
    return st, out.get_attribute("data-job-id"), out.text


def submit_bench(driver, op, dtype):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element(By.ID, "op")).select_by_value(op)
    Select(driver.find_element(By.ID, "dtype")).select_by_value(dtype)
    Select(driver.find_element(By.ID, "device")).select_by_value("cpu")
    driver.find_element(By.ID, "bench-run").click()


def check_products_and_uploads(driver, srv, rng):
    """A product from the form, a and b typed in; a .npy uploaded from the page, the bytes sent
    shown as they go, and a file that is no .npy refused with the API's words; then a reduction
    and a product on datasets picked as the form's inputs."""
    import io

    import numpy as np
    a = [[rng.randint(-9, 9) for _ in range(3)] for _ in range(2)]
    b = [[rng.randint(-9, 9) for _ in range(2)] for _ in range(3)]
    st, jid, line = submit(driver, "matmul", "float64", a, b=b)
    want = (np.array(a, float) @ np.array(b, float)).tolist()
    CHECK.eq(st, "succeeded", "a product from the form (%s)" % line)
    if st == "succeeded":
        CHECK.eq(srv.get_json("/v1/jobs/" + jid)["result"]["values"], want, "the form's product: a @ b")
        CHECK.ok(json.dumps([int(x) for x in want[0]], separators=(",", ":")) in line, "its rows in the answer: %r" % line)
    shown = driver.execute_script("return ['axis', 'ties', 'data-b'].map(id => document.getElementById(id)"
                                  ".closest('label').offsetParent !== null)")
    CHECK.eq(shown, [False, False, True], "matmul: the form hides axis and ties and shows b")

    tmp = tempfile.mkdtemp(prefix="gpured-dashboard-upload-")
    big = np.random.default_rng(rng.randrange(1 << 30)).integers(-1000, 1000, (1024, 1024), dtype=np.int32)
    path = os.path.join(tmp, "big.npy")
    np.save(path, big)
    size = os.path.getsize(path)
    state = lambda: driver.execute_script("const o = document.getElementById('upload-msg'), p = "
                                          "document.getElementById('upload-progress'); return [o.dataset.status, "
                                          "o.dataset.id, o.textContent, p.hidden, p.value, p.max]")
    driver.find_element("id", "upload-file").send_keys(path)
    click(driver, "#upload")
    wait_for(driver, "return document.getElementById('upload-msg').dataset.status", "the upload's answer", 60)
    st, did, text, hidden, sent, total = state()
    CHECK.eq((st, hidden, sent, total), ("created", False, size, size),
             "an upload from the page: [status, bar hidden, bytes sent, of]: %s" % text)
    doc = srv.get_json("/v1/datasets/%s" % did) if did else {}
    CHECK.eq((doc.get("dtype"), doc.get("shape")), ("int32", [1024, 1024]), "the .npy stored as it was: %r" % doc)
    CHECK.ok(did and did in text and "int32" in text and "1024×1024" in text, "the page names it: %r" % text)
    bad = os.path.join(tmp, "notes.npy")
    with open(bad, "w") as f:
        f.write("not a .npy file\n")
    driver.find_element("id", "upload-file").send_keys(bad)
    click(driver, "#upload")
    wait_for(driver, "return document.getElementById('upload-msg').dataset.status === 'refused'", "the refusal")
    refused = srv.req("POST", "/v1/datasets", b"not a .npy file\n", {"Content-Type": "application/x-npy"})
    text, hidden = state()[2:4]
    CHECK.ok(400 <= refused.status < 500 and str(refused.status) in text and refused.json()["detail"] in text and hidden,
             "a file that is no .npy: the page shows the API's problem, no bar: %r" % text)
    shutil.rmtree(tmp, ignore_errors=True)

    # the upload as a reduction's input, picked in the form (its dtype is the dataset's)
    pick = "return [...document.getElementById('%s').options].some(o => o.value === '%s')"
    if did and wait_for(driver, pick % ("source", did), "the upload among the form's inputs"):
        st, jid, line = submit(driver, "sum", "float32", None, source=did)
        job = srv.get_json("/v1/jobs/" + jid) if jid else {}
        CHECK.eq((st, job.get("dataset"), job.get("dtype"), (job.get("result") or {}).get("value")),
                 ("succeeded", did, "int32", int(big.sum(dtype=np.int64))), "a sum of the picked dataset (%s)" % line)
    # a product with a from a dataset, b typed in
    left = np.random.default_rng(rng.randrange(1 << 30)).integers(-9, 9, (64, 32)).astype(np.float64)
    buf = io.BytesIO()
    np.save(buf, left)
    r = srv.req("POST", "/v1/datasets", buf.getvalue(), {"Content-Type": "application/x-npy"})
    right = [[rng.randint(-9, 9) for _ in range(2)] for _ in range(32)]
    if CHECK.eq(r.status, 201, "a 64x32 float64 dataset") and wait_for(driver, pick % ("source", r.json()["id"]), "it in the form"):
        st, jid, line = submit(driver, "matmul", "float64", None, source=r.json()["id"], b=right)
        job = srv.get_json("/v1/jobs/" + jid) if jid else {}
        CHECK.eq((st, job.get("a", {}).get("dataset"), (job.get("result") or {}).get("values")),
                 ("succeeded", r.json()["id"], (left @ np.array(right, float)).tolist()),
                 "a product of a picked dataset and b typed in (%s)" % line)
    submit(driver, "sum", "float64", [1], source="")  # the form as it was: values typed in


def row_of(driver, jid):
    """The job table row's cells once the poll has shown the job succeeded."""
    js = ("const tr = document.querySelector('#jobs tbody tr[data-id=\"%s\"]');"
          "return tr && tr.dataset.status === 'succeeded' && [...tr.cells].map(c => c.textContent);" % jid)
    return wait_for(driver, js, "job %s as succeeded in the table" % jid)


def chart_state(driver, canvas_id):
    """Points per dataset and how many pixels the canvas has painted."""
    return driver.execute_script("""
        const c = document.getElementById(arguments[0]);
        const ch = Chart.getChart(c);
        const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let painted = 0;
        for (let i = 3; i < px.length; i += 4) if (px[i]) painted++;
        return {labels: ch.data.labels, data: ch.data.datasets.map(d => d.data), painted: painted,
                w: c.width, h: c.height};""", canvas_id)


def table_ids(driver, table="jobs"):
    return driver.execute_script("return [...document.querySelectorAll('#%s tbody tr')].map(tr => tr.dataset.id)" % table)


def wait_ids(driver, want, what, table="jobs", timeout=10):
    """Wait until the table lists exactly want (in order); check it; returns what it lists."""
    deadline = time.time() + timeout
    while True:
        got = table_ids(driver, table)
        if got == want or time.time() > deadline:
            CHECK.eq(got, want, what)
            return got
        time.sleep(0.1)


def present(driver, css):
    return driver.execute_script("return !!document.querySelector(arguments[0])", css)


def wait_css(driver, css, what, timeout=10, gone=False):
    """Wait until css finds something (or, gone, nothing); False on time-out (checked here)."""
    deadline = time.time() + timeout
    while present(driver, css) == gone:
        if time.time() > deadline:
            CHECK.ok(False, "timed out after %ds waiting for %s" % (timeout, what))
            return False
        time.sleep(0.1)
    return True


def click(driver, css):
    """Click what css finds, scrolled into view first (the table is below the fold); found again
    if a refresh replaced it in between (an event or a poll may re-render the rows)."""
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    for attempt in range(3):
        try:
            e = driver.find_element(By.CSS_SELECTOR, css)
            driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", e)
            e.click()
            return e
        except StaleElementReferenceException:
            if attempt == 2:
                raise
    return None


def select(driver, sel_id, value):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element(By.ID, sel_id)).select_by_value(value)


def load_series(driver, *labels):
    """The {x, y} points of the load chart's series of those labels ([] for one it has not), read at
    once: each reading of /metrics draws them anew, x relative to its time."""
    return driver.execute_script("const ds = Chart.getChart(document.getElementById('load-chart')).data.datasets;"
                                 "return arguments[0].map(l => (ds.find(d => d.label === l) || {data: []}).data)", labels)


def check_detail(driver, srv, jid, downloads, art):
    """Open a job from its row: its document, its timings bar, its result saved as .npy."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    click(driver, '#jobs tbody tr[data-id="%s"]' % jid)
    shown = wait_for(driver, "const p = document.getElementById('detail');"
                     "try { const d = JSON.parse(document.getElementById('detail-json').textContent);"
                     "      return !p.hidden && d.id === '%s' && d } catch (e) { return null }" % jid, "the detail of " + jid)
    job = srv.get_json("/v1/jobs/" + jid)
    if shown:
        CHECK.eq({k: shown.get(k) for k in ("id", "status", "op", "shape", "device", "created_at", "finished_at")},
                 {k: job[k] for k in ("id", "status", "op", "shape", "device", "created_at", "finished_at")},
                 "detail: members of the job document")
        CHECK.eq(shown, job, "detail: the whole job document as GET /v1/jobs/{id} has it")
    CHECK.eq(driver.execute_script("return document.querySelector('#jobs tr.selected').dataset.id"), jid, "detail: its row is marked")

    # one segment per stage (and "other": what the stages leave of the total), each its share
    # (CSS keeps a width to 6 significant digits)
    segs = driver.execute_script("return [...document.querySelectorAll('#detail-timings .seg')].map(s =>"
                                 " [s.dataset.stage, parseFloat(s.style.width), s.getBoundingClientRect().width])")
    bar = driver.execute_script("return document.getElementById('detail-timings').getBoundingClientRect().width")
    t = job["timings_ms"]
    stages = ["queue", "h2d", "kernel", "d2h"]
    ssum = sum(t[k] for k in stages)
    scale = max(t["total"], ssum)
    want = [(k, 100 * t[k] / scale) for k in stages] + ([("other", 100 * (t["total"] - ssum) / scale)] if t["total"] > ssum else [])
    CHECK.eq([s[0] for s in segs], [w[0] for w in want], "detail: the timings bar's segments")
    CHECK.ok(len(segs) == len(want) and all(abs(s[1] - w[1]) < 1e-3 for s, w in zip(segs, want)),
             "detail: segment widths %r, want %r (%% of %r ms)" % ([s[1] for s in segs], want, scale))
    CHECK.ok(bar > 100 and abs(sum(s[2] for s in segs) - bar) < 2,
             "detail: the segments fill the %gpx bar: %r" % (bar, [s[2] for s in segs]))
    kernel = driver.execute_script("const r = document.querySelector('#detail-timings .seg[data-stage=kernel]')"
                                   ".getBoundingClientRect(); return [r.width, r.height]")
    CHECK.ok(kernel[0] > 1 and kernel[1] >= 10, "detail: the kernel segment is drawn, %r px (w, h)" % kernel)

    # the button saves the server's .npy (fetched with Accept, as a Blob) under the job's name
    path = os.path.join(downloads, jid + ".npy")
    click(driver, "#detail-download")
    deadline = time.time() + 15
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.1)  # Chromium writes NAME.crdownload and renames it once the download is whole
    r = srv.req("GET", "/v1/jobs/%s/result" % jid, headers={"Accept": "application/x-npy"})
    got = open(path, "rb").read() if os.path.exists(path) else None
    CHECK.ok(r.status == 200 and r.body.startswith(b"\x93NUMPY"), "the server's .npy of %s: %r" % (jid, r))
    CHECK.ok(got == r.body, "detail: the saved %s.npy (%r bytes) is the server's /result (%d bytes)"
             % (jid, got and len(got), len(r.body)))
    msg = driver.find_element("id", "detail-msg").text
    CHECK.ok(msg.startswith("saved %s.npy" % jid), "detail: says what it saved: %r" % msg)

    driver.save_screenshot(os.path.join(art, "dashboard-detail.png"))
    print("screenshot: %s" % os.path.join(art, "dashboard-detail.png"), flush=True)
    ActionChains(driver).send_keys(Keys.ESCAPE).perform()
    CHECK.ok(wait_for(driver, "return document.getElementById('detail').hidden", "Esc to close the detail"), "detail: Esc closes it")
    return job


def upload(srv, rng, rows, cols):
    vals = [rng.randint(-1000, 1000) for _ in range(rows * cols)]
    r = srv.req("POST", "/v1/datasets?dtype=int32&shape=%d,%d" % (rows, cols), struct.pack("<%di" % len(vals), *vals),
                {"Content-Type": "application/octet-stream"})
    CHECK.eq(r.status, 201, "upload a %dx%d dataset" % (rows, cols))
    return r.json()["id"]


def dataset_row(driver, did, timeout=10):
    """The dataset panel's row: [id, dtype, shape, size, created, last used, cached on, actions] and the
    size's title."""
    return wait_for(driver, "const tr = document.querySelector('#datasets tbody tr[data-id=\"%s\"]');"
                    "return tr && [[...tr.cells].map(c => c.textContent), tr.cells[3].title]" % did,
                    "dataset %s in the panel" % did, timeout)


def check_datasets(driver, srv, rng, kept):
    """The datasets panel: what it lists, its delete that asks first, and a refused delete.
    Returns the id of a job canceled on the way (for the status filter) and the URL refused."""
    did = upload(srv, rng, 3, 4)
    row = dataset_row(driver, did)  # listed on its "created" event
    if row:
        CHECK.eq(row[0][:4], [did, "int32", "3×4", "48 B"], "datasets: the upload's row (id, dtype, shape, size)")
        CHECK.eq(row[1], "48 bytes", "datasets: the exact size on hover")
        CHECK.eq(row[0][5], "never", "datasets: a new upload was never used")
        CHECK.eq(row[0][6], "—", "datasets: cached nowhere (a CPU server)")
    # a job that reads it marks it used; the panel shows when within a refresh (no event says so)
    ran = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": did, "device": "cpu"}, {"Prefer": "wait=30"})
    used = srv.get_json("/v1/datasets/" + did).get("last_used_at")
    if CHECK.ok(ran.status == 200 and isinstance(used, str), "datasets: a job on it ran (%d) and marked it used: %r"
                % (ran.status, used)):
        shown = wait_for(driver, "const tr = document.querySelector('#datasets tbody tr[data-id=\"%s\"]');"
                         "return tr && tr.cells[5].textContent !== 'never' && tr.cells[5].textContent" % did,
                         "the last use in the panel", 15)
        CHECK.eq(shown, used[:19].replace("T", " "), "datasets: the panel shows its last use")
    if kept:
        res = kept[0]["result"]
        row = dataset_row(driver, res["dataset"])
        CHECK.ok(row and row[0][1] == "int32" and row[0][2] == "4097" and row[0][3] == "16.0 KiB" and
                 row[1] == "%d bytes" % (4097 * 4), "datasets: a kept result's row (an int32 max's): %r" % (row,))
    want = [d["id"] for d in srv.get_json("/v1/datasets?limit=100")["datasets"]]
    wait_ids(driver, want, "datasets: the panel lists GET /v1/datasets, newest first", "datasets")

    # delete asks first: "Keep" keeps it, "Delete" deletes it
    btn = '#datasets tr[data-id="%s"] button[data-action="%s"]'
    click(driver, btn % (did, "delete"))
    CHECK.ok(wait_css(driver, btn % (did, "confirm"), "the delete's confirmation"), "datasets: delete asks for a confirmation")
    CHECK.eq(srv.req("GET", "/v1/datasets/" + did).status, 200, "datasets: still there while it asks")
    click(driver, btn % (did, "cancel"))
    time.sleep(0.3)
    CHECK.eq([present(driver, btn % (did, "confirm")), present(driver, btn % (did, "delete"))], [False, True],
             "datasets: Keep closes the question and keeps the row: [confirm shown, delete shown]")
    CHECK.eq(srv.req("GET", "/v1/datasets/" + did).status, 200, "datasets: Keep keeps it")
    click(driver, btn % (did, "delete"))
    click(driver, btn % (did, "confirm"))
    st = wait_for(driver, "return document.getElementById('datasets-msg').dataset.status", "the delete's answer")
    CHECK.eq(st, "deleted", "datasets: the delete's answer: %s" % driver.find_element("id", "datasets-msg").text)
    CHECK.eq(srv.req("GET", "/v1/datasets/" + did).status, 404, "datasets: confirmed, it is deleted")
    wait_css(driver, '#datasets tr[data-id="%s"]' % did, "the deleted row gone", gone=True)

    # a dataset a queued job holds: the delete is refused (409) and the page says why. The queue
    # behind the busy worker shows in the per-device chart too.
    held = upload(srv, rng, 2, 2)
    b = L.blocker(srv, 6)
    qjob = srv.req("POST", "/v1/jobs", {"op": "sum", "dataset": held, "device": "cpu"})
    canceled = None
    if CHECK.eq((b.status, qjob.status, qjob.json().get("status")), (202, 202, "queued"), "a job queued behind a busy worker"):
        canceled = qjob.json()["id"]
        refused = srv.req("DELETE", "/v1/datasets/" + held)
        L.check_problem("DELETE of a dataset a queued job holds", refused, 409)
        dataset_row(driver, held)
        driver.execute_script("document.getElementById('datasets-msg').removeAttribute('data-status')")
        click(driver, btn % (held, "delete"))
        click(driver, btn % (held, "confirm"))
        st = wait_for(driver, "return document.getElementById('datasets-msg').dataset.status", "the refused delete's answer")
        msg = driver.find_element("id", "datasets-msg").text
        CHECK.ok(st == "refused" and "409" in msg and refused.json()["detail"] in msg,
                 "datasets: a refused delete shows the problem: %r (%s)" % (msg, st))
        CHECK.eq(srv.req("GET", "/v1/datasets/" + held).status, 200, "datasets: refused, it stays")
        # /metrics is read every 3 s: a reading while the job waits shows it queued on the CPU
        q = wait_for(driver, "const d = Chart.getChart(document.getElementById('load-chart')).data.datasets"
                     ".find(d => d.label === 'cpu queued'); return d && d.data.some(p => p.y >= 1)",
                     "the queued job in the per-device chart", 8)
        CHECK.ok(q, "load chart: the CPU's queue depth rose to 1 behind the busy worker")
        CHECK.eq(srv.req("DELETE", "/v1/jobs/" + canceled).status, 200, "cancel the queued job")
    if b.status == 202:
        r = srv.req("GET", "/v1/jobs/%s?wait=30" % b.json()["id"], timeout=40)
        deadline = time.time() + 60
        while r.json()["status"] not in L.TERMINAL and time.time() < deadline:
            r = srv.req("GET", "/v1/jobs/%s?wait=30" % b.json()["id"], timeout=40)
        CHECK.eq(r.json()["status"], "succeeded", "the blocking benchmark ended")
    return canceled, "/v1/datasets/" + held


def check_filters(driver, srv, canceled):
    """Filters narrow the table to what the API lists for them (the device, matched by the page)."""
    def listed(**q):
        jobs = srv.get_json("/v1/jobs?limit=100" + "".join("&%s=%s" % kv for kv in q.items() if kv[0] != "device"))["jobs"]
        return [j["id"] for j in jobs if j["device"] == q.get("device", j["device"])]

    select(driver, "filter-op", "max")
    ids = wait_ids(driver, listed(op="max"), "filter op=max: the table is GET /v1/jobs?op=max")
    ops = driver.execute_script("return [...document.querySelectorAll('#jobs tbody tr')].map(tr => tr.cells[2].textContent)")
    CHECK.ok(len(ids) >= 2 and set(ops) == {"max"}, "filter op=max: %d rows, ops %r" % (len(ids), sorted(set(ops))))
    CHECK.eq(driver.execute_script("return location.hash"), "#op=max", "filter op=max: the hash")
    select(driver, "filter-op", "")
    if canceled:
        select(driver, "filter-status", "canceled")
        wait_ids(driver, [canceled], "filter status=canceled: the one job canceled")
    select(driver, "filter-status", "succeeded")
    select(driver, "filter-op", "max")
    select(driver, "filter-device", "cpu")
    want = listed(status="succeeded", op="max", device="cpu")
    wait_ids(driver, want, "filters status, op and device together")
    CHECK.eq(driver.execute_script("return location.hash"), "#status=succeeded&op=max&device=cpu", "three filters: the hash")

    # a reload keeps them: the selects and the table
    driver.refresh()
    wait_for(driver, "return document.querySelectorAll('#jobs tbody tr').length", "the filtered table after a reload")
    CHECK.eq(driver.execute_script("return ['status', 'op', 'device'].map(k => document.getElementById('filter-' + k).value)"),
             ["succeeded", "max", "cpu"], "filters after a reload")
    wait_ids(driver, want, "the filtered table after a reload")
    # a device the server has not (a link from a GPU server): nothing here ran there
    driver.execute_script("location.hash = '#device=gpu:7'")
    wait_ids(driver, [], "filter device=gpu:7 on a CPU server: no rows")
    meta = driver.find_element("id", "jobs-meta").text
    CHECK.ok("no job matches" in meta, "filter device=gpu:7: the table says so: %r" % meta)
    for k in ("status", "op", "device"):
        select(driver, "filter-" + k, "")
    wait_ids(driver, listed(), "no filters: every job again")
    CHECK.eq(driver.execute_script("return location.hash"), "", "no filters: no hash")


def check_load_chart(driver, srv, jobs_before):
    """The per-device chart's jobs/s add up to the jobs the server counted since the page opened."""
    total = sum(v for lb, v in O.scrape(srv).series("gpured_jobs_total") if lb["device"] == "cpu") - jobs_before
    n = len(load_series(driver, "cpu queued")[0])
    wait_for(driver, "const d = Chart.getChart(document.getElementById('load-chart')).data.datasets"
             ".find(d => d.label === 'cpu queued'); return d.data.length > %d" % n, "a reading of /metrics after the jobs", 8)
    queued, rates = load_series(driver, "cpu queued", "cpu jobs/s")
    CHECK.ok(len(queued) >= 3 and len(rates) == len(queued) - 1, "load chart: %d queue points, %d jobs/s points"
             % (len(queued), len(rates)))
    CHECK.ok(all(-300 <= p["x"] <= 0 for p in queued), "load chart: points within the last 5 minutes: %r" % queued[:3])
    xs = [p["x"] for p in queued]
    counted = sum(r["y"] * (xs[k + 1] - xs[k]) for k, r in enumerate(rates))
    CHECK.ok(total >= 5 and abs(counted - total) < 1e-6 * total + 1e-6,
             "load chart: jobs/s over time add up to %r jobs, the server counted %r" % (counted, total))
    st = chart_state(driver, "load-chart")
    CHECK.ok(st["painted"] > 0.02 * st["w"] * st["h"], "load chart painted %d pixels" % st["painted"])
    devs = srv.get_json("/v1/devices")
    if devs["gpus"]:
        labels = driver.execute_script("return Chart.getChart(document.getElementById('gpu-chart')).data.datasets.map(d => d.label)")
        CHECK.eq(sorted(labels), sorted(x for g in devs["gpus"] for x in (g["id"] + " memory used", g["id"] + " cache")),
                 "GPU chart: memory and cache per GPU")
    else:
        CHECK.eq(driver.execute_script("return [document.getElementById('gpu-none').hidden, document.getElementById('gpu-chart-box').hidden]"),
                 [False, True], "a CPU-only server: the GPU card says so instead of a chart")


def check_latency_chart(driver, srv, started, art):
    """The stage latency chart: p50 and p99 of queue, kernel and total in ms, a point per pair of
    consecutive readings of /metrics, from gpured_job_stage_seconds. Each total point lies within
    the bounds of the buckets the server counted jobs in (histogram_quantile interpolates inside the
    bucket the rank falls in), p99 >= p50, and where no job ended there is a gap, never a 0."""
    names = [st + " " + q for st in ("queue", "kernel", "total") for q in ("p50", "p99")]
    # read at once, before the scrape: every reading the page made precedes it
    got = driver.execute_script(
        "const ds = c => Chart.getChart(document.getElementById(c)).data.datasets;"
        "return [ds('latency-chart').map(d => [d.label, d.data.map(p => p.y)]),"
        "        ds('load-chart').find(d => d.label === 'cpu jobs/s').data.length]")
    m = O.scrape(srv)
    wall_ms = (time.time() - started) * 1e3
    series = dict(got[0])
    CHECK.eq([lb for lb, _ in got[0]], names, "latency chart: p50 and p99 of queue, kernel and total")
    p50, p99 = series.get("total p50", []), series.get("total p99", [])
    CHECK.ok(len(p50) == len(p99) == got[1] >= 2,
             "latency chart: a total point per pair of readings: %d p50, %d p99, %d jobs/s points" % (len(p50), len(p99), got[1]))
    # the server's total-stage buckets summed over devices (cumulative): the lowest and highest
    # non-empty bucket bound every quantile of every window
    cum = {}
    for lb, v in m.series("gpured_job_stage_seconds_bucket"):
        if lb["stage"] == "total":
            le = math.inf if lb["le"] == "+Inf" else float(lb["le"])
            cum[le] = cum.get(le, 0) + v
    les = sorted(cum)
    lo = max([0.0] + [le for le in les if cum[le] == 0])
    hi = min(le for le in les if cum[le] == cum[math.inf])
    hi = hi if hi != math.inf else les[-2]
    both = [(a, b) for a, b in zip(p50, p99) if a is not None and b is not None]
    CHECK.ok(len(both) >= 1, "latency chart: a total p50 and p99 from the jobs that ran: %r, %r" % (p50[-8:], p99[-8:]))
    CHECK.ok(all(b >= a for a, b in both), "latency chart: total p99 >= p50 at each point: %r" % both)
    CHECK.ok(all(lo * 1e3 * (1 - 1e-9) < v <= hi * 1e3 * (1 + 1e-9) and v < wall_ms for pair in both for v in pair),
             "latency chart: total p50/p99 %r ms within (%g, %g] ms, the server's buckets, and below the %d ms run"
             % (both, lo * 1e3, hi * 1e3, wall_ms))
    # no job ended while the blocking benchmark ran (benchmarks are not in the histogram): a gap
    CHECK.ok([a is None for a in p50] == [b is None for b in p99] and None in p50,
             "latency chart: gaps where no job ended, the same in p50 and p99: %r" % p50)
    zeros = [lb for lb, ys in got[0] if 0 in ys]
    CHECK.ok(not zeros, "latency chart: no job is a gap, not a 0 ms point: %r" % zeros)
    st = chart_state(driver, "latency-chart")
    CHECK.ok(st["painted"] > 0.02 * st["w"] * st["h"], "latency chart painted %d pixels" % st["painted"])
    driver.execute_script("document.getElementById('latency-card').scrollIntoView()")
    driver.save_screenshot(os.path.join(art, "dashboard-latency.png"))
    print("screenshot: %s" % os.path.join(art, "dashboard-latency.png"), flush=True)


def screenshots(driver, art, name):
    """The viewport as a person sees it, and the whole page (the table is below the fold)."""
    driver.save_screenshot(os.path.join(art, name + ".png"))
    w, h = driver.get_window_size()["width"], driver.get_window_size()["height"]
    full = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(w, max(h, full + 120))
    driver.execute_script("window.scrollTo(0, 0)")
    time.sleep(0.3)
    driver.save_screenshot(os.path.join(art, name + "-full.png"))
    driver.set_window_size(w, h)
    print("screenshots: %s{,-full}.png" % os.path.join(art, name), flush=True)


def main():
    started = time.time()
    L.store_independent("test_dashboard")
    srv = L.start_suite()
    rng = L.rng_for("test_dashboard")
    art = os.path.join(O.build_dir(), "artifacts")
    os.makedirs(art, exist_ok=True)

    # a few jobs before the page opens, so the table and charts start with history
    for op in ("sum", "max", "mean"):
        data = L.gen_data(op, "float64", 5000, rng)
        r = srv.req("POST", "/v1/jobs", {"op": op, "dtype": "float64", "data": data, "device": "cpu"},
                    {"Prefer": "wait=10"})
        CHECK.eq(r.status, 200, "seed job %s" % op)
    # and two whose results are kept as datasets: a long axis result and a matrix product
    kept = []
    for body in ({"op": "max", "dtype": "int32", "data": [[k, -k] for k in range(4097)], "axis": 1},
                 {"op": "matmul", "dtype": "float32", "a": {"data": [[1.0] * 80] * 70}, "b": {"data": [[2.0] * 60] * 80}}):
        r = srv.req("POST", "/v1/jobs", dict(body, device="cpu"), {"Prefer": "wait=10"})
        if CHECK.eq(r.status, 200, "seed job %s" % body["op"]):
            kept.append(r.json())

    downloads = tempfile.mkdtemp(prefix="gpured-downloads-")
    jobs_before = sum(v for lb, v in O.scrape(srv).series("gpured_jobs_total") if lb["device"] == "cpu")
    driver = browser(downloads)
    try:
        driver.set_window_size(1280, 800)
        driver.get(srv.base + "/")
        CHECK.eq(driver.title, "gpured", "page title")
        rows = wait_for(driver, "return document.querySelectorAll('#jobs tbody tr').length >= 5 && "
                        "document.querySelectorAll('#jobs tbody tr').length", "the seed jobs in the table")
        CHECK.eq(rows, 5, "rows in the job table after load")
        for job in kept:
            cells = row_of(driver, job["id"])
            want = "dataset %s (%s)" % (job["result"]["dataset"], "×".join(map(str, job["result"]["shape"])))
            CHECK.ok(cells and cells[-1] == want, "a kept result shows its dataset: %r, want %r" % (cells and cells[-1], want))
        devs = srv.get_json("/v1/devices")
        text = driver.find_element("id", "devices").text
        CHECK.ok(devs["cpu"]["name"] in text, "device panel names the CPU %r: %r" % (devs["cpu"]["name"], text))
        for g in devs["gpus"]:
            CHECK.ok(g["name"] in text, "device panel names %s: %r" % (g["id"], text))

        # a whole-array int64 sum, exact
        data = [rng.randint(-10**6, 10**6) for _ in range(257)]
        st, jid, line = submit(driver, "sum", "int64", data)
        CHECK.eq(st, "succeeded", "form job status (%s)" % line)
        want = sum(data)
        CHECK.ok(line.endswith("ms)") and (": %d " % want) in line, "form answer %r shows the sum %d" % (line, want))
        cells = row_of(driver, jid)
        if cells:
            CHECK.eq(cells[-1], str(want), "table result of the int64 sum")
            CHECK.eq(cells[2:7], ["sum", "int64", "257", "—", "cpu"], "table row columns")

        # a float64 mean along rows of a 2-D array, within rounding of an exact reference
        rows2 = [[rng.uniform(-1e3, 1e3) for _ in range(6)] for _ in range(3)]
        st, jid2, line = submit(driver, "mean", "float64", rows2, axis="1")
        CHECK.eq(st, "succeeded", "form job 2 status (%s)" % line)
        cells = row_of(driver, jid2)
        if cells:
            shown = [float(x) for x in cells[-1].strip("[]").split(",")]
            want = [math.fsum(r) / len(r) for r in rows2]
            CHECK.ok(len(shown) == 3 and all(abs(a - b) <= 1e-12 * max(1, abs(b)) for a, b in zip(shown, want)),
                     "table means %r vs reference %r" % (shown, want))

        # a 3-D array over two axes, typed as NumPy takes them; a bad axis is named before any request
        st, jid3d, line = submit(driver, "sum", "int32", [[[1, 2], [3, 4]], [[5, 6], [7, 8]]], axis="0, -1")
        CHECK.eq(st, "succeeded", "form job on 3-D data, axis 0,-1 (%s)" % line)
        cells = row_of(driver, jid3d)
        if cells:
            CHECK.eq([cells[5], cells[-1]], ["0,2", "[14, 22]"], "table row of the 3-D job: its axes and sums")
        driver.execute_script("document.getElementById('axis').value = '0;1'; document.getElementById('submit').click()")
        line = driver.execute_script("return document.getElementById('submit-result').textContent")
        CHECK.ok("axis:" in line, "a malformed axis is named by the form, before any request: %r" % line)
        driver.execute_script("document.getElementById('axis').value = ''")

        # both charts hold the jobs and have painted their canvas
        stage = chart_state(driver, "stage-chart")
        CHECK.ok(any(jid2[-5:] in lab for lab in stage["labels"]), "stage chart labels %r include the new job" % stage["labels"][-3:])
        CHECK.eq([len(d) for d in stage["data"]], [8] * 4, "stage chart: 4 stages x 8 jobs")
        CHECK.ok(stage["painted"] > 0.02 * stage["w"] * stage["h"], "stage chart painted %d of %dx%d pixels" % (stage["painted"], stage["w"], stage["h"]))
        thr = chart_state(driver, "throughput-chart")
        CHECK.ok(abs(sum(thr["data"][0]) * 10 - 8) < 1e-9, "throughput chart counts the 8 jobs: %r" % thr["data"][0][-3:])
        CHECK.ok(thr["painted"] > 0.02 * thr["w"] * thr["h"], "throughput chart painted %d pixels" % thr["painted"])

        # a benchmark from the button: one bar per variant, the GB/s the job reports
        submit_bench(driver, "sum", "float32")
        st = wait_for(driver, "return document.getElementById('bench-result').dataset.status", "the benchmark's answer", 90)
        bid = driver.find_element("id", "bench-result").get_attribute("data-job-id")
        CHECK.eq(st, "succeeded", "benchmark from the button: %s" % driver.find_element("id", "bench-result").text)
        if st == "succeeded":
            job = srv.get_json("/v1/jobs/" + bid)
            want = [a["name"] for a in srv.get_json("/v1/algorithms")["algorithms"]
                    if a["device"] == "cpu" and a["name"] != "auto" and "sum" in a["ops"] and "float32" in a["dtypes"]]
            CHECK.eq((job["kind"], job["shape"], job["repeats"]), ("benchmark", [1 << 20], 5), "benchmark job asked for")
            CHECK.eq(sorted(r["algorithm"] for r in job["result"]["rows"]), sorted(want), "benchmark rows")
            wait_for(driver, "return Chart.getChart(document.getElementById('bench-chart')).data.labels.length > 0",
                     "the benchmark chart")
            bench = chart_state(driver, "bench-chart")
            CHECK.eq(bench["labels"], [r["algorithm"] for r in job["result"]["rows"]], "benchmark chart bars")
            CHECK.eq(bench["data"][0], [r["gbps"] for r in job["result"]["rows"]], "benchmark chart GB/s")
            CHECK.ok(bench["painted"] > 0.02 * bench["w"] * bench["h"], "benchmark chart painted %d pixels" % bench["painted"])
            CHECK.eq(chart_state(driver, "stage-chart")["labels"], stage["labels"], "benchmarks stay out of the stage chart")

        # live: the page follows GET /v1/events, and a job made elsewhere is refreshed in by its events
        wait_for(driver, "return document.getElementById('live').dataset.live === 'true'", "the event stream live")
        before = driver.execute_script("return Number(document.body.dataset.eventRefreshes || 0)")
        r = srv.req("POST", "/v1/jobs", {"op": "min", "dtype": "int32", "data": [3, -9, 4], "device": "cpu"})
        if CHECK.eq(r.status, 202, "a job from outside the page"):
            cells = row_of(driver, r.json()["id"])
            CHECK.ok(cells is not None, "it shows up in the table")
            CHECK.ok(driver.execute_script("return Number(document.body.dataset.eventRefreshes || 0)") > before,
                     "refreshed by its events (the poll is 15 s apart while live)")
        # idle: the polls are answered 304 and nothing is re-sent
        before = O.scrape(srv)
        time.sleep(3.5)
        after = O.scrape(srv)
        lbl = dict(route="/v1/jobs", method="GET")
        n304 = after.get("gpured_http_requests_total", code="304", **lbl) - before.get("gpured_http_requests_total", code="304", **lbl)
        n200 = after.get("gpured_http_requests_total", code="200", **lbl) - before.get("gpured_http_requests_total", code="200", **lbl)
        # live, the page polls once in 15 s as a safety net; each poll is a 304
        CHECK.ok(n304 <= 1 and n200 == 0, "idle live page: %d polls answered 304, %d answered 200" % (n304, n200))

        # a job's detail: the matmul product kept as a dataset (a 70x60 float32 .npy)
        if len(kept) == 2:
            check_detail(driver, srv, kept[1]["id"], downloads, art)
        canceled, refused = check_datasets(driver, srv, rng, kept)
        check_load_chart(driver, srv, jobs_before)  # before the filters' reload starts the chart anew
        check_latency_chart(driver, srv, started, art)
        check_filters(driver, srv, canceled)
        check_products_and_uploads(driver, srv, rng)

        # nothing came from anywhere but this server (no CDN)
        urls = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        foreign = [u for u in urls if not u.startswith(srv.base)]
        CHECK.ok(not foreign, "resources fetched from elsewhere: %r" % foreign[:5])
        # no tokens on this server: the token form never showed, nothing asks to be forgotten
        CHECK.eq(driver.execute_script(TOKEN_UI), [False, False, None], "no tokens: [form shown, forget shown, token]")
        # Chromium logs an answer >= 400 to fetch as an error: the 409 asked for above is no fault
        console_errors(driver, "desktop", allow=("%s - Failed to load resource: the server responded with a status of 409" % refused,
                                                 "/v1/datasets - Failed to load resource: the server responded with a status of 4"))
        screenshots(driver, art, "dashboard-1280x800")

        # a phone: nothing wider than the screen, the form still usable
        driver.set_window_size(390, 844)
        time.sleep(0.5)
        widths = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        CHECK.ok(widths[0] <= widths[1], "phone width: page is %dpx wide in a %dpx window" % tuple(widths))
        st, jid3, line = submit(driver, "argmax", "int32", [3, 9, 2, 9, 1])
        CHECK.ok(st == "succeeded" and "9 @1" in line, "phone: argmax from the form: %r" % line)
        CHECK.eq(driver.execute_script(TOKEN_UI), [False, False, None], "no tokens, phone: [form shown, forget shown, token]")
        # the detail panel on a phone: the whole width, nothing wider
        if st == "succeeded":
            row_of(driver, jid3)
            click(driver, '#jobs tbody tr[data-id="%s"]' % jid3)
            wait_for(driver, "return document.getElementById('detail').dataset.status === 'succeeded' && "
                     "document.getElementById('detail-json').textContent.includes('%s')" % jid3, "the phone's detail")
            CHECK.eq(driver.execute_script("return [!document.getElementById('detail-download-indices').hidden,"
                                           " document.documentElement.scrollWidth <= window.innerWidth]"),
                     [True, True], "phone: an argmax's detail offers its indices and fits: [indices, fits]")
            driver.save_screenshot(os.path.join(art, "dashboard-phone-detail.png"))
            print("screenshot: %s" % os.path.join(art, "dashboard-phone-detail.png"), flush=True)
            click(driver, "#detail-close")
        console_errors(driver, "phone")
        screenshots(driver, art, "dashboard-phone")
        driver.set_window_size(1280, 800)
        L.check_stop(srv)
        with_tokens(driver, art, rng)
    finally:
        driver.quit()
        shutil.rmtree(downloads, ignore_errors=True)


def use_token(driver, token):
    from selenium.webdriver.common.by import By
    box = driver.find_element(By.ID, "token")
    CHECK.eq(box.get_attribute("type"), "password", "the token box is a password input")
    box.clear()
    box.send_keys(token)
    driver.find_element(By.ID, "token-use").click()


def with_tokens(driver, art, rng):
    """The dashboard against a server that needs `Authorization: Bearer TOKEN`."""
    from selenium.webdriver.common.by import By
    token = "%032x" % rng.getrandbits(128)
    wrong = "%032x" % rng.getrandbits(128)
    fd, path = tempfile.mkstemp(prefix="gpured-tokens-")
    with os.fdopen(fd, "w") as f:
        f.write("# TENANT TOKEN\nalice %s\n" % token)
    try:
        srv = L.Server(args=["--tokens-file", path], name="gpured-tokens").start()
        auth = {"Authorization": "Bearer " + token}
        CHECK.eq(srv.req("GET", "/v1/jobs").status, 401, "tokens: GET /v1/jobs without a token")
        r = srv.req("POST", "/v1/jobs", {"op": "sum", "dtype": "int64", "data": [5, 6, 7], "device": "cpu"},
                    dict(auth, Prefer="wait=10"))
        if not CHECK.eq(r.status, 200, "tokens: seed job with the token"):
            return
        seeded = r.json()["id"]

        driver.get(srv.base + "/")
        # the log so far belongs to the page before: it went on polling the server stopped after it
        driver.get_log("browser")
        wait_for(driver, "return !document.getElementById('token-card').hidden", "the token form after the 401s")
        CHECK.eq(driver.execute_script(TOKEN_UI), [True, False, None], "tokens, loaded: [form shown, forget shown, token]")
        CHECK.eq(driver.execute_script("return document.querySelectorAll('#jobs tbody tr').length"), 0,
                 "tokens: no jobs before a token")

        # a wrong token: refused, dropped, the form again
        use_token(driver, wrong)
        msg = wait_for(driver, "const m = document.getElementById('token-msg').textContent;"
                       "return !document.getElementById('token-card').hidden && m.includes('refused') && m",
                       "the form again after a wrong token")
        CHECK.ok(msg, "a wrong token is said to be refused: %r" % msg)
        CHECK.eq(driver.execute_script(TOKEN_UI), [True, False, None], "tokens, wrong one: [form shown, forget shown, token]")
        CHECK.eq(driver.execute_script("return document.querySelectorAll('#jobs tbody tr').length"), 0,
                 "tokens: no jobs after a wrong token")

        # the right one: the seeded job, the devices, a job from the form, idle polls into 304s
        use_token(driver, token)
        cells = row_of(driver, seeded)
        CHECK.ok(cells and cells[-1] == "18", "tokens: the seeded job's row: %r" % cells)
        CHECK.eq(driver.execute_script(TOKEN_UI), [False, True, token], "tokens, right one: [form shown, forget shown, token]")
        wait_for(driver, "return document.querySelector('#devices .device')", "the device panel with a token")
        st, jid, line = submit(driver, "max", "int32", [4, 11, -2])
        CHECK.ok(st == "succeeded" and ": 11 " in line, "tokens: a job from the form: %r" % line)
        if st == "succeeded":
            r = srv.req("GET", "/v1/jobs/" + jid, headers=auth)
            CHECK.eq((r.status, r.status == 200 and r.json().get("tenant")), (200, "alice"), "tokens: the form's job is alice's")
            row_of(driver, jid)

        # the stream reconnects within 2 s of the token (meanwhile the page polls every second)
        wait_for(driver, "return document.getElementById('live').dataset.live === 'true'", "tokens: the event stream live")

        def polls(code):
            m = O.Metrics(srv.req("GET", "/metrics", headers=auth).body.decode("utf-8"))
            return m.get("gpured_http_requests_total", code=code, route="/v1/jobs", method="GET")
        before = (polls("304"), polls("200"))
        time.sleep(3.5)
        n304, n200 = polls("304") - before[0], polls("200") - before[1]
        CHECK.eq(driver.execute_script("return document.getElementById('live').dataset.live"), "true",
                 "tokens: the event stream is live (fetch sends the token)")
        CHECK.ok(n304 <= 1 and n200 == 0, "tokens, idle live page: %d polls answered 304, %d answered 200" % (n304, n200))

        # the token is in no URL the page fetched or showed
        urls = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        urls.append(driver.current_url)
        CHECK.ok(any("/v1/jobs" in u for u in urls), "tokens: the resource list holds the job polls: %r" % urls[:5])
        leaked = [u for u in urls if token in u or wrong in u]
        CHECK.ok(not leaked, "tokens in URLs: %r" % leaked[:3])
        screenshots(driver, art, "dashboard-token")

        # forget: the token is gone, the table is empty, the form is back
        driver.find_element(By.ID, "token-forget").click()
        wait_for(driver, "return !document.getElementById('token-card').hidden", "the token form after forgetting")
        CHECK.eq(driver.execute_script(TOKEN_UI), [True, False, None], "tokens, forgotten: [form shown, forget shown, token]")
        CHECK.eq(driver.execute_script("return document.querySelectorAll('#jobs tbody tr').length"), 0,
                 "tokens: no jobs after forgetting")
        time.sleep(1.5)
        CHECK.eq(driver.execute_script(TOKEN_UI), [True, False, None], "tokens, forgotten, later: [form shown, forget shown, token]")
        screenshots(driver, art, "dashboard-token-form")
        console_errors(driver, "tokens", allow=(" 401 ",))
        L.check_stop(srv)
        CHECK.ok(not [ln for ln in srv.log if token in ln or wrong in ln], "tokens: a token in the server's log")
    finally:
        os.unlink(path)


if __name__ == "__main__":
    L.run_suite(main)
