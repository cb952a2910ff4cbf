#!/usr/bin/env python3
"""Pinned benchmark of sticky assignment (`make bench-sticky`; docs/benchmarks.md, D23).

The catalog of the HTTP benchmark with BENCH_STICKY=1: every app also has `onboarding_sticky`,
the typical placement whose experiment is sticky. Two flowgate servers on the same pinned
CPUs (bench/pinned.py's layout) and the same PostgreSQL database: one keeps assignments in the
database (the SQL adapter, `sticky_assignments`), the other in Redis (`sticky.redis_url`, a key
prefix of this run's own, deleted at the end).

1. **New users at the pinned peak**: BENCH_WARM seconds (default 40) of closed-loop wrk on each
   sticky server, every request a user it has not seen (wrk's request sequence starts afresh
   per run, bench/lua/resolve.lua): requests/s, CPU per request and what the writer behind
   resolve did (stored, dropped, failed; the queue at the end and after it drained).
2. **Known users, peak**: bench/pinned.py's alternating closed-loop rounds of the non-sticky
   placement and the sticky one on each server, the same request sequence as the warm-up, so
   every sticky request finds a stored assignment: CPU per request against the non-sticky
   placement's in the same round.
3. **Known users, latency**: oha at 25% (BENCH_OPEN_LOOP) of the non-sticky peak, open loop
   with latency correction, the same rate for the three, over one app and BENCH_KNOWN users
   (default 2,000) resolved once before: p50, p99, p99.9.

Environment: bench/pinned.py's (BENCH_SERVER_CPUS, BENCH_DURATION, BENCH_ROUNDS, BENCH_LAT_ROUNDS,
BENCH_LAT_DURATION, BENCH_OPEN_LOOP, BENCH_OHA, BENCH_BIN, BENCH_PERF, BENCH_SCHED), BENCH_WARM, BENCH_KNOWN,
BENCH_REDIS_URL (redis://127.0.0.1:6379). Writes target/bench-http/sticky.md and sticky.json.
"""

import json
import os
import random
import statistics
import subprocess
import sys
import time

os.environ["BENCH_STICKY"] = "1"
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402
import pinned as P  # noqa: E402

WARM = int(os.environ.get("BENCH_WARM", "40"))
KNOWN = int(os.environ.get("BENCH_KNOWN", "2000"))
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379")
FRACTIONS = [float(x) for x in os.environ.get("BENCH_OPEN_LOOP", "0.25").split(",") if x]
REDIS_API, REDIS_ADMIN = 18483, 18493
PLAIN, SQL, REDIS = "non-sticky", "sticky, SQL store", "sticky, Redis"
# BENCH_PERF=1 / BENCH_SCHED=1 (bench/pinned.py's): the first known-user round of the non-sticky
# placement and of the sticky one on Redis.
P.PERF_FILES.update({PLAIN: "perf-sticky-plain.data", REDIS: "perf-sticky-redis.data"})
P.SCHED_FILES.update({PLAIN: "sched-sticky-plain.data", REDIS: "sched-sticky-redis.data"})


def metrics(admin):
    """The sticky series of a server's /metrics: {series: value}."""
    status, body = B.call(admin, "GET", "/metrics", None, {})
    assert status == 200, body
    out = {}
    for line in body.decode().splitlines():
        if line.startswith("flowgate_sticky_"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


def requests_per_read(before, after):
    """Sticky requests over the reads sent to the store between two `metrics` snapshots (a
    worker sends the reads of one turn of its event loop as one)."""
    requests = sum(after.get(k, 0) - before.get(k, 0) for k in after if k.startswith("flowgate_sticky_reads_total{"))
    reads = after.get("flowgate_sticky_store_reads_total", 0) - before.get("flowgate_sticky_store_reads_total", 0)
    return requests / reads if reads else float("nan")


def start_redis_server(cpus, prefix):
    api, admin = B.API, B.ADMIN
    B.API, B.ADMIN = REDIS_API, REDIS_ADMIN
    try:
        settings = dict(P.flowgate_settings(), FLOWGATE__STICKY__REDIS_URL=REDIS_URL,
                        FLOWGATE__STICKY__KEY_PREFIX=prefix)
        return B.start_flowgate(extra=settings, preexec_fn=P.pinned(cpus))[0]
    finally:
        B.API, B.ADMIN = api, admin


def redis_cli(*args):
    return subprocess.run(["redis-cli", "-u", REDIS_URL, *args], capture_output=True, text=True, check=True).stdout


def delete_prefix(prefix):
    keys = redis_cli("--scan", "--pattern", prefix + ":*").split()
    for i in range(0, len(keys), 1000):
        redis_cli("DEL", *keys[i:i + 1000])
    return len(keys)


def new_users(name, proc, port, admin, env, generator):
    """WARM seconds of users the server has not seen: the run, and the writer's counts."""
    before = metrics(admin)
    run = P.peak(port, proc.pid, generator, env, WARM)
    at_end = metrics(admin)
    deadline = time.monotonic() + 60
    while metrics(admin).get("flowgate_sticky_write_queue", 0) > 0 and time.monotonic() < deadline:
        time.sleep(0.2)
    drained_after = time.monotonic() - (deadline - 60)
    after = metrics(admin)

    def delta(outcome):
        key = 'flowgate_sticky_writes_total{outcome="%s"}' % outcome
        return after.get(key, 0) - before.get(key, 0)

    result = dict(run, stored=delta("stored"), dropped=delta("dropped"), failed=delta("failed"),
                  queue_at_end=at_end.get("flowgate_sticky_write_queue", 0),
                  queue_after=after.get("flowgate_sticky_write_queue", 0), drained_s=drained_after)
    B.log("new users, %s: %.0f/s, %.1f us/req, stored %d, dropped %d, failed %d, queue %d at the end, "
          "%d after %.1f s" % (name, run["rps"], run["cpu_us"], result["stored"], result["dropped"],
                                result["failed"], result["queue_at_end"], result["queue_after"], drained_after))
    return result


def known_files(meta, key):
    """One app, KNOWN users: a body file, and per server a URL file of its placement."""
    rng = random.Random(11)
    bodies = os.path.join(B.OUT, "sticky-bodies.txt")
    with open(os.path.join(B.ROOT, "crates", "flowgate-contract-tests", "data", "typical_placement.json")) as f:
        attrs = json.dumps(json.load(f)["typical_attributes"], separators=(",", ":"))
    with open(bodies, "w") as f:
        for n in range(KNOWN):
            f.write('{"user_id":"known-%d","session_id":"s-%d","device_platform":"ios","attributes":%s}\n'
                    % (n, rng.randrange(1 << 30), attrs))
    urls = {}
    for name, port, placement in ((PLAIN, B.API, "onboarding"), (SQL, B.API, "onboarding_sticky"),
                                  (REDIS, REDIS_API, "onboarding_sticky")):
        urls[name] = os.path.join(B.OUT, "sticky-urls-%d-%s.txt" % (port, placement))
        with open(urls[name], "w") as f:
            f.write("http://127.0.0.1:%d/v1/apps/%s/placements/%s/resolve\n" % (port, meta["apps"][0], placement))
    return {name: P.resolve_requests(url, bodies, key) for name, url in urls.items()}


def warm_known(requests, generator):
    """Resolves every known user on each sticky server (random picks, 15 per user on average,
    so every one is picked w.h.p.), then waits for the writes."""
    for name in (SQL, REDIS):
        cmd = [P.OHA, "--no-tui", "--output-format", "json", "-n", str(15 * KNOWN), "-c", "16",
               "--disable-compression"] + requests[name]
        subprocess.run(cmd, capture_output=True, check=True, preexec_fn=P.pinned(generator))
    time.sleep(2)


def report(server_cpus, generator, fresh, peaks, lat, keys, batching):
    n = len(server_cpus)
    plain = peaks[PLAIN]
    lines = ["### Sticky assignment (D23), pinned: %d server core(s) (CPU %s), generator on CPU %s" % (
        n, ",".join(map(str, server_cpus)), ",".join(map(str, generator))), "",
        "New users at the pinned peak (%d s of closed-loop wrk -c%d per server, every request a user the "
        "server has not seen):" % (WARM, B.CONNECTIONS), "",
        "| store | requests/s | CPU µs/req | assignments stored | dropped | failed | queue at the end | queue after |",
        "|---|---|---|---|---|---|---|---|"]
    for name, r in fresh.items():
        lines.append("| %s | %.0f | %.1f | %d | %d | %d | %d | %d (%.1f s later) |" % (
            name, r["rps"], r["cpu_us"], r["stored"], r["dropped"], r["failed"], r["queue_at_end"],
            r["queue_after"], r["drained_s"]))
    lines += ["", "Known users (the warm-up's request sequence again: every sticky request finds its stored "
              "assignment), %d alternating rounds of %d s, medians:" % (P.ROUNDS, P.DURATION), "",
              "| placement | requests/s | CPU µs/req | server CPU (cores) | wrk p99 | CPU per request vs non-sticky "
              "| requests per store read |",
              "|---|---|---|---|---|---|---|"]
    for name, runs in peaks.items():
        ratio = statistics.median(x["cpu_us"] / y["cpu_us"] for x, y in zip(runs, plain))
        per_read = "%.1f" % batching["peak"][name] if name in batching["peak"] else ""
        lines.append("| %s | %.0f | %.1f | %.2f | %.2f ms | %.3fx | %s |" % (
            name, P.med(runs, "rps"), P.med(runs, "cpu_us"), P.med(runs, "server_cores"), P.med(runs, "p99_ms"),
            ratio, per_read))
    lines += ["", "| offered load | placement | achieved/s | p50 | p99 | p99.9 | requests per store read |",
              "|---|---|---|---|---|---|---|"]
    for fraction, rate, runs in lat:
        for name, rs in runs.items():
            per_read = "%.1f" % batching["open_loop"][name] if name in batching["open_loop"] else ""
            lines.append("| %.0f%% (%d/s) | %s | %.0f | %.3f ms | %.3f ms | %.3f ms | %s |" % (
                fraction * 100, rate, name, P.med(rs, "rps"), P.med(rs, "p50_ms"), P.med(rs, "p99_ms"),
                P.med(rs, "p999_ms"), per_read))
    lines += ["", "Open loop: oha -q RATE --latency-correction -c%d over one app and %d known users, %d "
              "alternating rounds of %d s; rates are fractions of the non-sticky placement's median pinned "
              "peak. Redis keys written: %d. %s" % (
                  B.CONNECTIONS, KNOWN, P.LAT_ROUNDS, P.LAT_DURATION, keys,
                  time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), ""]
    return "\n".join(lines)


def main():
    server_cpus, generator = P.layout()
    if not os.access(P.OHA, os.X_OK):
        sys.exit("bench: oha not found at %s (bench/run.sh installs it)" % P.OHA)
    if redis_cli("PING").strip() != "PONG":
        sys.exit("bench: Redis at %s does not answer (make redis-up)" % REDIS_URL)
    B.WORKERS = len(server_cpus)
    meta = B.new_catalog_database(quiet=True)
    prefix = "flowgate-bench-%d" % os.getpid()
    procs = []
    try:
        key = B.import_catalog(meta)
        B.log("starting the two servers on CPUs %s, the generator on %s" % (server_cpus, generator))
        sql, _ = B.start_flowgate(extra=P.flowgate_settings(), preexec_fn=P.pinned(server_cpus))
        procs.append(sql)
        redis = start_redis_server(server_cpus, prefix)
        procs.append(redis)
        env = dict(os.environ, BENCH_DIR=B.BENCH, BENCH_KEY=key, BENCH_APPS=",".join(meta["apps"]), BENCH_RUN="1")
        env.pop("BENCH_WRK_PACE_MS", None)
        plain_env = dict(env, BENCH_PLACEMENT="onboarding")
        sticky_env = dict(env, BENCH_PLACEMENT="onboarding_sticky")
        fresh = {SQL: new_users(SQL, sql, B.API, B.ADMIN, sticky_env, generator),
                 REDIS: new_users(REDIS, redis, REDIS_API, REDIS_ADMIN, sticky_env, generator)}
        admins = {SQL: B.ADMIN, REDIS: REDIS_ADMIN}
        before = {name: metrics(admin) for name, admin in admins.items()}
        peaks = P.peak_rounds([(PLAIN, sql, B.API, plain_env, None), (SQL, sql, B.API, sticky_env, None),
                               (REDIS, redis, REDIS_API, sticky_env, None)], generator)
        batching = {"peak": {name: requests_per_read(before[name], metrics(admin)) for name, admin in admins.items()}}
        requests = known_files(meta, key)
        warm_known(requests, generator)
        before = {name: metrics(admin) for name, admin in admins.items()}
        lat = P.open_loop_rounds(P.med(peaks[PLAIN], "rps"), FRACTIONS, requests, generator)
        batching["open_loop"] = {name: requests_per_read(before[name], metrics(admin))
                                 for name, admin in admins.items()}
        keys = len(redis_cli("--scan", "--pattern", prefix + ":*").split())
        text = report(server_cpus, generator, fresh, peaks, lat, keys, batching)
    finally:
        for proc in procs:
            B.stop(proc)
        B.psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % B.DB, db="postgres")
        delete_prefix(prefix)
    with open(os.path.join(B.OUT, "sticky.json"), "w") as f:
        json.dump({"new_users": fresh, "peaks": peaks, "open_loop": lat, "requests_per_store_read": batching}, f,
                  indent=1)
    with open(os.path.join(B.OUT, "sticky.md"), "w") as f:
        f.write(text)
    print(text)


if __name__ == "__main__":
    main()
