#!/usr/bin/env python3
# events_load.py: what event streams cost the job path. wrk posts small jobs
# (bench/http_load.lua: 1024 float32, Prefer: wait=5) to one gpured for SECS seconds, first with
# no subscriber, then with N subscribers to GET /v1/events, each filtered to one job id
# (a dashboard watching its job: every event is weighed for every stream, few are sent), then
# with N unfiltered ones (every event goes to every stream). One thread here drains all the
# streams through selectors. Prints a table and writes events_load-<host>-<date>.json. Not a
# test: it measures.
#   bench/events_load.py path/to/gpured [seconds] [subscribers] [connections] [device: cpu|gpu]
import os
import selectors
import socket
import sys
import threading
import time

from store_load import load, save, serving

BIN = sys.argv[1]
SECS = int(sys.argv[2]) if len(sys.argv) > 2 else 10
SUBS = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
CONNS = int(sys.argv[4]) if len(sys.argv) > 4 else 16
DEVICE = sys.argv[5] if len(sys.argv) > 5 else "cpu"  # where the jobs run


class Drain:
    """n streams opened with query, read to nowhere on one thread; counts bytes and events."""

    def __init__(self, url, n, query):
        host, port = url.split("//")[1].split(":")
        self.sel, self.bytes, self.events, self.stop, self.lost = selectors.DefaultSelector(), 0, 0, False, 0
        self.socks = []
        for _ in range(n):
            s = socket.create_connection((host, int(port)))
            s.sendall(("GET /v1/events%s HTTP/1.0\r\nHost: bench\r\n\r\n" % query).encode())
            s.setblocking(False)
            self.sel.register(s, selectors.EVENT_READ)
            self.socks.append(s)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stop:
            for key, _ in self.sel.select(0.2):
                try:
                    data = key.fileobj.recv(1 << 16)
                except BlockingIOError:
                    continue
                except OSError:  # refused or reset: counted, and no longer read
                    self.sel.unregister(key.fileobj)
                    self.lost += 1
                    continue
                self.bytes += len(data)
                self.events += data.count(b"\nevent: ") + data.startswith(b"event: ")

    def close(self):
        self.stop = True
        self.thread.join()
        for s in self.socks:
            s.close()


def main():
    # room for two sets of streams: a closed stream's connection is found gone at its next
    # keep-alive (15 s), so the last run's may still be open when the next run's come
    room = str(2 * SUBS + CONNS + 64)
    env = {"GPURED_MAX_CONNECTIONS_PER_IP": room, "GPURED_MAX_CONNECTIONS": room}
    rows = []
    print("%-24s %6s %10s %9s %9s %12s %10s" % ("subscribers", "conns", "jobs/s", "p50_ms", "p99_ms", "events_sent",
                                               "MB_sent"))
    with serving(BIN, [env]) as (urls, _):
        url = urls[0]
        for what, n, query in (("none", 0, ""), ("%d filtered (?job=)" % SUBS, SUBS, "?job=j_0"),
                               ("%d unfiltered" % SUBS, SUBS, "")):
            drain = Drain(url, n, query) if n else None
            time.sleep(1)
            r = load([(url, {"GPURED_DEVICE": DEVICE})], SECS, CONNS)
            sent = (drain.events, drain.bytes, drain.lost) if drain else (0, 0, 0)
            if drain:
                drain.close()
            r.update(subscribers=n, filtered=query != "", events_received=sent[0], bytes_received=sent[1],
                     streams_lost=sent[2])
            rows.append(r)
            print("%-24s %6d %10.0f %9.3f %9.3f %12d %10.1f" % (what, CONNS, r["jobs_per_s"], r["p50_ms"], r["p99_ms"],
                                                              sent[0], sent[1] / 1e6), flush=True)
    base = rows[0]["jobs_per_s"]
    for r in rows[1:]:
        r["ratio_to_none"] = r["jobs_per_s"] / base
        print("%s subscribers%s: %.3f of the job rate without" % (r["subscribers"], " (filtered)" if r["filtered"] else "",
                                                                  r["ratio_to_none"]))
    save("events_load", {"cores": os.cpu_count(), "seconds": SECS, "device": DEVICE, "rows": rows})


if __name__ == "__main__":
    main()
