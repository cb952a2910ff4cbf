#!/usr/bin/env python3
"""Does the admin listener's work reach the public one? (issue 49, docs/benchmarks.md)

    python3 bench/admin_isolation.py            # make bench-admin

Starts `flowgate serve` (BENCH_BIN, default target/release/flowgate) on a fresh SQLite file with
the demo workspace and BENCH_USERS (default 20000) simulated users of the demo experiment
written straight into the events table (an exposure each, a purchase for one in eight), then
sends single resolves at a fixed rate (BENCH_RATE per second, default 100) for BENCH_SECONDS
(default 20) and reports their p50, p99 and max: first alone, then while BENCH_REPORTS (default
32) clients ask for the experiment's report in a loop and one more asks `/readyz` five times a
second (its slowest answer is reported). The resolves are timed from their scheduled start
(open loop: a late answer delays no later request), one persistent connection each from a pool
of sending threads. Only the standard library and the sqlite3 command.
"""

import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

BIN = os.environ.get("BENCH_BIN", "target/release/flowgate")
USERS = int(os.environ.get("BENCH_USERS", "20000"))
RATE = float(os.environ.get("BENCH_RATE", "100"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "20"))
REPORTS = int(os.environ.get("BENCH_REPORTS", "32"))
TOKEN = "bench-admin-Token-0123456789-abcdefghijkl"
WORKSPACE = "d0000000-0000-4000-8000-000000000001"
APP = "d0000000-0000-4000-8000-0000000000a1"
EXPERIMENT = "d0000000-0000-4000-8000-0000000000c1"
VARIANTS = ["d0000000-0000-4000-8000-0000000000b1", "d0000000-0000-4000-8000-0000000000b2"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env(db, api, admin):
    e = {k: v for k, v in os.environ.items() if not k.startswith("FLOWGATE")}
    e.update({
        "FLOWGATE__DATABASE__URL": "sqlite://" + db,
        "FLOWGATE__SERVER__LISTEN": "127.0.0.1:%d" % api,
        "FLOWGATE__ADMIN__LISTEN": "127.0.0.1:%d" % admin,
        "FLOWGATE__ADMIN__TOKEN": TOKEN,
        "FLOWGATE__LOG__LEVEL": "warn",
        "FLOWGATE__CATALOG__CACHE_PATH": db + ".cache.json",
        # Resolves come from one address: no per-address limit in the way.
        "FLOWGATE__RATE_LIMIT__PER_IP_RPS": "100000",
        "FLOWGATE__RATE_LIMIT__PER_IP_BURST": "100000",
    })
    return e


def get(port, path, token=None, body=None, key=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {}
    if token:
        headers["Authorization"] = "Bearer " + token
    if key:
        headers["Authorization"] = "Bearer " + key
        headers["Content-Type"] = "application/json"
    conn.request("POST" if body else "GET", path, body=body, headers=headers)
    r = conn.getresponse()
    data = r.read()
    conn.close()
    return r.status, data


def seed_events(db):
    """USERS exposures to the demo experiment, a purchase for one user in eight."""
    app = APP.replace("-", "")
    sql = """
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {users} - 1)
INSERT INTO analytics_events (event_id, source, event_type, app_id, user_id, session_id,
    device_platform, occurred_at, experiment_id, variant_id, payload)
SELECT randomblob(16), 'sdk', 'flow_open', X'{app}', 'bench-user-' || i, 's', 'ios',
    strftime('%Y-%m-%dT%H:%M:%S', 'now', '-1 day', '+' || (i % 80000) || ' seconds') || '.000000Z',
    '{exp}', CASE WHEN i % 2 = 0 THEN '{v0}' ELSE '{v1}' END, '{{}}'
FROM n;
WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 8 FROM n WHERE i + 8 < {users})
INSERT INTO analytics_events (event_id, source, event_type, app_id, user_id, session_id,
    device_platform, occurred_at, payload)
SELECT randomblob(16), 'sdk', 'purchase_complete', X'{app}', 'bench-user-' || i, 's', 'ios',
    strftime('%Y-%m-%dT%H:%M:%S', 'now', '-1 day', '+' || (i % 80000 + 60) || ' seconds') || '.000000Z',
    json_object('revenue', 9.99, 'currency', 'USD', 'product_id', 'annual')
FROM n;
""".format(users=USERS, app=app, exp=EXPERIMENT, v0=VARIANTS[0], v1=VARIANTS[1])
    subprocess.run(["sqlite3", db], input=sql, text=True, check=True)


def percentile(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def resolve_at_rate(api, key, seconds):
    """Open loop: request i is due at start + i / RATE; its latency counts from then."""
    body = json.dumps({"user_id": "u", "session_id": "s", "device_platform": "ios",
                       "attributes": {"country": "US"}}).encode()
    path = "/v1/apps/%s/placements/paywall/resolve" % APP
    total = int(seconds * RATE)
    start = time.monotonic() + 0.2
    latencies, errors = [], []
    lock = threading.Lock()
    next_i = [0]

    def sender():
        conn = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
        while True:
            with lock:
                i = next_i[0]
                next_i[0] += 1
            if i >= total:
                return
            due = start + i / RATE
            wait = due - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            try:
                conn.request("POST", path, body=body, headers={
                    "Authorization": "Bearer " + key, "Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except Exception as e:  # noqa: BLE001  (counted, then a new connection)
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", api, timeout=10)
                r = e
            took = time.monotonic() - due
            with lock:
                (latencies if ok else errors).append(took if ok else str(getattr(r, "status", r)))

    threads = [threading.Thread(target=sender) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, errors


HAMMER = r"""
import http.client, sys, threading, time
port, path, token, n, until = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
counts = {}
lock = threading.Lock()
def loop():
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    while time.time() < until:
        try:
            conn.request("GET", path, headers={"Authorization": "Bearer " + token})
            r = conn.getresponse(); r.read(); s = r.status
        except Exception:
            s = "error"; conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        with lock:
            counts[s] = counts.get(s, 0) + 1
ts = [threading.Thread(target=loop) for _ in range(n)]
[t.start() for t in ts]; [t.join() for t in ts]
print(counts)
"""

READYZ = r"""
import http.client, sys, time
port, until = int(sys.argv[1]), float(sys.argv[2])
worst = 0.0
while time.time() < until:
    t = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request("GET", "/readyz"); conn.getresponse().read(); conn.close()
    worst = max(worst, time.monotonic() - t)
    time.sleep(0.2)
print(worst)
"""


def summary(name, latencies, errors):
    ms = [x * 1000 for x in latencies]
    print("%-34s n=%5d errors=%d  p50 %.2f ms  p99 %.2f ms  max %.2f ms" % (
        name, len(ms), len(errors), percentile(ms, 50), percentile(ms, 99), max(ms)))
    return percentile(ms, 99)


def main():
    tmp = tempfile.mkdtemp(prefix="flowgate-admin-isolation-")
    db = os.path.join(tmp, "flowgate.db")
    api, admin = free_port(), free_port()
    e = env(db, api, admin)
    subprocess.run([BIN, "migrate"], env=e, check=True, stdout=subprocess.DEVNULL)
    server = subprocess.Popen([BIN, "serve"], env=e, stdout=subprocess.DEVNULL)
    try:
        for _ in range(300):
            try:
                if get(admin, "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        out = subprocess.run([BIN, "keys", "create", "--workspace", WORKSPACE, "--env", "test",
                              "--json"], env=e, check=True, capture_output=True, text=True)
        key = json.loads(out.stdout)["key"]
        seed_events(db)
        # The key is served once the catalog refresh picked it up.
        for _ in range(300):
            status, _ = get(api, "/v1/apps/%s/placements/paywall/resolve" % APP,
                            body=b'{"user_id":"u","session_id":"s","device_platform":"ios"}', key=key)
            if status == 200:
                break
            time.sleep(0.1)
        t = time.monotonic()
        status, body = get(admin, "/admin/v1/experiments/%s/results" % EXPERIMENT, token=TOKEN)
        one = time.monotonic() - t
        exposed = json.loads(body).get("exposed_users") if status == 200 else body[:200]
        print("flowgate %s; %d users seeded; one report: %d in %.0f ms, exposed_users %s" % (
            BIN, USERS, status, one * 1000, exposed))
        resolve_at_rate(api, key, 2)  # warm-up
        alone = summary("resolve alone @%g/s" % RATE, *resolve_at_rate(api, key, SECONDS))
        until = time.time() + SECONDS + 1
        hammer = subprocess.Popen([sys.executable, "-c", HAMMER, str(admin),
                                   "/admin/v1/experiments/%s/results" % EXPERIMENT, TOKEN,
                                   str(REPORTS), str(until)], stdout=subprocess.PIPE, text=True)
        readyz = subprocess.Popen([sys.executable, "-c", READYZ, str(admin), str(until)],
                                  stdout=subprocess.PIPE, text=True)
        time.sleep(0.5)
        loaded = summary("resolve with %d report clients" % REPORTS,
                         *resolve_at_rate(api, key, SECONDS - 0.5))
        reports = hammer.communicate()[0].strip()
        worst = float(readyz.communicate()[0].strip())
        print("reports answered by status: %s; slowest /readyz %.0f ms" % (reports, worst * 1000))
        print("p99 with reports / alone: %.2fx" % (loaded / alone))
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(30)
        except subprocess.TimeoutExpired:
            server.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
