#!/usr/bin/env python3
"""Instructions per request, whole process, counted by callgrind (`make bench-count`;
docs/benchmarks.md).

Each server runs as a whole process under `valgrind --tool=callgrind` with one worker: its
runtime, HTTP stack, JSON, allocator and background tasks are all counted. Per workload: WARM
requests warm it up, `callgrind_control --dump` starts the window, N requests are sent one after
another on one keep-alive connection, a second dump ends it; the second dump's total divided by
N is the count per request. A count does not depend on what else runs on the machine, so a
change of 1% shows on a shared 2-core machine where times do not.

Servers, each on its workloads:
- flowgate on PostgreSQL (bench/gen_catalog.py's catalog at scale with BENCH_STICKY=1),
  `server.workers = 1`, sticky assignments in the database;
- the same with `sticky.redis_url` (Redis): the sticky workload and the non-sticky resolve it is
  compared with;
- the no-logic baseline (`flowgate-bench-baseline`, one worker) answering flowgate's bytes for
  the same request, one per workload;
- Unleash Edge 19.15.1 (bench/peer/install_edge.sh), offline with bench/peer/edge_features.py's
  equivalent toggle, evaluating it for the same user and attributes (identity and gzip).

Workloads: `resolve` (the typical placement for the typical user: a 20 KB flow), `resolve, gzip`
(the same with `Accept-Encoding: gzip`), `batch of 10`, `events` (10 per request, new ids each),
`sticky, SQL` and `sticky, Redis` (a user whose assignment is stored: the warm-up stores it),
`holdout` (a user the experiment holds out: no flow, and a `resolve_no_flow` event).

Environment: BENCH_COUNT_N (requests per window, default 1000), BENCH_COUNT_WARM (200),
BENCH_COUNT_RUNS (2: each run starts every server afresh), BENCH_COUNT_ONLY (workloads, comma
separated: resolve,gzip,batch10,events,sticky-sql,sticky-redis,holdout; or `idle` alone: the
idle process's instructions per second with the rollout scheduler at its defaults,
BENCH_COUNT_IDLE_S seconds), BENCH_BIN, BENCH_BASELINE_BIN, EDGE_BIN (no Edge when missing: its rows are left
out, said so). Writes target/bench-count/count.md and count.json, and each window's callgrind
dump (`callgrind_annotate target/bench-count/<file>` shows it function by function).
"""

import glob
import gzip
import http.client
import json
import os
import shutil
import subprocess
import sys
import threading
import time

os.environ["BENCH_STICKY"] = "1"  # the catalog's `onboarding_sticky` placements
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "peer"))
sys.dont_write_bytecode = True
import bench as B  # noqa: E402  (catalog, database, flowgate's environment)
import edge_requests as ER  # noqa: E402  (Edge's context for a user and attributes)

N = int(os.environ.get("BENCH_COUNT_N", "1000"))
WARM = int(os.environ.get("BENCH_COUNT_WARM", "200"))
RUNS = max(1, int(os.environ.get("BENCH_COUNT_RUNS", "2")))
ONLY = [s for s in os.environ.get("BENCH_COUNT_ONLY", "").split(",") if s]
OUT = os.path.join(B.ROOT, "target", "bench-count")
EDGE = os.environ.get("EDGE_BIN") or os.path.join(B.ROOT, "target", "peer", "bin", "unleash-edge")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379")
PORTS = {"flowgate": (18480, 18490), "flowgate, Redis": (18482, 18492)}
BASE_PORT, EDGE_PORT = 18481, 18483
EVENTS_PER_REQUEST = 10
# BENCH_COUNT_ENV (`KEY=VALUE,...`): settings for flowgate, e.g. the scheduler's interval.
SETTINGS = dict(kv.split("=", 1) for kv in os.environ.get("BENCH_COUNT_ENV", "").split(",") if kv)

RESOLVE, GZIP, BATCH, EVENTS = "resolve", "resolve, gzip", "batch of 10", "events"
STICKY_SQL, STICKY_REDIS, HOLDOUT = "sticky, SQL", "sticky, Redis", "holdout"
RESOLVE_REDIS = "resolve (Redis server)"
IDLE = "idle, per second"
# BENCH_COUNT_ONLY's names of the workloads.
IDS = {RESOLVE: "resolve", GZIP: "gzip", BATCH: "batch10", EVENTS: "events", STICKY_SQL: "sticky-sql",
       STICKY_REDIS: "sticky-redis", HOLDOUT: "holdout", RESOLVE_REDIS: "sticky-redis", IDLE: "idle"}
# Events arrive on 10 connections at once: a write of `events.write_threshold` (100) events then
# acknowledges 10 requests (`events.ack = "stored"`), as under load; one request at a time would
# wait for `events.flush_interval_ms` each.
CONNECTIONS = {"events": 10}
WORKLOADS = [RESOLVE, GZIP, BATCH, EVENTS, STICKY_SQL, STICKY_REDIS, HOLDOUT]


def log(msg):
    print("bench-count: " + msg, file=sys.stderr, flush=True)


def under_callgrind(name, cmd, env, run):
    """`cmd` under callgrind, its dumps into OUT as `<name>.run<run>.<pid>.<n>`."""
    os.makedirs(OUT, exist_ok=True)
    safe = name.replace(", ", "-").replace(" ", "-")
    out = os.path.join(OUT, "%s.run%d.%%p" % (safe, run))
    logfile = open(os.path.join(OUT, "%s.run%d.log" % (safe, run)), "ab")
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out] + cmd,
                            env=env, stdout=logfile, stderr=logfile, cwd=B.ROOT)
    proc.dump_prefix = out.replace("%p", str(proc.pid))
    return proc


def dump(proc):
    """Dumps `proc`'s counters since its last dump; returns (the file, its total instructions)."""
    before = set(glob.glob(proc.dump_prefix + ".*"))
    subprocess.run(["callgrind_control", "--dump", str(proc.pid)], check=True, capture_output=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        new = sorted(set(glob.glob(proc.dump_prefix + ".*")) - before)
        total = new and total_of(new[0])
        if total:
            return new[0], total
        time.sleep(0.1)
    raise RuntimeError("no callgrind dump of %d" % proc.pid)


def total_of(path):
    """The `totals:` (or `summary:`) instructions of a complete dump, None before it is written."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(("totals:", "summary:")):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


class Client:
    """One keep-alive connection; `send` checks the status of each answer."""

    def __init__(self, port):
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)

    def send(self, method, path, body, headers, status):
        self.conn.request(method, path, body=body, headers=headers)
        res = self.conn.getresponse()
        data = res.read()
        if res.status != status:
            raise RuntimeError("%s %s on %d: %d %s" % (method, path, self.port, res.status, data[:300]))
        return data, res.getheader("Content-Encoding")


def window(proc, port, request, status, connections=1):
    """WARM requests, then instructions per request over N more (with the window's dump), on
    `connections` keep-alive connections at once (each sends its share one after another)."""
    errors = []

    def send(first, last):
        try:
            client = Client(port)
            for i in range(first, last):
                client.send(*request(i), status)
            client.conn.close()
        except Exception as e:  # noqa: BLE001  (raised again in the calling thread)
            errors.append(e)

    def spread(first, count):
        share = max(1, count // connections)
        threads = [threading.Thread(target=send, args=(first + k * share, first + (k + 1) * share))
                   for k in range(connections)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]
        return share * connections

    spread(0, WARM)
    dump(proc)
    sent = spread(WARM, N)
    path, total = dump(proc)
    return total / sent, os.path.basename(path)


def ready(proc, port, path, what):
    B.wait_ready(proc, port, path, 600, what, any_status=path == "/")


def start_flowgate(name, run, extra):
    api, admin = PORTS[name]
    env = B.flowgate_env() | {
        "FLOWGATE__SERVER__LISTEN": "127.0.0.1:%d" % api,
        "FLOWGATE__ADMIN__LISTEN": "127.0.0.1:%d" % admin,
        "FLOWGATE__SERVER__WORKERS": "1",
        "FLOWGATE__DATABASE__AUTO_MIGRATE": "false",
        # Under callgrind a store write is 50-100 times slower: acknowledgements wait for it.
        "FLOWGATE__EVENTS__ACK_TIMEOUT_MS": "600000",
        "FLOWGATE__EVENTS__WRITE_TIMEOUT_MS": "600000",
        # Every write exactly `write_threshold` (100) events, never a partial one on the flush
        # timer: the events' count then does not depend on how fast valgrind runs.
        "FLOWGATE__EVENTS__BATCH_SIZE": "100",
        "FLOWGATE__EVENTS__FLUSH_INTERVAL_MS": "60000",
        # The store's revision is polled at the longest interval D12 allows (changes still
        # arrive by LISTEN at once), and the rollout scheduler's pass every 10 minutes (its
        # first, 10 minutes after the start, reads the whole catalog): background work that
        # would land in whichever window it falls in.
        "FLOWGATE__CATALOG__REFRESH_INTERVAL_MS": "5000",
        "FLOWGATE__SCHEDULER__INTERVAL_MS": "600000",
        "FLOWGATE__SCHEDULER__LEASE_SECONDS": "3600",
    } | SETTINGS | extra
    proc = under_callgrind(name, [B.BIN, "serve"], env, run)
    ready(proc, admin, "/readyz", name)
    return proc


def start_baseline(name, run, status, body, coding):
    sample = os.path.join(OUT, "baseline-%s.body" % name.replace(", ", "-").replace(" ", "-"))
    with open(sample, "wb") as f:
        f.write(body)
    cmd = [B.BASELINE, "127.0.0.1:%d" % BASE_PORT, "1", str(status), sample] + ([coding] if coding else [])
    proc = under_callgrind("baseline " + name, cmd, dict(os.environ), run)
    ready(proc, BASE_PORT, "/", "the baseline")
    return proc


def stop(proc):
    B.stop(proc)


def typical_attributes():
    with open(os.path.join(B.ROOT, "crates", "flowgate-contract-tests", "data", "typical_placement.json")) as f:
        return json.load(f)["typical_attributes"]


def requests(meta, key):
    """Each workload's request (method, path, body, headers) by request number, and its status."""
    app = meta["apps"][0]
    attrs = typical_attributes()
    auth = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}

    def ident(user, **more):
        return json.dumps(dict({"user_id": user, "session_id": "s-1", "device_platform": "ios",
                                "attributes": attrs}, **more))

    def resolve(placement, user, headers=auth):
        path = "/v1/apps/%s/placements/%s/resolve" % (app, placement)
        body = ident(user)
        return lambda i: ("POST", path, body, headers)

    batch_path = "/v1/apps/%s/placements/resolve-batch" % app
    batch_body = ident("user-1", placement_keys=meta["placement_keys"][:10])
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    kinds = [
        ',"event_type":"flow_open"',
        ',"event_type":"screen_view","screen_id":"screen-1","screen_index":1',
        ',"event_type":"screen_view","screen_id":"screen-2","screen_index":2,"time_on_screen_ms":1800',
        ',"event_type":"flow_complete"',
    ]
    run_id = int(time.time()) & 0xFFFFFFFF

    def events(i):
        # New ids for each request (the same length): every event is stored, none is a repeat.
        parts = []
        for k in range(EVENTS_PER_REQUEST):
            n = i * EVENTS_PER_REQUEST + k
            parts.append('{"event_id":"%08x-%04x-4000-8000-%012x","app_id":"%s","flow_id":"%s",'
                         '"flow_version_id":"%s","user_id":"user-%04d","session_id":"s-1",'
                         '"device_platform":"ios","timestamp":"%s","sdk_version":"2.3.1"%s}'
                         % (run_id, events.run, n, app, meta["event_flow"], meta["event_flow_version"], n % 5000,
                            stamp, kinds[k % len(kinds)]))
        return ("POST", "/v1/apps/%s/events" % app, "[" + ",".join(parts) + "]", auth)

    # The run's number is in every id: a second run's events are new too (a repeated id is
    # stored once, D7, on a slower path that would be counted instead).
    events.run = 0

    return {
        RESOLVE: (resolve("onboarding", "user-1"), 200),
        GZIP: (resolve("onboarding", "user-1", dict(auth, **{"Accept-Encoding": "gzip"})), 200),
        BATCH: (lambda i: ("POST", batch_path, batch_body, auth), 200),
        EVENTS: (events, 202),
        STICKY_SQL: (resolve("onboarding_sticky", "user-1"), 200),
        STICKY_REDIS: (resolve("onboarding_sticky", "user-1"), 200),
        RESOLVE_REDIS: (resolve("onboarding", "user-1"), 200),
        HOLDOUT: (resolve("onboarding", holdout_user(meta, key)), 200),
    }


def holdout_user(meta, key):
    """The first `user-<n>` the typical placement's experiment holds out (no flow), found on a
    plain flowgate once."""
    if holdout_user.found:
        return holdout_user.found
    proc = subprocess.Popen([B.BIN, "serve"], env=dict(B.flowgate_env(), FLOWGATE__DATABASE__AUTO_MIGRATE="false"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=B.ROOT)
    try:
        B.wait_ready(proc, B.ADMIN, "/readyz", 120, "flowgate")
        client = Client(B.API)
        auth = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
        for n in range(2, 2000):
            user = "user-%d" % n
            body = json.dumps({"user_id": user, "session_id": "s-1", "device_platform": "ios",
                               "attributes": typical_attributes()})
            data, _ = client.send("POST", "/v1/apps/%s/placements/onboarding/resolve" % meta["apps"][0], body, auth, 200)
            if json.loads(data).get("flow_id") is None:
                holdout_user.found = user
                return user
    finally:
        B.stop(proc)
    raise RuntimeError("no held-out user among user-2..user-1999")


holdout_user.found = None


def edge_context(meta):
    """Edge's request for the typical user: the query edge_requests.py builds, for user-1, the
    typical attributes, iOS and the first app."""
    attrs = typical_attributes()
    parts = ["userId=user-1", "sessionId=s-1", "appName=" + meta["apps"][0], ER.prop("devicePlatform", "ios")]
    parts += [ER.prop(ER.RENAME.get(k, k), v) for k, v in attrs.items()]
    return "/api/frontend/features/%s?%s" % (ER.features.TOGGLE, "&".join(parts))


def start_edge(run):
    folder = os.path.join(OUT, "edge")
    subprocess.run([sys.executable, os.path.join(HERE, "peer", "edge_features.py"), folder], check=True,
                   stdout=subprocess.DEVNULL)
    cmd = [EDGE, "--port", str(EDGE_PORT), "--interface", "127.0.0.1", "--workers", "1", "offline",
           "--bootstrap-file", os.path.join(folder, "equivalent_mirror.json"),
           "--client-tokens", ER.CLIENT_TOKEN, "--frontend-tokens", ER.FRONTEND_TOKEN]
    proc = under_callgrind("edge", cmd, dict(os.environ), run)
    ready(proc, EDGE_PORT, "/internal-backstage/ready", "unleash-edge")
    return proc


def idle(run, out):
    """`BENCH_COUNT_ONLY=idle`: flowgate with the rollout scheduler at its defaults (a pass every
    5 s), no requests: the whole process's instructions per second over BENCH_COUNT_IDLE_S
    (30) seconds, from 60 s after it is ready (the lease taken, the first passes done)."""
    seconds = float(os.environ.get("BENCH_COUNT_IDLE_S", "30"))
    log("run %d: flowgate idle, the scheduler every 5 s" % run)
    proc = start_flowgate("flowgate", run, {"FLOWGATE__SCHEDULER__INTERVAL_MS": "5000",
                                            "FLOWGATE__SCHEDULER__LEASE_SECONDS": "30"})
    try:
        time.sleep(60)
        dump(proc)
        time.sleep(seconds)
        path, total = dump(proc)
    finally:
        stop(proc)
    out.setdefault(IDLE, {}).setdefault("flowgate", []).append((total / seconds, os.path.basename(path)))
    log("run %d, idle: %.0f instructions per second" % (run, total / seconds))


def one_run(run, meta, key, reqs, out):
    """Every server of the run, started afresh, each window counted; fills out[workload][server]."""
    def want(w):
        return not ONLY or IDS[w] in ONLY

    def record(workload, server, value, dumpfile):
        out.setdefault(workload, {}).setdefault(server, []).append((value, dumpfile))
        log("run %d, %s, %s: %.0f instructions per request" % (run, workload, server, value))

    samples = {}
    reqs[EVENTS][0].run = run
    log("run %d: flowgate (PostgreSQL, one worker) under callgrind" % run)
    fg = start_flowgate("flowgate", run, {})
    try:
        for w in [RESOLVE, GZIP, BATCH, EVENTS, STICKY_SQL, HOLDOUT]:
            if not want(w) and not (w == RESOLVE and want(STICKY_SQL)):
                continue
            request, status = reqs[w]
            per, dumpfile = window(fg, PORTS["flowgate"][0], request, status, CONNECTIONS.get(w, 1))
            record(w, "flowgate", per, dumpfile)
            if w == EVENTS:
                # The answer is known; one more request alone would wait for a batch of 100.
                answer = b'{"accepted":%d,"rejected":0}' % EVENTS_PER_REQUEST
                samples[w] = (status, answer, None)
                continue
            method, path, body, headers = request(WARM + N)
            samples[w] = (status,) + Client(PORTS["flowgate"][0]).send(method, path, body, headers, status)
    finally:
        stop(fg)
    if want(STICKY_REDIS):
        prefix = "flowgate-bench-count-%d-%d:" % (os.getpid(), run)
        log("run %d: flowgate with sticky.redis_url under callgrind" % run)
        fr = start_flowgate("flowgate, Redis", run, {"FLOWGATE__STICKY__REDIS_URL": REDIS_URL,
                                                     "FLOWGATE__STICKY__KEY_PREFIX": prefix})
        try:
            for w in (RESOLVE_REDIS, STICKY_REDIS):
                request, status = reqs[w]
                per, dumpfile = window(fr, PORTS["flowgate, Redis"][0], request, status)
                record(w, "flowgate", per, dumpfile)
        finally:
            stop(fr)
            keys = subprocess.run(["redis-cli", "--scan", "--pattern", prefix + "*"], capture_output=True,
                                  text=True).stdout.split()
            if keys:
                subprocess.run(["redis-cli", "del"] + keys, capture_output=True)
    for w, (status, body, coding) in samples.items():
        if w in (STICKY_SQL,):
            continue  # the same bytes as resolve's: its baseline is resolve's
        log("run %d: baseline answering flowgate's bytes for %s" % (run, w))
        base = start_baseline(w, run, status, body, coding)
        try:
            request, _ = reqs[w]
            per, dumpfile = window(base, BASE_PORT, request, status, CONNECTIONS.get(w, 1))
            record(w, "baseline", per, dumpfile)
        finally:
            stop(base)
    if os.path.exists(EDGE) and (want(RESOLVE) or want(GZIP)):
        log("run %d: Unleash Edge (one worker) under callgrind" % run)
        edge = start_edge(run)
        try:
            path = edge_context(meta)
            for w, extra in ((RESOLVE, {}), (GZIP, {"Accept-Encoding": "gzip"})):
                if not want(w):
                    continue
                headers = dict({"Authorization": ER.FRONTEND_TOKEN}, **extra)
                body, coding = Client(EDGE_PORT).send("GET", path, None, headers, 200)
                size = len(gzip.decompress(body) if coding == "gzip" else body)
                if size < 10_000:
                    raise RuntimeError("Edge's answer for the typical user is %d bytes, not the flow" % size)
                per, dumpfile = window(edge, EDGE_PORT, lambda i, h=headers: ("GET", path, None, h), 200)
                record(w, "edge", per, dumpfile)
        finally:
            stop(edge)
    return samples


def main():
    for tool in ("valgrind", "callgrind_control", "psql"):
        if not shutil.which(tool):
            sys.exit("bench-count: %s is required" % tool)
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    meta = B.new_catalog_database(quiet=True)
    try:
        key = B.import_catalog(meta)
        reqs = requests(meta, key)
        results, sizes = {}, {}
        for run in range(1, RUNS + 1):
            if ONLY == ["idle"]:
                idle(run, results)
                continue
            samples = one_run(run, meta, key, reqs, results)
            sizes = {w: len(s[1]) for w, s in samples.items()}
        report(results, sizes)
    finally:
        B.psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % B.DB, db="postgres")


def report(results, sizes):
    def runs(w, server):
        return [v for v, _ in results.get(w, {}).get(server, [])]

    def fmt(values):
        return " / ".join("{:,.0f}".format(v) for v in values) if values else "-"

    def spread(values):
        return "%.2f%%" % (100 * (max(values) - min(values)) / min(values)) if len(values) > 1 else "-"

    lines = [
        "Instructions per request, whole process under callgrind, one worker; N=%d after %d warm-up "
        "requests, %d run(s) (each server started afresh per run; run 1 / run 2)." % (N, WARM, RUNS),
        "",
        "| workload | answer bytes | flowgate | run to run | baseline (same bytes) | flowgate − baseline | "
        "flowgate / baseline | Unleash Edge | Edge / flowgate |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    summary = {}
    for w in WORKLOADS + [RESOLVE_REDIS, IDLE]:
        f = runs(w, "flowgate")
        if not f:
            continue
        base_w = RESOLVE if w == STICKY_SQL else (RESOLVE_REDIS if w == STICKY_REDIS else w)
        b = runs(base_w, "baseline") if w not in (RESOLVE_REDIS, STICKY_REDIS) else []
        if w == STICKY_REDIS:
            b = runs(RESOLVE, "baseline")
        e = runs(w, "edge")
        fm = min(f)
        row = {"flowgate": f, "baseline": b, "edge": e}
        size = "-" if w == IDLE else "{:,}".format(sizes.get(base_w if base_w in sizes else RESOLVE, 0))
        cells = [w, size, fmt(f), spread(f), fmt(b)]
        if b:
            row["own"] = fm - min(b)
            row["ratio"] = fm / min(b)
            cells += ["{:,.0f}".format(fm - min(b)), "%.2fx" % (fm / min(b))]
        else:
            cells += ["-", "-"]
        if e:
            row["edge_ratio"] = min(e) / fm
            cells += [fmt(e), "%.1fx" % (min(e) / fm)]
        else:
            cells += ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
        summary[w] = row
    if STICKY_SQL in summary and RESOLVE in summary:
        lines.append("")
        lines.append("Sticky known user / non-sticky resolve: SQL store %.2fx" %
                     (min(summary[STICKY_SQL]["flowgate"]) / min(summary[RESOLVE]["flowgate"])))
    if STICKY_REDIS in summary and RESOLVE_REDIS in summary:
        lines.append("Sticky known user / non-sticky resolve (same server): Redis %.2fx" %
                     (min(summary[STICKY_REDIS]["flowgate"]) / min(summary[RESOLVE_REDIS]["flowgate"])))
    if BATCH in summary:
        lines.append("Batch of 10, per placement: flowgate %.0f, its own work %s" % (
            min(summary[BATCH]["flowgate"]) / 10,
            "%.0f" % (summary[BATCH]["own"] / 10) if "own" in summary[BATCH] else "-"))
    if EVENTS in summary:
        lines.append("Events, per event: flowgate %.0f, its own work %s" % (
            min(summary[EVENTS]["flowgate"]) / EVENTS_PER_REQUEST,
            "%.0f" % (summary[EVENTS]["own"] / EVENTS_PER_REQUEST) if "own" in summary[EVENTS] else "-"))
    if not os.path.exists(EDGE):
        lines.append("Unleash Edge was not counted: %s is missing (bash bench/peer/install_edge.sh)." % EDGE)
    text = "\n".join(lines) + "\n"
    print(text)
    with open(os.path.join(OUT, "count.md"), "w") as f:
        f.write(text)
    with open(os.path.join(OUT, "count.json"), "w") as f:
        json.dump({"n": N, "warm": WARM, "runs": RUNS, "results": results, "summary": summary}, f, indent=1)


if __name__ == "__main__":
    main()
