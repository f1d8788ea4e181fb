# test_dashboard.py: the dashboard in real headless Chromium (Debian's chromium, chromium-driver,
# python3-selenium): loads with no console errors and nothing fetched from elsewhere, a job
# submitted from the form succeeds with the reference value, the charts draw (a benchmark from its
# button too), the page follows the event stream (a job made elsewhere is refreshed in by its
# events) and an idle page sends no 200s, it fits 1280x800 and a phone; screenshots go to
# <build>/artifacts/. Then against a server with --tokens-file: the 401s bring up the token form, a
# wrong token is refused, the right one loads the tenant's jobs (sent as a header, never in a URL,
# kept in sessionStorage) and "Forget token" drops it.
import json
import math
import os
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


def browser():
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
    return webdriver.Chrome(service=Service(executable_path=DRIVER), options=opts)


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


def submit(driver, op, dtype, data, axis=""):
    """Fill the form as a person would and press Run; returns the result line's dataset."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select
    Select(driver.find_element(By.ID, "op")).select_by_value(op)
    Select(driver.find_element(By.ID, "dtype")).select_by_value(dtype)
    Select(driver.find_element(By.ID, "axis")).select_by_value(axis)
    Select(driver.find_element(By.ID, "device")).select_by_value("cpu")
    box = driver.find_element(By.ID, "data")
    box.clear()
    box.send_keys(json.dumps(data))
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

    driver = browser()
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

        # both charts hold the jobs and have painted their canvas
        stage = chart_state(driver, "stage-chart")
        CHECK.ok(any(jid2[-5:] in lab for lab in stage["labels"]), "stage chart labels %r include the new job" % stage["labels"][-3:])
        CHECK.eq([len(d) for d in stage["data"]], [7] * 4, "stage chart: 4 stages x 7 jobs")
        CHECK.ok(stage["painted"] > 0.02 * stage["w"] * stage["h"], "stage chart painted %d of %dx%d pixels" % (stage["painted"], stage["w"], stage["h"]))
        thr = chart_state(driver, "throughput-chart")
        CHECK.ok(abs(sum(thr["data"][0]) * 10 - 7) < 1e-9, "throughput chart counts the 7 jobs: %r" % thr["data"][0][-3:])
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

        # nothing came from anywhere but this server (no CDN)
        urls = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
        foreign = [u for u in urls if not u.startswith(srv.base)]
        CHECK.ok(not foreign, "resources fetched from elsewhere: %r" % foreign[:5])
        # no tokens on this server: the token form never showed, nothing asks to be forgotten
        CHECK.eq(driver.execute_script(TOKEN_UI), [False, False, None], "no tokens: [form shown, forget shown, token]")
        console_errors(driver, "desktop")
        screenshots(driver, art, "dashboard-1280x800")

        # a phone: nothing wider than the screen, the form still usable
        driver.set_window_size(390, 844)
        time.sleep(0.5)
        widths = driver.execute_script("return [document.documentElement.scrollWidth, window.innerWidth]")
        CHECK.ok(widths[0] <= widths[1], "phone width: page is %dpx wide in a %dpx window" % tuple(widths))
        st, jid3, line = submit(driver, "argmax", "int32", [3, 9, 2, 9, 1])
        CHECK.ok(st == "succeeded" and "9 @1" in line, "phone: argmax from the form: %r" % line)
        CHECK.eq(driver.execute_script(TOKEN_UI), [False, False, None], "no tokens, phone: [form shown, forget shown, token]")
        console_errors(driver, "phone")
        screenshots(driver, art, "dashboard-phone")
        driver.set_window_size(1280, 800)
        L.check_stop(srv)
        with_tokens(driver, art, rng)
    finally:
        driver.quit()


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
