#!/usr/bin/env python3
"""A/B of single resolve between builds or settings of flowgate (docs/benchmarks.md).

    python3 bench/ab.py ROUNDS SERVER [SERVER ...]

Each SERVER is a flowgate binary, optionally followed by `@KEY=VALUE,KEY=VALUE` environment for
that server alone (for example `target/release/flowgate@FLOWGATE__EVENTS__WRITE_THRESHOLD=300`).
Every server and the baseline(s) are started once, on one catalog and one PostgreSQL database,
then wrk drives each in turn for BENCH_DURATION seconds (default 5), ROUNDS times. Alternating
short runs of servers that stay up spreads the machine's drift over all of them, which the full
benchmark's one pair per scenario cannot do; each round's ratio to the baseline measured just
after it is kept, and the medians are printed.

Environment: BENCH_DURATION, BENCH_BASELINES (space-separated baseline binaries, default
target/release/flowgate-bench-baseline, each optionally followed by `@KEY=VALUE,...` as above,
e.g. `target/release/flowgate-bench-baseline@BASELINE_WORK_NS=2000`), PRE_SQL (statements run on the database after the
import, `;`-separated, `{DB}` names it: e.g. settings to try). Needs what bench/bench.py needs.
"""

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench as B  # noqa: E402  (the harness's helpers: catalog, servers, wrk)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    rounds, specs = int(sys.argv[1]), sys.argv[2:]
    duration = int(os.environ.get("BENCH_DURATION", "5"))
    baselines = os.environ.get("BENCH_BASELINES", B.BASELINE).split()
    meta = B.new_catalog_database(quiet=True)
    procs = []
    try:
        B.BIN = specs[0].partition("@")[0]
        key = B.import_catalog(meta)
        for stmt in filter(None, os.environ.get("PRE_SQL", "").split(";")):
            B.psql(stmt.replace("{DB}", B.DB))
        servers = []
        for i, spec in enumerate(specs):
            binary, _, settings = spec.partition("@")
            B.BIN, B.API, B.ADMIN = binary, 18500 + i, 18600 + i
            extra = dict(kv.split("=", 1) for kv in settings.split(",") if kv)
            proc, _ = B.start_flowgate(extra=extra)
            procs.append(proc)
            servers.append((spec, proc, B.API))
        # The baselines answer flowgate's bytes for the typical user.
        with open(os.path.join(B.ROOT, "crates", "flowgate-contract-tests", "data", "typical_placement.json")) as f:
            attrs = json.load(f)["typical_attributes"]
        ident = {"user_id": "user-1", "session_id": "s-1", "device_platform": "ios", "attributes": attrs}
        headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json"}
        path = "/v1/apps/%s/placements/onboarding/resolve" % meta["apps"][0]
        status, body = B.call(servers[0][2], "POST", path, json.dumps(ident), headers)
        assert status == 200, body
        sample = os.path.join(B.OUT, "baseline-resolve.json")
        with open(sample, "wb") as f:
            f.write(body)
        names = []
        for j, spec in enumerate(baselines):
            binary, _, settings = spec.partition("@")
            B.BASELINE, B.BASE = binary, 18700 + j
            proc = B.start_baseline(200, sample, extra=dict(kv.split("=", 1) for kv in settings.split(",") if kv))
            procs.append(proc)
            names.append("baseline " + spec)
            servers.append((names[-1], proc, B.BASE))
        env = dict(os.environ, BENCH_DIR=B.BENCH, BENCH_KEY=key, BENCH_APPS=",".join(meta["apps"]),
                   BENCH_FLOW=meta["event_flow"], BENCH_FLOW_VERSION=meta["event_flow_version"])
        env.pop("BENCH_WRK_PACE_MS", None)
        for _, _, port in servers:
            B.wrk(port, "resolve.lua", dict(env, BENCH_RUN="1"), 3)
        runs = {name: [] for name, _, _ in servers}
        for _ in range(rounds):
            line = []
            for name, proc, port in servers:
                cpu0 = B.cpu_seconds(proc.pid)
                w = B.wrk(port, "resolve.lua", dict(env, BENCH_RUN="2"), duration)
                cpu1 = B.cpu_seconds(proc.pid)
                rps = (w["requests"] - w["status_errors"]) / (w["duration_us"] / 1e6)
                runs[name].append((rps, 1e6 * (cpu1 - cpu0) / max(1, w["requests"]), w["p99_us"] / 1000))
                line.append("%s: %.0f/s %.1f us p99 %.2f ms" % ((name,) + runs[name][-1]))
            print(" | ".join(line), flush=True)
        print()
        print("| server | requests/s | CPU µs/req | p99 | " + " | ".join("vs " + n for n in names) + " |")
        print("|---|---|---|---|" + "---|" * len(names))
        for name, _, _ in servers:
            r = runs[name]
            cells = [name, "%.0f" % statistics.median(x[0] for x in r), "%.2f" % statistics.median(x[1] for x in r),
                     "%.2f ms" % statistics.median(x[2] for x in r)]
            for base in names:
                ratios = [a[0] / b[0] for a, b in zip(r, runs[base])]
                cells.append("%.3fx" % statistics.median(ratios))
            print("| " + " | ".join(cells) + " |")
        print("\n%d rounds of %d s each, wrk -t2 -c%d, medians; %s" % (rounds, duration, B.CONNECTIONS,
                                                                   time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())))
    finally:
        for proc in procs:
            B.stop(proc)
        B.psql("DROP DATABASE IF EXISTS %s WITH (FORCE)" % B.DB, db="postgres")


if __name__ == "__main__":
    main()
