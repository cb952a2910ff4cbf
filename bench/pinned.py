#!/usr/bin/env python3
"""Pinned HTTP benchmark of single resolve (`make bench-http`; docs/benchmarks.md).

The server under test gets its own cores and the load generator the others, so that what is
measured is the service, not the scheduler sharing two cores between them:

- flowgate (`server.workers` = the number of server cores) and the no-logic baseline
  (`flowgate-bench-baseline`, the same worker count, answering flowgate's bytes) run with their
  CPU affinity set to BENCH_SERVER_CPUS (default `0`; every thread of the process inherits
  it); wrk and oha run on every other CPU this process may use.
- **Peak** (closed loop): wrk with BENCH_CONNECTIONS connections and one thread per generator
  CPU drives each server in alternating rounds of BENCH_DURATION seconds (BENCH_ROUNDS rounds);
  per round: requests/s, the server's CPU (cores busy) and the generator's. The headline is
  requests/s per server core, and the ratio to the baseline in the same round.
- **Open loop** (latency): oha at a fixed rate (`-q`) with `--latency-correction` (latency
  counted from when each request was due, so a stalled server is not hidden by the generator
  waiting: coordinated omission) at BENCH_OPEN_LOOP fractions (default 0.25,0.5,0.75) of
  flowgate's median pinned peak, the same rate for both servers, alternating, BENCH_LAT_ROUNDS
  rounds each: p50, p99, p99.9 and the ratio to the baseline's at the same rate.

- **Batches** (closed loop): BENCH_BATCHES (default 10,50) placements per request (bench/lua/
  batch.lua: `onboarding` first, then the app's small placements), flowgate against a baseline
  answering flowgate's batch bytes, BENCH_BATCH_ROUNDS (3) alternating rounds each: CPU per
  request and per placement, and the ratio to the baseline's.

Requests are the single-resolve scenario of the unpinned benchmark (bench/bench.py): the typical
placement over the 10 apps of the key's workspace, 100,000 user ids, 4 platforms and the 12
attribute sets of bench/lua/resolve.lua; oha picks a URL (app) and a body line at random per
request from files generated with the same distribution. No Accept-Encoding unless
BENCH_ACCEPT_ENCODING is set: identity bodies, flowgate's 18 KB on average (13% of users are
in the experiment's holdout and get no flow), the baseline's always 20.8 KB (flowgate's answer
for the typical user, which carries a flow).

CPU layout: the servers' CPUs should be whole physical cores; on a machine with SMT, give the
servers both siblings of a core (or take the generator's CPUs from other cores), or the
generator shares the servers' cores. PostgreSQL (which stores the holdout users' events) and the
machine's other processes are not pinned, and their CPU is counted on neither side; the peak
table shows PostgreSQL's (every `postgres` process) apart, since it runs on the server's or the
generator's cores and a run with more of it has less left for either.

Environment: BENCH_SERVER_CPUS (e.g. `0` or `0-3` or `0,2`; default the lowest CPU this process
may use), BENCH_DURATION (10; bench/bench.py's default is 15),
BENCH_ROUNDS (5; bench.py's 3), BENCH_LAT_ROUNDS (3), BENCH_LAT_DURATION (10), BENCH_CONNECTIONS (64),
BENCH_OPEN_LOOP (0.25,0.5,0.75), BENCH_BATCHES (10,50; empty: no batch rounds), BENCH_BATCH_ROUNDS (3),
BENCH_PERF=1 (`perf record -g` of flowgate and of the baseline
during their first peak round into target/bench-http/perf-pinned.data and
perf-pinned-baseline.data; `python3 bench/stages.py perf` reads them stage by stage, or `perf
report -i FILE --no-children --sort comm,dso`; that round runs slower and counts in the medians),
BENCH_SCHED=1 (`perf sched record -a -g` of 3 s of flowgate's first peak round, with and without
resolve_no_flow events, into target/bench-http/sched-pinned.data and sched-pinned-quiet.data:
what ran on each core and where the workers slept), BENCH_AFTER_IMPORT_SQL (SQL run on the
benchmark's database after the import, e.g. `DROP INDEX ...` to measure what an index costs the
peak), BENCH_FLOWGATE_ENV (`KEY=VALUE,...`: settings for flowgate
alone, e.g. FLOWGATE__EVENTS__RECORD_RESOLVE_NO_FLOW=false), BENCH_OHA (the oha binary, default target/bench-tools/bin/oha,
installed by bench/run.sh), BENCH_BIN, BENCH_BASELINE_BIN. Writes target/bench-http/pinned.md
and pinned.json. Needs what bench/bench.py needs, and oha.
"""

import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402  (the harness's helpers: catalog, servers, wrk)

OHA = os.environ.get("BENCH_OHA") or os.path.join(B.ROOT, "target", "bench-tools", "bin", "oha")
DURATION = int(os.environ.get("BENCH_DURATION", "10"))
ROUNDS = max(1, int(os.environ.get("BENCH_ROUNDS", "5")))
LAT_ROUNDS = max(1, int(os.environ.get("BENCH_LAT_ROUNDS", "3")))
LAT_DURATION = int(os.environ.get("BENCH_LAT_DURATION", "10"))
FRACTIONS = [float(x) for x in os.environ.get("BENCH_OPEN_LOOP", "0.25,0.5,0.75").split(",") if x]
USERS = 100_000
AFTER_IMPORT_SQL = os.environ.get("BENCH_AFTER_IMPORT_SQL", "")
BATCHES = [int(x) for x in os.environ.get("BENCH_BATCHES", "10,50").split(",") if x]
BATCH_ROUNDS = max(1, int(os.environ.get("BENCH_BATCH_ROUNDS", "3")))


def cpu_list(text):
    """`0`, `0-3`, `0,2-3` -> sorted CPU numbers."""
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def layout():
    """(server CPUs, generator CPUs) from BENCH_SERVER_CPUS (default: the lowest CPU this process
    may use) and this process's affinity."""
    allowed = os.sched_getaffinity(0)
    server = cpu_list(os.environ.get("BENCH_SERVER_CPUS") or str(min(allowed)))
    if not set(server) <= allowed:
        sys.exit("bench: BENCH_SERVER_CPUS=%s is not within this process's CPUs %s" % (server, sorted(allowed)))
    generator = sorted(allowed - set(server))
    if not generator:
        sys.exit("bench: no CPU left for the load generator (BENCH_SERVER_CPUS takes all of %s)" % sorted(allowed))
    return server, generator


def pinned(cpus):
    """A preexec_fn setting the child's CPU affinity before exec (its threads inherit it)."""
    return lambda: os.sched_setaffinity(0, cpus)


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def postgres_cpu():
    """CPU seconds of every `postgres` process on the machine (the server's and its backends'):
    other PostgreSQL servers on the machine count too, and a backend that exits during a round
    loses its share, so the column is an estimate of the benchmark's database only on a machine
    that runs no other."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % pid) as f:
                head, _, rest = f.read().rpartition(")")
        except OSError:
            continue  # gone meanwhile
        if head.partition("(")[2] == "postgres":
            fields = rest.split()
            total += int(fields[11]) + int(fields[12])
    return total / B.CLK_TCK


def flowgate_settings():
    """BENCH_FLOWGATE_ENV (`KEY=VALUE,KEY=VALUE`): more environment for flowgate alone."""
    return dict(kv.split("=", 1) for kv in os.environ.get("BENCH_FLOWGATE_ENV", "").split(",") if kv)


def baseline_sample(meta, key, accept_encoding=None):
    """Writes flowgate's answer (running on B.API) for the typical user, which the baseline
    sends to every request; returns (its path, its Content-Encoding or None)."""
    with open(os.path.join(B.ROOT, "crates", "flowgate-contract-tests", "data", "typical_placement.json")) as f:
        attrs = json.load(f)["typical_attributes"]
    ident = {"user_id": "user-1", "session_id": "s-1", "device_platform": "ios", "attributes": attrs}
    headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
    if accept_encoding:
        headers["Accept-Encoding"] = accept_encoding
    status, body, coding = B.call(B.API, "POST", "/v1/apps/%s/placements/onboarding/resolve" % meta["apps"][0],
                                  json.dumps(ident), headers, coding=True)
    assert status == 200, body
    sample = os.path.join(B.OUT, "baseline-resolve.json")
    with open(sample, "wb") as f:
        f.write(body)
    return sample, coding


def batch_baseline(meta, key, n, cpus):
    """A baseline on its own port answering flowgate's batch of the first `n` placements of the
    app for the typical user (bench/lua/batch.lua's keys): (process, port)."""
    with open(os.path.join(B.ROOT, "crates", "flowgate-contract-tests", "data", "typical_placement.json")) as f:
        attrs = json.load(f)["typical_attributes"]
    ident = {"placement_keys": meta["placement_keys"][:n], "user_id": "user-1", "session_id": "s-1",
             "device_platform": "ios", "attributes": attrs}
    status, body = B.call(B.API, "POST", "/v1/apps/%s/placements/resolve-batch" % meta["apps"][0], json.dumps(ident),
                          {"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    assert status == 200, body
    sample = os.path.join(B.OUT, "baseline-batch%d.json" % n)
    with open(sample, "wb") as f:
        f.write(body)
    port = BATCH_BASE + n
    return B.start_baseline(200, sample, preexec_fn=pinned(cpus), port=port), port


def batch_rounds(meta, key, server, env, server_cpus, generator, procs):
    """For each of BATCHES: BATCH_ROUNDS alternating closed-loop rounds of flowgate's batch
    resolve and a baseline answering its bytes; [(n, {name: [round, ...]}), ...]."""
    out = []
    for n in BATCHES:
        if not 1 <= n <= len(meta["placement_keys"]):
            sys.exit("bench: BENCH_BATCHES=%d: a batch of 1 to %d placements (the app's)" % (n, len(meta["placement_keys"])))
        baseline, port = batch_baseline(meta, key, n, server_cpus)
        procs.append(baseline)
        benv = dict(env, BENCH_BATCH=str(n))
        script = os.path.join(B.BENCH, "lua", "batch.lua")
        B.log("batch of %d placements" % n)
        peaks = peak_rounds([("flowgate", server, B.API, benv, script), ("baseline", baseline, port, benv, script)],
                            generator, BATCH_ROUNDS, record=False)
        B.stop(baseline)
        out.append((n, peaks))
    return out


def request_files(meta, key):
    """URL and body files for oha, distributed as bench/lua/resolve.lua's requests."""
    with open(os.path.join(B.BENCH, "lua", "resolve.lua")) as f:
        lua = f.read()
    sets = re.findall(r"^\s*'(\{.*\})',?$", re.search(r"local sets = \{(.*?)\n\}", lua, re.S).group(1), re.M)
    platforms = re.search(r"local platforms = \{([^}]*)\}", lua).group(1).replace('"', "").replace(" ", "").split(",")
    assert len(sets) == 12 and len(platforms) == 4, (len(sets), platforms)
    with open(os.path.join(B.ROOT, "crates", "flowgate-contract-tests", "data", "typical_placement.json")) as f:
        typical = json.load(f)["typical_attributes"]
    assert json.loads(sets[0]) == typical, "resolve.lua's first attribute set must be typical_attributes"
    rng = random.Random(7)
    bodies = os.path.join(B.OUT, "pinned-bodies.txt")
    with open(bodies, "w") as f:
        for n in range(20_000):
            f.write('{"user_id":"user-%d","session_id":"s-%d","device_platform":"%s","attributes":%s}\n'
                    % (rng.randrange(USERS), n, platforms[n % len(platforms)], sets[n % len(sets)]))
    urls = {}
    for name, port in (("flowgate", B.API), ("baseline", B.BASE)):
        urls[name] = os.path.join(B.OUT, "pinned-urls-%s.txt" % name)
        with open(urls[name], "w") as f:
            for app in meta["apps"]:
                f.write("http://127.0.0.1:%d/v1/apps/%s/placements/onboarding/resolve\n" % (port, app))
    return bodies, urls


def peak(port, server_pid, generator, env, duration=DURATION, script=None, perf=None, sched=None):
    """One closed-loop wrk run of `script` (default bench/lua/resolve.lua): requests/s, bytes per
    response, and CPU of server and generator (cores busy). `perf`: a file to `perf record -g`
    the server into, for the middle of the run; `sched`: a file to `perf sched record -a -g` the
    whole machine into, for 3 s of the run."""
    script = script or os.path.join(B.BENCH, "lua", "resolve.lua")
    cmd = ["wrk", "-t%d" % min(len(generator), B.CONNECTIONS), "-c%d" % B.CONNECTIONS, "-d%ds" % duration, "--timeout", "5s",
           "-s", script, "http://127.0.0.1:%d" % port]
    recorders = []
    if perf:
        recorders.append(subprocess.Popen(
            ["perf", "record", "-g", "--call-graph", "dwarf,16384", "-F", "2000", "-p", str(server_pid), "-o", perf,
             "--", "sleep", str(max(1, duration - 2))], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if sched:
        recorders.append(subprocess.Popen(["perf", "sched", "record", "-a", "-g", "-o", sched, "--", "sleep", "3"],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    s0, g0, p0, t0 = B.cpu_seconds(server_pid), children_cpu(), postgres_cpu(), time.monotonic()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, preexec_fn=pinned(generator))
    for recorder in recorders:
        recorder.wait()
    wall = time.monotonic() - t0
    s1, g1, p1 = B.cpu_seconds(server_pid), children_cpu(), postgres_cpu()
    m = re.search(r"WRKJSON (\{.*\})", out.stdout)
    if out.returncode != 0 or not m:
        raise RuntimeError("wrk failed: %s %s" % (out.stdout, out.stderr))
    w = json.loads(m.group(1))
    if w["status_errors"] or w["socket_errors"]:
        raise RuntimeError("wrk saw errors: %s" % w)
    secs = w["duration_us"] / 1e6
    return {"rps": w["requests"] / secs, "server_cores": (s1 - s0) / secs, "generator_cores": (g1 - g0) / wall,
            "postgres_cores": (p1 - p0) / wall, "p99_ms": w["p99_us"] / 1000, "cpu_us": 1e6 * (s1 - s0) / max(1, w["requests"]),
            "bytes": w["bytes"] / max(1, w["requests"])}


def resolve_requests(urls, bodies, key):
    """oha's arguments for flowgate's single resolve (and the baseline's same requests)."""
    return ["-m", "POST", "-H", "Authorization: Bearer " + key, "-T", "application/json", "-Z", bodies,
            "--urls-from-file", urls]


def open_loop(rate, requests, generator, accept_encoding=None):
    """One oha run of `requests` (its request arguments) at `rate` requests/s with latency
    correction, sending `accept_encoding` (none: identity bodies): percentiles in ms."""
    cmd = [OHA, "--no-tui", "--output-format", "json", "-z", "%ds" % LAT_DURATION, "-q", str(rate),
           "--latency-correction", "--wait-ongoing-requests-after-deadline", "-c", str(B.CONNECTIONS),
           "--worker-threads", str(len(generator))] + requests
    if accept_encoding:
        cmd += ["-H", "Accept-Encoding: " + accept_encoding]
    else:
        cmd += ["--disable-compression"]
    g0, t0 = children_cpu(), time.monotonic()
    out = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=pinned(generator))
    wall = time.monotonic() - t0
    if out.returncode != 0:
        raise RuntimeError("oha failed: %s %s" % (out.stdout[-2000:], out.stderr[-2000:]))
    r = json.loads(out.stdout)
    codes = r.get("statusCodeDistribution", {})
    if set(codes) - {"200"} or r.get("errorDistribution"):
        raise RuntimeError("oha saw failures: %s %s" % (codes, r.get("errorDistribution")))
    p = r["latencyPercentiles"]
    return {"rps": r["summary"]["requestsPerSec"], "p50_ms": p["p50"] * 1000, "p99_ms": p["p99"] * 1000,
            "p999_ms": p["p99.9"] * 1000, "generator_cores": (children_cpu() - g0) / wall}


QUIET_API, QUIET_ADMIN = 18482, 18492
# The batch baselines listen on BATCH_BASE + the batch's size.
BATCH_BASE = 18500


def start_without_events(cpus):
    """A second flowgate on QUIET_API with `events.record_resolve_no_flow = false` (a diagnostic
    row), pinned to `cpus`."""
    api, admin = B.API, B.ADMIN
    B.API, B.ADMIN = QUIET_API, QUIET_ADMIN
    try:
        settings = dict(flowgate_settings(), FLOWGATE__EVENTS__RECORD_RESOLVE_NO_FLOW="false")
        return B.start_flowgate(extra=settings, preexec_fn=pinned(cpus))[0]
    finally:
        B.API, B.ADMIN = api, admin


# BENCH_PERF=1: the servers recorded in their first peak round (bench/stages.py reads both).
PERF_FILES = {"flowgate": "perf-pinned.data", "baseline": "perf-pinned-baseline.data"}
# BENCH_SCHED=1: the whole machine's scheduling during the first peak round of flowgate with and
# without resolve_no_flow events (`perf sched timehist -i FILE --cpu N -s`: what ran on a core).
SCHED_FILES = {"flowgate": "sched-pinned.data", "flowgate, no resolve_no_flow events": "sched-pinned-quiet.data"}


def peak_rounds(servers, generator, rounds=None, record=True):
    """Warm-up, then `rounds` (default ROUNDS) closed-loop rounds over `servers` in turn, each
    (name, process, port, wrk env, wrk script or None): {name: [round, ...]}. `record`: the
    first round is profiled as BENCH_PERF and BENCH_SCHED ask."""
    B.log("warm-up")
    for _, proc, port, env, script in servers:
        peak(port, proc.pid, generator, env, 3, script)
    peaks = {name: [] for name, _, _, _, _ in servers}
    for i in range(rounds or ROUNDS):
        # Every other round in reverse order, so no server always runs first or after another.
        for name, proc, port, env, script in (servers if i % 2 == 0 else servers[::-1]):
            perf = sched = None
            if record and i == 0 and os.environ.get("BENCH_PERF") == "1" and name in PERF_FILES:
                perf = os.path.join(B.OUT, PERF_FILES[name])
                B.log("perf record of %s's first round into %s (it counts in the medians)" % (name, perf))
            if record and i == 0 and os.environ.get("BENCH_SCHED") == "1" and name in SCHED_FILES:
                sched = os.path.join(B.OUT, SCHED_FILES[name])
                B.log("perf sched record of %s's first round into %s (it counts in the medians)" % (name, sched))
            peaks[name].append(peak(port, proc.pid, generator, env, DURATION, script, perf, sched))
        B.log("peak round %d: %s" % (i + 1, "  ".join(
            "%s %.0f/s (%.1f us/req, server %.2f cores, generator %.2f, postgres %.2f)" % (
                n, r[-1]["rps"], r[-1]["cpu_us"], r[-1]["server_cores"], r[-1]["generator_cores"],
                r[-1]["postgres_cores"])
            for n, r in peaks.items())))
    return peaks


def open_loop_rounds(top, fractions, requests, generator, accept_encoding=None):
    """For each of `fractions` of `top` requests/s: LAT_ROUNDS open-loop rounds over `requests`
    ({name: oha request arguments}) in turn; [(fraction, rate, {name: [round, ...]}), ...]."""
    lat = []
    for fraction in fractions:
        rate = int(top * fraction)
        runs = {name: [] for name in requests}
        for i in range(LAT_ROUNDS):
            order = list(requests.items())
            for name, args in (order if i % 2 == 0 else order[::-1]):
                runs[name].append(open_loop(rate, args, generator, accept_encoding))
            B.log("open loop %.0f%% (%d/s) round %d: %s" % (fraction * 100, rate, i + 1, "  ".join(
                "%s p50 %.3f p99 %.3f p99.9 %.3f ms" % (n, r[-1]["p50_ms"], r[-1]["p99_ms"], r[-1]["p999_ms"])
                for n, r in runs.items())))
        lat.append((fraction, rate, runs))
    return lat


def med(runs, field):
    return statistics.median(r[field] for r in runs)


def main():
    server_cpus, generator = layout()
    if not os.access(OHA, os.X_OK):
        sys.exit("bench: oha not found at %s (bench/run.sh installs it)" % OHA)
    B.WORKERS = len(server_cpus)
    meta = B.new_catalog_database(quiet=True)
    procs = []
    try:
        report = run(meta, procs, server_cpus, generator)
    finally:
        for proc in procs:
            B.stop(proc)
        B.psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % B.DB, db="postgres")
    with open(os.path.join(B.OUT, "pinned.json"), "w") as f:
        json.dump(report["data"], f, indent=1)
    with open(os.path.join(B.OUT, "pinned.md"), "w") as f:
        f.write(report["text"])
    print(report["text"])


def run(meta, procs, server_cpus, generator):
    key = B.import_catalog(meta)
    if AFTER_IMPORT_SQL:
        B.log("running BENCH_AFTER_IMPORT_SQL: %s" % AFTER_IMPORT_SQL)
        B.psql(AFTER_IMPORT_SQL)
    B.log("starting flowgate and the baseline on CPUs %s, the generator on %s" % (server_cpus, generator))
    server, _ = B.start_flowgate(extra=flowgate_settings(), preexec_fn=pinned(server_cpus))
    procs.append(server)
    sample, coding = baseline_sample(meta, key, os.environ.get("BENCH_ACCEPT_ENCODING"))
    baseline = B.start_baseline(200, sample, coding, preexec_fn=pinned(server_cpus))
    procs.append(baseline)
    env = dict(os.environ, BENCH_DIR=B.BENCH, BENCH_KEY=key, BENCH_APPS=",".join(meta["apps"]), BENCH_RUN="1")
    env.pop("BENCH_WRK_PACE_MS", None)
    quiet = start_without_events(server_cpus)
    procs.append(quiet)
    peaks = peak_rounds([("flowgate", server, B.API, env, None), ("baseline", baseline, B.BASE, env, None),
                         (NO_EVENTS, quiet, QUIET_API, env, None)], generator)
    bodies, urls = request_files(meta, key)
    lat = open_loop_rounds(med(peaks["flowgate"], "rps"), FRACTIONS,
                           {name: resolve_requests(urls[name], bodies, key) for name in ("flowgate", "baseline")},
                           generator, os.environ.get("BENCH_ACCEPT_ENCODING"))
    batches = batch_rounds(meta, key, server, env, server_cpus, generator, procs)
    return report(server_cpus, generator, peaks, lat, batches)


NO_EVENTS = "flowgate, no resolve_no_flow events"
DIAGNOSTIC_NOTE = ("The row without resolve_no_flow events (`events.record_resolve_no_flow = false`) is a "
                   "diagnostic: the same server without recording the holdout users' events (13% of requests); "
                   "read its difference against the spread of the rounds.")


def report(server_cpus, generator, peaks, lat, batches=()):
    n = len(server_cpus)
    f, b = peaks["flowgate"], peaks["baseline"]
    ratios = [x["rps"] / y["rps"] for x, y in zip(f, b)]
    busy = [(x["rps"] / x["server_cores"]) / (y["rps"] / y["server_cores"]) for x, y in zip(f, b)]
    cpu = [x["cpu_us"] / y["cpu_us"] for x, y in zip(f, b)]
    lines = [
        "### Pinned single resolve: %d server core(s) (CPU %s), generator on CPU %s" % (
            n, ",".join(map(str, server_cpus)), ",".join(map(str, generator))),
        "",
    ]
    if AFTER_IMPORT_SQL:
        lines += ["**The schema was changed for this run** (BENCH_AFTER_IMPORT_SQL): `%s`" % AFTER_IMPORT_SQL, ""]
    lines += [
        "**CPU per request: flowgate %.2fx the baseline's** (median of the rounds' ratios; rounds %s; "
        "target at most 1.15x). Requests/s: %.3fx the baseline's (rounds %s)." % (
            statistics.median(cpu), ", ".join("%.2f" % r for r in cpu), statistics.median(ratios),
            ", ".join("%.3f" % r for r in ratios)),
        "",
        "| server | requests/s | per server core | server CPU (cores) | per busy server core | CPU µs/req "
        "| generator CPU (cores) | PostgreSQL CPU (cores) | wrk p99 | requests/s vs baseline "
        "| per busy core vs baseline |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, runs in peaks.items():
        cells = ("%.3fx" % statistics.median(x["rps"] / y["rps"] for x, y in zip(runs, b)),
                 "%.3fx" % statistics.median((x["rps"] / x["server_cores"]) / (y["rps"] / y["server_cores"])
                                             for x, y in zip(runs, b)))
        lines.append("| %s | %.0f | %.0f | %.2f | %.0f | %.2f | %.2f | %.2f | %.2f ms | %s | %s |" % (
            name, med(runs, "rps"), med(runs, "rps") / n, med(runs, "server_cores"),
            statistics.median(r["rps"] / r["server_cores"] for r in runs), med(runs, "cpu_us"),
            med(runs, "generator_cores"), med(runs, "postgres_cores"), med(runs, "p99_ms"), *cells))
    lines += ["", "Closed loop: wrk -t%d -c%d, %d alternating rounds of %d s (every other round in reverse "
              "order), medians. A ratio is the median of the rounds' ratios (each round's servers ran side by "
              "side), not the ratio of the medians; flowgate's per round: %s. Per busy server core = requests/s "
              "/ server CPU = 1e6 / CPU µs per request. %s" % (
                  min(len(generator), B.CONNECTIONS), B.CONNECTIONS, ROUNDS, DURATION,
                  ", ".join("%.3f" % r for r in ratios),
                  DIAGNOSTIC_NOTE if NO_EVENTS in peaks else ""), ""]
    if lat:
        lines += [
            "| offered load | server | achieved/s | p50 | p99 | p99.9 | p99 vs baseline | generator CPU |",
            "|---|---|---|---|---|---|---|---|",
        ]
    data_lat = []
    for fraction, rate, runs in lat:
        base99 = [r["p99_ms"] for r in runs["baseline"]]
        p99_ratio = statistics.median(x["p99_ms"] / y for x, y in zip(runs["flowgate"], base99))
        for name, rs in runs.items():
            lines.append("| %.0f%% (%d/s) | %s | %.0f | %.3f ms | %.3f ms | %.3f ms | %s | %.2f |" % (
                fraction * 100, rate, name, med(rs, "rps"), med(rs, "p50_ms"), med(rs, "p99_ms"),
                med(rs, "p999_ms"), "%.2fx" % p99_ratio if name == "flowgate" else "1", med(rs, "generator_cores")))
        data_lat.append({"fraction": fraction, "rate": rate, "runs": runs, "p99_ratio": p99_ratio})
    if lat:
        lines += ["", "Open loop: oha -q RATE --latency-correction -c%d, %d alternating rounds of %d s per rate, "
                  "medians; rates are fractions of flowgate's median pinned peak." % (
                      B.CONNECTIONS, LAT_ROUNDS, LAT_DURATION), ""]
    data_batches = []
    if batches:
        lines += [
            "| batch | server | requests/s | placements/s | CPU µs/req | CPU µs per placement "
            "| bytes/response | CPU per placement vs baseline (rounds) |",
            "|---|---|---|---|---|---|---|---|",
        ]
    for size, runs in batches:
        cpu_ratios = [x["cpu_us"] / y["cpu_us"] for x, y in zip(runs["flowgate"], runs["baseline"])]
        for name, rs in runs.items():
            lines.append("| %d | %s | %.0f | %.0f | %.1f | %.2f | %.0f | %s |" % (
                size, name, med(rs, "rps"), size * med(rs, "rps"), med(rs, "cpu_us"), med(rs, "cpu_us") / size,
                med(rs, "bytes"), "%.2fx (%s)" % (statistics.median(cpu_ratios), ", ".join("%.2f" % r for r in cpu_ratios))
                if name == "flowgate" else "1"))
        data_batches.append({"placements": size, "peaks": runs, "cpu_ratio": statistics.median(cpu_ratios),
                             "cpu_us_per_placement": {name: med(rs, "cpu_us") / size for name, rs in runs.items()}})
    if batches:
        lines += ["", "Batches: bench/lua/batch.lua (the typical placement first, then the app's small ones; two "
                  "attribute sets), wrk -c%d, %d alternating rounds of %d s per size, medians; the baseline answers "
                  "flowgate's batch for the typical user (more bytes than flowgate's average answer: see bytes/response)." % (
                      B.CONNECTIONS, BATCH_ROUNDS, DURATION), ""]
    lines += [time.strftime("Measured %Y-%m-%d %H:%M UTC.", time.gmtime()), ""]
    return {"text": "\n".join(lines), "data": {"server_cpus": server_cpus, "generator_cpus": generator,
                                               "batches": data_batches,
                                               "peaks": peaks, "peak_ratio": statistics.median(ratios),
                                               "busy_core_ratio": statistics.median(busy),
                                               "after_import_sql": AFTER_IMPORT_SQL,
                                               "cpu_ratio": statistics.median(cpu), "cpu_ratios": cpu,
                                               "cpu_us": {name: med(runs, "cpu_us") for name, runs in peaks.items()},
                                               "open_loop": data_lat}}


if __name__ == "__main__":
    main()
