#!/usr/bin/env python3
"""Flowgate beside a peer, Unleash Edge, on the same pinned core (`make bench-peer`;
docs/benchmarks.md, bench/peer/README.md).

Both servers run with BENCH_SERVER_CPUS' worker count and CPU affinity (default: one worker on
CPU 0), the load generators on the other CPUs, as in bench/pinned.py:

- flowgate: single resolve of the typical placement (bench/lua/resolve.lua's requests) on the
  catalog at scale, in PostgreSQL;
- Edge, equivalent toggle: `unleash-edge offline` with bench/peer/edge_features.py's
  `equivalent_mirror.json` (a flexibleRollout with constraints on country, app version and a
  number, three variants sticky on userId carrying the same ~20 KB flows, the holdout and
  default served as flowgate serves them), `GET /api/frontend/features/onboarding` with the
  same users and attributes (bench/peer/edge_requests.py);
- Edge, its own 5-feature data set (`edge5.json`), `GET /api/frontend` with the same contexts;
- flowgate and Edge's equivalent toggle again with `Accept-Encoding: gzip`, as mobile HTTP
  stacks send it (flowgate sends the flow compressed once per version, Edge compresses each
  response).

Peak: wrk closed loop, alternating rounds (BENCH_ROUNDS of BENCH_DURATION s): requests/s per
server core, the server's CPU per request and the generator's CPU. Open loop: oha -q with
--latency-correction at BENCH_OPEN_LOOP fractions (default 0.25,0.5) of the Edge equivalent's
peak, the same rate for flowgate and Edge, alternating (BENCH_LAT_ROUNDS): p50, p99, p99.9.

Environment: as bench/pinned.py, plus EDGE_BIN (default target/peer/bin/unleash-edge, built by
bench/peer/install_edge.sh). Writes target/bench-peer/peer.md and peer.json.
"""

import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench as B  # noqa: E402  (the harness's helpers: catalog, servers)
import pinned as P  # noqa: E402  (pinning, wrk and oha runs)

EDGE = os.environ.get("EDGE_BIN") or os.path.join(B.ROOT, "target", "peer", "bin", "unleash-edge")
OUT = os.path.join(B.ROOT, "target", "bench-peer")
FRONTEND_TOKEN = "*:development.flowgate-bench-frontend-token"
CLIENT_TOKEN = "*:development.flowgate-bench-client-token"
# Rows with `Accept-Encoding: gzip`, as mobile HTTP stacks send it (Edge prefers br when it is
# offered too, which costs it far more: bench/peer/README.md).
GZIP = ", gzip"
FLOWGATE_GZIP = "flowgate" + GZIP
# The no-logic baseline (flowgate's bytes for the typical user, 20.8 KB, no logic): the floor of
# what sending such a response costs on this core, in the same run.
BASELINE = "no-logic baseline"
EDGE_PORTS = {"edge equivalent": 18483, "edge 5 features": 18484}
FRACTIONS = [float(x) for x in os.environ.get("BENCH_OPEN_LOOP", "0.25,0.5").split(",") if x]


def start_edge(bootstrap, port, cpus):
    """Edge offline on `port` with `bootstrap`, pinned to `cpus`, one worker per CPU."""
    cmd = [EDGE, "--port", str(port), "--interface", "127.0.0.1", "--workers", str(len(cpus)),
           "offline", "--bootstrap-file", bootstrap, "--client-tokens", CLIENT_TOKEN,
           "--frontend-tokens", FRONTEND_TOKEN]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(os.path.join(OUT, "edge-%d.log" % port), "ab"),
                            preexec_fn=P.pinned(cpus))
    B.wait_ready(proc, port, "/internal-backstage/ready", 30, "unleash-edge (log in %s)" % OUT)
    return proc


def edge_data():
    """Writes Edge's data sets and request lists; returns {name: (bootstrap, paths, urls)}."""
    subprocess.run([sys.executable, os.path.join(HERE, "peer", "edge_features.py"), OUT], check=True,
                   stdout=subprocess.DEVNULL)
    out = {}
    for name, (data, lists) in {"edge equivalent": ("equivalent_mirror.json", "equivalent"),
                                "edge 5 features": ("edge5.json", "edge5")}.items():
        folder = os.path.join(OUT, lists)
        subprocess.run([sys.executable, os.path.join(HERE, "peer", "edge_requests.py"), folder, "--base-url",
                        "http://127.0.0.1:%d" % EDGE_PORTS[name]], check=True, stdout=subprocess.DEVNULL)
        out[name] = (os.path.join(OUT, data), os.path.join(folder, lists + ".paths"),
                     os.path.join(folder, lists + ".urls"))
    return out


def main():
    server_cpus, generator = P.layout()
    for tool in (EDGE, P.OHA):
        if not os.access(tool, os.X_OK):
            sys.exit("bench: %s not found (bench/peer/run.sh builds it)" % tool)
    B.WORKERS = len(server_cpus)
    B.OUT = OUT
    meta = B.new_catalog_database(quiet=True)
    B.log("generating Edge's data sets")
    edge = edge_data()
    procs = []
    try:
        report = run(meta, edge, procs, server_cpus, generator)
    finally:
        for proc in procs:
            B.stop(proc)
        B.psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % B.DB, db="postgres")
    with open(os.path.join(OUT, "peer.json"), "w") as f:
        json.dump(report["data"], f, indent=1)
    with open(os.path.join(OUT, "peer.md"), "w") as f:
        f.write(report["text"])
    print(report["text"])


def run(meta, edge, procs, server_cpus, generator):
    key = B.import_catalog(meta)
    B.log("starting flowgate and Edge on CPUs %s, the generator on %s" % (server_cpus, generator))
    server, _ = B.start_flowgate(extra=P.flowgate_settings(), preexec_fn=P.pinned(server_cpus))
    procs.append(server)
    env = dict(os.environ, BENCH_DIR=B.BENCH, BENCH_KEY=key, BENCH_APPS=",".join(meta["apps"]), BENCH_RUN="1",
               EDGE_TOKEN=FRONTEND_TOKEN)
    env.pop("BENCH_WRK_PACE_MS", None)
    env.pop("BENCH_ACCEPT_ENCODING", None)
    gzip = dict(env, BENCH_ACCEPT_ENCODING="gzip")
    quiet = P.start_without_events(server_cpus)
    procs.append(quiet)
    baseline = B.start_baseline(200, P.baseline_sample(meta, key)[0], preexec_fn=P.pinned(server_cpus))
    procs.append(baseline)
    servers = [("flowgate", server, B.API, env, None), (P.NO_EVENTS, quiet, P.QUIET_API, env, None),
               (FLOWGATE_GZIP, server, B.API, gzip, None), (BASELINE, baseline, B.BASE, env, None)]
    edge_lua = os.path.join(HERE, "peer", "edge.lua")
    for name, (bootstrap, paths, _) in edge.items():
        proc = start_edge(bootstrap, EDGE_PORTS[name], server_cpus)
        procs.append(proc)
        servers.append((name, proc, EDGE_PORTS[name], dict(env, EDGE_PATHS=paths), edge_lua))
        if name == "edge equivalent":
            servers.append((name + GZIP, proc, EDGE_PORTS[name], dict(gzip, EDGE_PATHS=paths), edge_lua))
    peaks = P.peak_rounds(servers, generator)
    bodies, urls = P.request_files(meta, key)
    lat = P.open_loop_rounds(P.med(peaks["edge equivalent"], "rps"), FRACTIONS, {
        "flowgate": P.resolve_requests(urls["flowgate"], bodies, key),
        "edge equivalent": ["-H", "Authorization: " + FRONTEND_TOKEN, "--urls-from-file", edge["edge equivalent"][2]],
    }, generator)
    return report(server_cpus, generator, peaks, lat)


def headline(peaks):
    """The figures the targets are about, each the median of the rounds' ratios with the rounds'
    range: flowgate per busy core against Edge (identity and gzip) and its CPU per request against
    the no-logic baseline's."""
    def rounds(a, b, f):
        return [f(x, y) for x, y in zip(a, b)]

    def busy(x, y):
        return (x["rps"] / x["server_cores"]) / (y["rps"] / y["server_cores"])

    def cpu(x, y):
        return x["cpu_us"] / y["cpu_us"]

    cells = []
    for label, a, b, f, target in (
            ("flowgate per busy core / Edge's, identity", "flowgate", "edge equivalent", busy, "at least 5x"),
            ("flowgate per busy core / Edge's, gzip", FLOWGATE_GZIP, "edge equivalent" + GZIP, busy, "at least 8x"),
            ("flowgate's CPU per request / the baseline's", "flowgate", BASELINE, cpu, "at most 1.15x")):
        if a in peaks and b in peaks:
            r = rounds(peaks[a], peaks[b], f)
            cells.append("**%s: %.2fx** (rounds %.2f-%.2f; target %s)" % (
                label, statistics.median(r), min(r), max(r), target))
    return ["; ".join(cells) + ".", ""]


def report(server_cpus, generator, peaks, lat):
    n = len(server_cpus)
    lines = [
        "### flowgate and Unleash Edge: %d server core(s) (CPU %s), generator on CPU %s" % (
            n, ",".join(map(str, server_cpus)), ",".join(map(str, generator))),
        "",
        "| server | requests/s | per server core | CPU µs/req | server CPU (cores) | generator CPU (cores) "
        "| bytes/response | flowgate's requests/s per busy core / this server's (flowgate without events) |",
        "|---|---|---|---|---|---|---|---|",
    ]

    def per_core(a, b):
        return statistics.median((x["rps"] / x["server_cores"]) / (y["rps"] / y["server_cores"]) for x, y in zip(a, b))

    ratios = {}
    for name, runs in peaks.items():
        cell = ""
        if name.endswith(GZIP) and name.startswith("edge"):
            ratios[name] = (per_core(peaks[FLOWGATE_GZIP], runs),)
            cell = "%.2fx (flowgate, gzip)" % ratios[name]
        elif name.startswith("edge"):
            ratios[name] = (per_core(peaks["flowgate"], runs), per_core(peaks[P.NO_EVENTS], runs))
            cell = "%.2fx (%.2fx)" % ratios[name]
        lines.append("| %s | %.0f | %.0f | %.1f | %.2f | %.2f | %.0f | %s |" % (
            name, P.med(runs, "rps"), P.med(runs, "rps") / n, P.med(runs, "cpu_us"), P.med(runs, "server_cores"),
            P.med(runs, "generator_cores"), P.med(runs, "bytes"), cell))
    lines[2:2] = headline(peaks)
    lines += ["", "Closed loop: wrk -t%d -c%d, %d alternating rounds of %d s (every other round in reverse "
              "order), medians; the ratio is the median over rounds of the ratio of requests/s per busy server "
              "core (= 1e6 / CPU µs per request), not the ratio of the medians. The no-logic baseline sends "
              "flowgate's 20.8 KB answer for the typical user to every request: the floor of sending such a "
              "response on this core. %s" % (min(len(generator), B.CONNECTIONS), B.CONNECTIONS, P.ROUNDS,
                                             P.DURATION, P.DIAGNOSTIC_NOTE), ""]
    lines += ["| offered load | server | achieved/s | p50 | p99 | p99.9 | generator CPU |", "|---|---|---|---|---|---|---|"]
    for fraction, rate, runs in lat:
        for name, rs in runs.items():
            lines.append("| %.0f%% of Edge's peak (%d/s) | %s | %.0f | %.3f ms | %.3f ms | %.3f ms | %.2f |" % (
                fraction * 100, rate, name, P.med(rs, "rps"), P.med(rs, "p50_ms"), P.med(rs, "p99_ms"),
                P.med(rs, "p999_ms"), P.med(rs, "generator_cores")))
    lines += ["", "Open loop: oha -q RATE --latency-correction -c%d, %d alternating rounds of %d s, medians. %s" % (
        B.CONNECTIONS, P.LAT_ROUNDS, P.LAT_DURATION, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())), ""]
    return {"text": "\n".join(lines), "data": {"server_cpus": server_cpus, "generator_cpus": generator,
                                               "peaks": peaks, "per_core_ratios": ratios,
                                               "open_loop": [{"fraction": f, "rate": r, "runs": x} for f, r, x in lat]}}


if __name__ == "__main__":
    main()
