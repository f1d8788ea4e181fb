# c1_probe.py: one client, one keep-alive connection, 2000 small JSON jobs in a row with Prefer: wait;
# the medians of the round trip, of the server's own time per request (its info log) and of the
# job's created->finished, to see where a c=1 job's time goes. Not a test: it measures.
#   bench/c1_probe.py HOST PORT SERVER_LOG
import http.client, json, sys, time, re, statistics as st
host, port, logf = sys.argv[1], int(sys.argv[2]), sys.argv[3]
body = json.dumps({"op": "sum", "dtype": "float32", "data": [(i % 97) / 7.0 for i in range(1024)], "device": "cpu"})
c = http.client.HTTPConnection(host, port)
tot, q, cl = [], [], []
for i in range(2000):
    t0 = time.perf_counter()
    c.request("POST", "/v1/jobs", body, {"Content-Type": "application/json", "Prefer": "wait=5"})
    j = json.loads(c.getresponse().read())
    cl.append((time.perf_counter() - t0) * 1e3)
    tot.append(j["timings_ms"]["total"]); q.append(j["timings_ms"]["queue"])
time.sleep(0.5)
srv = [float(m) for m in re.findall(r"POST /v1/jobs 200 ([0-9.]+)ms", open(logf).read())][-2000:]
med = lambda v: st.median(v)
print("c=1, 2000 sequential JSON jobs (1024 float32, cpu): medians in ms")
print("client round trip %.3f | server arrival->answer %.3f | job created->finished %.3f (queue %.3f)" % (med(cl), med(srv), med(tot), med(q)))
print("=> before created (body parse, submit) + after finished (commit wait, wake, render, send): %.3f" % (med(srv) - med(tot)))
